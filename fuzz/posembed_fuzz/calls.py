"""--mode calls (the default): every public function against its NumPy twin.

Each input, a byte string, picks a public function (the file-writing ones
aside) and builds its arguments (:mod:`.calls_builders`,
:mod:`.calls_windows`, from the pools of :mod:`.calls_values`). It then
calls posembed and ``posembed.reference`` on the same arguments (built
twice, so neither call can see what the other did) and requires:

* posembed returns what the twin returns (:mod:`.calls_compare`): the same
  type, shape, dtype and bytes, except that NaNs may differ in their payload
  bits and ``similarity`` agrees to a tolerance; or
* posembed raises TypeError, ValueError or IndexError, and the twin raises
  the same kind;

and in both cases posembed leaves its inputs unchanged, an ``out=`` it refused
untouched, and returns ``out`` itself when it accepted one. Anything else
(another exception type, a mismatch, a changed input) raises
:class:`FuzzFailure`; a crash or a hang ends the process (libFuzzer's
``-timeout=``, or ``faulthandler`` without atheris). Discrepancies already
reported are listed in ``KNOWN_BUGS`` (:mod:`.common`) and tolerated until
fixed.

Sizes are small (arrays of a few KB) or reach 2**62: nothing in between, so
MemoryError is never an allowed outcome. A size of 2**62 or more must be
refused before any allocation (posembed's documented guard): with ValueError,
or with the error the twin gives for the other arguments once that size is
replaced by a small one; the twin never gets the huge size itself (its plain
loops would run for ever).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

import posembed
from posembed import _core, reference

# the window functions' targets register themselves in TARGETS on import
from . import calls_order, calls_windows  # noqa: F401
from .calls_builders import TARGETS, Builder
from .calls_compare import same_array, same_result
from .calls_values import DLPackBox, OutSpec
from .common import (
    ALLOWED,
    LAYOUT_FIELDS,
    Call,
    Context,
    FuzzFailure,
    Outcome,
    Reader,
    _build,
    _failure,
    _kind,
    _run,
    _text,
    quiet,
)

SMALL_RESULT = 1 << 20  # bytes: what a huge-size call may still return (an empty window set)


def _fingerprint(obj: Any) -> Any:
    """Enough of an argument to see whether a call changed it."""
    if isinstance(obj, np.ndarray):
        return (obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, memoryview):
        return obj.tobytes()
    if isinstance(obj, DLPackBox):
        return _fingerprint(obj.array)
    if isinstance(obj, (list, tuple)):
        return repr(obj)
    if isinstance(obj, (posembed.Windows, reference.Windows)):
        names = ("tokens", "starts", "lengths", "documents", "doc_offsets")
        return tuple(_fingerprint(getattr(obj, n)) for n in names)
    if isinstance(obj, (posembed.WindowLayout, reference.WindowLayout)):
        return tuple(_fingerprint(getattr(obj, n)) for n in LAYOUT_FIELDS)
    return None


def _out_label(call: Call) -> str | None:
    return next((label for label, arg, _ in call.args if isinstance(arg, OutSpec)), None)


def _expected_out(call: Call) -> tuple[tuple[int, ...], np.dtype[Any]] | None:
    """The shape and dtype of the twin's result without out= (for a good out=)."""
    if call.slow is None or call.huge:
        return None
    args = [(label, arg, kw) for label, arg, kw in call.args if not isinstance(arg, OutSpec)]
    probe = Call(call.name, call.fast, call.slow, args)
    pos, kw = _build(probe, Context("slow", {}))
    if call.seed_label and kw.get(call.seed_label) is None:
        kw[call.seed_label] = 0  # the shape does not depend on the seed
    result, _ = _run(call.slow, pos, kw)
    if isinstance(result, reference.Windows):
        result = result.tokens
    if isinstance(result, np.ndarray):
        return result.shape, result.dtype
    return None


def execute(call: Call) -> str:
    """Run one call on posembed and its twin and check the property; returns the
    outcome's kind for the statistics."""
    out_label = _out_label(call)
    expected = _expected_out(call) if out_label else None

    # posembed
    fast_ctx = Context("fast", {}, expected)
    pos, kw = _build(call, fast_ctx)
    made = fast_ctx.made
    before = {k: _fingerprint(v) for k, v in made.items()}
    seed_before = posembed.last_seed()
    result, fast_exc = _run(call.fast, pos, kw)
    outcome = Outcome(call, "", fast_exc=fast_exc, fast_args=made)
    for label, obj in made.items():
        if label != out_label and before[label] is not None and _fingerprint(obj) != before[label]:
            outcome.problem = "input-modified"
            _failure(outcome, f"posembed changed its input {label!r}")
    if fast_exc is not None and not isinstance(fast_exc, ALLOWED):
        outcome.problem = "exception"
        _failure(outcome, f"posembed raised {type(fast_exc).__name__}")
        return "known"
    if out_label is not None:
        out = made[out_label]
        if fast_exc is not None and before[out_label] != _fingerprint(out):
            outcome.problem = "out-written"
            _failure(outcome, "posembed wrote to out= and then raised")
        if fast_exc is None and isinstance(out, np.ndarray) and not _returns_out(result, out):
            outcome.problem = "out-not-returned"
            _failure(outcome, "posembed accepted out= but did not return it")
    if fast_exc is None and call.huge:
        nbytes = getattr(getattr(result, "tokens", result), "nbytes", 0)
        if nbytes >= SMALL_RESULT:
            outcome.problem = "huge"
            _failure(outcome, f"posembed accepted a size >= 2^62 and returned {nbytes} bytes")
    if call.slow is None:
        return _kind(fast_exc)

    # the twin
    if call.huge and fast_exc is not None:
        # posembed refused a size >= 2^62: ValueError, or what the twin says
        # about the other arguments when that size is small
        ctx = Context("slow", {}, expected)
        spos, skw = _build(call, ctx, replace=call.huge)
        _, slow_exc = _run(call.slow, spos, skw)
        outcome.slow_exc = slow_exc
        allowed = {"ValueError", _kind(slow_exc)}
        if _kind(fast_exc) not in allowed:
            outcome.problem = "huge-type"
            _failure(
                outcome,
                f"posembed raised {_kind(fast_exc)} for a size >= 2^62; expected one of {allowed}",
            )
        return _kind(fast_exc)
    slow_ctx = Context("slow", {}, expected)
    spos, skw = _build(call, slow_ctx)
    if call.seed_label and skw.get(call.seed_label) is None:
        drawn = posembed.last_seed()
        if drawn is not None and drawn != seed_before:
            skw[call.seed_label] = drawn  # the seed posembed drew
    slow_result, slow_exc = _run(call.slow, spos, skw)
    outcome.slow_exc = slow_exc
    if fast_exc is not None:
        if not call.twin_errors:
            return _kind(fast_exc)  # a twin that does not validate cannot disagree
        if slow_exc is None:
            outcome.problem = "twin-returned"
            _failure(outcome, f"posembed raised {_kind(fast_exc)}, the twin returned a result")
        elif _kind(slow_exc) != _kind(fast_exc):
            outcome.problem = "type"
            _failure(outcome, f"posembed raised {_kind(fast_exc)}, the twin {_kind(slow_exc)}")
        elif "sum over windows" in _text(fast_exc) and _token(fast_exc) != _token(slow_exc):
            # stitch's integer sums past int64: both must name the same token
            outcome.problem = "mismatch"
            _failure(outcome, f"posembed refused {_token(fast_exc)}, the twin {_token(slow_exc)}")
        return _kind(fast_exc)
    if slow_exc is not None:
        if not call.twin_errors:
            return "ok"  # the twin does not validate: it may fail where posembed need not
        outcome.problem = "twin-raised"
        _failure(outcome, f"posembed returned a result, the twin raised {_kind(slow_exc)}")
        return "known"
    try:
        (call.compare or same_result)(result, slow_result)
        box = made.get(out_label or "")
        if isinstance(box, DLPackBox):  # posembed returns a view: the memory must hold it
            same_array(box.array, getattr(slow_result, "tokens", slow_result), "out= (DLPack)")
    except FuzzFailure as exc:
        outcome.problem = "mismatch"
        outcome.fast_result, outcome.slow_result = result, slow_result
        _failure(outcome, str(exc))
    return "ok"


def _token(exc: BaseException | None) -> str:
    """The token an error names ("token 12"), if any."""
    found = re.search(r"token \d+", _text(exc))
    return found.group() if found else "no token"


def _returns_out(result: Any, out: np.ndarray) -> bool:
    if isinstance(result, posembed.Windows):
        return result.tokens is out
    return result is out


@dataclass
class Settings:
    """Threads and work thresholds an input runs under (restored afterwards)."""

    threads: int | None
    tiny: bool

    def __enter__(self) -> Settings:
        if self.threads is not None:
            self._before = (
                posembed.get_num_threads() if posembed.config()["num_threads_set"] else None
            )
            posembed.set_num_threads(self.threads)
        if self.tiny:
            # the parallel and streaming paths on small arrays
            _core._probes.set_thresholds(1024, 4096)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.threads is not None:
            posembed.set_num_threads(self._before)
        if self.tiny:
            _core._probes.set_thresholds(-1, -1)


TARGET_NAMES = sorted(TARGETS)


def decode(data: bytes) -> tuple[Call, Settings]:
    """The call and settings an input stands for. The first byte picks the
    function (see :func:`input_for`)."""
    r = Reader(data)
    name = r.pick(TARGET_NAMES)
    settings = Settings(r.pick([None, None, 1, 2, 3]), r.chance(3))
    with quiet():
        return TARGETS[name](Builder(r)), settings


def input_for(name: str, rest: bytes) -> bytes:
    """An input that calls the target ``name``, the rest of it drawn from ``rest``."""
    return bytes([TARGET_NAMES.index(name)]) + rest


def call_input(data: bytes) -> str:
    """Run one call input; returns the function and outcome for the statistics."""
    with quiet():
        call, settings = decode(data)
        with settings:
            kind = execute(call)
    return f"{call.name}: {kind}"
