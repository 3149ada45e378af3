"""Twin of resize_checkpoint: a whole safetensors file read, one table resized
by the twins, the whole file written.

The file format itself is read and written by posembed's one safetensors
module (``posembed.io._safetensors``, checked against the official package in
its own tests); what this twin restates is the resize."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

import posembed.io._safetensors as _safetensors
from posembed.reference._common import _flag
from posembed.reference.extend import extend
from posembed.reference.interpolate import interpolate
from posembed.reference.resample_grid import resample_grid


def resize_checkpoint(
    src: Any,
    dst: Any,
    key: str,
    length: int | None = None,
    *,
    init: str | None = None,
    align: str | None = None,
    prefix: int = 0,
    seed: int | None = None,
    grid: tuple[int, int] | None = None,
    new_grid: tuple[int, int] | None = None,
    method: str | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Twin of :func:`posembed.resize_checkpoint`: the whole file read into
    memory, the table resized by the twins, the whole file written.

    Parameters
    ----------
    src, dst : path
        The safetensors file to read and the one to write.
    key : str
        The table's name; shape (rows, d) or (1, ..., 1, rows, d).
    length : int, optional
        Position rows after the ``prefix`` rows (or ``new_grid``).
    init, align, prefix, seed, grid, new_grid, method, overwrite
        As :func:`posembed.resize_checkpoint`.

    Returns
    -------
    dict
        ``old_shape`` and ``new_shape`` of the table.

    Raises
    ------
    FileExistsError
        ``dst`` exists and ``overwrite`` is false.
    TypeError
        A table dtype other than F16, BF16, F32, F64; an ``overwrite`` that
        is not a bool.
    ValueError
        ``key`` is not in the file; a shape, prefix, length or grid the resize
        cannot use.
    """
    _flag(overwrite, "overwrite")
    if os.path.exists(dst) and not overwrite:
        raise FileExistsError(f"{dst} exists")
    with _safetensors.open_file(src) as f:
        header = _safetensors.read_header(f, src)
        blobs = {name: _safetensors.read_bytes(f, header, name) for name in header.data_order}
    if key not in header.entries:
        raise ValueError(f"no tensor named {key!r} in the checkpoint")
    entry = header.entries[key]
    if entry.dtype not in ("F16", "BF16", "F32", "F64"):
        raise TypeError(f"unsupported dtype {entry.dtype}")
    dt = _safetensors.numpy_dtype(entry.dtype, key)
    shape = entry.shape
    if len(shape) < 2 or any(s != 1 for s in shape[:-2]):
        raise ValueError(f"shape {shape} is not a table")
    rows, d = shape[-2:]
    if not 0 <= prefix < rows:
        raise ValueError("prefix must leave position rows")
    table = _safetensors.from_le(blobs[key], dt).reshape(rows, d)
    positions = table[prefix:]
    if new_grid is not None:
        if grid is None:
            side = math.isqrt(rows - prefix)
            grid = (side, side)
        new = resample_grid(
            positions, grid, new_grid, method=method or "bicubic", align=align or "half_pixel"
        )
    elif init is None:
        if length is None:
            raise ValueError("give length or new_grid")
        new = interpolate(positions, length, align=align or "scale")
    else:
        if length is None:
            raise ValueError("give length or new_grid")
        new = extend(positions, length, init=init, align=align, seed=seed)
    resized = np.concatenate([table[:prefix], new]).astype(dt)
    new_shape = (*shape[:-2], *resized.shape)
    blobs[key] = bytes(_safetensors.le_bytes(resized))
    specs = [
        header.entries[name].as_spec(
            shape=new_shape if name == key else None, nbytes=len(blobs[name])
        )
        for name in header.data_order
    ]
    with _safetensors.create(dst, specs, header.metadata, header_order=header.key_order) as out:
        for name in header.data_order:
            out.write(blobs[name])
    return {"old_shape": shape, "new_shape": new_shape}
