"""What several kernels' cases use: PyTorch when installed, NumPy's
interpolation as a user writes it, and the tokenized corpora on disk that the
chunk and convert cases read."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

import posembed

# The packages a plain ``pip install posembed`` leaves out that some cases time
# as a peer or need to run at all: import name -> (distribution, what users
# call it, how to install it). Without one, its column stays empty or its
# cases are reported as not measured, and the run goes on.
OPTIONAL = {
    "torch": ("torch", "PyTorch", "pip install torch"),
    "pyarrow": ("pyarrow", "pyarrow", 'pip install "posembed[arrow]"'),
    "datasets": ("datasets", "HF datasets", "pip install datasets"),
    "safetensors": ("safetensors", "safetensors", "pip install safetensors"),
    "megatron": ("megatron-core", "megatron-core", "pip install megatron-core"),
    "trl": ("trl", "TRL", "pip install trl"),
}


def absent(module: str) -> str:
    """Why a case that needs ``module`` is not measured."""
    _, label, how = OPTIONAL[module]
    return f"{label} is not installed ({how})"


def optional_versions() -> dict[str, str | None]:
    """Each optional package's version, None where it cannot be imported here
    (looked up without importing it)."""
    versions: dict[str, str | None] = {}
    for module, (dist, label, _) in OPTIONAL.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a broken install, or a module set to None
            found = False
        try:
            versions[label] = importlib.metadata.version(dist) if found else None
        except importlib.metadata.PackageNotFoundError:
            versions[label] = None
    return versions


def optional_torch() -> Any:
    """PyTorch on posembed's thread count, or None where it is not installed
    (its column is then left empty)."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(posembed.get_num_threads())
    return torch


def numpy_interpolate(table: np.ndarray, length: int) -> np.ndarray:
    """What a NumPy user writes: half-pixel linear interpolation, vectorised."""
    rows = table.shape[0]
    s = np.maximum((np.arange(length) + 0.5) * rows / length - 0.5, 0)
    lo = np.minimum(np.floor(s).astype(np.int64), rows - 1)
    hi = np.minimum(lo + 1, rows - 1)
    w = (s - lo).astype(table.dtype)[:, None]
    out: np.ndarray = (1 - w) * table[lo] + w * table[hi]
    return out


class Corpus(NamedTuple):
    """A tokenized corpus in memory: tokens, CSR offsets, document lengths."""

    tokens: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray


def corpus(documents: int, dtype: Any, seed: int) -> Corpus:
    """``documents`` of 1 to 4095 tokens (about 2048 on average), GPT-2 ids."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 4096, documents)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.integers(0, 50_257, int(offsets[-1])).astype(dtype)
    return Corpus(tokens, offsets, lengths)


def write_parquet(path: Path, data: Corpus, row_group_size: int = 1000) -> None:
    """The corpus as a tokenized Parquet file: int32 id lists in an
    ``input_ids`` column, one document a row, snappy, row groups of 1000 rows
    (or ``row_group_size``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = pa.ListArray.from_arrays(pa.array(data.offsets.astype(np.int32)), pa.array(data.tokens))
    pq.write_table(pa.table({"input_ids": ids}), path, row_group_size=row_group_size)
