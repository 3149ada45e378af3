"""The bad-input matrix for gather and gather_backward.

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
    RAGGED,
    Case,
    Family,
    From,
    check_two_errors,
    function,
    i32,
    out_cases,
    sentinel,
    sharing,
    small_table,
    table,
)

FAMILY = Family(
    targets={
        "gather": function(
            "gather",
            lambda tmp: {
                "table": table(10, 4),
                "positions": np.array([[1, 2, 3], [4, 5, 9]]),
                "mode": "raise",
                "out": sentinel((2, 3, 4)),
            },
        ),
        "gather_backward": function(
            "gather_backward",
            lambda tmp: {
                "grad": table(6, 4).reshape(2, 3, 4),
                "positions": np.array([[0, 1, 4], [4, 1, 0]]),
                "length": 5,
                "out": sentinel((5, 4)),
            },
        ),
    },
    not_applicable={
        "gather": {
            "size": "no size argument: the result's shape is positions' shape plus d",
            "shape": "table and positions combine freely; only out= can mismatch (out_shape)",
        },
        "gather_backward": {
            "nan": "NaN and inf in grad are summed like any value, as numpy.add.at does",
        },
    },
)

# ---- gather -----------------------------------------------------------------------------
add = FAMILY.cases_for("gather")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read .*got list")
add(
    "table",
    "type",
    np.ma.masked_array(table(10, 4)),
    TypeError,
    r"table must not be a masked array",
    twin=True,
)
add("positions", "type", [[1, None, 2]], TypeError, r"positions must be integers; got NoneType")
add("table", "dtype", np.array([[object()]] * 3), TypeError, r"table must have a fixed-size dtype")
add(
    "positions",
    "dtype",
    np.array([1.0, 2.0]),
    TypeError,
    r"positions must be integers \(int8\.\.int64, uint8\.\.uint64\); got dtype float64",
)
add(
    "positions",
    "dtype",
    np.array([True, False]),
    TypeError,
    r"positions must be integers; got a bool",
)
add("positions", "dtype", np.array([1j]), TypeError, r"positions must be integers .*complex128")
add("table", "rank", table(10, 4)[0], ValueError, r"table must be a 2-D array .*got shape \(4,\)")
add("table", "rank", table(8, 4).reshape(2, 4, 4), ValueError, r"table must be a 2-D .*\(2, 4, 4\)")
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"position 1 at positions\[0, 0\] is out of range for a table of 0 rows "
    r"\(it has no valid positions\)",
)
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"cannot gather in mode 'clip' from a table of 0 rows",
    also={"mode": "clip"},
)
add("positions", "nan", np.array([0.0, np.nan]), TypeError, r"positions must be integers")
add(
    "positions",
    "range",
    np.array([[1, 2, 3], [4, 5, 10]]),
    IndexError,
    r"position 10 at positions\[1, 2\] is out of range for a table of 10 rows "
    r"\(valid positions are 0\.\.9\)",
)
add("positions", "range", [[1, -1, 3], [1, 2, 3]], IndexError, r"position -1 at positions\[0, 1\]")
add(
    "positions",
    "range",
    [[0, 2**63, 1], [1, 2, 3]],
    IndexError,
    r"position 9223372036854775808 at positions\[0, 1\]",
)
add(
    "positions",
    "range",
    [[0, 1, 2], [2**64, 1, 3]],
    IndexError,
    r"position 18446744073709551616 at positions\[1, 0\]",
)
add(
    "positions",
    "range",
    2**64,
    IndexError,
    r"position 18446744073709551616 is out of range .*\(valid positions are 0\.\.9\)",
    also={"out": None},
)
add(
    "positions",
    "range",
    np.array([2**64 - 1], np.uint64),
    IndexError,
    r"position 18446744073709551615 at positions\[0\]",
    also={"out": None},
)
add("mode", "range", "nope", ValueError, r"mode must be 'raise', 'clip' or 'wrap'; got 'nope'")
add("mode", "range", None, ValueError, r"mode must be 'raise', 'clip' or 'wrap'; got None")


out_cases(add, (2, 3, 4), np.float32)
add(
    "out",
    "out_overlap",
    From(lambda a: a["table"][:6].reshape(2, 3, 4)),
    ValueError,
    r"out must not overlap table: they share memory",
)
add(
    "out",
    "out_overlap",
    sharing(
        positions=lambda b: i32(b, 0, (2, 3)),
        out=lambda b: b[:96].view(np.float32).reshape(2, 3, 4),
    ),
    ValueError,
    r"out must not overlap positions: they share memory",
)
add(
    "out",
    "out_overlap",
    # positions of another dtype: posembed converts them, and checks the caller's array too
    sharing(
        positions=lambda b: b[:6].view(np.uint8).reshape(2, 3),
        out=lambda b: b[:96].view(np.float32).reshape(2, 3, 4),
    ),
    ValueError,
    r"out must not overlap positions",
)

# ---- gather_backward --------------------------------------------------------------------
add = FAMILY.cases_for("gather_backward")
add("grad", "type", RAGGED, TypeError, r"grad must be an array NumPy can read")
add("positions", "type", [[0, None, 1], [1, 2, 3]], TypeError, r"positions must be integers")
add("length", "type", "5", TypeError, r"length must be an integer >= 0; got str '5'")
add("length", "type", 5.0, TypeError, r"length must be an integer >= 0; got float 5\.0")
add("length", "type", True, TypeError, r"length must be an integer >= 0; got bool True")
add("length", "type", None, TypeError, r"length must be an integer >= 0; got NoneType")
add(
    "grad",
    "dtype",
    np.ones((2, 3, 4), np.int32),
    TypeError,
    r"grad must have a float dtype \(float16, bfloat16, float32, float64\); got int32",
)
add("grad", "dtype", np.ones((2, 3, 4), np.complex64), TypeError, r"grad must have a float dtype")
add("positions", "dtype", np.zeros((2, 3)), TypeError, r"positions must be integers .*float64")
add(
    "grad",
    "rank",
    table(2, 3),
    ValueError,
    r"grad must have shape positions\.shape \+ \(d,\) = \(2, 3\) \+ \(d,\); got \(2, 3\)",
)
add("positions", "rank", np.zeros((2, 3, 1), int), ValueError, r"grad must have shape positions")
add(
    "length",
    "empty",
    0,
    IndexError,
    r"position 0 at positions\[0, 0\] is out of range for a table of 0 rows "
    r"\(length 0; it has no valid positions\)",
    also={"out": None},
)
add("length", "size", -1, ValueError, r"length must be an integer >= 0; got -1")
add(
    "length",
    "size",
    2**63,
    ValueError,
    r"length is too large: 9223372036854775808 x 4 x 4 reaches 2\^62",
)
add("length", "size", 2**64, ValueError, r"length is too large: 18446744073709551616 x 4")
add(
    "grad", "shape", table(6, 4).reshape(3, 2, 4), ValueError, r"grad must have shape .*\(3, 2, 4\)"
)
add(
    "positions",
    "range",
    [[0, 1, 5], [4, 1, 0]],
    IndexError,
    r"position 5 at positions\[0, 2\] is out of range for a table of 5 rows "
    r"\(length 5; valid positions are 0\.\.4\)",
)
add("positions", "range", [[0, 1, 2], [-1, 1, 0]], IndexError, r"position -1 at positions\[1, 0\]")
add(
    "positions",
    "range",
    [[0, 1, 2], [2**64, 1, 0]],
    IndexError,
    r"position 18446744073709551616 at positions\[1, 0\] .*\(length 5; valid positions",
)
out_cases(add, (5, 4), np.float32)
add(
    "out",
    "out_overlap",
    From(lambda a: a["grad"].reshape(-1)[:20].reshape(5, 4)),
    ValueError,
    r"out must not overlap grad: they share memory",
)
add(
    "out",
    "out_overlap",
    sharing(
        positions=lambda b: i32(b, 0, (2, 3)), out=lambda b: b[:80].view(np.float32).reshape(5, 4)
    ),
    ValueError,
    r"out must not overlap positions: they share memory",
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


# Two things wrong at once (see the harness): posembed and its twin name the same one.
TWO_ERRORS: list[tuple[str, Callable[[Any], Any], type[Exception], str]] = [
    (
        "gather_backward",
        lambda m: m.gather_backward(np.zeros((1, 2), np.float32), [9], 3, out=[]),
        TypeError,
        "out",
    ),
    ("gather", lambda m: m.gather(small_table(), [9], out=np.zeros((1, 2))), TypeError, "out"),
    (
        "gather",
        lambda m: m.gather(small_table(), [2**70], out=np.zeros((1, 2))),
        IndexError,
        "position",
    ),
    (
        "gather_backward",
        lambda m: m.gather_backward(np.zeros((2, 2), np.float32), [2**70], 3),
        IndexError,
        "position",
    ),
]


@pytest.mark.parametrize(("name", "call", "exc", "text"), TWO_ERRORS)
def test_two_errors_at_once_give_the_same_exception_as_the_twin(name, call, exc, text):
    check_two_errors(call, exc, text)
