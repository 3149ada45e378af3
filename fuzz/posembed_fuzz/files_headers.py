"""The files mode's crafted headers: a safetensors checkpoint (its JSON header
nested deep, with non-finite literals, keys twice, UTF-8 and lengths,
offsets, shapes and dtypes gone wrong) for resize_checkpoint and
`posembed resize`, whose output the official reader must take; a .npy file
(shape, descr, fortran_order, header length, version, magic, data) for
chunk_file and `posembed chunk` (as the tokens or as --offsets) and
`posembed plot similarity`; and a folder posembed chunk wrote, read back (its
section below). Each is a valid file with 0 to 3 defects; a valid one must be
accepted, a crafted one refused with a documented exception (exit 2 and one
line from the command).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

import posembed
from posembed.chunk import chunk_file

from .common import Reader, _run, _short
from .files_common import (
    NONFINITE,
    Crafted,
    Obj,
    Raw,
    _cli,
    _deep,
    _files_failure,
    _json,
    _judge,
    _judge_cli,
    _strict_header,
    _watched,
)

try:
    import matplotlib  # noqa: F401

    plot_available = True
except ImportError:  # posembed plot is then left out of the files mode
    plot_available = False

BAD_UTF8 = [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xfe\xfe", b"\x80"]

ST_DEFECTS = ["nest", "nonfinite", "duplicate", "length", "offsets", "shape", "dtype", "utf8"]
ST_DEFECTS += ["surrogate", "metadata", "data", "not-object", "bom", "numbers"]
ST_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64}


def _safetensors_file(r: Reader, folder: Path) -> Crafted:
    rows, d = r.int(1, 12), r.int(1, 5)
    dt = r.pick(sorted(ST_DTYPES))
    table = r.rng().standard_normal((rows, d)).astype(ST_DTYPES[dt])
    data = bytearray(table.astype(table.dtype.newbyteorder("<")).tobytes())
    entry = Obj([("dtype", dt), ("shape", [rows, d]), ("data_offsets", [0, len(data)])])
    top = Obj([("pos", entry)])
    other: Obj | None = None
    if r.chance(2):
        k = r.int(0, 6)
        other = Obj(
            [("dtype", "I32"), ("shape", [k]), ("data_offsets", [len(data), len(data) + 4 * k])]
        )
        data += np.arange(k, dtype="<i4").tobytes()
        top.pairs.insert(r.int(0, 1), ("other", other))
    meta: Obj | None = Obj([("format", "pt")]) if r.chance(2) else None
    if meta is not None:
        top.pairs.insert(0, ("__metadata__", meta))
    whole: str | None = None
    hlen: int | None = None
    byte_edits: list[tuple[bytes, bytes]] = []
    planted = []
    for _ in range(r.pick([0, 1, 1, 1, 2, 3])):
        defect = r.pick(ST_DEFECTS)
        where = ""
        if defect == "nest":
            where = r.pick(["whole", "field", "shape", "metadata"])
            text = Raw(_deep(r))
            if where == "whole":
                whole = text
            elif where == "field":
                entry.pairs.append(("extra", text))
            elif where == "shape":
                entry.set("shape", text)
            else:
                top.pairs.insert(0, ("__metadata__", text))
        elif defect == "nonfinite":
            lit = Raw(r.pick(NONFINITE))
            where = r.pick(["field", "shape", "offsets", "metadata", "other"])
            if where == "field":
                entry.pairs.append(("scale", lit))
            elif where == "shape":
                entry.set("shape", [lit, d])
            elif where == "offsets":
                entry.set("data_offsets", [0, lit])
            elif where == "metadata":
                top.pairs.insert(0, ("__metadata__", Obj([("x", lit)])))
            elif other is not None:
                other.pairs.append(("scale", Obj([("v", [lit])])))
        elif defect == "duplicate":
            where = r.pick(["tensor", "field", "metadata", "metadata key"])
            if where == "tensor":
                top.pairs.append(("pos", entry))
            elif where == "field":
                entry.pairs.append(("dtype", dt))
            elif where == "metadata":
                top.pairs.append(("__metadata__", Obj([("format", "np")])))
            elif meta is not None:
                meta.pairs.append(("format", "pt"))
        elif defect == "length":
            hlen = r.pick([0, 1, 7, -1, 2**63, 2**64 - 1, 100_000_001, "end+1", "short"])
            where = str(hlen)
        elif defect == "offsets":
            n = len(data)
            where = r.pick(["overlap", "outside", "reversed", "negative", "float", "three", "text"])
            where = r.pick([where, "bool", "huge", "gap"])
            bad: Any = {
                "overlap": [0, n + 4],
                "outside": [0, n + 1000],
                "reversed": [n, 0],
                "negative": [-4, n],
                "float": [0.0, float(n)],
                "three": [0, n, n],
                "text": ["0", str(n)],
                "bool": [False, n],
                "huge": [0, 2**64],
                "gap": [4, n + 4],
            }[where]
            entry.set("data_offsets", bad)
        elif defect == "shape":
            where = r.pick(["2^64 elements", "2^63", "negative", "float", "bool", "empty", "text"])
            where = r.pick([where, "more", "nested", "null", "zero"])
            entry.set(
                "shape",
                {
                    "2^64 elements": [2**32, 2**32],
                    "2^63": [2**63],
                    "negative": [-rows, -d],
                    "float": [float(rows), d],
                    "bool": [True, d],
                    "empty": [],
                    "text": "rows",
                    "more": [rows, d, 2**40, 2**40],
                    "nested": [[rows], d],
                    "null": None,
                    "zero": [0, d],
                }[where],
            )
        elif defect == "dtype":
            value = r.pick(["Q8", "", "f32", "F8_E4M3", "I64", 5, None, ["F32"], "F32 ", "BOOL"])
            entry.set("dtype", value)
            where = repr(value)
        elif defect == "utf8":
            bad_bytes = r.pick(BAD_UTF8)
            where = r.pick(["name", "metadata", "other"])
            target = {"name": b'"pos"', "metadata": b'"pt"', "other": b'"other"'}[where]
            byte_edits.append((target, target[:-1] + bad_bytes + b'"'))
            where += f" {bad_bytes!r}"
        elif defect == "surrogate":
            where = r.pick(["other", "metadata"])
            if where == "other" and other is not None:
                top.pairs.append(("x\\ud800", Raw(_json(other))))
            else:
                top.pairs.insert(0, ("__metadata__", Obj([("k", Raw('"\\udfff"'))])))
        elif defect == "metadata":
            value = r.pick(['{"a": 1}', "[]", "null", '{"a": {"b": "c"}}', '"str"', '{"a": null}'])
            top.pairs.insert(0, ("__metadata__", Raw(value)))
            where = value
        elif defect == "data":
            where = r.pick(["short", "long"])
            if where == "short":
                del data[-r.int(1, max(len(data), 1)) :]
            else:
                data += b"\0" * r.int(1, 9)
        elif defect == "not-object":
            whole = Raw(r.pick(["[]", "1", "null", '"x"', "", " ", "{", "{}x", "[{}]"]))
            where = repr(str(whole))
        elif defect == "bom":
            byte_edits.append((b"", "\ufeff".encode()))
        elif defect == "numbers":
            lit = r.pick(["1e2", "0x10", "01", "-0", "1.0", "+1", "1_0"])
            entry.set("shape", [Raw(lit), d])
            where = lit
        planted.append(f"safetensors:{defect}" + (f" ({where})" if where else ""))
    header = (whole if whole is not None else _json(top)).encode("utf-8", "surrogatepass")
    for old, new in byte_edits:
        header = new + header if old == b"" else header.replace(old, new, 1)
    header += b" " * (-len(header) % 8)
    if hlen == "end+1":
        hlen = len(header) + len(data) + 1
    elif hlen == "short":
        hlen = max(len(header) - 3, 0)
    length = len(header) if hlen is None else int(hlen) % 2**64
    path = folder / "model.safetensors"
    path.write_bytes(length.to_bytes(8, "little") + header + bytes(data))
    return Crafted("safetensors", path, planted, note=f"table {dt} ({rows}, {d})")


NPY_SHAPES = ["(4611686018427387904,)", "(9223372036854775807,)", "(1099511627776,)", "(-1,)"]
NPY_SHAPES += ["(-4611686018427387904,)", "()", "(3, 4)", "(1.5,)", "'x'", "(0,)", "None"]
NPY_SHAPES += ["(4294967296, 4294967296)", "(2305843009213693952,)"]
NPY_DEFECTS = ["shape", "descr", "fortran", "length", "version", "magic", "dict", "data", "bytes"]


def _npy_file(r: Reader, path: Path, values: np.ndarray) -> Crafted:
    """``values`` (little-endian) saved as a .npy file, by hand, with defects."""
    descr, fortran, shape = repr(values.dtype.str), "False", repr(values.shape)
    version, magic = (1, 0), b"\x93NUMPY"
    body = values.tobytes()
    hlen: int | None = None
    text: str | None = None
    planted = []
    for _ in range(r.pick([0, 1, 1, 1, 2, 3])):
        defect = r.pick(NPY_DEFECTS)
        if defect == "shape":
            shape = r.pick([*NPY_SHAPES, f"({values.size}, 1)", f"({values.size + 1},)"])
            planted.append(f"npy:shape {shape}")
        elif defect == "descr":
            descr = r.pick(["'|O'", "'<f8'", "'>i8'", "'<U3'", "'|V8'", "'nonsense'", "5"])
            descr = r.pick([descr, "[('a', '<i8')]", "None", "'<i16'", "'<M8[ns]'", "'|b1'"])
            descr = r.pick([descr, "'<u2'", "'|i1'", "'O'", "('<i8', (2,))"])
            planted.append(f"npy:descr {descr}")
        elif defect == "fortran":
            fortran = r.pick(["True", "'garbage'", "1", "None", "[]"])
            planted.append(f"npy:fortran_order {fortran}")
        elif defect == "length":
            hlen = r.pick([0, 1, 0xFFFF, 2**31, 2**32 - 1, -64, 64])
            planted.append(
                f"npy:header length {hlen:+d}" if hlen in (-64, 64) else f"npy:header length {hlen}"
            )
        elif defect == "version":
            version = r.pick([(2, 0), (3, 0), (9, 9), (0, 0), (1, 1)])
            planted.append(f"npy:version {version}")
        elif defect == "magic":
            magic = r.pick([b"\x93NUMPZ", b"", b"\x93NUM"])
            planted.append(f"npy:magic {magic!r}")
        elif defect == "dict":
            text = r.pick(
                [
                    "[1, 2]",
                    "{'descr': '<i8'}",
                    "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), 'x': 1}",
                    "__import__('os').getcwd()",
                    "{" * 300,
                    "(" * 300 + ")" * 300,
                    "",
                    "{'descr': '<i8', 'fortran_order': False, 'shape': (1,) * 100}",
                ]
            )
            planted.append(f"npy:header {_short(text, 40)!r}")
        elif defect == "data":
            if r.chance(2) and body:
                body = body[: -r.int(1, len(body))]
                planted.append("npy:data short")
            else:
                body += b"\1" * r.int(1, 15)
                planted.append("npy:data long")
        elif defect == "bytes":
            planted.append("npy:header bytes")
            text = f"{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}\xff\x00"
    if text is None:
        text = f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"
    raw = text.encode("latin-1", "replace")
    wide = version[0] >= 2
    prefix = len(magic) + 2 + (4 if wide else 2)
    raw += b" " * (-(prefix + len(raw) + 1) % 64) + b"\n"
    size = len(raw) if hlen is None else (len(raw) + hlen if hlen in (-64, 64) else hlen)
    size %= 2 ** (32 if wide else 16)
    blob = magic + bytes(version) + size.to_bytes(4 if wide else 2, "little") + raw + body
    path.write_bytes(blob)
    return Crafted("npy", path, planted)


def _files_safetensors(r: Reader, root: Path) -> str:
    crafted = _safetensors_file(r, root)
    length = r.int(1, 20)
    dst = root / "resized.safetensors"
    if r.chance(2):
        reader = "resize_checkpoint"
        _, exc = _run(
            lambda pos, kw: posembed.resize_checkpoint(crafted.path, dst, "pos", length), [], {}
        )
        kind = _judge(crafted, reader, exc, (ValueError, TypeError))
    else:
        argv = [
            "resize",
            str(crafted.path),
            "--key",
            "pos",
            "--length",
            str(length),
            "-o",
            str(dst),
        ]
        reader = "posembed resize"
        kind = _judge_cli(crafted, argv)
    if dst.exists():
        problem = _strict_header(dst)
        if problem is not None:
            _files_failure(
                crafted, reader, "output", f"{reader} wrote a header the format refuses: {problem}"
            )
            kind = "known"
    return f"files safetensors {reader}: {kind}"


def _files_npy(r: Reader, root: Path) -> str:
    targets = ["chunk_file", "chunk_file offsets", "posembed chunk", "posembed chunk --offsets"]
    if plot_available:
        targets.append("posembed plot similarity")
    target = r.pick(targets)
    size, n = r.int(1, 8), r.int(0, 40)
    rng = r.rng()
    offsets_path: Path | None = None
    if target == "posembed plot similarity":
        table = rng.standard_normal((r.int(1, 6), r.int(1, 4)))
        crafted = _npy_file(r, root / "table.npy", table)
        argv = ["plot", "similarity", str(crafted.path), "-o", str(root / "sim.png")]
        kind = _judge_cli(crafted, [*argv, "--length", str(r.int(1, 8))], how="usage")
        return f"files npy {target}: {kind}"
    if "offsets" in target:
        tokens_path = root / "tokens.npy"
        np.save(tokens_path, np.arange(n, dtype=np.int32))
        values = np.array([0, *sorted(rng.integers(0, n + 1, r.int(0, 3))), n], np.int64)
        crafted = _npy_file(r, root / "offsets.npy", values)
        input_path, offsets_path = tokens_path, crafted.path
    else:
        values = (np.arange(n) % 50).astype(r.pick(["<i8", "<i4", "<u2", "|u1"]))
        crafted = _npy_file(r, root / "tokens.npy", values)
        input_path = crafted.path
    out = root / "out"
    if target.startswith("chunk_file"):
        _, exc = _run(
            lambda pos, kw: chunk_file(
                input_path, out, size=size, offsets_path=offsets_path, quiet=True
            ),
            [],
            {},
        )
        kind = _judge(crafted, target, exc, (ValueError, TypeError))
    else:
        argv = ["chunk", str(input_path), "-o", str(out), "--size", str(size), "--quiet"]
        kind = _judge_cli(
            crafted, argv + (["--offsets", str(offsets_path)] if offsets_path else [])
        )
    left = [p.name for p in root.iterdir() if "partial" in p.name]
    if left:
        kind = _files_failure(crafted, target, "partial", f"{target} left {left} behind")
    return f"files npy {target}: {kind}"


# ------------------------------------------- files mode: chunk outputs as input
#
# A folder posembed chunk wrote (windows.npy, lengths.npy and meta.json), read
# back by chunk_file and `posembed chunk` as one document per window, given
# defects: its .npy headers and data, lengths out of range or of another
# count, meta.json, a link, a FIFO, a file missing. A valid folder must give
# the windows of its windows cut to their lengths; a crafted one a documented
# exception (exit 2 and one line), never a read through a link or a wait.

WF_DEFECTS = ["windows npy", "lengths npy", "lengths values", "meta", "link", "fifo", "missing"]


def _files_windows(r: Reader, root: Path) -> str:
    rng = r.rng()
    n, size = r.int(0, 50), r.int(1, 6)
    dtype = np.dtype(r.pick(["<i4", "<i8", "<u2", "|u1"]))
    tokens = (np.arange(n) % 100).astype(dtype)
    offsets = np.array([0, *sorted(rng.integers(0, n + 1, r.int(0, 3))), n], np.int64)
    w = posembed.windows(tokens, size, step=r.int(1, size), offsets=offsets)
    folder = root / "w"
    folder.mkdir()
    np.save(folder / "windows.npy", w.tokens)
    np.save(folder / "lengths.npy", w.lengths)
    (folder / "meta.json").write_text('{"format": "npy"}')
    crafted = Crafted("windows folder", folder, [])
    defects = [r.pick(WF_DEFECTS) for _ in range(r.pick([0, 1, 1, 2]))]
    # a FIFO last: writing another defect into it would wait for a reader
    for defect in sorted(defects, key=lambda d: d == "fifo"):
        if defect in ("windows npy", "lengths npy"):
            name = defect.split()[0] + ".npy"
            values = w.tokens if name == "windows.npy" else w.lengths
            made = _npy_file(r, folder / name, values)
            crafted.planted += [f"{name} {p}" for p in made.planted]
        elif defect == "lengths values":
            bad = w.lengths.copy()
            if bad.size:
                bad[r.int(0, bad.size - 1)] = r.pick([-1, size + 1, 2**62, -(2**63)])
            else:
                bad = np.array([1], np.int64)
            np.save(folder / "lengths.npy", bad)
            crafted.planted.append("lengths out of range or of another count")
        elif defect == "meta":
            (folder / "meta.json").write_bytes(r.pick([b"[", b"[]", b"{" * 3000, b"", b"\xff{"]))
            crafted.planted.append("meta.json")
        elif defect == "link":
            np.save(root / "outside.npy", w.lengths)
            (folder / "lengths.npy").unlink(missing_ok=True)
            (folder / "lengths.npy").symlink_to(root / "outside.npy")
            crafted.planted.append("lengths.npy a link")
        elif defect == "fifo" and hasattr(os, "mkfifo"):
            name = r.pick(["windows.npy", "lengths.npy", "meta.json"])
            (folder / name).unlink(missing_ok=True)
            if (folder / name).exists():  # a FIFO already
                continue
            os.mkfifo(folder / name)
            crafted.fifos.append(folder / name)
            crafted.planted.append(f"{name} a FIFO")
        elif defect == "missing":
            (folder / r.pick(["lengths.npy", "meta.json"])).unlink(missing_ok=True)
            crafted.planted.append("a file missing")
    out, size2 = root / "out", r.int(1, 8)
    target = r.pick(["chunk_file", "posembed chunk"])
    if target == "chunk_file":
        call = lambda: _run(lambda pos, kw: chunk_file(folder, out, size=size2, quiet=True), [], {})  # noqa: E731
        (_, exc), blocked = _watched(crafted, call)
        kind = _judge(crafted, target, exc, (ValueError, TypeError))
    else:
        argv = ["chunk", str(folder), "-o", str(out), "--size", str(size2), "--quiet"]
        done, blocked = _watched(crafted, lambda: _cli(argv))
        kind = _judge_cli(crafted, argv, done=done)
    if blocked:
        return f"files windows: {_files_failure(crafted, target, 'blocked', 'blocked on a FIFO')}"
    if kind == "ok" and not crafted.planted:
        # the windows of the windows, each cut to its length
        docs = [row[:k] for row, k in zip(w.tokens, w.lengths, strict=True)]
        flat = np.concatenate([np.zeros(0, dtype), *docs])
        ends = np.cumsum([0, *(d.shape[0] for d in docs)])
        want = posembed.windows(flat, size2, offsets=ends)
        got = np.load(out / "windows.npy")
        if not np.array_equal(got, want.tokens) or not np.array_equal(
            np.load(out / "lengths.npy"), want.lengths
        ):
            kind = _files_failure(crafted, target, "windows", "the windows read back differ")
    return f"files windows {target}: {kind}"
