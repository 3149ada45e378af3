"""The pieces of ``posembed chunk``: a token file cut into windows on disk.

:func:`chunk_file` is the command's engine (one process, streaming in bounded
memory); ``posembed.dask.chunk_parts`` does the same job on a Dask cluster.
Both start from :func:`prepare_chunk`, which checks the arguments and opens
the input as a :class:`TokenFile` (read a slice at a time), and give
their outputs the layout of :func:`posembed.window_layout`.
"""

from __future__ import annotations

from posembed.corpus._chunk import chunk_file, prepare_chunk
from posembed.corpus._pipeline import ChunkJob
from posembed.io._tokens import ChunkError, TokenFile

__all__ = ["ChunkError", "ChunkJob", "TokenFile", "chunk_file", "prepare_chunk"]
