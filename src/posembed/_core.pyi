from typing import Any

import numpy as np

def interpolate(
    table: np.ndarray,
    kind: int,
    length: int,
    align: int,
    first: int = 0,
    out: np.ndarray | None = None,
    fresh: bool = False,
) -> np.ndarray: ...
def lerp(
    table: np.ndarray, kind: int, positions: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray: ...
def resample_grid(
    table: np.ndarray,
    kind: int,
    prefix: int,
    h: int,
    w: int,
    h2: int,
    w2: int,
    method: int,
    align: int,
) -> np.ndarray: ...
def gather(
    table: np.ndarray,
    positions: np.ndarray,
    mode: int,
    out: np.ndarray | None = None,
    fresh: bool = False,
) -> np.ndarray: ...
def embed(
    tokens: np.ndarray,
    pos: np.ndarray,
    kind: int,
    ids: np.ndarray,
    positions: np.ndarray | None,
    offset: int,
    period: int,
    active: bool,
    seed: int,
    threshold: int,
    scale: float,
    out: np.ndarray | None = None,
) -> np.ndarray: ...
def dropout_mask(n: int, seed: int, threshold: int) -> np.ndarray: ...
def gather_backward(
    grad: np.ndarray,
    kind: int,
    positions: np.ndarray,
    length: int,
    out: np.ndarray,
    zero_unused: bool,
) -> None: ...
def windows(
    tokens: np.ndarray,
    doc_offsets: np.ndarray,
    size: int,
    step: int,
    tail: int,
    pad: np.ndarray,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...
def window_owner(
    doc_offsets: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    documents: np.ndarray,
    size: int,
    rule: int,
) -> np.ndarray: ...
def stitch(
    values: np.ndarray,
    doc_offsets: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    documents: np.ndarray,
    size: int,
    reduce: int,
    own: np.ndarray | None,
    fill: Any,
) -> np.ndarray: ...
def set_num_threads(n: int) -> None: ...
def get_num_threads() -> int: ...
def _last_team_size() -> int: ...
def _set_thresholds(parallel_min_bytes: int, stream_min_bytes: int) -> None: ...
def config() -> dict[str, Any]: ...
def roofline_fill(
    buf: np.ndarray, value: int = 0, stream: bool = False, threads: int = 0
) -> None: ...
def roofline_copy(
    dst: np.ndarray, src: np.ndarray, stream: bool = False, threads: int = 0
) -> None: ...
def roofline_spin(n: int, threads: int = 0) -> int: ...
