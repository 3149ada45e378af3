"""The calls mode's argument builders: :class:`Builder` draws the arguments of
one call from the input's bytes, and each ``@target`` function builds the
call of one public function (those of the window functions are in
:mod:`.calls_windows`). Sizes are small (arrays of a few KB) or reach 2**62,
nothing in between; a size of 2**62 or more is recorded with a small
stand-in for the twin (see :mod:`.calls`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import posembed
from posembed import reference

from .calls_compare import (
    _compare_embedding,
    _compare_embedding_shape,
    _compare_fresh_draws,
    _compare_similarity,
)
from .calls_values import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    LAYOUTS,
    NOT_INTS,
    ODD_CHOICES,
    ODD_INTS,
    ODD_RATES,
    ODD_SEEDS,
    ODD_SIZES,
    OUT_VARIANTS,
    TABLE_FLOATS,
    ArraySpec,
    GeneratorArg,
    OutSpec,
    _cast,
    _content,
    _layout_fits,
    ml_dtypes,
)
from .common import INF, NAN, Arg, Call, Reader, Value, _is_huge, _is_int


class Builder:
    """Draws the arguments of one call from the fuzz bytes."""

    def __init__(self, r: Reader) -> None:
        self.r = r
        self.huge: dict[str, Arg] = {}

    # arrays

    def array(
        self,
        dtype: np.dtype[Any],
        shape: tuple[int, ...],
        mode: str,
        lo: int = 0,
        hi: int = 9,
        layout: str | None = None,
    ) -> ArraySpec:
        return self.spec(_content(self.r.rng(), shape, dtype, mode, lo, hi), layout)

    def spec(self, base: np.ndarray, layout: str | None = None) -> ArraySpec:
        """base in a layout drawn from LAYOUTS (or the given one), where it fits."""
        if layout is None:
            layout = self.r.pick(LAYOUTS)
        if not _layout_fits(base, layout):
            layout = "c"
        if layout == "broadcast":  # the content a zero stride can show
            base = np.broadcast_to(base[:1], base.shape).copy()
        return ArraySpec(base, layout)

    def dims(self, max_ndim: int, max_dim: int) -> tuple[int, ...]:
        return tuple(self.r.int(0, max_dim) for _ in range(self.r.int(0, max_ndim)))

    def table(self, floats: bool = True) -> ArraySpec:
        """A (rows, cols) table: float (or any dtype), sometimes of another rank."""
        r = self.r
        wild = r.chance(6)
        dtype = r.pick(ALL_DTYPES if wild or not floats else FLOAT_DTYPES)
        big = r.chance(6)  # enough bytes for the parallel paths under tiny thresholds
        shape = (r.int(0, 80 if big else 12), r.int(0, 24 if big else 6))
        if r.chance(10):
            shape = self.dims(3, 5)
        mode = r.pick(["normal", "normal", "normal", "special", "bits", "ints"])
        return self.array(dtype, shape, mode, -3, 9)

    def integers(self, lo: int, hi: int, shape: tuple[int, ...] | None = None) -> ArraySpec:
        """Integer-valued positions, ids or tokens, mostly in lo..hi."""
        r = self.r
        dtype = r.pick(INT_DTYPES) if not r.chance(8) else r.pick(ALL_DTYPES)
        if shape is None:
            shape = self.dims(3, 5)
        mode = r.pick(["ints"] * 4 + ["near", "extreme", "bits"])
        if mode == "near":
            mode, lo, hi = "ints", lo - 2, hi + 2
        return self.array(dtype, shape, mode, lo, hi)

    def out(self, overlaps: list[str]) -> OutSpec:
        variant = self.r.pick(OUT_VARIANTS)
        return OutSpec(variant, self.r.pick(overlaps) if variant == "overlap" else None)

    # parameters

    def count(self, lo: int, hi: int) -> Arg:
        """An integer parameter (not a size): small, or odd, or not an integer."""
        r = self.r
        if r.chance(5):
            return Value(r.pick(ODD_INTS + NOT_INTS))
        return Value(r.int(lo, hi))

    def size(self, label: str, lo: int, hi: int, standin: Any) -> Arg:
        """A size parameter; one reaching 2^62 is recorded with a small stand-in."""
        r = self.r
        if r.chance(6):
            value = r.pick(ODD_SIZES + NOT_INTS)
            if _is_huge(value):
                self.huge[label] = Value(standin)
            return Value(value)
        return Value(r.int(lo, hi))

    def choice(self, options: list[str]) -> Arg:
        return Value(self.r.pick(ODD_CHOICES) if self.r.chance(8) else self.r.pick(options))

    def rate(self) -> Arg:
        r = self.r
        if r.chance(6):
            return Value(r.pick(ODD_RATES))
        return Value(r.pick([0.0, 0.1, 0.5, 0.9, 0.0, 0.25]))

    def seed(self, none: bool = True) -> Arg:
        r = self.r
        if r.chance(6):
            return Value(r.pick(ODD_SEEDS))
        if none and r.chance(3):
            return Value(None)
        return Value(r.int(0, 2**64 - 1) if r.chance(4) else r.int(0, 99))

    def maybe(self, call: Call, label: str, arg: Callable[[], Arg], odds: int = 2) -> None:
        """Pass a keyword with probability 1/odds (else leave the default)."""
        if self.r.chance(odds):
            call.add(label, arg(), keyword=True)

    def finish(self, call: Call) -> Call:
        """Rarely, a keyword the function does not take (both must refuse it)."""
        if self.r.chance(40):
            call.add("bogus", Value(1), keyword=True)
        call.huge = self.huge
        return call


def _rows(spec: ArraySpec) -> int:
    return spec.shape[0] if spec.base.ndim >= 1 else 1


def _cols(spec: ArraySpec) -> int:
    return spec.shape[1] if spec.base.ndim >= 2 else 1


def _fn(module: Any, name: str) -> Callable[[list[Any], dict[str, Any]], Any]:
    """module.name(*pos, **kw), looked up at call time (so tests can patch it)."""

    def call(pos: list[Any], kw: dict[str, Any]) -> Any:
        return getattr(module, name)(*pos, **kw)

    return call


TARGETS: dict[str, Callable[[Builder], Call]] = {}


def target(name: str) -> Callable[[Callable[[Builder], Call]], Callable[[Builder], Call]]:
    def register(fn: Callable[[Builder], Call]) -> Callable[[Builder], Call]:
        TARGETS[name] = fn
        return fn

    return register


def _plain(name: str) -> Call:
    return Call(name, _fn(posembed, name), _fn(reference, name))


@target("gather")
def _gather(b: Builder) -> Call:
    call = _plain("gather")
    table = b.table(floats=not b.r.chance(2))
    call.add("table", table)
    call.add("positions", b.integers(0, _rows(table) - 1))
    b.maybe(call, "mode", lambda: b.choice(["raise", "clip", "wrap"]))
    b.maybe(call, "out", lambda: b.out(["table", "positions"]), odds=4)
    return b.finish(call)


@target("gather_backward")
def _gather_backward(b: Builder) -> Call:
    call = _plain("gather_backward")
    r = b.r
    length = r.int(0, 12)
    positions = b.integers(0, length - 1)
    d = r.int(0, 6)
    shape = (*positions.shape, d)
    if r.chance(8):
        shape = b.dims(3, 4)
    wild = r.chance(8)
    mode = r.pick(["normal", "normal", "special", "bits"])
    grad = b.array(r.pick(ALL_DTYPES if wild else FLOAT_DTYPES), shape, mode)
    call.add("grad", grad)
    call.add("positions", positions)
    call.add("length", b.size("length", length, length, standin=length))
    b.maybe(call, "out", lambda: b.out(["grad", "positions"]), odds=4)
    return b.finish(call)


@target("interpolate")
def _interpolate(b: Builder) -> Call:
    call = _plain("interpolate")
    call.add("table", b.table())
    call.add("length", b.size("length", 0, 40, standin=3))
    b.maybe(call, "align", lambda: b.choice(["scale", "half_pixel", "corners"]))
    b.maybe(call, "antialias", lambda: _antialias(b), odds=3)
    b.maybe(call, "out", lambda: b.out(["table"]), odds=4)
    return b.finish(call)


def _antialias(b: Builder) -> Arg:
    """antialias=: mostly True (the default is False), sometimes not a bool."""
    return Value(b.r.pick([True, True, True, False, np.bool_(True), 1, None, "yes"]))


@target("lerp")
def _lerp(b: Builder) -> Call:
    call = _plain("lerp")
    r = b.r
    table = b.table()
    top = _rows(table) - 1
    shape = b.dims(3, 5)
    if r.chance(4):
        positions = b.integers(0, top, shape)
    else:
        dtype = r.pick(FLOAT_DTYPES) if not r.chance(8) else r.pick(ALL_DTYPES)
        rng = r.rng()
        values = rng.uniform(-0.5 if r.chance(4) else 0.0, max(top, 0) + 0.5 * r.chance(4), shape)
        if r.chance(4) and values.size:
            values.flat[int(rng.integers(0, values.size))] = r.pick([NAN, INF, -INF, -0.0, 1e300])
        positions = b.spec(_cast(values, dtype) if not dtype.hasobject else values.astype(object))
    call.add("table", table)
    call.add("positions", positions)
    b.maybe(call, "out", lambda: b.out(["table", "positions"]), odds=4)
    return b.finish(call)


def _random_argument(b: Builder) -> Arg:
    """A seed argument for a numpy.random.default_rng: an int, a Generator, None, odd."""
    r = b.r
    if r.chance(4):
        return GeneratorArg(r.int(0, 99))
    return b.seed()


@target("extend")
def _extend(b: Builder) -> Call:
    r = b.r
    table = b.table()
    rows = _rows(table)
    init = b.choice(["interpolate", "tile", "edge", "random", "zeros"])
    call = _plain("extend")
    call.add("table", table)
    call.add("length", b.size("length", max(rows - 1, 0), rows + 20, standin=max(rows, 1)))
    if not r.chance(4):
        call.add("init", init, keyword=True)
    is_random = isinstance(init, Value) and init.value == "random"
    if is_random or r.chance(8):
        b.maybe(call, "std", lambda: Value(r.pick([0.0, 0.5, 2, np.float32(1), *ODD_RATES])))
        b.maybe(call, "seed", lambda: _random_argument(b), odds=1 if r.chance(2) else 3)
    if not is_random or r.chance(8):
        b.maybe(call, "align", lambda: b.choice(["scale", "half_pixel", "corners"]), odds=3)
    labels = {label: arg for label, arg, _ in call.args}
    seed = labels.get("seed")
    if is_random and (seed is None or (isinstance(seed, Value) and seed.value is None)):
        call.compare = _compare_fresh_draws(rows)  # a fresh seed: only the kept rows compare
    return b.finish(call)


@target("resample_grid")
def _resample_grid(b: Builder) -> Call:
    r = b.r
    h, w, prefix = r.int(1, 4), r.int(1, 4), r.int(0, 2)
    rows = prefix + h * w if not r.chance(8) else r.int(0, 20)
    dtype = r.pick(FLOAT_DTYPES) if not r.chance(8) else r.pick(ALL_DTYPES)
    mode = r.pick(["normal", "normal", "special", "bits"])
    table = b.array(dtype, (rows, r.int(0, 5)) if not r.chance(10) else b.dims(3, 4), mode)

    def grid(label: str, hh: int, ww: int) -> Arg:
        if r.chance(8):
            odd: list[Any] = [(hh,), (hh, ww, 1), [hh, ww], np.array([hh, ww]), 3, None, "ab"]
            odd += [(hh, float(ww)), (hh, -ww), (0, ww), (np.int64(hh), np.uint8(ww))]
            return Value(r.pick(odd))
        if label == "new_grid" and r.chance(10):
            big = (r.pick(ODD_SIZES), ww) if r.chance(2) else (hh, r.pick(ODD_SIZES))
            if any(_is_huge(x) for x in big):
                b.huge[label] = Value((2, 2))
            return Value(big)
        return Value((hh, ww))

    call = _plain("resample_grid")
    call.add("table", table)
    call.add("grid", grid("grid", h, w))
    call.add("new_grid", grid("new_grid", r.int(1, 6), r.int(1, 6)))
    b.maybe(call, "prefix", lambda: b.count(prefix, prefix))
    b.maybe(call, "method", lambda: b.choice(["bicubic", "bilinear"]))
    b.maybe(call, "align", lambda: b.choice(["half_pixel", "corners"]))
    b.maybe(call, "antialias", lambda: _antialias(b), odds=3)
    return b.finish(call)


@target("embed")
def _embed(b: Builder) -> Call:
    r = b.r
    call = _plain("embed")
    vocab, d = r.int(0, 12), r.int(0, 6)
    dtype = r.pick(TABLE_FLOATS) if not r.chance(6) else r.pick(ALL_DTYPES)
    mode = r.pick(["normal", "normal", "special", "bits"])
    call.add("token_table", b.array(dtype, (vocab, d) if not r.chance(12) else b.dims(3, 4), mode))
    batch, length = r.int(0, 4), r.int(0, 8)
    ids_shape: tuple[int, ...] = (batch, length) if r.chance(2) else (length,)
    call.add("token_ids", b.integers(0, vocab - 1, b.dims(3, 4) if r.chance(10) else ids_shape))
    rows = length + r.int(0, 4)
    pos_dtype = dtype if not r.chance(8) else r.pick(ALL_DTYPES)
    call.add("pos_table", b.array(pos_dtype, (rows, d if not r.chance(10) else r.int(0, 6)), mode))
    if r.chance(3):
        shape = r.pick([(length,), (1, length), ()]) if not r.chance(3) else b.dims(2, 4)
        call.add("positions", b.integers(0, rows - 1, shape), keyword=True)
        if r.chance(6):
            call.add("offset", b.count(0, 2), keyword=True)
    else:
        b.maybe(call, "offset", lambda: b.count(0, max(rows - length + 1, 0)))
    b.maybe(call, "dropout", b.rate)
    b.maybe(call, "seed", b.seed)
    b.maybe(call, "out", lambda: b.out(["token_table", "pos_table", "token_ids"]), odds=4)
    b.maybe(call, "first_row", lambda: _first_row(b, d), odds=3)
    call.seed_label = "seed"
    return b.finish(call)


def _first_row(b: Builder, d: int) -> Arg:
    """embed's first_row: small, far into the mask's counter, either side of the
    last row of d values below 2^62, or odd. No size: nothing is allocated for
    it, so the twin takes every value itself."""
    r = b.r
    last = 2**62 // max(d, 1)
    if r.chance(3):
        return Value(r.pick([2**40 + r.int(0, 9), last, last + 1, last - r.int(1, 9)]))
    return b.count(0, 20)


@target("dropout_mask")
def _dropout_mask(b: Builder) -> Call:
    r = b.r
    entries: list[Any] = []
    for _ in range(r.int(0, 3)):
        entries.append(r.pick(ODD_SIZES + NOT_INTS) if r.chance(8) else r.int(0, 9))
    kind = r.int(0, 5)  # an int, a list, an array or (mostly) a tuple
    passed = entries[:1] if kind == 0 and entries else entries  # the sizes the call gets
    small = [type(x)(1) if _is_huge(x) else x for x in passed]  # each size >= 2^62 made 1
    shape: Any = tuple(entries)
    stand_in: Any = tuple(small)
    if kind == 0 and entries:
        shape, stand_in = entries[0], small[0]
    elif kind == 1:
        shape, stand_in = list(entries), small
    elif kind == 2 and all(_is_int(x) and -(2**63) <= int(x) < 2**63 for x in entries):
        shape, stand_in = np.array(entries, dtype=np.int64), np.array(small, dtype=np.int64)
    huge = any(_is_huge(x) for x in passed)
    if r.chance(12):
        shape, huge = r.pick(["3", None, 2.0, {1: 2}, b"ab"]), False
    call = _plain("dropout_mask")
    call.add("shape", Value(shape))
    call.add("p", b.rate())
    call.add("seed", b.seed(none=False))
    if huge:
        # the stand-in has the form of the shape passed (int, list, array or tuple)
        b.huge["shape"] = Value(stand_in)
    return b.finish(call)


@target("similarity")
def _similarity(b: Builder) -> Call:
    call = _plain("similarity")
    table = b.table()
    call.add("table", table)
    call.compare = _compare_similarity(_cols(table))
    return b.finish(call)


# ------------------------------------------------ LearnedPositionEmbedding


def _embedding_call(name: str, method: str | None) -> Call:
    """from_table(table, copy=, dropout=) then the method: pos[0] is the table,
    the "from_table.*" keywords go to from_table, the rest to the method."""

    def run(cls: Any) -> Callable[[list[Any], dict[str, Any]], Any]:
        def call(pos: list[Any], kw: dict[str, Any]) -> Any:
            kw = dict(kw)
            copy, rate = kw.pop("from_table.copy"), kw.pop("from_table.dropout")
            emb = cls().from_table(pos[0], copy=copy, dropout=rate)
            return emb if method is None else getattr(emb, method)(*pos[1:], **kw)

        return call

    return Call(
        name,
        run(lambda: posembed.LearnedPositionEmbedding),
        run(lambda: reference.LearnedPositionEmbedding),
    )


@target("LearnedPositionEmbedding")
def _embedding(b: Builder) -> Call:
    r = b.r

    def make(cls: Any) -> Callable[[list[Any], dict[str, Any]], Any]:
        return lambda pos, kw: cls()(*pos, **kw)

    call = Call(
        "LearnedPositionEmbedding",
        make(lambda: posembed.LearnedPositionEmbedding),
        make(lambda: reference.LearnedPositionEmbedding),
    )
    call.add("max_seq_len", b.size("max_seq_len", 0, 24, standin=2))
    call.add("embed_dim", b.size("embed_dim", 0, 8, standin=2))
    odd_std = [-0.1, NAN, INF, 1e308, 1e38, 7e4, "xavier", [0.1], True, np.float16(0.1), None]
    b.maybe(call, "init_std", lambda: Value(r.pick([0.02, "scaled", 1, 0.0, *odd_std])))
    seed = _random_argument(b) if r.chance(2) else Value(r.int(0, 99))
    call.add("seed", seed, keyword=True)
    dtypes: list[Any] = [np.float16, np.float32, np.float64, "float32", ">f8", "bfloat16"]
    dtypes += [np.int32, "nonsense", None, np.complex64, object, "f2"]
    if ml_dtypes is not None:
        dtypes.append(ml_dtypes.bfloat16)
    b.maybe(call, "dtype", lambda: Value(r.pick(dtypes)))
    b.maybe(call, "dropout", b.rate)
    if isinstance(seed, Value) and seed.value is None:
        # fresh draws on each side: whether init_std overflows the dtype is chance
        call.compare = _compare_embedding_shape
        call.twin_errors = False
    else:
        call.compare = _compare_embedding
    return b.finish(call)


@target("LearnedPositionEmbedding methods")
def _embedding_methods(b: Builder) -> Call:
    r = b.r
    method = r.pick([None, "__call__", "interpolate", "extend", "embed", "windows"])
    name = "LearnedPositionEmbedding.from_table" + (f"(...).{method}" if method else "")
    call = _embedding_call(name, method)
    table = b.table()
    rows = _rows(table)
    call.add("table", table)
    call.add("from_table.copy", Value(r.pick([True, False])), keyword=True)
    call.add("from_table.dropout", b.rate(), keyword=True)
    if method == "__call__":
        call.add("positions", b.integers(0, rows - 1))
        b.maybe(call, "mode", lambda: b.choice(["raise", "clip", "wrap"]))
        b.maybe(call, "out", lambda: b.out(["positions"]), odds=4)
    elif method == "interpolate":
        call.add("length", b.size("length", 0, 30, standin=3))
        b.maybe(call, "align", lambda: b.choice(["scale", "half_pixel", "corners"]))
    elif method == "extend":
        call.add("length", b.size("length", max(rows - 1, 0), rows + 10, standin=max(rows, 1)))
        init = b.choice(["interpolate", "tile", "edge", "zeros", "random"])
        call.add("init", init, keyword=True)
        if isinstance(init, Value) and init.value == "random":
            call.add("seed", Value(r.int(0, 99)), keyword=True)
            b.maybe(call, "std", lambda: Value(r.pick([0.0, 0.5, -1.0, NAN])))
    elif method == "embed":
        vocab, d = r.int(0, 10), _cols(table)
        dtype = table.dtype if not r.chance(6) else r.pick(FLOAT_DTYPES)
        call.add("token_table", b.array(dtype, (vocab, d), "normal"))
        length = r.int(0, rows + 1)
        ids_shape = (length,) if r.chance(2) else (r.int(0, 3), length)
        call.add("token_ids", b.integers(0, vocab - 1, ids_shape))
        b.maybe(call, "training", lambda: Value(r.pick([True, False, 1, None, np.bool_(True)])))
        b.maybe(call, "seed", b.seed)
        b.maybe(call, "offset", lambda: b.count(0, 3))
        call.seed_label = "seed"
    elif method == "windows":
        call.add("tokens", b.integers(0, 50, (r.int(0, 30),)))
        b.maybe(call, "step", lambda: b.count(1, max(rows, 1)))
        b.maybe(call, "tail", lambda: b.choice(["pad", "shift", "drop"]))
        b.maybe(call, "out", lambda: b.out(["tokens"]), odds=6)
    return b.finish(call)


@target("set_num_threads")
def _set_num_threads(b: Builder) -> Call:
    """Odd thread counts: an allowed error or a setting that kernels then run with."""

    def fast(pos: list[Any], kw: dict[str, Any]) -> Any:
        before = posembed.get_num_threads() if posembed.config()["num_threads_set"] else None
        try:
            posembed.set_num_threads(*pos)
            table = np.arange(12.0).reshape(6, 2)
            return posembed.gather(table, [5, 0, 3])
        finally:
            posembed.set_num_threads(before)

    call = Call("set_num_threads", fast, None)
    values: list[Any] = [None, 1, 2, 3, 0, -1, 2**31, 2**63, 2**64, 1.5, "2", True, np.int64(2)]
    call.add("n", Value(b.r.pick(values)))
    return call
