"""The bad-input matrix for windows, stitch, Windows.owner, window_layout and
WindowLayout.cut.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import posembed

from .badinput_harness import (
    ALL_OUT,
    Case,
    Family,
    From,
    function,
    i32,
    method,
    out_cases,
    sentinel,
    sharing,
    table,
    twin_of,
)

WINDOWS = posembed.windows(np.arange(20, dtype=np.int32), 4, step=2)  # 9 windows of 4
LAYOUT = posembed.window_layout(20, 4, step=2)  # WINDOWS' layout: 9 windows of 4


def at(a: np.ndarray, k: int, value: int, dtype: type = np.int64) -> np.ndarray:
    """A copy of ``a`` as ``dtype`` with ``a[k] = value``."""
    copy = a.astype(dtype)
    copy[k] = value
    return copy


def past_2_63(record: posembed.Windows | posembed.WindowLayout) -> list[tuple[object, str]]:
    """Hand-built copies of ``record`` whose sums pass 2^63, each with what
    the refusal says: starts near 2^63, lengths near 2^63, the two together,
    an unsigned start that int64 would wrap, and a document offset on top."""
    p = "windows" if isinstance(record, posembed.Windows) else "layout"
    starts, lengths, documents = record.starts, record.lengths, record.documents
    sums = rf"{p}\.starts \+ {p}\.lengths must fit int64 \(below 2\^63\); window 1 has "
    return [
        (
            dataclasses.replace(record, starts=at(starts, 1, 2**63 - 2)),
            sums + r"start 9223372036854775806 and length 4",
        ),
        (
            dataclasses.replace(record, lengths=at(lengths, 1, 2**63 - 1)),
            sums + r"start 2 and length 9223372036854775807",
        ),
        (
            dataclasses.replace(record, starts=at(starts, 1, 2**62), lengths=at(lengths, 1, 2**62)),
            sums + r"start 4611686018427387904 and length 4611686018427387904",
        ),
        (
            dataclasses.replace(record, starts=at(starts, 1, 2**63, np.uint64)),
            rf"{p}\.starts must stay below 2\^63; got 9223372036854775808 at index 1",
        ),
        (
            dataclasses.replace(
                record,
                doc_offsets=np.array([0, 20, 2**63 - 1]),
                documents=at(documents, 8, 1),
                starts=at(starts, 8, 2**63 - 10),
            ),
            rf"{p}\.doc_offsets\[document\] \+ {p}\.starts \+ {p}\.lengths must fit int64 "
            r"\(below 2\^63\); window 8 of document 1 \(offset 20\) has start "
            r"9223372036854775798 and length 4",
        ),
    ]


CHOICES_ONLY = "its only argument is a choice: any other value, whatever its type, is range"


FAMILY = Family(
    targets={
        "windows": function(
            "windows",
            lambda tmp: {
                "tokens": np.arange(20, dtype=np.int32),
                "size": 4,
                "step": None,
                "overlap": None,
                "tail": "pad",
                "pad_value": 0,
                "offsets": None,
                "out": sentinel((5, 4), np.int32),
            },
        ),
        "stitch": function(
            "stitch",
            lambda tmp: {
                "values": table(9, 4),
                "windows": WINDOWS,
                "reduce": "mean",
                "fill": 0,
            },
        ),
        "Windows.owner": method(
            posembed.Windows, "owner", lambda tmp: {"self": WINDOWS, "rule": "first"}, twin=True
        ),
        "Windows.to_arrow": method(
            posembed.Windows, "to_arrow", lambda tmp: {"self": WINDOWS}, twin=False
        ),
        "window_layout": function(
            "window_layout",
            lambda tmp: {
                "offsets_or_token_count": np.array([0, 7, 20]),
                "size": 4,
                "step": None,
                "overlap": None,
                "tail": "pad",
            },
        ),
        "WindowLayout.cut": method(
            posembed.WindowLayout,
            "cut",
            lambda tmp: {
                "self": LAYOUT,
                "tokens": np.arange(20, dtype=np.int32),
                "windows": None,
                "token_start": 0,
                "pad_value": 0,
                "out": sentinel((9, 4), np.int32),
            },
            twin=True,
        ),
    },
    not_applicable={
        "windows": {
            "shape": "one token array; offsets that do not fit it are range, out= is out_shape",
        },
        "stitch": {**ALL_OUT},
        "Windows.owner": {
            **ALL_OUT,
            "type": CHOICES_ONLY + "; a Windows built with fields of the wrong type is dtype",
            "empty": "a Windows with no windows has an empty owner: valid",
            "nan": "integer fields only",
        },
        "Windows.to_arrow": {
            **ALL_OUT,
            "empty": "a Windows with no windows gives a table of no rows: valid",
            "nan": "integer fields only",
            "range": "the table holds the fields as they are: no field indexes memory",
        },
        "window_layout": {
            **ALL_OUT,
            "shape": "one corpus argument (offsets or a token count); offsets of another rank "
            "are rank",
        },
        "WindowLayout.cut": {},
    },
)

# ---- windows ----------------------------------------------------------------------------
add = FAMILY.cases_for("windows")
add("tokens", "type", [[1], [2, 3]], TypeError, r"tokens must be an array NumPy can read")
add("size", "type", "4", TypeError, r"size must be a positive integer; got str '4'")
add("size", "type", 4.0, TypeError, r"size must be a positive integer; got float 4\.0")
add("size", "type", None, TypeError, r"size must be a positive integer; got NoneType None")
add("step", "type", 2.0, TypeError, r"step must be a positive integer; got float 2\.0")
add("overlap", "type", True, TypeError, r"overlap must be an integer >= 0; got bool True")
add("pad_value", "type", 1.5, TypeError, r"pad_value must be an integer; got 1\.5")
add("pad_value", "type", None, TypeError, r"pad_value must be an integer; got None")
add(
    "offsets", "type", "x", TypeError, r"offsets must be a 1-D integer array; got <U1 of shape \(\)"
)
add("tokens", "dtype", np.arange(20.0), TypeError, r"tokens must be integers; got dtype float64")
add("tokens", "dtype", np.ones(20, bool), TypeError, r"tokens must be integers; got dtype bool")
add("offsets", "dtype", [0.0, 20.0], TypeError, r"offsets must be a 1-D integer array; got float64")
add(
    "tokens",
    "rank",
    np.zeros((4, 5), np.int32),
    ValueError,
    r"tokens must be 1-D; got shape \(4, 5\)",
)
add("tokens", "rank", np.int32(3), ValueError, r"tokens must be 1-D; got shape \(\)")
add(
    "offsets",
    "rank",
    [[0, 20]],
    TypeError,
    r"offsets must be a 1-D integer array; got int64 of shape \(1, 2\)",
)
add(
    "offsets",
    "empty",
    np.zeros(0, np.int64),
    ValueError,
    r"offsets must start at 0 and end at len\(tokens\) = 20; got \[\]\.\.\[\]",
)
add("pad_value", "nan", np.nan, TypeError, r"pad_value must be an integer; got nan")
add("size", "size", 0, ValueError, r"size must be a positive integer; got 0")
add("size", "size", -1, ValueError, r"size must be a positive integer; got -1")
add("size", "size", 2**63, ValueError, r"size is too large: 9223372036854775808 x 4 reaches 2\^62")
add("size", "size", 2**64, ValueError, r"size is too large: 18446744073709551616 x 4")
add("size", "size", 2**62, ValueError, r"size is too large: 4611686018427387904 x 4")
add("step", "size", 0, ValueError, r"step must be a positive integer; got 0")
add("overlap", "size", -1, ValueError, r"overlap must be an integer >= 0; got -1")
add(
    "step",
    "size",
    2**63,
    ValueError,
    r"step must be in 1\.\.4 \(at most size, or tokens are skipped\)",
)
add("overlap", "size", 2**64, ValueError, r"overlap must be in 0\.\.3 \(less than size 4\)")
add("step", "range", 5, ValueError, r"step must be in 1\.\.4 .*; got 5")
add("overlap", "range", 4, ValueError, r"overlap must be in 0\.\.3 \(less than size 4\); got 4")
add("tail", "range", "nope", ValueError, r"tail must be one of 'pad', 'shift', 'drop'; got 'nope'")
add(
    "pad_value",
    "range",
    2**31,
    ValueError,
    r"pad_value 2147483648 does not fit int32 \(-2147483648\.\.2147483647\)",
)
add("pad_value", "range", -(2**31) - 1, ValueError, r"pad_value -2147483649 does not fit int32")
add(
    "pad_value",
    "range",
    -1,
    ValueError,
    r"pad_value -1 does not fit uint16 \(0\.\.65535\)",
    also={"tokens": np.arange(20, dtype=np.uint16), "out": None},
)
add(
    "offsets",
    "range",
    [0, 5, 3, 20],
    ValueError,
    r"offsets must not decrease; offsets\[2\] = 3 < 5",
)
add(
    "offsets",
    "range",
    np.array([0, 2**63, 20], np.uint64),
    ValueError,
    r"offsets must not decrease; offsets\[2\] = 20 < 9223372036854775808",
)
add(
    "offsets",
    "range",
    [0, 21],
    ValueError,
    r"offsets must start at 0 and end at len\(tokens\) = 20; got \[0\]\.\.\[21\]",
)
add("offsets", "range", [1, 20], ValueError, r"offsets must start at 0 and end at len\(tokens\)")
add(
    "overlap",
    "combination",
    2,
    ValueError,
    r"give step or overlap, not both \(overlap = size - step\)",
    also={"step": 2},
)


def arrow(rows: list[list[object] | None], kind: str = "int32") -> From:
    """A pyarrow list column, built when the case runs (pyarrow is an optional extra).
    The twin takes NumPy tokens only: an Arrow column is posembed's input path."""

    def build(args: dict[str, object]) -> object:
        import pyarrow as pa

        return pa.array(rows, type=pa.list_(getattr(pa, kind)()))

    return From(build)


ARROW = {"twin": False, "needs": "pyarrow"}
add(
    "tokens",
    "dtype",
    arrow([[1.0, 2.0], [3.0]], "float64"),
    TypeError,
    r"tokens must be a list column of integers \(token ids\); got Arrow type list<item: double>",
    also={"out": None},
    **ARROW,
)
add(
    "tokens",
    "range",
    arrow([[1, 2], [3], None]),
    ValueError,
    r"tokens must hold a list at every row \(an empty list is an empty document\); row 2 is null",
    also={"out": None},
    **ARROW,
)
add(
    "tokens",
    "range",
    arrow([[1, 2], [3, None]]),
    ValueError,
    r"tokens must hold no null token; row 1 has one at position 1",
    also={"out": None},
    **ARROW,
)
add(
    "offsets",
    "combination",
    [0, 2, 3],
    ValueError,
    r"offsets must not be given with an Arrow list column: its rows are the documents",
    also={"tokens": arrow([[1, 2], [3]]), "out": None},
    **ARROW,
)
out_cases(add, (5, 4), np.int32)
add(
    "out",
    "out_overlap",
    sharing(
        tokens=lambda b: i32(b, 0, (20,)), out=lambda b: b[40:120].view(np.int32).reshape(5, 4)
    ),
    ValueError,
    r"out must not overlap tokens: they share memory",
)

# ---- stitch -----------------------------------------------------------------------------
add = FAMILY.cases_for("stitch")
FILLS = r"fill must be a number that fits "
INTS = {"values": np.ones((9, 4), np.int32), "reduce": "max"}
add("windows", "type", "w", TypeError, r"windows must be a posembed\.Windows; got str")
add(
    "windows",
    "type",
    # a twin's Windows: posembed takes its own only (the twin takes both, by design)
    From(lambda a: twin_of(WINDOWS)),
    TypeError,
    r"windows must be a posembed\.Windows; got Windows",
    twin=False,
)
add("values", "type", [[1.0], [2.0, 3.0]], TypeError, r"values must be an array NumPy can read")
add("fill", "type", "x", TypeError, FILLS + r"float32; got 'x'")
add("fill", "type", None, TypeError, FILLS + r"float32; got None")
add("fill", "type", [1, 2], TypeError, FILLS + r"float32; got \[1, 2\]")
# A Windows built by hand with fields that are wrong: posembed refuses it by name;
# the twin loops over whatever it is given (twin=False)
add(
    "windows",
    "dtype",
    dataclasses.replace(WINDOWS, starts=WINDOWS.starts.astype(float)),
    TypeError,
    r"windows\.starts must be a 1-D integer array; got float64 of shape \(9,\)",
    twin=False,
)
add(
    "values",
    "dtype",
    np.ones((9, 4), np.complex64),
    TypeError,
    r"values must be numbers \(bool, integer or float\); got dtype complex64",
)
add("values", "dtype", np.full((9, 4), "a"), TypeError, r"values must be numbers .*<U1")
add("values", "dtype", np.full((9, 4), None), TypeError, r"values must be numbers .*object")
add(
    "values",
    "rank",
    np.ones(9, np.float32),
    ValueError,
    r"values must have leading shape \(windows, size\) = \(9, 4\); got shape \(9,\)",
)
add(
    "windows",
    "rank",
    dataclasses.replace(WINDOWS, lengths=WINDOWS.lengths[:, None]),
    TypeError,
    r"windows\.lengths must be a 1-D integer array; got int64 of shape \(9, 1\)",
    twin=False,
)
add(
    "values",
    "empty",
    np.ones((0, 4), np.float32),
    ValueError,
    r"values must have leading shape .*\(0, 4\)",
)
add(
    "windows",
    "empty",
    dataclasses.replace(WINDOWS, doc_offsets=np.zeros(0, np.int64)),
    ValueError,
    r"windows\.doc_offsets must start at 0 and never decrease; got \[\]",
    twin=False,
)
add("fill", "nan", np.nan, TypeError, FILLS + r"int32; got nan", also=INTS)
add(
    "windows",
    "size",
    dataclasses.replace(WINDOWS, size=0),
    ValueError,
    r"windows\.size must be a positive integer; got 0",
)
add("fill", "range", 2**64, TypeError, FILLS + r"int32; got 18446744073709551616", also=INTS)
add("fill", "range", 1e300, TypeError, FILLS + r"float32; got 1e\+300")
add(
    "fill",
    "range",
    -1,
    TypeError,
    FILLS + r"uint8; got -1",
    also={"values": np.ones((9, 4), np.uint8), "reduce": "max"},
)
add(
    "reduce",
    "range",
    "nope",
    ValueError,
    r"reduce must be one of 'mean', 'sum', 'max', 'first', 'center'; got 'nope'",
)
add(
    "values",
    "shape",
    np.ones((10, 4)),
    ValueError,
    r"values must have leading shape \(windows, size\) = \(9, 4\); got shape \(10, 4\)",
)
add("values", "shape", np.ones((9, 5)), ValueError, r"values must have leading shape .*\(9, 5\)")
add(
    "windows",
    "shape",
    dataclasses.replace(WINDOWS, tokens=WINDOWS.tokens[:3]),
    ValueError,
    r"windows\.tokens has 3 rows but windows\.starts has 9 entries",
    twin=False,
)
add(
    "windows",
    "shape",
    dataclasses.replace(WINDOWS, starts=WINDOWS.starts + 100),
    ValueError,
    r"windows: window arrays do not describe these documents",
    twin=False,
)
add(
    "windows",
    "shape",
    dataclasses.replace(WINDOWS, doc_offsets=np.array([0, 14, 1])),
    ValueError,
    r"windows\.doc_offsets must start at 0 and never decrease; got \[0, 14, 1\]",
    twin=False,
)
for bad, message in past_2_63(WINDOWS):
    add("windows", "range", bad, ValueError, message, twin=False)

# ---- Windows.owner ----------------------------------------------------------------------
add = FAMILY.cases_for("Windows.owner")
RULES = r"rule must be one of 'first', 'center'; got "
add("rule", "range", "nope", ValueError, RULES + r"'nope'")
add("rule", "range", "mean", ValueError, RULES + r"'mean'")
add("rule", "range", None, ValueError, RULES + r"None")
add("rule", "range", 1, ValueError, RULES + r"1")
# A Windows built by hand (the twin loops over whatever it is given: no twin)
HAND = {"twin": False, "named": "windows"}
add(
    "self",
    "dtype",
    dataclasses.replace(WINDOWS, starts=WINDOWS.starts.astype(float)),
    TypeError,
    r"windows\.starts must be a 1-D integer array; got float64",
    **HAND,
)
add(
    "self",
    "dtype",
    dataclasses.replace(WINDOWS, documents=None),
    TypeError,
    r"windows\.documents must be a 1-D integer array; got object of shape \(\)",
    **HAND,
)
add(
    "self",
    "rank",
    dataclasses.replace(WINDOWS, starts=WINDOWS.starts[:, None]),
    TypeError,
    r"windows\.starts must be a 1-D integer array; got int64 of shape \(9, 1\)",
    **HAND,
)
add(
    "self",
    "size",
    dataclasses.replace(WINDOWS, size=0),
    ValueError,
    r"windows\.size must be a positive integer; got 0",
    **HAND,
)
add(
    "self",
    "size",
    dataclasses.replace(WINDOWS, size=4.0),
    TypeError,
    r"windows\.size must be a positive integer; got float 4\.0",
    **HAND,
)
add(
    "self",
    "range",
    dataclasses.replace(WINDOWS, starts=WINDOWS.starts + 100),
    ValueError,
    r"windows: window arrays do not describe these documents",
    **HAND,
)
add(
    "self",
    "range",
    dataclasses.replace(WINDOWS, doc_offsets=np.array([5, 20])),
    ValueError,
    r"windows\.doc_offsets must start at 0 and never decrease; got \[5, 20\]",
    **HAND,
)
add(
    "self",
    "shape",
    dataclasses.replace(WINDOWS, tokens=WINDOWS.tokens[:0]),
    ValueError,
    r"windows\.tokens has 0 rows but windows\.starts has 9 entries",
    **HAND,
)
add(
    "self",
    "shape",
    dataclasses.replace(WINDOWS, lengths=WINDOWS.lengths[:-1]),
    ValueError,
    r"windows: inconsistent window arrays",
    **HAND,
)
for bad, message in past_2_63(WINDOWS):
    add("self", "range", bad, ValueError, message, **HAND)

# ---- window_layout ----------------------------------------------------------------------
add = FAMILY.cases_for("Windows.to_arrow")
# A Windows built by hand; Arrow out is posembed's (the twin has no to_arrow)
add(
    "self",
    "type",
    dataclasses.replace(WINDOWS, tokens=WINDOWS.tokens.tolist()),
    TypeError,
    r"windows\.tokens must be a 2-D integer ndarray; got list of shape \(9, 4\)",
    **HAND,
)
add(
    "self",
    "dtype",
    dataclasses.replace(WINDOWS, tokens=WINDOWS.tokens.astype(np.float32)),
    TypeError,
    r"windows\.tokens must be a 2-D integer ndarray; got float32 of shape \(9, 4\)",
    **HAND,
)
add(
    "self",
    "rank",
    dataclasses.replace(WINDOWS, tokens=WINDOWS.tokens.reshape(9, 2, 2)),
    TypeError,
    r"windows\.tokens must be a 2-D integer ndarray; got int32 of shape \(9, 2, 2\)",
    **HAND,
)
add(
    "self",
    "size",
    dataclasses.replace(WINDOWS, size=0),
    ValueError,
    r"windows\.size must be a positive integer; got 0",
    **HAND,
)
add(
    "self",
    "shape",
    dataclasses.replace(WINDOWS, tokens=WINDOWS.tokens[:, :3]),
    ValueError,
    r"windows\.tokens must have shape \(windows, size\) = \(9, 4\) .*got tokens of shape "
    r"\(9, 3\)",
    **HAND,
)
add(
    "self",
    "shape",
    dataclasses.replace(WINDOWS, lengths=WINDOWS.lengths[:5]),
    ValueError,
    r"windows\.tokens must have shape .* with one start, length and document per window; "
    r"got .*5 lengths and 9 documents",
    **HAND,
)

add = FAMILY.cases_for("window_layout")
CORPUS = "offsets_or_token_count"
OFFSETS = {"named": "offsets"}  # an array given for the corpus is named as offsets
add(
    CORPUS,
    "type",
    "x",
    TypeError,
    r"offsets must be a 1-D integer array; got <U1 of shape \(\)",
    **OFFSETS,
)
add(CORPUS, "type", True, TypeError, r"offsets_or_token_count must be an integer >= 0; got bool")
add("size", "type", "4", TypeError, r"size must be a positive integer; got str '4'")
add("step", "type", 2.0, TypeError, r"step must be a positive integer; got float 2\.0")
add("overlap", "type", True, TypeError, r"overlap must be an integer >= 0; got bool True")
add(
    CORPUS,
    "dtype",
    [0.0, 20.0],
    TypeError,
    r"offsets must be a 1-D integer array; got float64",
    **OFFSETS,
)
add(
    CORPUS,
    "rank",
    [[0, 20]],
    TypeError,
    r"offsets must be a 1-D integer array; got int64 of shape \(1, 2\)",
    **OFFSETS,
)
add(
    CORPUS,
    "empty",
    np.zeros(0, np.int64),
    ValueError,
    r"offsets must start at 0; got \[\]\.\.\[\]",
    **OFFSETS,
)
add(
    CORPUS,
    "nan",
    np.nan,
    TypeError,
    r"offsets must be a 1-D integer array; got float64 of shape \(\)",
    **OFFSETS,
)
add("size", "size", 0, ValueError, r"size must be a positive integer; got 0")
add("size", "size", 2**62, ValueError, r"size is too large: 4611686018427387904 reaches 2\^62")
add(CORPUS, "size", -1, ValueError, r"offsets_or_token_count must be an integer >= 0; got -1")
add(CORPUS, "size", 2**63, ValueError, r"offsets_or_token_count must stay below 2\^63")
add(
    CORPUS,
    "size",
    2**62,
    ValueError,
    r"offsets_or_token_count \(the corpus's tokens\) is too large: 4611686018427387904 reaches",
)
add(
    CORPUS,
    "type",
    None,
    TypeError,
    r"offsets_or_token_count must be a token count or CSR offsets; got None",
)
add("step", "size", 0, ValueError, r"step must be a positive integer; got 0")
add("step", "range", 5, ValueError, r"step must be in 1\.\.4 .*; got 5")
add("overlap", "range", 4, ValueError, r"overlap must be in 0\.\.3 \(less than size 4\); got 4")
add("tail", "range", "nope", ValueError, r"tail must be one of 'pad', 'shift', 'drop'; got 'nope'")
add(
    CORPUS, "range", [1, 20], ValueError, r"offsets must start at 0; got \[1\]\.\.\[20\]", **OFFSETS
)
add(
    CORPUS,
    "range",
    [0, 5, 3, 20],
    ValueError,
    r"offsets must not decrease; offsets\[2\] = 3 < 5",
    **OFFSETS,
)
add(
    CORPUS,
    "range",
    np.array([0, 2**63 + 1], np.uint64),
    ValueError,
    r"offsets must stay below 2\^63",
    **OFFSETS,
)
add(
    "overlap",
    "combination",
    2,
    ValueError,
    r"give step or overlap, not both \(overlap = size - step\)",
    also={"step": 2},
)

# ---- WindowLayout.cut -------------------------------------------------------------------
add = FAMILY.cases_for("WindowLayout.cut")
HAND = {"named": "layout"}  # a WindowLayout built by hand: its fields are named layout.<field>
COVER = r"tokens must hold the corpus's tokens 0\.\.19 that these windows cover; they hold "
add("tokens", "type", [[1], [2, 3]], TypeError, r"tokens must be an array NumPy can read")
add(
    "windows",
    "type",
    [0, 3],
    TypeError,
    r"windows must be a slice of window indices, such as slice\(a, b\); got list \[0, 3\]",
)
add("windows", "type", slice("a", 3), TypeError, r"windows must be a slice of integers")
add(
    "windows",
    "range",
    slice(0, 5, 0),
    ValueError,
    r"windows must be a slice with step 1 \(a range of windows\); got slice\(0, 5, 0\)",
)
add("token_start", "type", 1.0, TypeError, r"token_start must be an integer >= 0; got float 1\.0")
add("pad_value", "type", None, TypeError, r"pad_value must be an integer; got None")
add("tokens", "dtype", np.arange(20.0), TypeError, r"tokens must be integers; got dtype float64")
add(
    "self",
    "dtype",
    dataclasses.replace(LAYOUT, starts=LAYOUT.starts.astype(float)),
    TypeError,
    r"layout\.starts must be a 1-D integer array; got float64 of shape \(9,\)",
    **HAND,
)
add(
    "tokens",
    "rank",
    np.zeros((4, 5), np.int32),
    ValueError,
    r"tokens must be 1-D; got shape \(4, 5\)",
)
add(
    "self",
    "rank",
    dataclasses.replace(LAYOUT, lengths=LAYOUT.lengths[:, None]),
    TypeError,
    r"layout\.lengths must be a 1-D integer array; got int64 of shape \(9, 1\)",
    **HAND,
)
add("tokens", "empty", np.zeros(0, np.int32), ValueError, COVER + "none")
add("pad_value", "nan", np.nan, TypeError, r"pad_value must be an integer; got nan")
add("token_start", "size", -1, ValueError, r"token_start must be an integer >= 0; got -1")
add(
    "token_start",
    "size",
    2**64,
    ValueError,
    r"token_start is too large: 18446744073709551616 reaches 2\^62",
)
add(
    "self",
    "size",
    dataclasses.replace(LAYOUT, size=0),
    ValueError,
    r"layout\.size must be a positive integer; got 0",
    **HAND,
)
add(
    "pad_value",
    "range",
    2**31,
    ValueError,
    r"pad_value 2147483648 does not fit int32 \(-2147483648\.\.2147483647\)",
)
add(
    "windows",
    "range",
    slice(0, 9, 2),
    ValueError,
    r"windows must be a slice with step 1 \(a range of windows\); got slice\(0, 9, 2\)",
)
add("token_start", "range", 1, ValueError, COVER + r"1\.\.20 \(token_start=1, 20 tokens\)")
add(
    "self",
    "range",
    dataclasses.replace(LAYOUT, lengths=np.where(np.arange(9) == 3, 5, LAYOUT.lengths)),
    ValueError,
    r"layout: window 3 \(document 0, start 6, length 5\) does not lie inside its document",
    **HAND,
)
add("tokens", "shape", np.arange(10, dtype=np.int32), ValueError, COVER + r"0\.\.9")
add(
    "self",
    "shape",
    dataclasses.replace(LAYOUT, starts=LAYOUT.starts[:8]),
    ValueError,
    r"layout\.starts, \.lengths and \.documents must have one entry per window; got 8, 9 and 9",
    **HAND,
)
for bad, message in past_2_63(LAYOUT):
    add("self", "range", bad, ValueError, message, **HAND)
out_cases(add, (9, 4), np.int32)
add(
    "out",
    "out_overlap",
    sharing(
        tokens=lambda b: i32(b, 0, (20,)), out=lambda b: b[40:184].view(np.int32).reshape(9, 4)
    ),
    ValueError,
    r"out must not overlap tokens: they share memory",
)

del add

# == the tests ==========================================================================

pytestmark = pytest.mark.usefixtures("restore_threads")


@pytest.mark.parametrize("case", FAMILY.cases, ids=FAMILY.case_id)
def test_bad_input_is_refused_and_nothing_is_modified(case: Case, tmp_path: Path):
    FAMILY.check_refused(case, tmp_path)


@pytest.mark.parametrize("case", FAMILY.twin_cases(), ids=FAMILY.case_id)
def test_the_twin_raises_the_same_exception_type(case: Case, tmp_path: Path):
    FAMILY.check_twin(case, tmp_path)


@pytest.mark.parametrize("name", list(FAMILY.targets))
def test_valid_arguments_succeed_and_modify_no_input(name: str, tmp_path: Path):
    FAMILY.check_valid(name, tmp_path)
