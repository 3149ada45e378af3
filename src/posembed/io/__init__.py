"""Formats and stores: what posembed reads and writes, and how.

``.npy`` headers (``_npy``), strict JSON (``_json``), safetensors
(``_safetensors``), Megatron-LM indexed datasets (``_indexed`` reads,
``_indexed_write`` writes), token files and the one-line input error
(``_tokens``), fsspec object stores (``_store``), the parted output of
``posembed chunk --dask`` read back (``_parts``), and atomic outputs with the
``--force`` rules (``_outdir``). This layer imports only the kernels and
:mod:`posembed._core`.
"""
