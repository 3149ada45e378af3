"""posembed: fast, checked kernels for learned position embeddings.

The core is C++ (OpenMP threads, SIMD) behind a thin NumPy API; every kernel
has a plain NumPy twin in :mod:`posembed.reference`.
"""

from __future__ import annotations

from posembed import reference
from posembed.checkpoint._resize import resize_checkpoint
from posembed.corpus._batches import Batches, MicroBatch
from posembed.corpus._blend_output import gpt_blend, write_megatron_cache
from posembed.corpus._merge import merge_indexed
from posembed.io._indexed import IndexedCorpus
from posembed.io._indexed_write import write_indexed
from posembed.kernels import _runtime
from posembed.kernels._batch_order import BatchOrder
from posembed.kernels._blend import blending_indices, exhaustive_blending_indices
from posembed.kernels._blend_build import GPTBlend, GPTBlendSplit, split_ranges
from posembed.kernels._embed import dropout_mask, embed, last_seed
from posembed.kernels._embedding import LearnedPositionEmbedding
from posembed.kernels._extend import extend
from posembed.kernels._gather import gather, gather_backward
from posembed.kernels._gpt_batch import GPTBatch, gpt_batch
from posembed.kernels._interpolate import interpolate, lerp
from posembed.kernels._pack import PackedRows, PackPlan, pack
from posembed.kernels._resample_grid import resample_grid
from posembed.kernels._runtime import config, get_num_threads, set_num_threads, show_config
from posembed.kernels._samples import GPTSamples, gpt_sample_index, gpt_samples
from posembed.kernels._similarity import similarity
from posembed.kernels._windows import WindowLayout, Windows, stitch, window_layout, windows

__version__ = _runtime.VERSION

__all__ = [
    "BatchOrder",
    "Batches",
    "GPTBatch",
    "GPTBlend",
    "GPTBlendSplit",
    "GPTSamples",
    "IndexedCorpus",
    "LearnedPositionEmbedding",
    "MicroBatch",
    "PackPlan",
    "PackedRows",
    "WindowLayout",
    "Windows",
    "__version__",
    "blending_indices",
    "config",
    "dropout_mask",
    "embed",
    "exhaustive_blending_indices",
    "extend",
    "gather",
    "gather_backward",
    "get_num_threads",
    "gpt_batch",
    "gpt_blend",
    "gpt_sample_index",
    "gpt_samples",
    "interpolate",
    "last_seed",
    "lerp",
    "merge_indexed",
    "pack",
    "reference",
    "resample_grid",
    "resize_checkpoint",
    "set_num_threads",
    "show_config",
    "similarity",
    "split_ranges",
    "stitch",
    "window_layout",
    "windows",
    "write_indexed",
    "write_megatron_cache",
]
