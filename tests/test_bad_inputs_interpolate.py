"""The bad-input matrix for interpolate, lerp, extend and similarity.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .badinput_harness import (
    ALL_OUT,
    RAGGED,
    RANDOM,
    SEED_IS,
    Case,
    Family,
    check_two_errors,
    f32,
    function,
    out_cases,
    sentinel,
    sharing,
    small_table,
    table,
)

FAMILY = Family(
    targets={
        "interpolate": function(
            "interpolate",
            lambda tmp: {
                "table": table(10, 4),
                "length": 15,
                "align": "scale",
                "antialias": False,
                "out": sentinel((15, 4)),
            },
        ),
        "lerp": function(
            "lerp",
            lambda tmp: {
                "table": table(10, 4),
                "positions": np.array([[0.5, 2.0, 8.75]]),
                "out": sentinel((1, 3, 4)),
            },
        ),
        "extend": function(
            "extend",
            lambda tmp: {
                "table": table(10, 4),
                "length": 16,
                "init": "interpolate",
                "std": None,
                "seed": None,
                "align": None,
            },
        ),
        "similarity": function("similarity", lambda tmp: {"table": table(10, 4)}),
    },
    not_applicable={
        "interpolate": {
            "nan": "NaN and inf in the table are values to blend (a row that copies one "
            "copies it exactly, as documented)",
            "shape": "one array in; out= can mismatch (out_shape)",
        },
        "lerp": {
            "size": "no size argument: the result's shape is positions' shape plus d",
            "shape": "table and positions combine freely; only out= can mismatch (out_shape)",
        },
        "extend": {**ALL_OUT, "shape": "one array in"},
        "similarity": {
            **ALL_OUT,
            "empty": "a table of no rows has an empty (0, 0) similarity: valid",
            "nan": "NaN and inf rows give NaN similarities, as the arithmetic says",
            "size": "no size argument",
            "range": "no argument with a range",
            "shape": "one array in",
        },
    },
)

# ---- interpolate ------------------------------------------------------------------------
add = FAMILY.cases_for("interpolate")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add("length", "type", "15", TypeError, r"length must be a positive integer; got str '15'")
add("length", "type", 15.0, TypeError, r"length must be a positive integer; got float 15\.0")
add("length", "type", None, TypeError, r"length must be a positive integer; got NoneType None")
add("length", "type", True, TypeError, r"length must be a positive integer; got bool True")
add(
    "table",
    "dtype",
    np.ones((10, 4), np.int32),
    TypeError,
    r"table must have a float dtype \(float16, bfloat16, float32, float64\); got dtype int32",
)
add("table", "dtype", np.ones((10, 4), np.complex64), TypeError, r"table must have a float dtype")
add("table", "rank", table(10, 4)[0], ValueError, r"table must be a 2-D array of shape \(L, d\)")
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    ValueError,
    r"table must have at least one row; got shape \(0, d\)",
)
add("length", "size", 0, ValueError, r"length must be a positive integer; got 0")
add("length", "size", -1, ValueError, r"length must be a positive integer; got -1")
add(
    "length",
    "size",
    2**63,
    ValueError,
    r"length is too large: 4 x 9223372036854775808 x 10 reaches 2\^62",
)
add("length", "size", 2**64, ValueError, r"length is too large: 4 x 18446744073709551616 x 10")
add(
    "align",
    "range",
    "nope",
    ValueError,
    r"align must be one of 'scale', 'half_pixel', 'corners'; got 'nope'",
)
add("align", "range", None, ValueError, r"align must be one of .*; got None")
out_cases(add, (15, 4), np.float32)


add(
    "out",
    "out_overlap",
    sharing(
        table=lambda b: f32(b, 0, (10, 4)),
        out=lambda b: b[80:320].view(np.float32).reshape(15, 4),
    ),
    ValueError,
    r"out must not overlap table: they share memory",
)
add(
    "out",
    "out_overlap",
    # a Fortran-ordered table is copied before the kernel reads it: the caller's
    # table is checked too (it was not, and out= overwrote it)
    sharing(
        table=lambda b: f32(b, 0, (4, 10)).T,
        out=lambda b: b[80:320].view(np.float32).reshape(15, 4),
    ),
    ValueError,
    r"out must not overlap table: they share memory",
)
add("antialias", "type", None, TypeError, r"antialias must be True or False; got None")
add(
    "antialias",
    "combination",
    True,
    ValueError,
    r"antialias=True needs align='half_pixel' .*; got align='scale'",
)

# ---- lerp -------------------------------------------------------------------------------
add = FAMILY.cases_for("lerp")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add("positions", "type", "1", TypeError, r"positions must be real numbers; got dtype <U1")
add("positions", "type", None, TypeError, r"positions must be real numbers; got dtype object")
add("positions", "type", [[0.5, "x"]], TypeError, r"positions must be real numbers")
add("table", "dtype", np.ones((10, 4), np.int64), TypeError, r"table must have a float dtype")
add(
    "positions",
    "dtype",
    np.array([True]),
    TypeError,
    r"positions must be real numbers; got dtype bool",
)
add(
    "positions",
    "dtype",
    np.array([1j]),
    TypeError,
    r"positions must be real numbers; got dtype complex",
)
add("table", "rank", np.ones(4, np.float32), ValueError, r"table must be a 2-D array")
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    ValueError,
    r"position 0\.5 at positions\[0, 0\] cannot be looked up: the table has no rows",
)
for value in (np.nan, np.inf, -np.inf):
    add(
        "positions",
        "nan",
        np.array([[0.5, value, 1.0]]),
        ValueError,
        rf"position {value} at positions\[0, 1\] is not a finite number in \[0, 9\] "
        r"\(the table has 10 rows\)",
    )
add("positions", "range", np.array([[0.5, -0.5, 1.0]]), ValueError, r"position -0\.5 at positions")
add(
    "positions",
    "range",
    np.array([[0.5, 9.5, 1.0]]),
    ValueError,
    r"position 9\.5 at positions\[0, 1",
)
# a Python int past 64 bits: a real number, out of range
add(
    "positions",
    "range",
    [[0.5, 2**64, 1.0]],
    ValueError,
    r"position 1\.8446744073709552e\+19 at positions\[0, 1\] is not a finite number",
)
add("positions", "range", [[0.5, 10**400, 1.0]], ValueError, r"position inf at positions\[0, 1\]")
add(
    "positions",
    "range",
    np.array([[2**64 - 1]], np.uint64),
    ValueError,
    r"position 1\.8446744073709552e\+19 at positions\[0, 0\]",
    also={"out": None},
)
out_cases(add, (1, 3, 4), np.float32)
add(
    "out",
    "out_overlap",
    sharing(
        table=lambda b: f32(b, 0, (10, 4)),
        out=lambda b: b[140:188].view(np.float32).reshape(1, 3, 4),
    ),
    ValueError,
    r"out must not overlap table: they share memory",
)
add(
    "out",
    "out_overlap",
    # a table in another byte order is converted: the caller's table is checked too
    sharing(
        table=lambda b: f32(b, 0, (10, 4)).view(">f4"),
        out=lambda b: b[140:188].view(np.float32).reshape(1, 3, 4),
    ),
    ValueError,
    r"out must not overlap table: they share memory",
)
add(
    "out",
    "out_overlap",
    sharing(
        positions=lambda b: f32(b, 0, (1, 3)),
        out=lambda b: b[:48].view(np.float32).reshape(1, 3, 4),
    ),
    ValueError,
    r"out must not overlap positions: they share memory",
)

# ---- extend -----------------------------------------------------------------------------
add = FAMILY.cases_for("extend")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add("length", "type", "16", TypeError, r"length must be a positive integer; got str '16'")
add("length", "type", 16.0, TypeError, r"length must be a positive integer; got float")
add("std", "type", "0.1", TypeError, r"std must be a number >= 0; got str '0\.1'", also=RANDOM)
add("std", "type", True, TypeError, r"std must be a number >= 0; got bool True", also=RANDOM)
add("seed", "type", "x", TypeError, SEED_IS + r"; got 'x' \(", also=RANDOM)
add("seed", "type", 1.5, TypeError, SEED_IS + r"; got 1\.5", also=RANDOM)
add("seed", "type", True, TypeError, SEED_IS + r"; got bool True", also=RANDOM)
add("table", "dtype", np.ones((10, 4), np.int32), TypeError, r"table must have a float dtype")
add("table", "rank", np.ones((2, 5, 4), np.float32), ValueError, r"table must be a 2-D array")
add("table", "empty", np.zeros((0, 4), np.float32), ValueError, r"table must have at least one row")
add("std", "nan", np.nan, ValueError, r"std must be a finite number >= 0; got nan", also=RANDOM)
add("std", "nan", np.inf, ValueError, r"std must be a finite number >= 0; got inf", also=RANDOM)
for rows in (16, 10):  # with new rows, and with none (the table is measured all the same)
    add(
        "table",
        "nan",
        np.full((10, 4), np.nan, np.float32),
        ValueError,
        r"the table's standard deviation is not finite \(it holds inf or NaN\); pass std=",
        also={**RANDOM, "length": rows},
    )
add("length", "size", 0, ValueError, r"length must be a positive integer; got 0")
add("length", "size", -1, ValueError, r"length must be a positive integer; got -1")
add("length", "size", 2**63, ValueError, r"length is too large: 4 x 9223372036854775808 x 10")
add("length", "size", 2**64, ValueError, r"length is too large: 4 x 18446744073709551616 x 10")
add(
    "length",
    "range",
    5,
    ValueError,
    r"length must be at least the table's 10 rows \(extend only grows; interpolate shrinks\); "
    r"got 5",
)
add("init", "range", "nope", ValueError, r"init must be one of 'interpolate', .*; got 'nope'")
add("init", "range", None, ValueError, r"init must be one of .*; got None")
add("align", "range", "nope", ValueError, r"align must be one of 'scale', .*; got 'nope'")
add("std", "range", -1.0, ValueError, r"std must be a finite number >= 0; got -1\.0", also=RANDOM)
add("seed", "range", -1, ValueError, SEED_IS + r"; got -1 \(", also=RANDOM)
add(
    "std",
    "combination",
    0.1,
    ValueError,
    r"std and seed apply to init='random' only; got init='tile'",
    also={"init": "tile"},
)
add("seed", "combination", 1, ValueError, r"std and seed apply to init='random' only")
add(
    "align",
    "combination",
    "corners",
    ValueError,
    r"align applies to init='interpolate' only; got init='zeros'",
    also={"init": "zeros"},
)

# ---- similarity -------------------------------------------------------------------------
add = FAMILY.cases_for("similarity")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add(
    "table", "type", np.ma.masked_array(table(3, 4)), TypeError, r"table must not be a masked array"
)
add(
    "table", "dtype", np.ones((3, 4), np.int32), TypeError, r"table must have a float dtype .*int32"
)
add("table", "dtype", np.array([[object()]]), TypeError, r"table must have a fixed-size dtype")
add("table", "rank", np.ones(3, np.float32), ValueError, r"table must be a 2-D array .*\(3,\)")
add("table", "rank", "x", ValueError, r"table must be a 2-D array .*got shape \(\)")

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


# Two things wrong at once (see the harness): posembed and its twin name the same one.
TWO_ERRORS: list[tuple[str, Callable[[Any], Any], type[Exception], str]] = [
    ("lerp", lambda m: m.lerp(small_table(), [5.0], out=np.zeros((1, 2))), TypeError, "out"),
]


@pytest.mark.parametrize(("name", "call", "exc", "text"), TWO_ERRORS)
def test_two_errors_at_once_give_the_same_exception_as_the_twin(name, call, exc, text):
    check_two_errors(call, exc, text)
