# Stubs for posembed._core._probes (cpp/bind_probes.cpp): rooflines and
# thread-pool probes for the benchmark and the tests; not part of the API.

from typing import SupportsFloat, SupportsIndex

import numpy as np
import numpy.typing as npt

from posembed._core import FileMap

def set_thresholds(parallel_min_bytes: SupportsIndex, stream_min_bytes: SupportsIndex) -> None:
    """Override the work thresholds (-1 restores a default)."""

def legacy_intervals(key: npt.ArrayLike, pos: SupportsIndex, maxes: npt.ArrayLike) -> np.ndarray:
    """NumPy's random_interval of each maximum, drawn from an MT19937 state in turn."""

def last_team_size() -> int:
    """Threads that ran the most recent parallel section (1 if it stayed serial)."""

def calls_in_flight_peak(reset: bool = False) -> int:
    """Most kernel calls in flight at once since the last reset."""

def helpers_busy_peak(reset: bool = False) -> int:
    """Most helper threads busy at once across calls since the last reset."""

def team_sizes_in_openmp_team(outer: SupportsIndex, n: SupportsIndex) -> int:
    """Largest team a call made from each thread of an OpenMP team used."""

def roofline_fill(
    buf: np.ndarray, value: SupportsIndex = 0, stream: bool = False, threads: SupportsIndex = 0
) -> None: ...
def roofline_spin(n: SupportsIndex, threads: SupportsIndex = 0) -> int: ...
def roofline_flops(n: SupportsIndex, fused: bool = False, threads: SupportsIndex = 0) -> float: ...
def flops_per_step(fused: bool = False) -> int: ...
def roofline_random_bits(n: SupportsIndex, threads: SupportsIndex = 0) -> int: ...
def mapped_faults() -> int:
    """Copies out of a file's mapping that met a page lost (the file shrank)."""

def roofline_fill_block(
    size: SupportsIndex, value: SupportsIndex = 0, stream: bool = False, threads: SupportsIndex = 0
) -> None:
    """A block of size bytes from the kernels' output cache filled with value, then handed back."""

def output_block_size(base: object) -> int:
    """The size of the kernels' output block behind an array's .base, or -1 where there is none."""

def kept_output_blocks() -> list[int]:
    """The sizes in bytes of the freed output blocks kept for reuse, oldest first."""

def hold_file_lock(seconds: SupportsFloat | SupportsIndex) -> None:
    """A thread of its own holds the lock a kernel takes to look at the file
    it keeps open, for ``seconds`` (returns once it holds it)."""

def truncate_after_open(path: str, size: SupportsIndex) -> None:
    """The next open of ``path`` by a kernel that reads it on each call
    truncates it to ``size`` bytes after its checks (a file that shrinks
    while it is read)."""

def roofline_pread(
    fd: SupportsIndex,
    ranges: npt.ArrayLike,
    dst: np.ndarray,
    threads: SupportsIndex = 0,
    mapping: FileMap | None = None,
) -> None: ...
def roofline_copy(
    dst: np.ndarray, src: np.ndarray, stream: bool = False, threads: SupportsIndex = 0
) -> None: ...
