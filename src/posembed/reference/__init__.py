"""Plain NumPy twins of posembed's kernels.

Each function here has the same signature, the same results and the same
exception types as its fast counterpart, and is written to be read, not to be
fast. The tests and the fuzz harness run both on the same inputs and hold the
kernels to these. One module per family of kernels: ``gather`` (gather,
gather_backward), ``interpolate`` (interpolate, lerp), ``extend``,
``resample_grid``, ``similarity``, ``samples`` (gpt_samples, GPTSamples,
gpt_sample_index: Megatron-LM's GPT sample indices), ``windows`` (windows, Windows,
window_layout, WindowLayout, stitch), ``random`` (uniform_bits,
dropout_mask), ``embed``, ``embedding`` (the LearnedPositionEmbedding class),
``checkpoint`` (resize_checkpoint), ``pack`` (pack: sequence packing plans and
their cut) and ``indexed`` (IndexedCorpus,
write_indexed, merge_indexed: Megatron indexed datasets, whole files at a time), ``blend``
(blending_indices, exhaustive_blending_indices: Megatron-LM's blends) and
``batch_order`` (BatchOrder: the seeded order of samples sliced into batches).
Where a module shares its name with a function (``gather``, ``interpolate``,
...), ``posembed.reference.<name>`` is the function; ``from
posembed.reference.<module> import ...`` reaches the rest of a module.

The twins import nothing from the rest of posembed but its safetensors file
format module (the format is not what the resize twin restates), and that
includes its argument checks: they check their arguments with their own plain code
(``_common``). This is deliberate. A twin that called posembed's checks would
accept what they accept and raise what they raise, so a check that lets a bad
value through, or refuses it with the wrong exception type, would be wrong on
both sides at once and no comparison could see it. Written twice, the two sets
of checks must agree on the exception type of every bad input the tests and
the fuzz harness try; their messages are their own (posembed's are the ones
users read).
"""

from __future__ import annotations

from posembed.reference.batch_order import BatchOrder
from posembed.reference.blend import blending_indices, exhaustive_blending_indices
from posembed.reference.checkpoint import resize_checkpoint as resize_checkpoint
from posembed.reference.embed import embed
from posembed.reference.embedding import LearnedPositionEmbedding
from posembed.reference.extend import extend
from posembed.reference.gather import gather, gather_backward
from posembed.reference.gpt_batch import GPTBatch as GPTBatch
from posembed.reference.gpt_batch import gpt_batch, gpt_blend_batch
from posembed.reference.indexed import IndexedCorpus, merge_indexed, write_indexed
from posembed.reference.interpolate import interpolate, lerp
from posembed.reference.pack import pack
from posembed.reference.random import dropout_mask, uniform_bits
from posembed.reference.resample_grid import resample_grid
from posembed.reference.samples import GPTSamples as GPTSamples
from posembed.reference.samples import gpt_sample_index, gpt_samples
from posembed.reference.similarity import similarity
from posembed.reference.windows import WindowLayout as WindowLayout
from posembed.reference.windows import Windows as Windows
from posembed.reference.windows import stitch, window_layout, windows

__all__ = [
    "BatchOrder",
    "IndexedCorpus",
    "LearnedPositionEmbedding",
    "blending_indices",
    "dropout_mask",
    "embed",
    "exhaustive_blending_indices",
    "extend",
    "gather",
    "gather_backward",
    "gpt_batch",
    "gpt_blend_batch",
    "gpt_sample_index",
    "gpt_samples",
    "interpolate",
    "lerp",
    "merge_indexed",
    "pack",
    "resample_grid",
    "similarity",
    "stitch",
    "uniform_bits",
    "window_layout",
    "windows",
    "write_indexed",
]

# Importable from here too, but not in __all__: the Windows, WindowLayout and
# GPTSamples records that windows(), window_layout() and gpt_samples() return,
# and resize_checkpoint, which twins posembed's results but not its checks of
# arguments and files (so the bad-input tests do not hold it to posembed's
# exception types).
