"""A position table inside a checkpoint: :func:`posembed.resize_checkpoint`.

``_table`` plans a resize and resizes one table of a safetensors file into a
new file; ``_model_folder`` does it for a Hugging Face model folder (its
``config.json``, shards and index); ``_resize`` is the entry point that picks
one. This layer imports only :mod:`posembed.io`, the kernels and
:mod:`posembed._core`.
"""
