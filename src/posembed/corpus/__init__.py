"""The jobs on corpora: ``posembed chunk``, ``convert``, ``merge``, ``pack`` and ``samples``.

A source module reads one kind of input (``_source_tokens``,
``_source_arrow``, ``_source_indexed``, ``_source_store``,
``_source_windows``; ``_source`` holds what they share), a job runs it (``_chunk``, on the
cut in ``_pipeline``; ``_convert``, ``_merge``, ``_pack_output``, ``_samples_output``; their
progress bar: ``_progress``) and a sink module writes the result
(``_sink_npy``, ``_sink_parquet``, ``_sink_indexed``).
This layer imports only :mod:`posembed.io`, the kernels and
:mod:`posembed._core`.
"""
