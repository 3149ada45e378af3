"""A parted output as `posembed chunk --dask` writes it (index.json,
meta.json, the layout's .npy files and the parts), given defects, for
posembed.dask.read_parts: it must accept a valid folder and refuse a crafted
one with ValueError, never serve a part outside the folder, block on a FIFO,
or serve rows that disagree with its index.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

import posembed

from .common import Reader, _run, _short
from .files_common import (
    NONFINITE,
    Crafted,
    Obj,
    Raw,
    _clear,
    _deep,
    _files_failure,
    _json,
    _judge,
    _watched,
)

try:
    from posembed.dask import read_parts
except ImportError:  # the files mode then leaves parted outputs out
    read_parts = None

PART_DEFECTS = ["index text", "version", "parts", "file", "windows", "size", "dtype", "symlink"]
PART_DEFECTS += ["symlinked parts", "fifo", "folder", "part dtype", "part shape", "part cut"]
PART_DEFECTS += ["meta", "layout file", "part object"]
ESCAPES = ("../x.npy", "ABSOLUTE", "parts/../../x.npy", "parts/../index.json", "/dev/zero")


def _parts_folder(r: Reader, root: Path) -> Crafted:
    """A parted output as posembed chunk --dask writes it, with defects."""
    rng = r.rng()
    n, size = r.int(0, 60), r.int(1, 6)
    step, tail = r.int(1, size), r.pick(["pad", "shift", "drop"])
    dtype = np.dtype(r.pick(["<i4", "<i8", "<u2", "|u1"]))
    tokens = (np.arange(n) % 100).astype(dtype)
    offsets = np.array([0, *sorted(rng.integers(0, n + 1, r.int(0, 3))), n])
    w = posembed.windows(tokens, size, step=step, tail=tail, offsets=offsets)
    count = len(w)
    bounds = [0, *sorted(int(x) for x in rng.integers(0, count + 1, r.int(0, 3))), count]
    folder = root / "out"
    (folder / "parts").mkdir(parents=True)
    parts = []
    # each part's tokens run from its first window's start in the corpus to the next part's
    corpus = [int(w.doc_offsets[w.documents[i]] + w.starts[i]) for i in range(count)]
    token_bounds = [0, *(corpus[a] if a < count else n for a in bounds[1:-1]), n]
    for c in range(len(bounds) - 1):
        a, b = bounds[c], bounds[c + 1]
        np.save(folder / "parts" / f"part-{c:05d}.npy", w.tokens[a:b])
        spans = [("windows", [a, b]), ("tokens", [token_bounds[c], token_bounds[c + 1]])]
        parts.append(Obj([("file", f"parts/part-{c:05d}.npy"), *spans]))
    for name in ("starts", "lengths", "documents", "doc_offsets"):
        np.save(folder / f"{name}.npy", getattr(w, name))
    meta = Obj([("input", "tokens.npy"), ("tokens", n), ("documents", len(offsets) - 1)])
    meta.pairs += [("windows", count), ("size", size), ("step", step), ("tail", tail)]
    meta.pairs += [("dtype", dtype.name), ("pad_value", 0), ("parts", len(parts))]
    index = Obj([("version", 1), ("dtype", dtype.str), ("size", size), ("parts", parts)])
    # what an escaping entry would serve: rows of the right shape, all 77
    np.save(root / "x.npy", np.full((max(bounds[1] - bounds[0], 1), size), 77, dtype))
    crafted = Crafted("parts", folder, [])
    index_text: str | None = None
    meta_text: str | None = None
    k = r.int(0, len(parts) - 1)
    part = parts[k]
    part_path = folder / "parts" / f"part-{k:05d}.npy"
    for _ in range(r.pick([0, 1, 1, 1, 2])):
        defect = r.pick(PART_DEFECTS)
        where = ""
        if defect == "index text":
            where = r.pick(
                ["", "{", "[]", "null", "1", '"x"', "deep", "nonfinite", "twice", "utf8"]
            )
            if where == "deep":
                index_text = _deep(r)
            elif where == "nonfinite":
                index.set("size", Raw(r.pick(NONFINITE)))
            elif where == "twice":
                index.pairs.append(("parts", []))
            elif where == "utf8":
                index_text = _json(index).replace('"parts"', '"par\udcfftsx"', 1)
            else:
                index_text = where
        elif defect in ("version", "parts", "size", "dtype"):
            choices = {
                "version": [None, 2, "1", 0, [1], Raw("NaN")],
                "parts": [None, Obj([]), "parts", 5, [1], ["x"], [[0]], [Obj([])], Raw("null")],
                "size": [None, "3", 0, -1, 2**64, 1.5, Raw("null"), size + 1],
                "dtype": [None, "nonsense", 5, Raw("null"), "<f8", ">i4", "|O", "<U3", "<i2"],
            }[defect]
            value = r.pick(choices)
            if value is None:
                index.drop(defect)
            else:
                index.set(defect, value)
            where = "missing" if value is None else _short(_json(value), 30)
        elif defect == "file":
            value = r.pick([None, 5, Raw("null"), ["a"], "", "parts", "parts/", "parts/nope.npy"])
            value = r.pick([value, "parts/a\u0000.npy", "parts/part-00000.npy", *ESCAPES])
            if value == "ABSOLUTE":
                value = str(root / "x.npy")
            if value is None:
                part.drop("file")
            else:
                part.set("file", value)
            where = "missing" if value is None else _short(_json(value), 40)
        elif defect == "windows":
            a, b = bounds[k], bounds[k + 1]
            value = r.pick([None, 5, [a], [a, b, b], [str(a), str(b)], [float(a), float(b)]])
            value = r.pick([value, [Raw("NaN"), b], [b, a], [-1, b], [a, 2**64], Raw("null")])
            if value is None:
                part.drop("windows")
            else:
                part.set("windows", value)
            where = "missing" if value is None else _short(_json(value), 30)
        elif defect == "symlink":
            _clear(part_path)
            part_path.symlink_to(r.pick([root / "x.npy", Path("../../x.npy"), Path("/dev/zero")]))
        elif defect == "symlinked parts" and not (folder / "parts").is_symlink():
            shutil.move(folder / "parts", root / "elsewhere")
            (folder / "parts").symlink_to(root / "elsewhere")
        elif defect == "fifo":
            where = r.pick(["part", "starts.npy", "index.json", "meta.json"])
            victim = part_path if where == "part" else folder / where
            _clear(victim)
            os.mkfifo(victim)
            crafted.fifos.append(victim)
        elif defect == "folder":
            _clear(part_path)
            part_path.mkdir()
        elif defect in ("part dtype", "part shape", "part object"):
            rows = w.tokens[bounds[k] : bounds[k + 1]]
            _clear(part_path)  # (never np.save into a FIFO: that blocks)
            if defect == "part dtype":
                other = r.pick([np.int64, np.int16, np.float64, np.uint8, ">i4"])
                np.save(part_path, rows.astype(other))
                where = np.dtype(other).str
            elif defect == "part shape":
                shaped = r.pick(["more columns", "1-D", "fortran", "3-D"])
                np.save(
                    part_path,
                    {
                        "more columns": np.zeros((rows.shape[0], size + 1), dtype),
                        "1-D": rows.reshape(-1),
                        "fortran": np.asfortranarray(rows),
                        "3-D": rows[:, :, None],
                    }[shaped],
                )
                where = shaped
            else:
                np.save(part_path, np.empty(rows.shape, object), allow_pickle=True)
        elif defect == "part cut":
            saved = io.BytesIO()
            np.save(saved, w.tokens[bounds[k] : bounds[k + 1]])
            blob = saved.getvalue()
            _clear(part_path)
            part_path.write_bytes(blob[: r.int(0, max(len(blob) - 1, 0))])
        elif defect == "meta":
            where = r.pick(["", "{}", "size", "tail", "step", "deep"])
            if where == "deep":
                meta_text = _deep(r)
            elif where in ("size", "tail", "step"):
                meta.set(where, r.pick(["x", Raw("null"), -1, 2**64, Raw("NaN")]))
            else:
                meta_text = where
        elif defect == "layout file":
            name = r.pick(["starts", "lengths", "documents", "doc_offsets"])
            how = r.pick(["missing", "empty", "float", "2-D", "short"])
            target = folder / f"{name}.npy"
            _clear(target)
            if how == "empty":
                target.write_bytes(b"")
            elif how != "missing":
                good = getattr(w, name)
                np.save(
                    target,
                    {
                        "float": good.astype(np.float64),
                        "2-D": good[:, None],
                        "short": good[:-1],
                    }[how],
                )
            where = f"{name} {how}"
        crafted.planted.append(f"parts:{defect}" + (f" ({where})" if where else ""))
    if not any(p.startswith("parts:fifo") and "index.json" in p for p in crafted.planted):
        text = index_text if index_text is not None else _json(index)
        (folder / "index.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    if not any(p.startswith("parts:fifo") and "meta.json" in p for p in crafted.planted):
        (folder / "meta.json").write_text(meta_text if meta_text is not None else _json(meta))
    # what read_parts must still refuse after the later defects undid some:
    # a part outside the folder or a FIFO, where index.json still lists it
    listed = index_text is None and any(key == "parts" and v is parts for key, v in index.pairs)
    named = next((v for key, v in part.pairs if key == "file"), None)
    own = named == f"parts/part-{k:05d}.npy"
    outside = named in ESCAPES or named == str(root / "x.npy")
    crafted.escapes = listed and (
        (folder / "parts").is_symlink() or outside or (own and part_path.is_symlink())
    )
    crafted.fifos = [
        f
        for f in crafted.fifos
        if (f != part_path or (listed and own)) and f.is_fifo() and not f.is_symlink()
    ]
    crafted.note = f"{count} windows of {size} ({dtype.str}) in {len(parts)} parts"
    return crafted


def _served_rows_agree(w: Any, size: int) -> str | None:
    """Why the rows read_parts serves disagree with one another, or None."""
    view = w.tokens
    count = len(view)
    for i in sorted({0, count // 2, count - 1}):
        if count == 0:
            break
        one = np.asarray(view[i])
        gathered = np.asarray(view[[i]])[0]
        if one.dtype != view.dtype or gathered.dtype != view.dtype:
            return f"row {i} has dtype {one.dtype} / {gathered.dtype}, the view says {view.dtype}"
        if one.shape != (size,):
            return f"tokens[{i}] has shape {one.shape} but the windows' size is {size}"
        if not np.array_equal(one, gathered):
            return f"tokens[{i}] = {one} but tokens[[{i}]][0] = {gathered}"
    whole = np.asarray(view)
    if whole.shape != view.shape:
        return f"the rows have shape {whole.shape}, the view says {view.shape}"
    return None


def _files_parts(r: Reader, root: Path) -> str:
    crafted = _parts_folder(r, root)
    reader = "read_parts"
    (result, exc), blocked = _watched(
        crafted, lambda: _run(lambda pos, kw: read_parts(crafted.path), [], {})
    )
    if blocked:
        kind = _files_failure(crafted, reader, "blocked", "read_parts blocked on a FIFO")
        return f"files parts: {kind}"
    kind = _judge(crafted, reader, exc, (ValueError,))
    if exc is None:
        if crafted.escapes:
            kind = _files_failure(
                crafted, reader, "outside", "read_parts served a part outside OUT/parts"
            )
        elif crafted.fifos:
            kind = _files_failure(crafted, reader, "fifo", "read_parts accepted a FIFO")
        else:
            try:
                problem = _served_rows_agree(result, result.size)
            except Exception as raised:  # reading what it accepted must work
                problem = f"reading the rows raised {type(raised).__name__}: {_short(str(raised))}"
            if problem is not None:
                kind = _files_failure(
                    crafted, reader, "rows", f"read_parts serves rows that disagree: {problem}"
                )
    return f"files parts: {kind}"
