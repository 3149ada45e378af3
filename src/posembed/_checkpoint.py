"""resize_checkpoint: a position table inside a safetensors file, resized in place of a copy.

The safetensors format is read and written here directly (it is small): an
8-byte little-endian header length N, N bytes of UTF-8 JSON, then the data
buffer, which the JSON's ``data_offsets`` index from its start.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from posembed import _validate as v
from posembed._extend import INITS, extend
from posembed._interpolate import interpolate
from posembed._resample import METHODS, resample_grid

# Bytes moved per read while copying the other tensors: the command's memory
# stays at about this much whatever the checkpoint's size.
COPY_BYTES = 8 << 20

# The safetensors reference loader refuses larger headers; so does this one,
# which also keeps a wrong length from reading gigabytes of a non-safetensors file.
MAX_HEADER_BYTES = 100_000_000

# Bits per element of the dtypes the format names (others are copied unchecked).
_DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
}
TABLE_DTYPES = ("F16", "BF16", "F32", "F64")

_METADATA = "__metadata__"


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

    def __str__(self) -> str:
        rows = "row" if self.prefix == 1 else "rows"
        kept = f", {self.prefix} prefix {rows} kept" if self.prefix else ""
        return (
            f"{self.key} ({self.dtype}): {self.old_shape} -> {self.new_shape} "
            f"by {self.mode}{kept}; wrote {self.output}"
        )


@dataclass(frozen=True)
class _Header:
    entries: dict[str, Any]  # the JSON object, in file order, __metadata__ included
    data_start: int  # file offset of the data buffer
    order: list[str]  # tensor names in data-buffer order


def resize_checkpoint(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
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
) -> ResizeResult:
    """Resize the position table ``key`` of a safetensors checkpoint; copy the rest.

    The fix for "size mismatch for position_embeddings" when a model is loaded
    at a longer context than it was trained for. Only the header and the one
    table are read into memory; every other tensor's bytes are streamed to the
    output a few megabytes at a time, so checkpoints larger than memory work.

    Parameters
    ----------
    src : path
        The safetensors checkpoint to read; it is never modified.
    dst : path
        The file to write. The output is written to a temporary file in the
        same folder and renamed into place once complete, so after any error
        ``dst`` is as it was (absent, or untouched).
    key : str
        Name of the table: a tensor of shape (rows, d), or (1, ..., 1, rows, d)
        as timm's ViT ``pos_embed`` (1, N, d), whose leading 1s are kept. Its
        dtype must be F16, BF16 (needs ``ml_dtypes``), F32 or F64.
    length : int, optional
        Position rows in the result, ``prefix`` rows not counted: the output
        table has ``prefix + length`` rows. For RoBERTa (514 rows = 2 + 512),
        ``prefix=2, length=1024`` gives 1026 rows. Give either ``length`` (a
        1-D sequence of positions) or ``new_grid`` (a ViT's 2-D patch grid). A length equal to the
        current ``rows - prefix`` copies the table unchanged (the output file
        is still written; all its tensors equal the input's).
    init : {"interpolate", "tile", "edge", "random", "zeros"}, optional
        Unset: the position rows are resampled by
        ``posembed.interpolate(rows, length, align=align or "scale")``, which
        grows or shrinks them. Set: ``posembed.extend(rows, length, init=init,
        align=align, seed=seed)``, which keeps the trained rows bit-identical
        and only grows (a shorter ``length`` is a ValueError).
    align : {"scale", "half_pixel", "corners"}, optional
        Interpolation convention (see :func:`posembed.interpolate`); default
        ``"scale"``. Applies when interpolating (``init`` unset or
        ``"interpolate"``).
    prefix : int
        Leading rows that are not positions (RoBERTa's 2 padding-offset rows,
        a ViT's CLS row): copied bit-identically and not resized. The
        ``--offset`` option of ``posembed resize`` is this argument.
    seed : int, optional
        Seed of ``init="random"`` (only).
    grid : (H, W), optional
        With ``new_grid``: the patch grid the position rows form, row-major
        (``rows - prefix == H * W``). Default: the square grid, when ``rows -
        prefix`` is a square number.
    new_grid : (H', W'), optional
        Resample the position rows as an (H, W) image of d channels to (H', W')
        with :func:`posembed.resample_grid` (``prefix`` rows, such as a ViT's
        CLS row, kept); the output has ``prefix + H' * W'`` rows. Not with
        ``length`` or ``init``.
    method : {"bicubic", "bilinear"}, optional
        The grid's resampling (default ``"bicubic"``, PyTorch's); ``align``
        defaults to ``"half_pixel"`` there (PyTorch's ``align_corners=False``;
        ``"corners"`` is ``True``).
    overwrite : bool
        Replace ``dst`` if it exists (``--force`` on the command line).

    Returns
    -------
    ResizeResult
        The key, dtype, old and new shapes, prefix, mode and output path;
        ``str()`` of it is a one-line summary.

    Raises
    ------
    FileNotFoundError
        ``src`` or the folder of ``dst`` does not exist.
    FileExistsError
        ``dst`` exists and ``overwrite`` is false.
    IsADirectoryError
        ``dst`` is a folder.
    ValueError
        ``src`` is not a valid safetensors file (the message names the file and
        the problem); ``dst`` is ``src``; ``key`` is not in the file (the
        message lists the closest names); the table's shape is not (rows, d)
        with optional leading 1s; ``prefix`` leaves no position rows; a bad
        ``length``, ``init`` or ``align``; ``length`` shorter than the table
        with ``init`` set; ``align`` with an ``init`` other than
        ``"interpolate"``, ``seed`` without ``init="random"``.
    TypeError
        The table's dtype is not F16, BF16, F32 or F64; an argument of the
        wrong type (an ``overwrite`` that is not a bool included).
    ImportError
        The table is BF16 and ``ml_dtypes`` is not installed.

    Notes
    -----
    Every other tensor keeps its bytes, dtype (any, unknown ones such as
    F8_E4M3 included), shape and place in the data buffer; the header keeps
    its order and the ``__metadata__`` strings exactly; only the table's
    ``shape`` and the ``data_offsets`` of it and the tensors after it change.
    The header is padded with spaces so that the data starts 8-byte aligned,
    as the reference writer does.

    The position rows are resized as a 1-D sequence. A ViT's patch rows are a
    flattened 2-D grid: 1-D resizing does not keep their 2-D neighbourhoods, so
    resample those with :func:`posembed.resample_grid` instead.
    """
    paths: dict[str, Any] = {"src": src, "dst": dst}  # annotations are no check
    for name, path in paths.items():
        if not isinstance(path, (str, os.PathLike)):
            kind = type(path).__name__
            raise TypeError(f"{name} must be a path (str or os.PathLike); got {kind}")
    if not isinstance(key, str):
        raise TypeError(f"key must be a str; got {type(key).__name__} {key!r}")
    overwrite = v.flag(overwrite, "overwrite")
    p = v.non_negative_int(prefix, "prefix")
    if new_grid is None:
        if grid is not None or method is not None:
            raise ValueError("grid and method apply to a grid resize only; pass new_grid too")
        if length is None:
            raise TypeError("give length (position rows) or new_grid (a ViT's patch grid)")
        n = v.positive_int(length, "length")
        new_hw = None
    else:
        if length is not None:
            raise ValueError(
                "give length or new_grid, not both; "
                f"got length={length!r} and new_grid={new_grid!r}"
            )
        if init is not None or seed is not None:
            raise ValueError("init and seed apply to a 1-D resize only; a grid is resampled")
        new_hw = v.grid_shape(new_grid, "new_grid")
        n = new_hw[0] * new_hw[1]
        hw = None if grid is None else v.grid_shape(grid, "grid")
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

    src_path, dst_path = Path(src), Path(dst)
    if not src_path.is_file():
        what = "is a folder, not a file" if src_path.is_dir() else "no such file"
        raise FileNotFoundError(f"{src_path}: {what}")
    if dst_path.is_dir():
        raise IsADirectoryError(f"output {dst_path} is a folder; give a file path")
    if not dst_path.parent.is_dir():
        raise FileNotFoundError(f"output folder {dst_path.parent} does not exist")
    if dst_path.exists():
        if os.path.samefile(src_path, dst_path):
            raise ValueError(
                f"output {dst_path} is the input file; write to a new path "
                "(the input is never modified)"
            )
        if not overwrite:
            raise FileExistsError(f"{dst_path} exists; pass overwrite=True to replace it")

    with open(src_path, "rb") as f:
        header = _read_header(f, src_path)
        entry = _table_entry(header, key)
        shape = tuple(entry["shape"])
        dtype_name = entry["dtype"]
        if dtype_name not in TABLE_DTYPES:
            raise TypeError(
                f"{key!r} has dtype {dtype_name}; resizing supports {', '.join(TABLE_DTYPES)}"
            )
        if len(shape) < 2 or any(s != 1 for s in shape[:-2]):
            raise ValueError(
                f"{key!r} has shape {shape}; a position table must be (rows, d), "
                "optionally with leading 1s such as (1, rows, d)"
            )
        rows, d = shape[-2:]
        if p >= rows:
            raise ValueError(
                f"prefix must be less than the {rows} rows of {key!r} (shape {shape}) "
                f"so that position rows remain; got {p}"
            )
        if new_hw is not None:
            if hw is None:
                side = math.isqrt(rows - p)
                if side * side != rows - p:
                    raise ValueError(
                        f"{key!r} has {rows - p} position rows (prefix {p} not counted), not a "
                        "square grid; give grid=(H, W) with H * W equal to that"
                    )
                hw = (side, side)
            if hw[0] * hw[1] != rows - p:
                raise ValueError(
                    f"grid {hw[0]}x{hw[1]} has {hw[0] * hw[1]} cells but {key!r} has "
                    f"{rows - p} position rows (shape {shape}, prefix {p} not counted)"
                )
        if init is not None and n < rows - p:
            raise ValueError(
                f"length {n} is shorter than the {rows - p} position rows of {key!r} "
                f"(prefix {p} not counted); init= only grows the table (extend), "
                "leave init unset to interpolate it down"
            )
        dt = _numpy_dtype(dtype_name, key)
        begin, end = entry["data_offsets"]
        f.seek(header.data_start + begin)
        raw = f.read(end - begin)
        if len(raw) != end - begin:
            raise ValueError(f"{src_path}: the file ended inside {key!r} (changed while reading?)")
        table = _from_le(raw, dt).reshape(rows, d)
        if new_hw is not None:
            assert hw is not None
            how = "bicubic" if method is None else method
            at = "half_pixel" if align is None else align
            mode = f"resample_grid ({hw[0]}x{hw[1]} -> {new_hw[0]}x{new_hw[1]}, {how}, align={at})"
            grown = resample_grid(table[p:], hw, new_hw, method=how, align=at)
        elif init is None:
            mode = f"interpolate (align={align or 'scale'})"
            grown = interpolate(table[p:], n, align=align or "scale")
        else:
            detail = f", align={align or 'scale'}" if init == "interpolate" else ""
            detail += f", seed={seed}" if seed is not None else ""
            mode = f"extend (init={init}{detail})"
            grown = extend(table[p:], n, init=init, align=align, seed=seed)
        new_shape = (*shape[:-2], p + n, d)
        table_bytes = (memoryview(raw)[: p * d * dt.itemsize], _to_le(grown, dt))
        _write(f, src_path, header, key, new_shape, table_bytes, dst_path)
    return ResizeResult(key, dtype_name, shape, new_shape, p, mode, dst_path)


def _corrupt(path: Path, problem: str) -> ValueError:
    return ValueError(f"{path}: not a valid safetensors file: {problem}")


def _read_header(f: io.BufferedReader, path: Path) -> _Header:
    """Parse and check the header: every tensor's bytes lie in the file, back
    to back, and match its dtype and shape."""
    size = os.fstat(f.fileno()).st_size
    head = f.read(8)
    if len(head) < 8:
        raise _corrupt(path, f"{size} bytes is too short for the 8-byte header length")
    n = int.from_bytes(head, "little")
    if n > size - 8:
        raise _corrupt(path, f"header length {n} exceeds the {size - 8} bytes after it")
    if n > MAX_HEADER_BYTES:
        raise _corrupt(path, f"header length {n} exceeds the format's {MAX_HEADER_BYTES}")
    text = f.read(n)
    try:
        obj = json.loads(text.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError as exc:
        raise _corrupt(path, f"header is not UTF-8 ({exc})") from None
    except ValueError as exc:  # json.JSONDecodeError and duplicate names
        raise _corrupt(path, f"header is not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise _corrupt(path, f"header must be a JSON object; got {type(obj).__name__}")
    meta = obj.get(_METADATA, {})
    if not isinstance(meta, dict) or not all(isinstance(x, str) for x in meta.values()):
        raise _corrupt(path, f"{_METADATA} must map names to strings; got {meta!r}")
    spans = []
    for name, entry in obj.items():
        if name != _METADATA:
            spans.append((*_check_entry(path, name, entry), name))
    spans.sort()  # by (begin, end): a zero-size tensor sorts before its neighbour
    at = 0
    for begin, end, name in spans:
        if begin != at:
            gap = "overlaps the tensor before it" if begin < at else f"leaves a gap at {at}"
            raise _corrupt(path, f"{name!r} data_offsets [{begin}, {end}] {gap}")
        at = end
    if at != size - 8 - n:
        raise _corrupt(
            path, f"the tensors end at data byte {at} but the data buffer has {size - 8 - n} bytes"
        )
    return _Header(obj, 8 + n, [name for _, _, name in spans])


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise ValueError(f"the name {name!r} appears twice")
        out[name] = value
    return out


def _is_count(x: Any) -> bool:
    return type(x) is int and x >= 0


def _check_entry(path: Path, name: str, entry: Any) -> tuple[int, int]:
    if not isinstance(entry, dict):
        raise _corrupt(path, f"{name!r} must be an object; got {entry!r}")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str):
        raise _corrupt(path, f"{name!r} has no dtype string; got {dtype!r}")
    if not isinstance(shape, list) or not all(_is_count(s) for s in shape):
        raise _corrupt(path, f"{name!r} shape must be a list of integers >= 0; got {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))):
        raise _corrupt(path, f"{name!r} data_offsets must be [begin, end]; got {offsets!r}")
    begin, end = offsets
    if begin > end:
        raise _corrupt(path, f"{name!r} data_offsets [{begin}, {end}] end before they begin")
    bits = _DTYPE_BITS.get(dtype)
    if bits is not None:
        total = math.prod(shape) * bits
        if total % 8 or total // 8 != end - begin:
            needs = f"{total // 8} bytes" if total % 8 == 0 else f"{total} bits"
            raise _corrupt(
                path, f"{name!r} holds {end - begin} bytes but {dtype} {tuple(shape)} needs {needs}"
            )
    return begin, end


def _table_entry(header: _Header, key: str) -> dict[str, Any]:
    entry = header.entries.get(key) if key != _METADATA else None
    if entry is not None:
        return dict(entry)
    import difflib  # only on this error path: import posembed stays light

    names = header.order
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
    raise ValueError(f"no tensor named {key!r} in the checkpoint{hint}")


def _numpy_dtype(name: str, key: str) -> np.dtype[Any]:
    if name == "BF16":
        try:
            import ml_dtypes
        except ImportError:
            raise ImportError(
                f"{key!r} is BF16, which NumPy reads through ml_dtypes: pip install ml_dtypes"
            ) from None
        bf16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
        return bf16
    return np.dtype({"F16": np.float16, "F32": np.float32, "F64": np.float64}[name])


def _from_le(raw: bytes, dt: np.dtype[Any]) -> np.ndarray:
    """Little-endian file bytes as native values (bfloat16 has no byte-order
    flag in NumPy, so it travels as uint16)."""
    bits = np.dtype(f"<u{dt.itemsize}")
    return np.frombuffer(raw, bits).astype(bits.newbyteorder("="), copy=False).view(dt)


def _to_le(a: np.ndarray, dt: np.dtype[Any]) -> memoryview:
    """The values' little-endian bytes (the array's own memory on a little-endian machine)."""
    bits = np.dtype(f"=u{dt.itemsize}")
    le = np.ascontiguousarray(a, dtype=dt).view(bits).astype(bits.newbyteorder("<"), copy=False)
    return memoryview(le.reshape(-1).view(np.uint8).data)


def _write(
    f: io.BufferedReader,
    src: Path,
    header: _Header,
    key: str,
    new_shape: tuple[int, ...],
    table_bytes: tuple[memoryview, memoryview],
    dst: Path,
) -> None:
    """The new file, at a temporary name renamed onto dst once it is complete."""
    entries = dict(header.entries)
    at = 0
    for name in header.order:
        begin, end = header.entries[name]["data_offsets"]
        size = sum(map(len, table_bytes)) if name == key else end - begin
        entries[name] = dict(header.entries[name], data_offsets=[at, at + size])
        at += size
    entries[key]["shape"] = list(new_shape)
    text = json.dumps(entries, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text += b" " * _padding(header, key, len(text), sum(map(len, table_bytes)))

    tmp = dst.parent / f".{dst.name}.partial-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        with open(tmp, "xb", buffering=0) as out:
            _write_all(out, len(text).to_bytes(8, "little") + text)
            # the tensors before the table and those after it are each one run of
            # bytes (the data buffer is back to back, in the same order): two copies
            fast = hasattr(os, "copy_file_range")
            run_start, run_bytes = header.data_start, 0
            for name in header.order:
                begin, end = header.entries[name]["data_offsets"]
                if name != key:
                    run_bytes += end - begin
                    continue
                fast = _copy_range(f.fileno(), out, src, run_start, run_bytes, fast)
                for part in table_bytes:
                    _write_all(out, part)
                run_start, run_bytes = header.data_start + end, 0
            _copy_range(f.fileno(), out, src, run_start, run_bytes, fast)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


PAGE = 4096


def _padding(header: _Header, key: str, text_bytes: int, table_bytes: int) -> int:
    """Spaces after the JSON (the format allows them): the data starts 8-byte
    aligned, and where that allows, the larger of the two runs copied unchanged
    (before and after the table) keeps its offset within a page, which the
    kernel copies about twice as fast as a shifted one."""
    begin, end = header.entries[key]["data_offsets"]
    data_bytes = sum(e - b for b, e in (header.entries[n]["data_offsets"] for n in header.order))
    if begin >= data_bytes - end:  # the run before the table: source and output at offset 0
        src_at, dst_at = header.data_start, 0
    else:
        src_at, dst_at = header.data_start + end, begin + table_bytes
    pad = (src_at - 8 - text_bytes - dst_at) % PAGE
    if (8 + text_bytes + pad) % 8:
        pad = -(8 + text_bytes) % 8  # the source's offsets are not 8-aligned
    return pad


# copy_file_range's ways of saying "not between these files": fall back to reads and writes.
_NO_COPY_RANGE = {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.EPERM}


def _copy_range(
    src_fd: int, out: io.FileIO, path: Path, start: int, count: int, fast: bool
) -> bool:
    """Bytes [start, start + count) of the source appended to out, COPY_BYTES at a
    time: in the kernel (copy_file_range: no trip through Python, and a shared
    extent where the file system can) while ``fast``, else read and written.
    Returns whether the in-kernel copy still works, for the next range."""
    while count > 0:
        # the kernel's copy needs no buffer here: larger pieces, fewer calls
        n = min(count, 64 * COPY_BYTES if fast else COPY_BYTES)
        if fast:
            try:
                got = os.copy_file_range(src_fd, out.fileno(), n, start)
            except OSError as exc:
                if exc.errno not in _NO_COPY_RANGE:
                    raise
                fast = False
                continue
        else:
            data = os.pread(src_fd, n, start)
            got = len(data)
            _write_all(out, data)
        if got == 0:
            raise ValueError(f"{path}: the file ended early (changed while reading?)")
        start += got
        count -= got
    return fast


def _write_all(out: io.FileIO, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[out.write(view) or 0 :]
