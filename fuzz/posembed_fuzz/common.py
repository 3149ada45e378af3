"""What every mode shares: the decoding of an input's bytes into choices
(:class:`Reader`), the outcomes a call may have, a call's recipe (which a
failure is reported with, in every mode), the known bugs tolerated, and the
statistics.

The decoding is the harness's own, not ``atheris.FuzzedDataProvider``: so one
input is the same call with or without atheris, a crash file from either
engine reproduces in the other, and the test suite's fixed corpus means the
same calls everywhere.
"""

from __future__ import annotations

import collections
import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ALLOWED = (TypeError, ValueError, IndexError)
NAN, INF = float("nan"), float("inf")
HUGE = 2**62  # sizes from here on must be refused (posembed's guard, _validate.MAX_PRODUCT)

# the arrays of a WindowLayout: compared, fingerprinted, changed by hand, raced
LAYOUT_FIELDS = ("starts", "lengths", "documents", "window_offsets", "doc_offsets")


class FuzzFailure(AssertionError):
    """The property failed: the message says which call and how."""


# ---------------------------------------------------------------- decoding


class Reader:
    """Turns fuzz bytes into choices; past the end every choice is its first option,
    so a shorter input is a simpler call (which libFuzzer's minimisation likes)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def int(self, lo: int, hi: int) -> int:
        """An integer in lo..hi (hi < lo gives lo)."""
        span = hi - lo
        if span <= 0:
            return lo
        raw = 0
        for _ in range((span.bit_length() + 7) // 8):
            raw = raw << 8 | self.byte()
        return lo + raw % (span + 1)

    def chance(self, n: int) -> bool:
        """True with probability 1/n."""
        return self.int(0, n - 1) == 0

    def pick(self, options: Any) -> Any:
        return options[self.int(0, len(options) - 1)]

    def rng(self) -> np.random.Generator:
        """A generator for bulk content (array values), seeded from 4 bytes."""
        return np.random.default_rng(self.int(0, 2**32 - 1))


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_huge(x: Any) -> bool:
    return _is_int(x) and int(x) >= HUGE


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- a call


@dataclass
class Context:
    """What an argument is built for: "fast" (posembed) or "slow" (the twin), the
    arguments built so far, and the (shape, dtype) an out= should have."""

    impl: str
    made: dict[str, Any]
    expected: tuple[tuple[int, ...], np.dtype[Any]] | None = None


class Arg:
    """A recipe for one argument, built afresh for each call."""

    def make(self, ctx: Context) -> Any:
        raise NotImplementedError

    def show(self) -> str:
        raise NotImplementedError


@dataclass
class Value(Arg):
    value: Any

    def make(self, ctx: Context) -> Any:
        return list(self.value) if isinstance(self.value, list) else self.value

    def show(self) -> str:
        return _short(repr(self.value))


@dataclass
class Call:
    """One fuzz case: the same arguments for posembed (``fast``) and its twin
    (``slow``; None where there is none)."""

    name: str
    fast: Callable[[list[Any], dict[str, Any]], Any]
    slow: Callable[[list[Any], dict[str, Any]], Any] | None
    args: list[tuple[str, Arg, bool]] = field(default_factory=list)  # (label, recipe, keyword)
    compare: Callable[[Any, Any], None] | None = None
    huge: dict[str, Arg] = field(default_factory=dict)  # size args >= 2^62 -> small stand-ins
    twin_errors: bool = True  # False: the twin does not validate (hand-built Windows)
    seed_label: str | None = None  # a seed=None the twin must get from last_seed()

    def add(self, label: str, arg: Arg, keyword: bool = False) -> None:
        self.args.append((label, arg, keyword))

    def describe(self) -> str:
        parts = [f"{label}={arg.show()}" for label, arg, _ in self.args]
        return f"{self.name}(" + ", ".join(parts) + ")"


def _build(call: Call, ctx: Context, replace: dict[str, Arg] | None = None) -> tuple[Any, Any]:
    """The positional list and keyword dict of a call, built for ctx.impl."""
    pos: list[Any] = []
    kw: dict[str, Any] = {}
    for label, arg, keyword in call.args:
        if replace and label in replace:
            arg = replace[label]
        obj = arg.make(ctx)
        ctx.made[label] = obj
        if keyword:
            kw[label] = obj
        else:
            pos.append(obj)
    return pos, kw


# ---------------------------------------------------------------- known bugs


@dataclass
class Outcome:
    """How one call went, for the KNOWN_BUGS entries to recognise."""

    call: Call
    problem: str  # "exception", "mismatch", "type", "twin-raised", "twin-returned", ...
    fast_exc: BaseException | None = None
    slow_exc: BaseException | None = None
    fast_args: dict[str, Any] = field(default_factory=dict)
    fast_result: Any = None
    slow_result: Any = None
    planted: tuple[str, ...] = ()  # the files mode: the defects of the crafted input


@dataclass(frozen=True)
class KnownBug:
    """A discrepancy reported and not yet fixed, tolerated (and counted, see -v)
    so that fuzzing can go on past it. Remove the entry with the fix."""

    name: str
    reproducer: str
    matches: Callable[[Outcome], bool]


def _text(exc: BaseException | None) -> str:
    return "" if exc is None else str(exc)


KNOWN_BUGS: list[KnownBug] = []


# ---------------------------------------------------------------- outcomes and statistics


@dataclass
class Stats:
    inputs: int = 0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    known: collections.Counter[str] = field(default_factory=collections.Counter)


STATS = Stats()


def _kind(exc: BaseException | None) -> str:
    """ "ok", or which of TypeError / ValueError / IndexError the exception is."""
    if exc is None:
        return "ok"
    kinds = [c.__name__ for c in ALLOWED if isinstance(exc, c)]
    return "/".join(kinds) if kinds else f"other:{type(exc).__name__}"


def _run(fn: Callable[[list[Any], dict[str, Any]], Any], pos: list[Any], kw: dict[str, Any]):
    try:
        return fn(pos, kw), None
    except Exception as exc:  # judged by the caller
        return None, exc


def _failure(outcome: Outcome, message: str) -> None:
    """Raise FuzzFailure, unless a KNOWN_BUGS entry covers the outcome."""
    for bug in KNOWN_BUGS:
        if bug.matches(outcome):
            STATS.known[bug.name] += 1
            return
    lines = [f"{message}", f"call: {outcome.call.describe()}"]
    if outcome.fast_exc is not None:
        lines.append(f"posembed raised {type(outcome.fast_exc).__name__}: {outcome.fast_exc}")
    if outcome.slow_exc is not None:
        lines.append(f"the twin raised {type(outcome.slow_exc).__name__}: {outcome.slow_exc}")
    raise FuzzFailure(_short("\n".join(lines), 4000))


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """NumPy's warnings (casts of NaN, overflow in the twins) are no finding, and
    the test suite turns warnings into errors."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield
