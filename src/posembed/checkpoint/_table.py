"""A position table inside a safetensors file: the plan of a resize, the table
resized from the file, and the new file written beside the old one (for
:func:`posembed.resize_checkpoint` and the model folders alike)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from posembed.io import _safetensors as sft
from posembed.kernels import _validate as v
from posembed.kernels._extend import INITS, extend
from posembed.kernels._interpolate import interpolate
from posembed.kernels._resample_grid import METHODS, resample_grid

TABLE_DTYPES = ("F16", "BF16", "F32", "F64")


@dataclass(frozen=True)
class ResizeResult:
    """What :func:`resize_checkpoint` did."""

    key: str
    dtype: str  # the safetensors name: F16, BF16, F32 or F64
    old_shape: tuple[int, ...]
    new_shape: tuple[int, ...]
    prefix: int
    mode: str  # "interpolate (align=...)", "extend (init=...)" or "resample_grid (...)"
    output: Path
    # A model folder's: the file that holds the table, config.json's fields
    # changed (name: (old, new)) and the files and folders not copied.
    shard: str | None = None
    config: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()
    # other files of the folder changed to match: "file field": (old, new)
    also: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    # the model's other tables resized alike (BART's decoder's, beside its encoder's)
    others: tuple[str, ...] = ()

    def __str__(self) -> str:
        rows = "row" if self.prefix == 1 else "rows"
        kept = f", {self.prefix} prefix {rows} kept" if self.prefix else ""
        where = f" in {self.shard}" if self.shard else ""
        text = f"{self.key} ({self.dtype}){where}: {self.old_shape} -> {self.new_shape} "
        text += f"by {self.mode}{kept}"
        if self.others:
            text += f"; {', '.join(self.others)} the same"
        if self.config:
            changes = ", ".join(
                f"{name} {json.dumps(old)} -> {json.dumps(new)}"
                for name, (old, new) in self.config.items()
            )
            text += f"; config.json: {changes}"
        for name, (old, new) in self.also.items():
            text += f"; {name} {json.dumps(old)} -> {json.dumps(new)}"
        if self.skipped:
            text += "; not copied: " + ", ".join(self.skipped)
        return text + f"; wrote {self.output}"


@dataclass(frozen=True)
class Plan:
    """A resize's arguments, checked: either ``length`` or ``new_grid``."""

    new_rows: int  # position rows of the result
    length: int | None
    new_grid: tuple[int, int] | None
    grid: tuple[int, int] | None
    init: str | None
    align: str | None
    method: str | None
    seed: int | None
    antialias: bool = False


def _plan(
    length: int | None,
    init: str | None,
    align: str | None,
    seed: int | None,
    grid: tuple[int, int] | None,
    new_grid: tuple[int, int] | None,
    method: str | None,
    antialias: bool = False,
) -> Plan:
    if new_grid is None:
        if grid is not None or method is not None:
            raise ValueError("grid and method apply to a grid resize only; pass new_grid too")
        if length is None:
            raise TypeError("give length (position rows) or new_grid (a ViT's patch grid)")
        new_rows = v.positive_int(length, "length")
    else:
        if length is not None:
            raise ValueError(
                "give length or new_grid, not both; "
                f"got length={length!r} and new_grid={new_grid!r}"
            )
        if init is not None or seed is not None:
            raise ValueError("init and seed apply to a 1-D resize only; a grid is resampled")
        new_grid = v.grid_shape(new_grid, "new_grid")
        new_rows = new_grid[0] * new_grid[1]
        grid = None if grid is None else v.grid_shape(grid, "grid")
        if align == "scale":
            raise ValueError("align for a grid must be 'half_pixel' or 'corners'; got 'scale'")
        v.choice("bicubic" if method is None else method, "method", METHODS)
    if init is not None:
        v.choice(init, "init", INITS)
    if align is not None:
        v.choice(align, "align", v.ALIGNS)
    if align is not None and init not in (None, "interpolate"):
        raise ValueError(f"align applies to interpolation only; got init={init!r}")
    if seed is not None and init != "random":
        raise ValueError(f"seed applies to init='random' only; got init={init!r}")
    if v.flag(antialias, "antialias"):
        if init is not None:
            raise ValueError(
                f"antialias applies to interpolation and grids; init={init!r} keeps the "
                "trained rows and adds new ones"
            )
        align = "half_pixel" if align is None else align
        v.antialias_flag(True, align)
    return Plan(new_rows, length, new_grid, grid, init, align, method, seed, bool(antialias))


@dataclass(frozen=True)
class NewTable:
    """A table resized in memory, to be written in place of ``entry``."""

    entry: sft.TensorEntry
    new_shape: tuple[int, ...]
    prefix: int
    mode: str
    rows: tuple[np.ndarray, np.ndarray]  # the prefix rows as they were, then the positions

    @property
    def nbytes(self) -> int:
        itemsize = sft.numpy_dtype(self.entry.dtype, self.entry.name).itemsize
        return math.prod(self.new_shape) * itemsize


def resize_table(
    source: BinaryIO, header: sft.Header, key: str, prefix: int, plan: Plan
) -> NewTable:
    """Table ``key`` of the open file ``source`` read and resized by ``plan``."""
    entry = _table_entry(header, key)
    rows, dim = _table_size(entry, prefix)
    grid = _position_grid(entry, prefix, plan.grid) if plan.new_grid is not None else None
    new_rows, init, align, seed = plan.new_rows, plan.init, plan.align, plan.seed
    if init is not None and new_rows < rows - prefix:
        raise ValueError(
            f"length {new_rows} is shorter than the {rows - prefix} position rows of {key!r} "
            f"(prefix {prefix} not counted); init= only grows the table (extend), "
            "leave init unset to interpolate it down"
        )
    table = sft.read_tensor(source, header, key).reshape(rows, dim)
    if plan.new_grid is not None:
        assert grid is not None
        new_grid = plan.new_grid
        grid_method = "bicubic" if plan.method is None else plan.method
        grid_align = "half_pixel" if align is None else align
        mode = (
            f"resample_grid ({grid[0]}x{grid[1]} -> {new_grid[0]}x{new_grid[1]}, "
            f"{grid_method}, align={grid_align}{', antialias' if plan.antialias else ''})"
        )
        positions = resample_grid(
            table[prefix:],
            grid,
            new_grid,
            method=grid_method,
            align=grid_align,
            antialias=plan.antialias,
        )
    elif init is None:
        mode = f"interpolate (align={align or 'scale'}{', antialias' if plan.antialias else ''})"
        positions = interpolate(
            table[prefix:], new_rows, align=align or "scale", antialias=plan.antialias
        )
    else:
        detail = f", align={align or 'scale'}" if init == "interpolate" else ""
        detail += f", seed={seed}" if seed is not None else ""
        mode = f"extend (init={init}{detail})"
        positions = extend(table[prefix:], new_rows, init=init, align=align, seed=seed)
    new_shape = (*entry.shape[:-2], prefix + new_rows, dim)
    return NewTable(entry, new_shape, prefix, mode, (table[:prefix], positions))


def _check_paths(src: Path, dst: Path, overwrite: bool) -> None:
    if not src.exists():  # a folder is a model folder, taken before this
        raise FileNotFoundError(f"{src}: no such file")
    # anything else but a regular file (a FIFO, a device) sft.open_file refuses
    if dst.is_dir():
        raise IsADirectoryError(f"output {dst} is a folder; give a file path")
    if not dst.parent.is_dir():
        raise FileNotFoundError(f"output folder {dst.parent} does not exist")
    if os.path.lexists(dst):
        if os.path.exists(dst) and os.path.samefile(src, dst):
            raise ValueError(
                f"output {dst} is the input file; write to a new path (the input is never modified)"
            )
        problem = sft.not_replaceable(dst)
        if problem:
            raise FileExistsError(problem)
        if not overwrite:
            raise FileExistsError(f"{dst} exists; pass overwrite=True to replace it")


def _table_entry(header: sft.Header, key: str) -> sft.TensorEntry:
    """The table's entry, or a ValueError that suggests the names meant."""
    entry = header.entries.get(key)
    if entry is not None:
        return entry
    raise no_table(key, header.data_order)


def no_table(key: str, names: Sequence[str]) -> ValueError:
    """The error for a table ``key`` missing from tensors ``names``: it
    suggests the names meant."""
    import difflib  # only on this error path: import posembed stays light

    near = difflib.get_close_matches(key, names, n=5, cutoff=0.6)
    positional = [
        s for s in names if ("position" in s.lower() or "pos_embed" in s.lower()) and s not in near
    ]
    hint = ""
    if near:
        hint += "; close names: " + ", ".join(map(repr, near))
    if positional:
        more = f" (and {len(positional) - 10} more)" if len(positional) > 10 else ""
        hint += "; position tables: " + ", ".join(map(repr, positional[:10])) + more
    if not hint:
        count = f"{len(names)} tensor" + ("" if len(names) == 1 else "s")
        hint = f"; it has {count}, such as " + ", ".join(map(repr, names[:5])) if names else ""
        hint = hint or "; it has no tensors"
    return ValueError(f"no tensor named {key!r} in the checkpoint{hint}")


def _table_size(entry: sft.TensorEntry, prefix: int) -> tuple[int, int]:
    """(rows, dim) of a table the resize can take: a float dtype, a (rows, d)
    shape after leading 1s, and position rows after the prefix."""
    key, shape = entry.name, entry.shape
    if entry.dtype not in TABLE_DTYPES:
        raise TypeError(
            f"{key!r} has dtype {entry.dtype}; resizing supports {', '.join(TABLE_DTYPES)}"
        )
    if len(shape) < 2 or any(s != 1 for s in shape[:-2]):
        raise ValueError(
            f"{key!r} has shape {shape}; a position table must be (rows, d), "
            "optionally with leading 1s such as (1, rows, d)"
        )
    rows, dim = shape[-2:]
    if prefix >= rows:
        raise ValueError(
            f"prefix must be less than the {rows} rows of {key!r} (shape {shape}) "
            f"so that position rows remain; got {prefix}"
        )
    return rows, dim


def _position_grid(
    entry: sft.TensorEntry, prefix: int, grid: tuple[int, int] | None
) -> tuple[int, int]:
    """The (H, W) grid of the position rows: ``grid`` checked, or the square one."""
    key, shape = entry.name, entry.shape
    positions = shape[-2] - prefix
    if grid is None:
        side = math.isqrt(positions)
        if side * side != positions:
            raise ValueError(
                f"{key!r} has {positions} position rows (prefix {prefix} not counted), not a "
                "square grid; give grid=(H, W) with H * W equal to that"
            )
        grid = (side, side)
    if grid[0] * grid[1] != positions:
        raise ValueError(
            f"grid {grid[0]}x{grid[1]} has {grid[0] * grid[1]} cells but {key!r} has "
            f"{positions} position rows (shape {shape}, prefix {prefix} not counted)"
        )
    return grid


def write(src_fd: int, header: sft.Header, new: NewTable | Sequence[NewTable], dst: Path) -> None:
    """The new file: the header as it was but for the tables' shapes and the
    offsets after them; the tensors before, between and after the tables are
    each one run of the source's bytes (the data buffer is back to back),
    copied unchanged around the tables' new ``rows``."""
    tables = sorted((new,) if isinstance(new, NewTable) else new, key=lambda t: t.entry.begin)
    parts: dict[str, list[Any]] = {}  # each table's bytes, prefix rows then positions
    for table in tables:
        dtype = sft.numpy_dtype(table.entry.dtype, table.entry.name)
        parts[table.entry.name] = [sft.le_bytes(part, dtype) for part in table.rows]
    sizes = {name: sum(map(len, chunks)) for name, chunks in parts.items()}
    specs = [
        header.entries[name].as_spec(shape=new_shape, nbytes=sizes[name])
        if (new_shape := _new_shape(tables, name)) is not None
        else header.entries[name].as_spec()
        for name in header.data_order
    ]
    # The unchanged runs (before, between and after the tables), each with
    # its offset in the new data buffer; the largest keeps its offset within
    # a page (whole pages copy faster).
    runs: list[tuple[int, int, int]] = []  # (source offset, bytes, new offset)
    at = grown = 0
    for table in tables:
        runs.append((at, table.entry.begin - at, at + grown))
        grown += sizes[table.entry.name] - table.entry.nbytes
        at = table.entry.end
    runs.append((at, header.data_bytes - at, at + grown))
    largest = max(runs, key=lambda run: run[1])
    page_match = (largest[2], header.data_start + largest[0])
    with sft.create(
        dst, specs, header.metadata, header_order=header.key_order, page_match=page_match
    ) as out:
        for k, (start, length, _) in enumerate(runs):
            out.copy(src_fd, header.data_start + start, length, header.path)
            if k < len(tables):
                for part in parts[tables[k].entry.name]:
                    out.write(part)


def _new_shape(tables: Sequence[NewTable], name: str) -> tuple[int, ...] | None:
    return next((t.new_shape for t in tables if t.entry.name == name), None)
