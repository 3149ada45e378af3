# Stubs for the pybind11 module built from cpp/module.cpp and cpp/bind_*.cpp,
# one entry per m.def and py::enum_ there, with its argument names, defaults
# and order. pybind11 binds every argument as positional-or-keyword. Argument
# types are what the bindings accept: C++ integers take any object with
# __index__ (never a float), C++ doubles any real number, `I64` arguments
# (py::array_t<int64_t>) anything NumPy converts to int64 without an unsafe
# cast, enum arguments only that enum's members. Where the binding takes a
# py::object, the stub names what it can actually use; anything else raises
# TypeError at run time.
#
# stubtest cannot compare these signatures with the module (pybind11 gives
# its functions no __text_signature__); tests/test_docstrings.py compares them
# with the signature line pybind11 writes into each function's __doc__.

from collections.abc import Sequence
from typing import (
    Any,
    ClassVar,
    SupportsFloat,
    SupportsIndex,
    TypeAlias,
    TypedDict,
    type_check_only,
)

import numpy as np
import numpy.typing as npt

from posembed._core import _probes as _probes

# Bound C++ enums (pybind11 py::enum_): member names are the words the
# Python API takes, so posembed looks a user's string up in __members__.
@type_check_only
class _Enum:
    def __init__(self, value: SupportsIndex) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __ne__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __index__(self) -> int: ...
    def __int__(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...

class FloatKind(_Enum):
    __members__: ClassVar[dict[str, FloatKind]]
    float16: ClassVar[FloatKind]
    bfloat16: ClassVar[FloatKind]
    float32: ClassVar[FloatKind]
    float64: ClassVar[FloatKind]

class Align(_Enum):
    __members__: ClassVar[dict[str, Align]]
    scale: ClassVar[Align]
    half_pixel: ClassVar[Align]
    corners: ClassVar[Align]

class IndexMode(_Enum):
    __members__: ClassVar[dict[str, IndexMode]]
    # "raise" is a keyword: reached as IndexMode.__members__["raise"]
    clip: ClassVar[IndexMode]
    wrap: ClassVar[IndexMode]

class GridMethod(_Enum):
    __members__: ClassVar[dict[str, GridMethod]]
    bilinear: ClassVar[GridMethod]
    bicubic: ClassVar[GridMethod]

class Tail(_Enum):
    __members__: ClassVar[dict[str, Tail]]
    pad: ClassVar[Tail]
    shift: ClassVar[Tail]
    drop: ClassVar[Tail]

class OwnerRule(_Enum):
    __members__: ClassVar[dict[str, OwnerRule]]
    first: ClassVar[OwnerRule]
    center: ClassVar[OwnerRule]

class Reduce(_Enum):
    __members__: ClassVar[dict[str, Reduce]]
    mean: ClassVar[Reduce]
    sum: ClassVar[Reduce]
    max: ClassVar[Reduce]
    first: ClassVar[Reduce]
    center: ClassVar[Reduce]

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

# IndexError naming the first of indices (integers, or Python ints in an object
# array) outside [0, rows): the kernels' own scan and message.
def check_in_range(
    indices: np.ndarray, rows: SupportsIndex, name: str, noun: str, table: str = ""
) -> None: ...

# out_just_allocated: the caller allocated out for this call, so the kernel
# writes it with plain stores, as a result of its own (streaming gains nothing).
def gather(
    table: np.ndarray,
    positions: np.ndarray,
    mode: IndexMode,
    out: np.ndarray | None = None,
    out_just_allocated: bool = False,
) -> np.ndarray: ...
def interpolate(
    table: np.ndarray,
    kind: FloatKind,
    length: SupportsIndex,
    align: Align,
    first: SupportsIndex = 0,
    out: np.ndarray | None = None,
    out_just_allocated: bool = False,
    antialias: bool = False,
) -> np.ndarray: ...
def lerp(
    table: np.ndarray,
    kind: FloatKind,
    positions: np.ndarray,
    out: np.ndarray | None = None,
) -> np.ndarray: ...
def resample_grid(
    table: np.ndarray,
    kind: FloatKind,
    prefix: SupportsIndex,
    height: SupportsIndex,
    width: SupportsIndex,
    new_height: SupportsIndex,
    new_width: SupportsIndex,
    method: GridMethod,
    align: Align,
    antialias: bool = False,
) -> np.ndarray: ...
def resample_grid_flops(
    height: SupportsIndex,
    width: SupportsIndex,
    new_height: SupportsIndex,
    new_width: SupportsIndex,
    d: SupportsIndex,
    method: GridMethod,
    align: Align,
    antialias: bool = False,
) -> int: ...
def embed(
    tokens: np.ndarray,
    pos: np.ndarray,
    kind: FloatKind,
    ids: np.ndarray,
    positions: np.ndarray | None,
    offset: SupportsIndex,
    active: bool,
    seed: SupportsIndex,
    threshold: SupportsIndex,
    scale: SupportsFloat | SupportsIndex,
    out: np.ndarray | None = None,
    first_row: SupportsIndex = 0,
) -> np.ndarray: ...
def embed_plain(tokens: object, ids: object, pos: object) -> np.ndarray | None: ...
def dropout_mask(
    count: SupportsIndex, seed: SupportsIndex, threshold: SupportsIndex
) -> npt.NDArray[np.bool_]: ...
def gather_plain(table: object, positions: object, out: object = None) -> np.ndarray | None: ...
def gather_backward(
    grad: np.ndarray,
    kind: FloatKind,
    positions: np.ndarray,
    length: SupportsIndex,
    out: np.ndarray | None = None,
) -> np.ndarray: ...
def window_layout(
    doc_offsets: npt.ArrayLike,
    size: SupportsIndex,
    step: SupportsIndex,
    tail: Tail,
    win_offsets: npt.ArrayLike | None = None,
    begin: SupportsIndex = 0,
    end: SupportsIndex = -1,
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]
]: ...
def fill_windows(
    tokens: np.ndarray,
    token_start: SupportsIndex,
    doc_offsets: npt.ArrayLike,
    starts: npt.ArrayLike,
    lengths: npt.ArrayLike,
    documents: npt.ArrayLike,
    size: SupportsIndex,
    pad: np.ndarray,
    out: np.ndarray | None = None,
) -> np.ndarray: ...
def fill_windows_to_file(
    in_fd: SupportsIndex,
    in_offset: SupportsIndex,
    itemsize: SupportsIndex,
    swap: bool,
    token_count: SupportsIndex,
    doc_offsets: npt.ArrayLike,
    starts: npt.ArrayLike,
    lengths: npt.ArrayLike,
    documents: npt.ArrayLike,
    size: SupportsIndex,
    pad: np.ndarray,
    out_fd: SupportsIndex,
    out_offset: SupportsIndex,
    block_bytes: SupportsIndex,
) -> int: ...
def window_owner(
    doc_offsets: npt.ArrayLike,
    starts: npt.ArrayLike,
    lengths: npt.ArrayLike,
    documents: npt.ArrayLike,
    size: SupportsIndex,
    rule: OwnerRule,
) -> npt.NDArray[np.bool_]: ...
def stitch(
    values: np.ndarray,
    doc_offsets: npt.ArrayLike,
    starts: npt.ArrayLike,
    lengths: npt.ArrayLike,
    documents: npt.ArrayLike,
    size: SupportsIndex,
    reduce: Reduce,
    fill: SupportsFloat | SupportsIndex,
) -> np.ndarray: ...
def document_tokens(lengths: np.ndarray, documents: npt.ArrayLike | None = None) -> int: ...
def sample_index(
    lengths: np.ndarray,
    document_index: np.ndarray,
    sequence_length: SupportsIndex,
    extra: SupportsIndex,
    num_samples: SupportsIndex,
    wide: bool,
) -> np.ndarray: ...
def blending_indices(weights: np.ndarray, size: SupportsIndex) -> tuple[np.ndarray, np.ndarray]: ...
def exhaustive_blending_indices(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
def gpt_indices(
    lengths: np.ndarray,
    documents: npt.ArrayLike | None,
    epochs: SupportsIndex,
    separate: bool,
    samples_before_final: SupportsIndex,
    sequence_length: SupportsIndex,
    extra: SupportsIndex,
    num_samples: SupportsIndex,
    key: npt.ArrayLike,
    pos: SupportsIndex,
    wide_documents: bool,
    wide_samples: bool,
    wide_shuffle: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

# What a GPTBatchReader call gives: tokens, labels, loss_mask, position_ids,
# the parts' flat cu_seqlens, cu_seqlens_padded, max_seqlen, the attention
# mask or None, where each part's cu_seqlens begin and its longest document.
_BatchTuple: TypeAlias = tuple[
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    int,
    np.ndarray | None,
    np.ndarray,
    np.ndarray,
]

class GPTBatchReader:
    def __init__(
        self,
        document_index: np.ndarray,
        sample_index: np.ndarray,
        shuffle_index: np.ndarray,
        sequence_length: SupportsIndex,
        extra: SupportsIndex,
        eod: SupportsIndex,
        pad: SupportsIndex,
        reset_position_ids: bool,
        reset_attention_mask: bool,
        eod_mask_loss: bool,
        attention_mask: bool,
        offsets: np.ndarray | None,
        lengths: np.ndarray | None,
        tokens: np.ndarray | None,
        bin: str,
        file_dtype: object,
        file_offset: SupportsIndex,
        swap: bool,
        ntokens: SupportsIndex,
        stamp: tuple[int, int, int] | None,
    ) -> None: ...
    def __call__(
        self, indices: np.ndarray, part_rows: SupportsIndex = 0, text: np.ndarray | None = None
    ) -> _BatchTuple | None: ...
    def reads_alone(self) -> bool: ...

def gpt_blend_batch(
    readers: Sequence[GPTBatchReader | None],
    dataset_index: np.ndarray,
    dataset_sample_index: np.ndarray,
    indices: np.ndarray,
    part_rows: SupportsIndex = 0,
) -> _BatchTuple: ...

class GPTBatchAhead:
    def __init__(
        self,
        reader: GPTBatchReader,
        n: SupportsIndex,
        seed: SupportsIndex,
        shuffle: bool,
        step0: SupportsIndex,
        stride: SupportsIndex,
        offset: SupportsIndex,
        m: SupportsIndex,
        first: SupportsIndex,
        every: SupportsIndex,
        group: SupportsIndex,
        count: SupportsIndex,
        run_length: SupportsIndex,
        ahead: SupportsIndex,
        readers: SupportsIndex,
        threads: SupportsIndex,
        caller_reads: bool = True,
        blend: tuple[Sequence[GPTBatchReader | None], np.ndarray, np.ndarray] | None = None,
    ) -> None: ...
    def next(self) -> list[tuple[list[int], np.ndarray, _BatchTuple]] | None: ...
    def close(self) -> None: ...

def gpt_batch_ahead_readers() -> int: ...
def gpt_batch_ahead_caller_shares() -> int: ...

class FileMap:
    def __init__(self, fd: SupportsIndex, size: SupportsIndex) -> None: ...
    @property
    def size(self) -> int: ...

def write_marked(
    fd: SupportsIndex,
    data: np.ndarray,
    cuts: npt.ArrayLike,
    mark: np.ndarray,
    offset: SupportsIndex,
) -> None: ...
def copy_marked(
    in_fd: SupportsIndex,
    in_offset: SupportsIndex,
    in_dtype: np.dtype[Any],
    swap: bool,
    first: SupportsIndex,
    last: SupportsIndex,
    block: SupportsIndex,
    cuts: npt.ArrayLike,
    out_fd: SupportsIndex,
    out_dtype: np.dtype[Any],
    mark: np.ndarray,
    out_offset: SupportsIndex,
    low: SupportsIndex,
    high: SupportsIndex,
) -> tuple[int, int]: ...
def unit_rows(x: np.ndarray) -> np.ndarray: ...
def row_scales(x: np.ndarray, threads: SupportsIndex = 0) -> tuple[np.ndarray, np.ndarray]: ...
def mirror_lower(
    a: np.ndarray,
    inv: np.ndarray | None = None,
    begin: SupportsIndex = 0,
    end: SupportsIndex = -1,
    threads: SupportsIndex = 0,
) -> None: ...
def batch_order_rows(
    out: np.ndarray,
    first: SupportsIndex,
    stride: SupportsIndex,
    n: SupportsIndex,
    seed: SupportsIndex,
    shuffle: bool,
) -> None: ...
def batch_order_samples(
    positions: np.ndarray, out: np.ndarray, n: SupportsIndex, seed: SupportsIndex, shuffle: bool
) -> None: ...
def pack_plan(
    lengths: npt.ArrayLike, capacity: SupportsIndex, strategy: SupportsIndex, split: SupportsIndex
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...
def pack_cut(
    tokens: tuple[Any, ...],
    columns: list[tuple[Any, ...]],
    wanted: npt.ArrayLike,
    row_offsets: npt.ArrayLike,
    document: npt.ArrayLike,
    start: npt.ArrayLike,
    length: npt.ArrayLike,
    document_lengths: npt.ArrayLike,
    capacity: SupportsIndex,
    wide: bool,
    labels: bool,
    position_start: SupportsIndex,
    separator: SupportsIndex,
    reuse: bool = False,
) -> tuple[Any, Any, Any, Any, Any]: ...

class PackCutReader:
    def __init__(
        self,
        row_offsets: npt.ArrayLike,
        document: npt.ArrayLike,
        start: npt.ArrayLike,
        length: npt.ArrayLike,
        document_lengths: npt.ArrayLike,
        capacity: SupportsIndex,
        wide: bool,
        labels: bool,
        position_start: SupportsIndex,
        separator: SupportsIndex,
        sources: list[tuple[Any, ...]],
    ) -> None: ...
    def __call__(self, rows: np.ndarray) -> tuple[Any, Any, Any, Any, Any] | None: ...

def pack_unpack(
    values: np.ndarray,
    row_offsets: npt.ArrayLike,
    document: npt.ArrayLike,
    start: npt.ArrayLike,
    length: npt.ArrayLike,
    offset: npt.ArrayLike,
    placed: npt.ArrayLike,
) -> np.ndarray: ...
def set_num_threads(threads: SupportsIndex) -> None: ...
def get_num_threads() -> int: ...
def set_calling_thread_threads(threads: SupportsIndex) -> int: ...
def calling_thread_threads() -> int: ...
def config() -> _Config: ...
def rename_exchange(a: bytes, b: bytes) -> int: ...
def rename_noreplace(src: bytes, dst: bytes) -> int: ...
