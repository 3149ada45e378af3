"""The benchmark's problem sizes come from the machine's caches (posembed.bench.sizes)."""

from __future__ import annotations

import sys

import pytest

from posembed import bench
from posembed.bench import scaling
from posembed.bench.sizes import (
    SYSFS_CACHES,
    Caches,
    MiB,
    Sizes,
    describe_reporting,
    free_page_reporting,
    read_sysfs,
    sizes,
)


def fake_sysfs(folder, entries):
    for i, (level, kind, size, shared) in enumerate(entries):
        index = folder / f"index{i}"
        index.mkdir()
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
        (index / "shared_cpu_list").write_text(f"{shared}\n")
    return folder


def test_reads_the_last_level_and_l2_from_sysfs(tmp_path):
    folder = fake_sysfs(
        tmp_path,
        [
            (1, "Data", "48K", "0"),
            (1, "Instruction", "32K", "0"),
            (2, "Unified", "2048K", "0"),
            (3, "Unified", "307200K", "0-1,4-5"),
        ],
    )
    assert read_sysfs(folder) == Caches(2 * MiB, 300 * MiB, "L3", 4, "sysfs")


def test_a_cpu_without_l3_has_l2_as_its_last_level(tmp_path):
    folder = fake_sysfs(tmp_path, [(1, "Data", "32K", "0"), (2, "Unified", "4M", "0-3")])
    assert read_sysfs(folder) == Caches(4 * MiB, 4 * MiB, "L2", 4, "sysfs")


@pytest.mark.parametrize("size", ["", "lots", "12Q"])
def test_unreadable_sysfs_is_none(tmp_path, size):
    assert read_sysfs(tmp_path / "absent") is None
    assert read_sysfs(tmp_path) is None  # no index folders
    fake_sysfs(tmp_path, [(3, "Unified", size, "0")])
    assert read_sysfs(tmp_path) is None


def test_this_machines_caches():
    found = bench.caches()
    assert found.l2 > 0
    assert found.last_level > 0
    assert found.shared_by >= 1
    from_sysfs = read_sysfs(SYSFS_CACHES)
    if from_sysfs is not None:
        assert found == from_sysfs
    else:
        assert found.source in ("sysconf", "default")


@pytest.mark.parametrize("last_level", [32 * MiB, 300 * MiB])
def test_sizes_follow_the_last_level(last_level):
    c = Caches(1 * MiB, last_level, "L3", 2, "sysfs")
    assert sizes(of=c) == Sizes(last_level // 4, 4 * last_level)
    quick = sizes(quick=True, of=c)
    assert quick.quick
    assert quick.in_cache <= 2 * MiB
    assert quick.in_memory <= 32 * MiB
    assert "1/4 and 4x the L3" in sizes(of=c).describe("L3")


# in memory, these stream their input rather than their output (what "bytes" counts)
STREAMED_INPUT = {("windows", "stitch mean"), ("gather_backward", "token ids")}


@pytest.mark.parametrize("last_level", [32 * MiB, 300 * MiB])
def test_scaling_problems_are_sized_from_the_caches(last_level):
    s = sizes(of=Caches(1 * MiB, last_level, "L3", 2, "sysfs"))
    made = [c for build in scaling.SCALING_BUILDERS.values() for c in build(s)]
    assert [f"{c.problem} ({c.size})" for c in made] == [
        name for names in bench.SCALING_NAMES.values() for name in names
    ]
    for case in made:  # listed without building any arrays
        if case.size == "in cache":
            assert case.nbytes <= s.in_cache, case
            assert case.nbytes >= s.in_cache // 8 or case.nbytes == 0, case
        elif (case.kernel, case.problem) not in STREAMED_INPUT:
            assert case.nbytes >= s.in_memory, case
            assert case.nbytes <= 1.1 * s.in_memory, case


def fake_virtio(folder, devices):
    """devices: (device id, or the device file's text; features string) per
    virtio device."""
    for i, (device, features) in enumerate(devices):
        d = folder / f"virtio{i}"
        d.mkdir(parents=True)
        (d / "device").write_text(device if isinstance(device, str) else f"0x{device:04x}\n")
        (d / "features").write_text(features + "\n")
    return folder


# bits 1, 2 and 5 (statistics, deflate on OOM, free page reporting), 32 (version 1)
REPORTING = "0110010000" + "0" * 22 + "1" + "0" * 31
NO_REPORTING = "0110000000" + "0" * 22 + "1" + "0" * 31


@pytest.mark.parametrize(
    ("devices", "order", "want"),
    [
        ([(2, "1" * 64), (5, REPORTING)], "9\n", 512 * 4096),
        ([(5, REPORTING)], "10", 1024 * 4096),
        ([(5, NO_REPORTING)], "9", None),  # a balloon without reporting
        ([(1, REPORTING)], "9", None),  # bit 5 of a network card means something else
        ([], "9", None),
        ([(5, REPORTING)], None, None),  # no order published
        ([(5, REPORTING)], "nine", None),
        ([(5, REPORTING)], "4294967295", None),  # no order set
        ([("0xzz\n", REPORTING), (5, REPORTING)], "9", 512 * 4096),  # an odd one passed over
        ([(5, "01")], "9", None),  # too few feature bits
    ],
)
def test_free_page_reporting_is_read_from_the_balloon_and_its_order(
    tmp_path, monkeypatch, devices, order, want
):
    module = sys.modules[free_page_reporting.__module__]  # (bench.sizes is also a function)
    monkeypatch.setattr(module, "_sysconf", lambda name: 4096)
    folder = fake_virtio(tmp_path / "devices", devices)
    folder.mkdir(exist_ok=True)
    order_file = tmp_path / "order"
    if order is not None:
        order_file.write_text(order)
    assert free_page_reporting(folder, order_file) == want


def test_the_header_says_when_freed_memory_goes_back_to_the_host():
    assert describe_reporting(None) is None
    line = describe_reporting(2 * MiB)
    assert line is not None
    assert line.startswith("memory: freed blocks of 2 MiB go back to the host")
    found = free_page_reporting()  # this machine: None, or a power of two of pages
    assert found is None or (found >= 4096 and found & (found - 1) == 0)
