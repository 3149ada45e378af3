"""Twin of resize_checkpoint: a whole safetensors file read, one table resized
by the twins, the whole file written."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from posembed.reference._common import _flag
from posembed.reference.extend import extend
from posembed.reference.interpolate import interpolate
from posembed.reference.resample_grid import resample_grid


def _read_safetensors(path: Any) -> tuple[dict[str, Any], bytes]:
    """A safetensors file's header (JSON) and the data after it, read whole."""
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header: dict[str, Any] = json.loads(blob[8 : 8 + n])
    return header, blob[8 + n :]


def _write_safetensors(path: Any, header: dict[str, Any], raw: dict[str, bytes]) -> None:
    """A safetensors file of ``header`` with each tensor's bytes from ``raw``,
    laid out in the order of the header's data_offsets (which are rewritten)."""
    pieces = []
    at = 0
    names = sorted(
        (h["data_offsets"][0], h["data_offsets"][1], name)
        for name, h in header.items()
        if name != "__metadata__"
    )
    for _, _, name in names:
        header[name] = dict(header[name], data_offsets=[at, at + len(raw[name])])
        pieces.append(raw[name])
        at += len(raw[name])
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(pieces))


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
    header, data = _read_safetensors(src)
    if key not in header or key == "__metadata__":
        raise ValueError(f"no tensor named {key!r} in the checkpoint")
    entry = header[key]
    dtypes = {"F16": np.dtype("<f2"), "F32": np.dtype("<f4"), "F64": np.dtype("<f8")}
    if entry["dtype"] == "BF16":
        import ml_dtypes

        dt = np.dtype(ml_dtypes.bfloat16)
    elif entry["dtype"] in dtypes:
        dt = dtypes[entry["dtype"]]
    else:
        raise TypeError(f"unsupported dtype {entry['dtype']}")
    shape = tuple(entry["shape"])
    if len(shape) < 2 or any(s != 1 for s in shape[:-2]):
        raise ValueError(f"shape {shape} is not a table")
    rows, d = shape[-2:]
    if not 0 <= prefix < rows:
        raise ValueError("prefix must leave position rows")
    begin, end = entry["data_offsets"]
    table = np.frombuffer(data[begin:end], dtype=dt).reshape(rows, d)
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
    raw = {
        name: data[h["data_offsets"][0] : h["data_offsets"][1]]
        for name, h in header.items()
        if name != "__metadata__"
    }
    raw[key] = resized.tobytes()
    header[key]["shape"] = list(new_shape)
    _write_safetensors(dst, header, raw)
    return {"old_shape": shape, "new_shape": new_shape}
