"""Arrow and Parquet input for chunk_file and `posembed chunk`: a Parquet file
or folder of them, an Arrow IPC file or stream, a save_to_disk folder
(state.json and IPC streams), written with pyarrow, then given defects. An
accepted input must give the windows of the .npy path (chunk_file on its
tokens and offsets): for a valid input, of the documents written; for a
crafted one that was accepted, of the column as pyarrow itself reads it. A
refused one: ChunkError (exit 2 and one line from the command), never a
read out of the folder or a wait on a FIFO.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from posembed.chunk import ChunkError, chunk_file

from .common import Reader, _run
from .files_common import (
    Crafted,
    Obj,
    _blocked,
    _clear,
    _cli,
    _files_failure,
    _json,
    _json_text_defect,
    _judge,
    _judge_cli,
    _left_behind,
    _watched,
)

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # the files mode then leaves Arrow and Parquet input out
    pa = None
    pq = None

AR_FORMS = ["parquet", "parquet folder", "ipc file", "ipc stream", "saved"]
AR_DEFECTS = ["cut", "flip", "column type", "null row", "null token", "no column"]
AR_DEFECTS += ["state text", "state files", "fifo", "mixed dtype", "dataset_dict", "empty file"]
AR_TYPES = {"<i4": "int32", "<i8": "int64", "<u2": "uint16", "|u1": "uint8", "<i2": "int16"}
SAVED_ESCAPES = ["../x.arrow", "ABSOLUTE", "sub/x.arrow", "", ".", "..", "a\\b", "nope.arrow"]


def _arrow_write(path: Path, table: Any, form: str, rows_per_group: int) -> None:
    if form.startswith("parquet"):
        pq.write_table(table, path, row_group_size=rows_per_group)
        return
    maker = pa.ipc.new_file if form == "ipc file" else pa.ipc.new_stream
    with maker(str(path), table.schema) as writer:
        for batch in table.to_batches(max_chunksize=rows_per_group):
            writer.write_batch(batch)


def _arrow_corpus(r: Reader, root: Path) -> tuple[Crafted, str, list[np.ndarray]]:
    """The crafted input, its column's name, and the documents written."""
    rng = r.rng()
    form = r.pick(AR_FORMS)
    dtype = np.dtype(r.pick(sorted(AR_TYPES)))
    docs = [(rng.integers(0, 50, r.int(0, 12))).astype(dtype) for _ in range(r.int(0, 6))]
    column = r.pick(["input_ids", "input_ids", "tokens", "a b"])
    value_type = getattr(pa, AR_TYPES[dtype.str])()
    list_type = pa.large_list(value_type) if r.chance(4) else pa.list_(value_type)
    values: Any = [d.tolist() for d in docs]
    columns = {column: pa.array(values, list_type)}
    if r.chance(2):
        columns["text"] = pa.array([f"doc {i}" for i in range(len(docs))])
        if r.chance(2):
            columns = dict(reversed(list(columns.items())))
    pieces = 1 if form in ("parquet", "ipc file", "ipc stream") else r.int(1, 3)
    rows_per_group = r.int(1, 4)
    planted: list[str] = []
    fifos: list[Path] = []
    escapes = False
    defects = [r.pick(AR_DEFECTS) for _ in range(r.pick([0, 0, 1, 1, 1, 2]))]
    for defect in defects:
        where = ""
        if defect == "column type":
            how = r.pick(["float", "string", "list of lists", "int", "list of float", "bool"])
            bad: Callable[[Any], Any] = {
                "float": lambda v: pa.array([float(len(x or ())) for x in v]),
                "string": lambda v: pa.array([str(x) for x in v]),
                "list of lists": lambda v: pa.array([[x] for x in v]),
                "int": lambda v: pa.array([len(x or ()) for x in v], pa.int64()),
                "list of float": lambda v: pa.array(v, pa.list_(pa.float32())),
                "bool": lambda v: pa.array(
                    [None if x is None else [t is not None and t > 9 for t in x] for x in v],
                    pa.list_(pa.bool_()),
                ),
            }[how]
            columns[column] = bad(values)
            where = how
        elif defect == "null row" and docs:
            values = list(values)
            values[r.int(0, len(values) - 1)] = None
            columns[column] = pa.array(values, list_type)
        elif defect == "null token" and any(values):
            values = [list(v) if v is not None else None for v in values]
            row = next(i for i, v in enumerate(values) if v)
            values[row][r.int(0, len(values[row]) - 1)] = None
            columns[column] = pa.array(values, list_type)
        elif defect == "no column" and column in columns:
            columns["other"] = columns.pop(column)
        else:
            continue
        planted.append(f"arrow:{defect}" + (f" ({where})" if where else ""))
    table = pa.table(columns)
    suffix = ".parquet" if form.startswith("parquet") else ".arrow"
    rows = table.num_rows
    cuts = sorted(rng.integers(0, rows + 1, pieces - 1).tolist()) if pieces > 1 else []
    bounds = [0, *cuts, rows]
    if form == "parquet folder" or form == "saved":
        folder = root / "corpus"
        folder.mkdir()
        files = []
        for k in range(pieces):
            name = (
                f"part-{k}.parquet"
                if form == "parquet folder"
                else f"data-{k:05d}-of-{pieces:05d}.arrow"
            )
            piece = table.slice(bounds[k], bounds[k + 1] - bounds[k])
            _arrow_write(
                folder / name,
                piece,
                "parquet" if suffix == ".parquet" else "ipc stream",
                rows_per_group,
            )
            files.append(folder / name)
        target = folder
    else:
        files = [root / f"corpus{suffix}"]
        _arrow_write(files[0], table, form, rows_per_group)
        target = files[0]
    state = Obj([("_data_files", [Obj([("filename", f.name)]) for f in files])])
    state.pairs += [("_fingerprint", "abc"), ("_format_type", None), ("_split", None)]
    state_text: str | None = None
    np.save(root / "x.npy", np.arange(5))
    shutil.copy(files[0], root / "x.arrow")
    for defect in [r.pick(AR_DEFECTS) for _ in range(r.pick([0, 0, 1, 1]))]:
        where = ""
        victim = r.pick(files)
        if defect in ("cut", "flip", "empty file") and victim.is_file() and victim.stat().st_size:
            blob = bytearray(victim.read_bytes())
            if defect == "cut":
                blob = blob[: r.int(0, max(len(blob) - 1, 0))]
                where = f"{len(blob)} bytes"
            elif defect == "flip":
                for _ in range(r.int(1, 4)):
                    at = r.int(0, len(blob) - 1)
                    blob[at] ^= 1 << r.int(0, 7)
                    where += f" {at}"
            else:
                blob = bytearray()
            victim.write_bytes(bytes(blob))
        elif defect == "state text" and form == "saved":
            state_text, where = _json_text_defect(r, state)
        elif defect == "state files" and form == "saved":
            how = r.pick(["missing", "empty", "not list", "entry", "escape", "link out", "fifo"])
            entries = next((v for k, v in state.pairs if k == "_data_files"), None)
            entries = entries if isinstance(entries, list) else []
            if how == "missing":
                state.drop("_data_files")
            elif how == "empty":
                state.set("_data_files", [])
            elif how == "not list":
                state.set("_data_files", r.pick(["x", 5, Obj([]), None]))
            elif how == "entry":
                entries.append(r.pick(["x", 5, Obj([]), Obj([("filename", 5)]), None, []]))
            elif how == "escape":
                name = r.pick(SAVED_ESCAPES)
                name = str(root / "x.arrow") if name == "ABSOLUTE" else name
                if name == "sub/x.arrow":
                    (target / "sub").mkdir(exist_ok=True)
                    shutil.copy(root / "x.arrow", target / "sub" / "x.arrow")
                entries.append(Obj([("filename", name)]))
                escapes = name not in ("", ".", "..", "a\\b", "nope.arrow")
                where = repr(name)
            elif how == "link out":
                (target / "link.arrow").symlink_to(r.pick([root / "x.arrow", Path("../x.arrow")]))
                entries.append(Obj([("filename", "link.arrow")]))
                escapes = True
            else:
                os.mkfifo(target / "pipe.arrow")
                fifos.append(target / "pipe.arrow")
                entries.insert(0, Obj([("filename", "pipe.arrow")]))
            where = how + (f" {where}" if where else "")
        elif defect == "fifo":
            how = r.pick(["data", "state.json", "extra parquet"])
            if how == "data" or (how == "state.json" and form != "saved"):
                victim = files[0]
            elif how == "state.json":
                victim = target / "state.json"
            else:
                if form != "parquet folder":
                    continue
                victim = target / "zz.parquet"
            _clear(victim)
            os.mkfifo(victim)
            fifos.append(victim)
            where = victim.name
        elif defect == "mixed dtype" and len(files) > 1:
            other = np.dtype("<i8" if dtype.str != "<i8" else "<i4")
            other_type = pa.list_(getattr(pa, AR_TYPES[other.str])())
            piece = pa.table({column: pa.array([[1, 2]], other_type)})
            form_one = "parquet" if suffix == ".parquet" else "ipc stream"
            _clear(files[-1])
            _arrow_write(files[-1], piece, form_one, 1)
        elif defect == "dataset_dict" and form == "saved":
            (target / "dataset_dict.json").write_text('{"splits": ["train"]}')
            target = target  # a split's folder with a stray dataset_dict.json: still a split
        else:
            continue
        planted.append(f"arrow:{defect}" + (f" ({where})" if where else ""))
    if form == "saved" and not (target / "state.json").is_fifo():
        text = state_text if state_text is not None else _json(state)
        (target / "state.json").write_bytes(text.encode("utf-8", "surrogatepass"))
        (target / "dataset_info.json").write_text("{}")
    crafted = Crafted("arrow", target, planted, fifos=[f for f in fifos if f.is_fifo()])
    crafted.escapes = escapes
    crafted.note = f"{form}, {len(docs)} documents of {dtype.str}, column {column!r}"
    return crafted, column, docs


def _column_as_read(crafted: Crafted, column: str) -> list[np.ndarray] | None:
    """The documents pyarrow itself reads from the input's column, or None if it cannot."""
    path = crafted.path
    try:
        if path.is_dir() and (path / "state.json").is_file():
            state = json.loads((path / "state.json").read_text())
            files = [path / e["filename"] for e in state["_data_files"]]
        elif path.is_dir():
            files = sorted(p for p in path.iterdir() if p.name.lower().endswith(".parquet"))
        else:
            files = [path]
        docs: list[np.ndarray] = []
        for f in files:
            if not f.is_file():
                return None
            if f.suffix == ".parquet":
                table = pq.read_table(f, columns=[column])
            else:
                with pa.OSFile(str(f), "rb") as handle:
                    head = handle.read(6)
                    handle.seek(0)
                    if head == b"ARROW1":
                        table = pa.ipc.open_file(handle).read_all()
                    else:
                        table = pa.ipc.open_stream(handle).read_all()
            table.validate(full=True)
            col = table.column(column)
            if col.null_count:
                return None
            docs += [
                np.asarray(x, dtype=col.type.value_type.to_pandas_dtype()) for x in col.to_pylist()
            ]
        return docs
    except Exception:  # pyarrow refuses it too: nothing to compare with
        return None


def _npy_windows(
    root: Path, docs: list[np.ndarray], dtype: np.dtype[Any], size: int, step: int, tail: str
) -> dict[str, bytes]:
    """The outputs of chunk_file for the documents as a .npy file and offsets."""
    flat = np.concatenate([np.asarray(d, dtype) for d in docs]) if docs else np.empty(0, dtype)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    base = root / "npy-path"
    base.mkdir(exist_ok=True)
    np.save(base / "tokens.npy", flat)
    np.save(base / "offsets.npy", offsets)
    chunk_file(
        base / "tokens.npy",
        base / "out",
        size=size,
        step=step,
        tail=tail,
        offsets_path=base / "offsets.npy",
        quiet=True,
    )
    return {n: (base / "out" / n).read_bytes() for n in CHUNK_OUTPUTS}


CHUNK_OUTPUTS = ("windows.npy", "starts.npy", "lengths.npy", "documents.npy")


def _chunked_outputs(out: Path, fmt: str) -> dict[str, bytes]:
    """The outputs of a chunk run, as .npy bytes (a Parquet output read back)."""
    if fmt == "npy":
        return {n: (out / n).read_bytes() for n in CHUNK_OUTPUTS}
    table = pq.read_table(out / "windows.parquet")
    ids = table.column("input_ids").combine_chunks()
    size = ids.type.list_size
    rows = np.asarray(ids.values).reshape(-1, size)
    arrays = {"windows.npy": rows}
    for name in ("start", "length", "document"):
        arrays[f"{name}s.npy"] = np.asarray(table.column(name)).astype(np.int64)
    saved = {}
    for name, array in arrays.items():
        buf = io.BytesIO()
        np.save(buf, array)
        saved[name] = buf.getvalue()
    return saved


def _files_arrow(r: Reader, root: Path) -> str:
    crafted, column, docs = _arrow_corpus(r, root)
    size = r.int(1, 6)
    step = r.int(1, size)
    tail = r.pick(["pad", "shift", "drop"])
    fmt = r.pick(["npy", "npy", "parquet"])
    out = root / "out"
    col = None if column == "input_ids" and r.chance(2) else column
    if r.chance(2):
        reader = "chunk_file"
        (_, exc), blocked = _watched(
            crafted,
            lambda: _run(
                lambda pos, kw: chunk_file(
                    crafted.path,
                    out,
                    size=size,
                    step=step,
                    tail=tail,
                    column=col,
                    format=fmt,
                    quiet=True,
                ),
                [],
                {},
            ),
        )
        if blocked:
            return _blocked(crafted, "arrow", reader)
        kind = _judge(crafted, reader, exc, (ChunkError,))
        accepted = exc is None
    else:
        reader = "posembed chunk"
        argv = ["chunk", str(crafted.path), "-o", str(out), "--size", str(size)]
        argv += ["--step", str(step), "--tail", tail, "--format", fmt, "--quiet"]
        argv += [] if col is None else ["--column", col]
        done, blocked = _watched(crafted, lambda: _cli(argv))
        if blocked:
            return _blocked(crafted, "arrow", reader)
        kind = _judge_cli(crafted, argv, done=done)
        accepted = done[0] == 0 and done[2] is None
    if accepted:
        if crafted.escapes:
            return f"files arrow {reader}: " + _files_failure(
                crafted, reader, "outside", f"{reader} read a file outside the folder"
            )
        if crafted.fifos:
            return f"files arrow {reader}: " + _files_failure(
                crafted, reader, "fifo", f"{reader} accepted a FIFO"
            )
        expected_docs = _column_as_read(crafted, column) if crafted.planted else docs
        if expected_docs is not None:
            dtype = np.dtype(json.loads((out / "meta.json").read_text())["dtype"])
            want = _npy_windows(root, expected_docs, dtype, size, step, tail)
            got = _chunked_outputs(out, fmt)
            differ = [n for n in CHUNK_OUTPUTS if want[n] != got[n]]
            if differ:
                kind = _files_failure(
                    crafted,
                    reader,
                    "windows",
                    f"{reader}: {', '.join(differ)} differ from the .npy path's",
                )
    elif out.exists():
        kind = _files_failure(crafted, reader, "partial", f"{reader} refused but wrote {out}")
    kind = _left_behind(crafted, reader, root, kind)
    return f"files arrow {reader}: {kind}"
