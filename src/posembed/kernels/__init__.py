"""The kernels: arrays in, arrays out.

One module per kernel family (gather, embed, interpolate, extend,
resample_grid, similarity, windows, pack, GPT samples, blends, batch order), the argument checks
they share (``_validate``), Arrow arrays taken as corpora (``_arrow``) and the
thread and SIMD runtime (``_runtime``). Each checks its arguments and calls
the compiled code in :mod:`posembed._core`; nothing here reads a file. The
public names are re-exported by :mod:`posembed`; this layer imports only
``posembed._core``.
"""
