"""posembed: fast, checked kernels for learned position embeddings.

The core is C++ (OpenMP threads, SIMD) behind a thin NumPy API; every kernel
has a plain NumPy twin in :mod:`posembed.reference`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from posembed import reference
from posembed._checkpoint import resize_checkpoint
from posembed._embed import dropout_mask, embed, last_seed
from posembed._embedding import LearnedPositionEmbedding
from posembed._extend import extend
from posembed._gather import gather, gather_backward
from posembed._indexed import IndexedCorpus, write_indexed
from posembed._interpolate import interpolate, lerp
from posembed._pack import PackedRows, PackPlan, pack
from posembed._resample_grid import resample_grid
from posembed._runtime import config, get_num_threads, set_num_threads, show_config
from posembed._samples import GPTSamples, gpt_sample_index, gpt_samples
from posembed._similarity import similarity
from posembed._windows import WindowLayout, Windows, stitch, window_layout, windows

try:
    __version__ = version("posembed")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

__all__ = [
    "GPTSamples",
    "IndexedCorpus",
    "LearnedPositionEmbedding",
    "PackPlan",
    "PackedRows",
    "WindowLayout",
    "Windows",
    "__version__",
    "config",
    "dropout_mask",
    "embed",
    "extend",
    "gather",
    "gather_backward",
    "get_num_threads",
    "gpt_sample_index",
    "gpt_samples",
    "interpolate",
    "last_seed",
    "lerp",
    "pack",
    "reference",
    "resample_grid",
    "resize_checkpoint",
    "set_num_threads",
    "show_config",
    "similarity",
    "stitch",
    "window_layout",
    "windows",
    "write_indexed",
]
