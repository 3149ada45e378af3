"""The calls mode's targets for the window functions: windows, stitch (on
windows from posembed.windows or its twin, or on a Windows built by hand with
one field changed), Windows.owner, window_layout and WindowLayout.cut (on a
layout from window_layout or built by hand, all its windows or a range).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import posembed
from posembed import reference

from .calls_builders import Builder, _fn, _plain, target
from .calls_values import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, LAYOUTS, ArraySpec, _cast, _content
from .common import (
    INF,
    LAYOUT_FIELDS,
    NAN,
    Arg,
    Call,
    Context,
    Reader,
    Value,
    _build,
    _is_int,
    _short,
)


def _offsets(b: Builder, n: int) -> Arg:
    """CSR document offsets over n tokens: valid mostly, else broken."""
    r = b.r
    cuts = sorted(r.int(0, n) for _ in range(r.int(0, 5)))
    valid = np.array([0, *cuts, n], dtype=np.int64)
    if r.chance(4):
        return Value(r.pick([[0, n], [n, 0], [0], [], [0, n + 1], [1, n], [0.0, n], None, "x"]))
    dtype = r.pick(INT_DTYPES) if not r.chance(6) else r.pick(ALL_DTYPES)
    if r.chance(6) and valid.size > 2:
        valid[1], valid[-2] = valid[-2] + 1, valid[1]  # decreasing
    return b.spec(_cast(valid, dtype) if not dtype.hasobject else valid.astype(object))


def _windows_args(b: Builder, call: Call, strict: bool) -> None:
    """tokens, size, and the windows keywords; strict: valid ones only (for stitch)."""
    r = b.r
    n = r.int(0, 40)
    if strict:
        layout = r.pick(["c", "c", "reversed", "stepped", "readonly", "unaligned"])
        tokens: Arg = b.array(r.pick(INT_DTYPES), (n,), "ints", 0, 50, layout)
        size: Arg = Value(r.int(1, 9))
    else:
        tokens = b.integers(0, 50, (n,) if not r.chance(10) else b.dims(2, 5))
        size = b.size("size", 1, 9, standin=4)
    call.add("tokens", tokens)
    call.add("size", size)
    top = size.value if isinstance(size, Value) and _is_int(size.value) else 9
    top = min(max(int(top), 1), 9)
    if strict:
        if r.chance(2):
            call.add("step", Value(r.int(1, top)), keyword=True)
        call.add("tail", Value(r.pick(["pad", "shift", "drop"])), keyword=True)
        if r.chance(3):
            cuts = sorted(r.int(0, n) for _ in range(r.int(0, 4)))
            call.add("offsets", Value(np.array([0, *cuts, n])), keyword=True)
        return
    which = r.int(0, 3)
    if which == 1 or r.chance(20):
        call.add("step", b.count(1, top), keyword=True)
    if which == 2 or r.chance(20):
        call.add("overlap", b.count(0, top - 1), keyword=True)
    b.maybe(call, "tail", lambda: b.choice(["pad", "shift", "drop"]))
    b.maybe(call, "pad_value", lambda: b.count(-1, 99), odds=3)
    b.maybe(call, "offsets", lambda: _offsets(b, n), odds=3)
    b.maybe(call, "out", lambda: b.out(["tokens"]), odds=4)


@target("windows")
def _windows(b: Builder) -> Call:
    call = _plain("windows")
    _windows_args(b, call, strict=False)
    return b.finish(call)


@dataclass
class WindowsArg(Arg):
    """A Windows built by posembed.windows or its twin from the same arguments."""

    call: Call

    def make(self, ctx: Context) -> Any:
        inner = Context(ctx.impl, {})
        pos, kw = _build(self.call, inner)
        module = posembed if ctx.impl == "fast" else reference
        return module.windows(*pos, **kw)

    def show(self) -> str:
        return self.call.describe()


@target("stitch")
def _stitch(b: Builder) -> Call:
    r = b.r
    inner = Call("windows", _fn(posembed, "windows"), _fn(reference, "windows"))
    _windows_args(b, inner, strict=True)
    made = _build(inner, Context("slow", {}))
    w = reference.windows(*made[0], **made[1])
    call = _plain("stitch")
    rest = b.dims(2, 3)
    shape: tuple[int, ...] = (len(w), w.size, *rest)
    if r.chance(10):
        shape = (len(w) + r.pick([-1, 1]), w.size) if r.chance(2) else b.dims(3, 4)
    if r.chance(5) and shape == (len(w), w.size):
        values: Arg = ArraySpec(np.asarray(w.tokens), r.pick(["c", "reversed", "list"]))
    else:
        dtype = r.pick(ALL_DTYPES) if r.chance(3) else r.pick(FLOAT_DTYPES + INT_DTYPES)
        mode = r.pick(["normal", "special", "ints", "bits"])
        values = b.array(dtype, tuple(max(s, 0) for s in shape), mode, -5, 5)
    call.add("values", values)
    if r.chance(15):
        call.add("windows", Value(r.pick([None, (1, 2), "w", np.zeros((2, 2))])))
    else:
        call.add("windows", WindowsArg(inner))
    b.maybe(call, "reduce", lambda: b.choice(["mean", "sum", "max", "first", "center"]))
    b.maybe(call, "fill", lambda: Value(r.pick([0, 1, -1, 2.5, NAN, INF, 2**64, -(2**64), "x"])))
    return b.finish(call)


def _reworked(r: Reader, old: np.ndarray, how: int) -> np.ndarray:
    """A hand-built Windows' or WindowLayout's array changed as a whole (``how``
    1 to 4): another dtype, one short, reversed, or strided."""
    if how == 1:
        return old.astype(r.pick([np.int32, np.uint64, np.float64, ">i8"]))
    if how == 2:
        return old[:-1] if old.size else np.zeros(1, old.dtype)
    if how == 3:
        return old[::-1]
    return np.repeat(old, 2)[::2]  # a strided view of the same values


@dataclass
class TamperedWindows(Arg):
    """A Windows built by hand: a real one with one field changed."""

    fields: dict[str, Any]

    def make(self, ctx: Context) -> Any:
        cls = posembed.Windows if ctx.impl == "fast" else reference.Windows
        values = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in self.fields.items()}
        return cls(**values)

    def show(self) -> str:
        return _short("Windows(" + ", ".join(f"{k}={v!r}" for k, v in self.fields.items()) + ")")


@target("Windows(by hand)")
def _hand_built_windows(b: Builder) -> Call:
    """stitch and owner on a Windows whose arrays may not describe its documents:
    posembed must refuse it (ValueError) or, when it accepts, agree with the twin."""
    r = b.r
    inner = Call("windows", _fn(posembed, "windows"), _fn(reference, "windows"))
    _windows_args(b, inner, strict=True)
    pos, kw = _build(inner, Context("slow", {}))
    w = posembed.windows(*pos, **kw)
    fields: dict[str, Any] = {
        "tokens": w.tokens,
        "starts": w.starts,
        "lengths": w.lengths,
        "documents": w.documents,
        "doc_offsets": w.doc_offsets,
        "size": w.size,
        "step": w.step,
        "tail": w.tail,
    }
    name = r.pick(["starts", "lengths", "documents", "doc_offsets", "size", "tokens"])
    reshaped = False  # the twin reads a reshaped array differently: no comparison
    old = fields[name]
    if isinstance(old, np.ndarray):
        how = r.int(0, 5)
        if how == 0 and old.size:
            new = old.copy()
            k = r.int(0, old.size - 1)
            value = int(new.flat[k]) + r.pick([-3, -1, 1, 2, 40, 2**62, -(2**63)])
            info = np.iinfo(new.dtype)
            new.flat[k] = min(max(value, info.min), info.max)
        elif 1 <= how <= 4:
            new = _reworked(r, old, how)
        else:
            new = old.reshape(1, -1) if old.ndim == 1 else old.reshape(-1)
            reshaped = True
    else:
        new = r.pick([old + 1, old - 1, 0, -1, "9", None])
    fields[name] = new
    tampered = TamperedWindows(fields)
    if r.chance(2):
        call = Call("Windows.owner", _method("owner"), _method("owner"), twin_errors=False)
        call.add("windows", tampered)
        call.add("rule", Value(r.pick(["first", "center"])))
    else:
        call = Call("stitch", _fn(posembed, "stitch"), _fn(reference, "stitch"), twin_errors=False)
        size = fields["size"] if _is_int(fields["size"]) else 1
        dims = (len(w), max(min(int(size), 12), 0), *b.dims(1, 2))
        call.add("values", b.array(r.pick(FLOAT_DTYPES + INT_DTYPES), dims, "ints", -5, 5, "c"))
        call.add("windows", tampered)
        call.add("reduce", Value(r.pick(["mean", "sum", "max", "first", "center"])), keyword=True)
    huge_values = (
        isinstance(new, np.ndarray) and new.size and np.abs(new.astype(float)).max() > 1000
    )
    if reshaped or huge_values:
        call.slow = None  # the twin loops over every token a document claims
    return b.finish(call)


@target("window_layout")
def _window_layout(b: Builder) -> Call:
    r = b.r
    call = _plain("window_layout")
    n = r.int(0, 40)
    which = r.int(0, 3)
    if which == 0:
        corpus = b.size("offsets_or_token_count", 0, 40, standin=n)
    elif which == 1 and r.chance(4):
        # past 2^62 tokens: refused by name from 2^63 on (the twin gets n
        # tokens, in the same dtype and layout; not a list, whose dtype
        # NumPy would choose by the values)
        big = r.pick([2**62, 2**63 - 1, 2**63, 2**64 - 1])
        dtype = np.uint64 if big > 2**63 - 1 else np.int64
        corpus = b.spec(np.array([0, big], dtype), r.pick([x for x in LAYOUTS if x != "list"]))
        b.huge["offsets_or_token_count"] = ArraySpec(np.array([0, n], dtype), corpus.layout)
    else:
        corpus = _offsets(b, n)
    call.add("offsets_or_token_count", corpus)
    call.add("size", b.size("size", 1, 9, standin=4))
    size = call.args[-1][1]
    top = size.value if isinstance(size, Value) and _is_int(size.value) else 9
    top = min(max(int(top), 1), 9)
    kind = r.int(0, 3)
    if kind == 1 or r.chance(20):
        call.add("step", b.count(1, top), keyword=True)
    if kind == 2 or r.chance(20):
        call.add("overlap", b.count(0, top - 1), keyword=True)
    b.maybe(call, "tail", lambda: b.choice(["pad", "shift", "drop"]))
    return b.finish(call)


@dataclass
class LayoutArg(Arg):
    """A WindowLayout made by posembed.window_layout or its twin from the same
    arguments, or built by hand from ``fields`` (a real one's, one changed)."""

    call: Call
    fields: dict[str, Any] | None = None

    def make(self, ctx: Context) -> Any:
        if self.fields is not None:
            cls = posembed.WindowLayout if ctx.impl == "fast" else reference.WindowLayout
            values = {
                k: v.copy() if isinstance(v, np.ndarray) else v for k, v in self.fields.items()
            }
            return cls(**values)
        inner = Context(ctx.impl, {})
        pos, kw = _build(self.call, inner)
        module = posembed if ctx.impl == "fast" else reference
        return module.window_layout(*pos, **kw)

    def show(self) -> str:
        if self.fields is None:
            return self.call.describe()
        fields = ", ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return _short(f"WindowLayout({fields})")


def _tampered_layout(b: Builder, layout: reference.WindowLayout) -> tuple[dict[str, Any], bool]:
    """A real layout's fields with one changed, and whether the twin can take
    them (values past int64, wrapped by posembed's int64 view, it reads as
    they are)."""
    r = b.r
    fields: dict[str, Any] = {name: getattr(layout, name) for name in LAYOUT_FIELDS}
    fields.update(size=layout.size, step=layout.step, tail=layout.tail)
    name = r.pick(["starts", "lengths", "documents", "doc_offsets", "window_offsets", "size"])
    old = fields[name]
    if not isinstance(old, np.ndarray):
        fields[name] = r.pick([old + 1, old - 1, 0, -1, "9", None, float(old), 2**62])
        return fields, True
    how = r.int(0, 5)
    new = old
    if how == 0 and old.size:
        new = old.copy()
        new.flat[r.int(0, old.size - 1)] += r.pick([-3, -1, 1, 2, 40, 2**62, -(2**62)])
    elif 1 <= how <= 4:
        new = _reworked(r, old, how)
    else:
        new = old.reshape(1, -1)
    fields[name] = new
    wrapped = new.dtype.kind == "u" and bool((old < 0).any())
    return fields, not wrapped and not (new.size and np.abs(new.astype(float)).max() > 1000)


@target("WindowLayout.cut")
def _window_layout_cut(b: Builder) -> Call:
    """cut on a layout from window_layout (now and then one built by hand):
    all its windows, or a range of them from a slice of the corpus's tokens."""
    r = b.r
    inner = Call("window_layout", _fn(posembed, "window_layout"), _fn(reference, "window_layout"))
    n = r.int(0, 40)
    cuts = sorted(r.int(0, n) for _ in range(r.int(0, 4)))
    size = r.int(1, 9)
    inner.add("offsets_or_token_count", Value(np.array([0, *cuts, n]) if cuts else n))
    inner.add("size", Value(size))
    inner.add("step", Value(r.int(1, size)), keyword=True)
    inner.add("tail", Value(r.pick(["pad", "shift", "drop"])), keyword=True)
    pos, kw = _build(inner, Context("slow", {}))
    layout = reference.window_layout(*pos, **kw)
    call = Call("WindowLayout.cut", _method("cut"), _method("cut"))
    if r.chance(6):
        fields, twin_can = _tampered_layout(b, layout)
        call.add("layout", LayoutArg(inner, fields))
        if not twin_can:
            call.slow = None
    else:
        call.add("layout", LayoutArg(inner))
    windows = len(layout)
    a = r.int(0, windows)
    e = r.int(a, windows)
    firsts = layout.doc_offsets[layout.documents] + layout.starts
    lo, hi = 0, n
    if r.chance(2):  # a range of windows from the tokens it covers (and a few more)
        call.add("windows", Value(slice(a, e)), keyword=True)
        if a < e:
            lo = max(0, int(firsts[a]) - r.int(0, 2))
            hi = min(n, int(firsts[e - 1] + layout.lengths[e - 1]) + r.int(0, 2))
        else:
            lo = hi = r.int(0, n)
    elif r.chance(8):
        odd = [slice(a, e, 2), slice(None, None, -1), slice(0, 3, 0), [0, 1], "x", range(2)]
        odd += [slice("a", 2), slice(-2, None), slice(np.int64(1), None), slice(2**70, 3)]
        call.add("windows", Value(r.pick(odd)), keyword=True)
    rng = r.rng()
    if r.chance(8):
        tokens: Arg = b.integers(0, 50, b.dims(2, 5))
    else:
        dtype = r.pick(INT_DTYPES) if not r.chance(10) else r.pick(ALL_DTYPES)
        corpus = _content(rng, (n,), dtype, r.pick(["ints", "ints", "extreme"]), 0, 50)
        tokens = b.spec(corpus[lo:hi].copy())
    call.add("tokens", tokens)
    if lo or r.chance(6):
        start = b.count(lo, lo) if not r.chance(6) else Value(r.pick([lo - 1, lo + 1]))
        call.add("token_start", start, keyword=True)
    b.maybe(call, "pad_value", lambda: b.count(-1, 99), odds=3)
    b.maybe(call, "out", lambda: b.out(["tokens"]), odds=4)
    return b.finish(call)


def _method(name: str) -> Callable[[list[Any], dict[str, Any]], Any]:
    def call(pos: list[Any], kw: dict[str, Any]) -> Any:
        return getattr(pos[0], name)(*pos[1:], **kw)

    return call
