"""An output in an object store (a moto S3 server on the loopback address,
started once per fuzzing process, where moto and s3fs are installed): a
prefix already holding some of posembed's output, a crafted manifest, a
crafted or live marker of another run, objects posembed did not write, and
the input itself, then `posembed chunk` or `convert` to it, with --force or
not. Exit 0 or 2 with one line; whatever posembed did not write and the
input are never changed; an exit 0 leaves the complete output, its manifest
and no marker.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import posembed
from posembed.chunk import chunk_file

from .common import Reader
from .files_common import Crafted, _cli, _files_failure, _judge_cli

STORE_DEFECTS = ["output", "manifest", "marker", "live marker", "foreign", "input inside"]
STORE_BUCKET = "fuzz"
_STORE: dict[str, Any] = {}


def _store_fs() -> Any:
    """The fuzzing process's S3 server and its file system (started on first use)."""
    if "fs" not in _STORE:
        import atexit

        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's bench/
        from bench.store_server import s3_server

        from posembed.io import _store

        _store.SETTLE_SECONDS = 0.01  # one run at a time here: no need to wait out another
        stack = contextlib.ExitStack()
        _STORE["fs"] = stack.enter_context(s3_server(STORE_BUCKET))
        atexit.register(stack.close)
    _STORE["n"] = _STORE.get("n", 0) + 1
    return _STORE["fs"]


def _store_listing(fs: Any, prefix: str) -> dict[str, bytes]:
    fs.invalidate_cache()
    try:
        return {p: fs.cat_file(p) for p in fs.find(prefix)}
    except FileNotFoundError:
        return {}


def _files_store(r: Reader, root: Path) -> str:
    fs = _store_fs()
    prefix = f"{STORE_BUCKET}/p{_STORE['n']}"
    pair = r.chance(3)
    out_key = f"{prefix}/x" if pair else f"{prefix}/o"
    url = f"s3://{out_key}"
    tokens = (np.arange(r.int(0, 300)) % 1000).astype(np.uint16)
    np.save(root / "tokens.npy", tokens)
    source, planted = str(root / "tokens.npy"), []
    defects = sorted({r.pick(STORE_DEFECTS) for _ in range(r.pick([0, 1, 1, 2, 3]))})
    crafted = Crafted("store output", root, planted)
    for defect in defects:
        if defect == "output":  # a complete output of posembed's
            if pair:
                posembed.write_indexed(root / "old", tokens, [0, tokens.size])
                fs.put(str(root / "old.bin"), out_key + ".bin")
                fs.put(str(root / "old.idx"), out_key + ".idx")
            else:
                chunk_file(root / "tokens.npy", root / "old", size=4, quiet=True)
                for f in (root / "old").iterdir():
                    fs.put(str(f), f"{out_key}/{f.name}")
            planted.append("an output there")
        elif defect == "manifest" and not pair:
            fs.pipe(f"{out_key}/meta.json", r.pick([b"{", b"[]", b'{"format": 1}', b"\xff", b""]))
            planted.append("a crafted manifest")
        elif defect in ("marker", "live marker"):
            marker = out_key + (".posembed-writing.json" if pair else "/.posembed-writing.json")
            if defect == "live marker":
                body = {"writing": "posembed", "run": "other", "host": "elsewhere", "pid": 1}
                body |= {"renewed": time.time(), "ended": False}
                fs.pipe(marker, json.dumps(body).encode())
            else:
                fs.pipe(marker, r.pick([b"", b"{", b"[1]", b'{"renewed": "x"}', b"\x00" * 9,
                                        b'{"run": 5, "renewed": 1e300, "pid": -1}']))  # fmt: skip
            planted.append(defect)
        elif defect == "foreign":
            fs.pipe(f"{prefix}/o/data.bin" if not pair else out_key + ".bin", b"precious")
            planted.append("objects posembed did not write")
        elif defect == "input inside":
            key = f"{out_key}/tokens.npy" if not pair else out_key + ".idx"
            fs.put(str(root / "tokens.npy"), key)
            source = f"s3://{key}"
            planted.append("the input inside the output")
    before = _store_listing(fs, prefix)
    force = r.chance(2)
    if pair:
        argv = ["convert", source, "-o", url]
        argv += ["--offsets", str(root / "offsets.npy")] if source.endswith(".npy") else []
        np.save(root / "offsets.npy", np.array([0, tokens.size], np.int64))
    else:
        argv = ["chunk", source, "-o", url, "--size", str(r.int(1, 8))]
    argv += ["--quiet"] + (["--force"] if force else [])
    if not force and before:
        planted.append("no --force")
    done = _cli(argv)
    kind = _judge_cli(crafted, argv, done=done)
    after = _store_listing(fs, prefix)
    # posembed may replace an output of its own (--force), never the input,
    # nor objects in a prefix it has no manifest or marker in
    ours = {"output", "manifest", "marker", "live marker"} & set(defects)
    kept = {
        k: v for k, v in before.items() if f"s3://{k}" == source or (v == b"precious" and not ours)
    }
    for key, value in kept.items():
        if after.get(key) != value:
            return f"files store: {_files_failure(crafted, argv[0], 'lost', f'{key} changed')}"
    if done[0] == 0:
        marker = out_key + (".posembed-writing.json" if pair else "/.posembed-writing.json")
        done_key = out_key + ".idx" if pair else f"{out_key}/meta.json"
        if marker in after or done_key not in after:
            why = "an exit 0 left a marker or no manifest"
            return f"files store: {_files_failure(crafted, argv[0], 'unfinished', why)}"
    elif done[0] == 2 and before != after:
        return f"files store: {_files_failure(crafted, argv[0], 'changed', 'exit 2 changed it')}"
    return f"files store {argv[0]}: {kind}"


def _store_available() -> bool:
    try:
        import moto.server  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError:
        return False
    return True
