"""The machine's cache sizes, and the problem sizes derived from them.

"In cache" and "in memory" mean something only against the caches of the
machine at hand: a 128 MB output streams through memory on a CPU with a
32 MiB last-level cache and stays in one with 300 MiB.

*In cache* problems touch (read plus write) at most a quarter of the
last-level cache. They are sized by the last level, not by L2: the threads of
a call share the problem, so what must fit is the whole problem in the cache
they all share; and the kernels run a call that writes under 256 KiB on one
thread, so a problem sized to an L2 of 0.5-2 MiB could not show the threads
at all. A quarter leaves room for the interpreter, the other threads and, on
a shared machine, the neighbours.

*In memory* problems stream at least four times the last-level cache (their
largest input or output does), so that at most a small part of them can be
served from cache.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

MiB = 1 << 20
SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
# When neither sysfs nor sysconf knows: a common server last level, and L2.
DEFAULT_LAST_LEVEL = 32 * MiB
DEFAULT_L2 = 1 * MiB
IN_CACHE_SHARE = 4  # an in-cache problem touches at most last level / this
IN_MEMORY_FACTOR = 4  # an in-memory problem streams at least this x last level
# --quick runs smoke-test sizes: far below a full run's on any machine.
QUICK_IN_CACHE = 2 * MiB
QUICK_IN_MEMORY = 32 * MiB


@dataclass(frozen=True)
class Caches:
    """The data caches of the CPU the benchmark runs on (sizes in bytes)."""

    l2: int  # one core's L2
    last_level: int
    last_level_name: str  # "L3", or "L2" on a CPU without L3
    shared_by: int  # CPUs sharing the last level
    source: str  # where the sizes were read: "sysfs", "sysconf" or "default"

    def describe(self) -> str:
        shared = f", shared by {self.shared_by} CPUs" if self.shared_by > 1 else ""
        return (
            f"L2 {_mib(self.l2)}, {self.last_level_name} {_mib(self.last_level)}{shared} "
            f"({'assumed: not reported' if self.source == 'default' else 'from ' + self.source})"
        )


@dataclass(frozen=True)
class Sizes:
    """How large the benchmark's cache-sized problems are, in bytes."""

    in_cache: int  # an "in cache" problem touches (reads + writes) at most this
    in_memory: int  # an "in memory" problem streams at least this
    quick: bool = False  # the smaller sizes of --quick

    def describe(self, last_level: str = "last-level cache") -> str:
        text = f"in cache <= {_mib(self.in_cache)} touched, in memory >= {_mib(self.in_memory)}"
        if self.quick:
            return f"{text} (--quick: at most {_mib(QUICK_IN_CACHE)} and {_mib(QUICK_IN_MEMORY)})"
        return f"{text} (1/{IN_CACHE_SHARE} and {IN_MEMORY_FACTOR}x the {last_level})"


def _mib(nbytes: int) -> str:
    if nbytes >= MiB:
        return f"{nbytes / MiB:g} MiB"
    return f"{nbytes / 1024:g} KiB"


def _parse_size(text: str) -> int:
    """sysfs writes cache sizes as "48K", "2048K", "32M"."""
    text = text.strip()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1:].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def _count_cpus(text: str) -> int:
    """The number of CPUs in a sysfs list such as "0-3,8-11"."""
    count = 0
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            count += int(last or first) - int(first) + 1
    return count


def read_sysfs(folder: Path) -> Caches | None:
    """The caches described under ``folder`` (Linux: cpu0's ``cache/index*``),
    or None where it is absent or unreadable."""
    data: dict[int, tuple[int, int]] = {}  # level: (size, CPUs sharing it)
    try:
        for index in sorted(folder.glob("index*")):
            if (index / "type").read_text().strip() not in ("Data", "Unified"):
                continue
            level = int((index / "level").read_text())
            shared = index / "shared_cpu_list"
            cpus = _count_cpus(shared.read_text()) if shared.exists() else 1
            data[level] = (_parse_size((index / "size").read_text()), max(cpus, 1))
    except (OSError, ValueError):
        return None
    if not data:
        return None
    top = max(data)
    last_level, shared_by = data[top]
    l2 = data.get(2, data[min(data)])[0]
    return Caches(l2, last_level, f"L{top}", shared_by, "sysfs")


def _sysconf(name: str) -> int:
    if name not in os.sysconf_names:
        return 0
    try:
        return max(int(os.sysconf(name)), 0)
    except (OSError, ValueError):
        return 0


@functools.cache
def caches() -> Caches:
    """This machine's caches: from Linux sysfs, else ``os.sysconf``, else assumed
    (32 MiB last level, 1 MiB L2)."""
    found = read_sysfs(SYSFS_CACHES)
    if found is not None:
        return found
    cpus = os.cpu_count() or 1
    l3, l2 = _sysconf("SC_LEVEL3_CACHE_SIZE"), _sysconf("SC_LEVEL2_CACHE_SIZE")
    if l3 or l2:
        return Caches(l2 or DEFAULT_L2, l3 or l2, "L3" if l3 else "L2", cpus, "sysconf")
    return Caches(DEFAULT_L2, DEFAULT_LAST_LEVEL, "L3", cpus, "default")


def _physical_memory() -> int:
    """Bytes of memory this machine has (a large number if it cannot tell)."""
    pages, page = _sysconf("SC_PHYS_PAGES"), _sysconf("SC_PAGE_SIZE")
    return pages * page if pages and page else 1 << 50


def sizes(quick: bool = False, of: Caches | None = None) -> Sizes:
    """The in-cache and in-memory problem sizes for the caches ``of`` (default:
    this machine's)."""
    c = caches() if of is None else of
    in_cache = c.last_level // IN_CACHE_SHARE
    # A case holds a few buffers of this size at once: on a host whose cache
    # is large next to its memory, memory sets the limit, not the cache.
    in_memory = min(c.last_level * IN_MEMORY_FACTOR, max(_physical_memory() // 16, 64 * MiB))
    if quick:
        return Sizes(min(in_cache, QUICK_IN_CACHE), min(in_memory, QUICK_IN_MEMORY), True)
    return Sizes(in_cache, in_memory)


def at_least(nbytes: int, unit: int) -> int:
    """The fewest units of ``unit`` bytes that make ``nbytes`` (an in-memory count)."""
    return max(1, -(-nbytes // unit))


def at_most(nbytes: int, unit: int) -> int:
    """The most units of ``unit`` bytes that fit ``nbytes`` (an in-cache count), at least 1."""
    return max(1, nbytes // unit)


# Where Linux describes virtio devices, and the free page reporting order.
SYSFS_VIRTIO = Path("/sys/bus/virtio/devices")
SYSFS_REPORTING_ORDER = Path("/sys/module/page_reporting/parameters/page_reporting_order")
VIRTIO_BALLOON = 5  # virtio device id of a memory balloon
BALLOON_F_REPORTING = 5  # its feature bit: free page reporting


def free_page_reporting(
    devices: Path = SYSFS_VIRTIO, order_file: Path = SYSFS_REPORTING_ORDER
) -> int | None:
    """The smallest block, in bytes, in which this virtual machine hands freed
    memory back to its host (a virtio balloon with free page reporting; it
    hands back free blocks of this size or larger), or None where it does not,
    or where Linux does not say (kernels before 5.14 publish no order).
    Memory handed back costs a fault on the host when it is next touched, so
    a benchmark row that writes a fresh output varies with how much of it was
    handed back."""
    reporting = False
    for device in sorted(devices.glob("virtio*")) if devices.is_dir() else []:
        try:
            if int((device / "device").read_text(), 16) != VIRTIO_BALLOON:
                continue
            bits = (device / "features").read_text().strip()
        except (OSError, ValueError):  # one odd device does not hide the others
            continue
        reporting |= len(bits) > BALLOON_F_REPORTING and bits[BALLOON_F_REPORTING] == "1"
    if not reporting:
        return None
    try:
        order = int(order_file.read_text())
    except (OSError, ValueError):
        return None
    page = _sysconf("SC_PAGE_SIZE") or 4096
    return page << order if 0 <= order < 32 else None  # unset reads 4294967295


def describe_reporting(block: int | None) -> str | None:
    """The header line for free_page_reporting()'s answer."""
    if block is None:
        return None
    return (
        f"memory: freed blocks of {_mib(block)} go back to the host "
        "(virtio-balloon free page reporting); a fresh output written on blocks handed "
        "back faults on the host, so fresh-memory rows vary between rounds and runs"
    )
