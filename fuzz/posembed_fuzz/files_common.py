"""What the files mode's families share: JSON documents written by hand (a
key twice, a literal put in as it is), the crafted input and the defects
planted in it, ``posembed ARGV`` run in this process, the judging of a
reader's or a command's outcome, the strict check of a safetensors header,
and the watch for a read blocked on a FIFO.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posembed import cli
from posembed.io import _safetensors

from .common import Call, Outcome, Reader, Value, _failure, _kind, _short


class Raw(str):
    """JSON text put into a crafted document as it is."""


@dataclass
class Obj:
    """A JSON object as (key, value) pairs, so that a key may come twice."""

    pairs: list[tuple[str, Any]]

    def get(self, key: str) -> Any:
        return next(v for k, v in self.pairs if k == key)

    def set(self, key: str, value: Any) -> None:
        self.pairs = [(k, value if k == key else v) for k, v in self.pairs]

    def drop(self, key: str) -> None:
        self.pairs = [(k, v) for k, v in self.pairs if k != key]


def _json(x: Any) -> str:
    if isinstance(x, Raw):
        return str(x)
    if isinstance(x, Obj):
        return "{" + ", ".join(f"{json.dumps(k)}: {_json(v)}" for k, v in x.pairs) + "}"
    if isinstance(x, list):
        return "[" + ", ".join(_json(v) for v in x) + "]"
    return json.dumps(x)


def _deep(r: Reader) -> str:
    depth = r.pick([64, 1000, 20_000, 200_000])
    if r.chance(2):
        return "[" * depth + "]" * depth if r.chance(3) else "[" * depth + "1" + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


NONFINITE = ["NaN", "Infinity", "-Infinity"]


@dataclass
class Crafted:
    """A crafted input on disk: what the reader gets, and the defects planted."""

    kind: str
    path: Path
    planted: list[str]
    fifos: list[Path] = field(default_factory=list)
    escapes: bool = False  # a part that lies outside the folder
    note: str = ""


def _clear(path: Path) -> None:
    """Remove whatever is at ``path`` (file, link, FIFO or folder)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _cli(argv: list[str]) -> tuple[int, str, BaseException | None]:
    """``posembed ARGV`` in this process: exit status, stderr, and the exception
    that would have ended the command with a traceback (else None)."""
    err = io.StringIO()
    code, exc = 0, None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except Exception as raised:  # a traceback, for the caller to judge
            exc = raised
    return code, err.getvalue(), exc


def _files_failure(crafted: Crafted, reader: str, problem: str, message: str, exc=None) -> str:
    call = Call(f"files {crafted.kind}: {reader}", lambda pos, kw: None, None)
    call.add("planted", Value(crafted.planted))
    if crafted.note:
        call.add("file", Value(crafted.note))
    outcome = Outcome(call, problem, fast_exc=exc, planted=tuple(crafted.planted))
    _failure(outcome, message)
    return "known"


def _blocked(crafted: Crafted, family: str, reader: str) -> str:
    """The outcome of a reader that blocked on one of the input's FIFOs."""
    message = f"{reader} blocked on a FIFO"
    return f"files {family} {reader}: " + _files_failure(crafted, reader, "blocked", message)


def _left_behind(crafted: Crafted, reader: str, root: Path, kind: str) -> str:
    """``kind``, unless the reader left a folder of its own (.posembed-*) in ``root``."""
    left = [p.name for p in root.iterdir() if p.name.startswith(".posembed-")]
    if left:
        return _files_failure(crafted, reader, "partial", f"{reader} left {left} behind")
    return kind


def _judge(
    crafted: Crafted, reader: str, exc: BaseException | None, allowed: tuple[type, ...]
) -> str:
    """A reader's outcome: its result or a documented exception; a valid input accepted."""
    if exc is not None and not isinstance(exc, allowed):
        return _files_failure(
            crafted,
            reader,
            "exception",
            f"{reader} raised {type(exc).__name__}: {_short(str(exc))}",
            exc,
        )
    if exc is not None and not crafted.planted:
        return _files_failure(
            crafted, reader, "refused", f"{reader} refused a valid input: {_short(str(exc))}", exc
        )
    return _kind(exc)


def _judge_cli(
    crafted: Crafted,
    argv: list[str],
    how: str = "one line",
    done: tuple[int, str, BaseException | None] | None = None,
) -> str:
    """``posembed ARGV``: exit 0, or 2 with one error line on stderr (after
    argparse's usage for ``how="usage"``); never a traceback. ``done``: what
    :func:`_cli` gave, where the caller ran it."""
    reader = "posembed " + " ".join(argv[:2] if argv[0] == "plot" else argv[:1])
    code, err, exc = _cli(argv) if done is None else done
    if exc is not None:
        return _files_failure(
            crafted,
            reader,
            "traceback",
            f"{reader} ended with a traceback: {type(exc).__name__}: {_short(str(exc))}",
            exc,
        )
    lines = err.splitlines()
    if code == 0:
        return "ok"
    if code != 2:
        return _files_failure(crafted, reader, "exit", f"{reader} exited {code}: {_short(err)}")
    errors = [line for line in lines if line.startswith(f"{reader}: error: ")]
    shape_ok = len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err
    if how == "one line":
        shape_ok = shape_ok and len(lines) == 1
    if not shape_ok:
        return _files_failure(crafted, reader, "stderr", f"{reader} exited 2 with stderr {err!r}")
    if not crafted.planted:
        return _files_failure(
            crafted, reader, "refused", f"{reader} refused a valid input: {err!r}"
        )
    return "exit 2"


def _strict_header(path: Path) -> str | None:
    """Why the safetensors file at ``path`` is not one the official reader takes, or None."""

    def refuse(literal: str) -> None:
        raise ValueError(f"the literal {literal}")

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"a key twice in {keys}")
        return dict(pairs)

    blob = path.read_bytes()
    n = int.from_bytes(blob[:8], "little")
    try:
        json.loads(blob[8 : 8 + n].decode("utf-8"), parse_constant=refuse, object_pairs_hook=once)
        with open(path, "rb") as f:
            _safetensors.read_header(f, path)
    except (ValueError, RecursionError) as exc:
        return str(exc)
    return None


def _json_text_defect(r: Reader, obj: Obj) -> tuple[str | None, str]:
    """A JSON document's text made bad (None: keep ``obj``, changed in place), and how."""
    how = r.pick(["", "{", "[]", "null", '"x"', "deep", "nonfinite", "duplicate", "utf8"])
    how = r.pick([how, "bigint", "1e999", "bom", "trailing"])
    if how == "deep":
        return _deep(r), how
    if how == "nonfinite":
        obj.pairs.append(("x", Raw(r.pick(NONFINITE))))
        return None, how
    if how == "duplicate":
        k, v = obj.pairs[r.int(0, len(obj.pairs) - 1)]
        obj.pairs.append((k, v))
        return None, how
    if how == "utf8":
        return _json(obj)[:-1] + ', "k": "\udcff"}', how
    if how == "bigint":
        obj.pairs.append(("x", Raw("9" * 5000)))
        return None, how
    if how == "1e999":
        obj.pairs.append(("x", Raw("1e999")))
        return None, how
    if how == "bom":
        return "\ufeff" + _json(obj), how
    if how == "trailing":
        return _json(obj) + " x", how
    return how, repr(how)


# How long a reader may take when its input holds a FIFO, before the harness
# looks for a read blocked on one.
FIFO_WAIT = 0.5


def _watched(crafted: Crafted, fn: Callable[[], Any]) -> tuple[Any, bool]:
    """fn() on a thread: its result, and whether it blocked on one of the
    crafted input's FIFOs (opened by the harness for writing, and closed, to
    let it go on)."""
    if not crafted.fifos:
        return fn(), False
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(done=fn()), daemon=True)
    thread.start()
    thread.join(FIFO_WAIT)
    blocked = False
    while thread.is_alive():
        for fifo in crafted.fifos:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody waits to read it
                continue
            blocked = True
            os.close(fd)
        thread.join(0.05)
    return box["done"], blocked
