"""posembed over Dask: corpora larger than one machine.

:mod:`posembed.dask.compute` runs :func:`posembed.windows`,
:func:`posembed.stitch` and :func:`posembed.embed` over Dask arrays, block by
block, with results equal byte for byte to one call on the whole input;
:mod:`posembed.dask.parts` writes the on-disk output of ``posembed chunk
--dask`` (one file of windows per partition of a token file); :func:`read_parts`
reads it back.

Needs the ``dask`` extra: ``pip install "posembed[dask]"``.
"""

from __future__ import annotations

try:
    import dask.array  # noqa: F401  (dask itself with it)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'posembed.dask needs Dask: pip install "posembed[dask]" (dask[array] and distributed)'
    ) from exc

from posembed.dask.compute import DaskWindows, embed, stitch, windows
from posembed.dask.parts import chunk_parts
from posembed.io._parts import PartsView, read_parts

__all__ = [
    "DaskWindows",
    "PartsView",
    "chunk_parts",
    "embed",
    "read_parts",
    "stitch",
    "windows",
]
