# Stubs for the pybind11 module built from cpp/bindings.cpp, one entry per
# m.def there, with its argument names, defaults and order. pybind11 binds
# every argument as positional-or-keyword. Argument types are what the
# bindings accept: C++ integers take any object with __index__ (never a
# float), C++ doubles any real number, `I64` arguments (py::array_t<int64_t>)
# anything NumPy converts to int64 without an unsafe cast. Where the binding
# takes a py::object, the stub names what it can actually use; anything else
# raises TypeError at run time.
#
# stubtest cannot compare these signatures with the module (pybind11 gives
# its functions no __text_signature__); tests/test_docstrings.py compares them
# with the signature line pybind11 writes into each function's __doc__.

from typing import SupportsFloat, SupportsIndex, TypedDict, type_check_only

import numpy as np
import numpy.typing as npt

@type_check_only
class _Config(TypedDict):
    compiler: str
    build_type: str
    sanitized: bool  # built with AddressSanitizer + UndefinedBehaviorSanitizer
    openmp: bool
    openmp_version: int  # the _OPENMP date macro, 0 without OpenMP
    simd: str
    cpu_simd: str
    simd_levels: list[str]
    dropout_rng: str
    num_threads: int
    default_num_threads: int
    num_threads_set: bool
    max_num_threads: int
    forked_child: bool
    parallel_min_bytes: int
    stream_min_bytes: int

def gather(
    table: np.ndarray,
    positions: np.ndarray,
    mode: SupportsIndex,
    out: np.ndarray | None = None,
    fresh: bool = False,
) -> np.ndarray: ...
def interpolate(
    table: np.ndarray,
    kind: SupportsIndex,
    length: SupportsIndex,
    align: SupportsIndex,
    first: SupportsIndex = 0,
    out: np.ndarray | None = None,
    fresh: bool = False,
) -> np.ndarray: ...
def lerp(
    table: np.ndarray,
    kind: SupportsIndex,
    positions: np.ndarray,
    out: np.ndarray | None = None,
) -> np.ndarray: ...
def resample_grid(
    table: np.ndarray,
    kind: SupportsIndex,
    prefix: SupportsIndex,
    h: SupportsIndex,
    w: SupportsIndex,
    h2: SupportsIndex,
    w2: SupportsIndex,
    method: SupportsIndex,
    align: SupportsIndex,
) -> np.ndarray: ...
def embed(
    tokens: np.ndarray,
    pos: np.ndarray,
    kind: SupportsIndex,
    ids: npt.ArrayLike,
    positions: npt.ArrayLike | None,
    offset: SupportsIndex,
    period: SupportsIndex,
    active: bool,
    seed: SupportsIndex,
    threshold: SupportsIndex,
    scale: SupportsFloat | SupportsIndex,
    out: np.ndarray | None = None,
    first_row: SupportsIndex = 0,
) -> np.ndarray: ...
def dropout_mask(
    n: SupportsIndex, seed: SupportsIndex, threshold: SupportsIndex
) -> npt.NDArray[np.bool_]: ...
def gather_backward(
    grad: np.ndarray,
    kind: SupportsIndex,
    positions: npt.ArrayLike,
    length: SupportsIndex,
    out: np.ndarray,
    zero_unused: bool,
) -> None: ...
def windows(
    tokens: np.ndarray,
    doc_offsets: np.ndarray,
    size: SupportsIndex,
    step: SupportsIndex,
    tail: SupportsIndex,
    pad: np.ndarray,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
def window_owner(
    doc_offsets: npt.ArrayLike,
    starts: npt.ArrayLike,
    lengths: npt.ArrayLike,
    documents: npt.ArrayLike,
    size: SupportsIndex,
    rule: SupportsIndex,
) -> npt.NDArray[np.bool_]: ...
def stitch(
    values: np.ndarray,
    doc_offsets: npt.ArrayLike,
    starts: npt.ArrayLike,
    lengths: npt.ArrayLike,
    documents: npt.ArrayLike,
    size: SupportsIndex,
    reduce: SupportsIndex,
    own: npt.ArrayLike | None,
    fill: SupportsFloat | SupportsIndex,
) -> np.ndarray: ...
def set_num_threads(n: SupportsIndex) -> None: ...
def get_num_threads() -> int: ...
def _set_thresholds(parallel_min_bytes: SupportsIndex, stream_min_bytes: SupportsIndex) -> None:
    """Override the work thresholds (-1 restores a default)."""

def _last_team_size() -> int:
    """Threads that ran the most recent parallel section (1 if it stayed serial)."""

def _calls_in_flight_peak(reset: bool = False) -> int:
    """Most kernel calls in flight at once since the last reset (diagnostics)."""

def _helpers_busy_peak(reset: bool = False) -> int:
    """Most helper threads busy at once across calls since the last reset (diagnostics)."""

def _team_sizes_in_openmp_team(outer: SupportsIndex, n: SupportsIndex) -> int:
    """Largest team a call made from each thread of an OpenMP team used (diagnostics)."""

def config() -> _Config: ...
def roofline_fill(
    buf: np.ndarray, value: SupportsIndex = 0, stream: bool = False, threads: SupportsIndex = 0
) -> None: ...
def roofline_spin(n: SupportsIndex, threads: SupportsIndex = 0) -> int: ...
def roofline_copy(
    dst: np.ndarray, src: np.ndarray, stream: bool = False, threads: SupportsIndex = 0
) -> None: ...
