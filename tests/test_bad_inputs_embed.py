"""The bad-input matrix for embed and dropout_mask.

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
    EMBED_SEED,
    RAGGED,
    Case,
    Family,
    From,
    check_two_errors,
    f32,
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
        "embed": function(
            "embed",
            lambda tmp: {
                "token_table": table(20, 4),
                "token_ids": np.array([[1, 2, 3], [4, 5, 6]]),
                "pos_table": table(8, 4) * np.float32(0.5),
                "positions": None,
                "offset": 0,
                "dropout": 0.0,
                "seed": None,
                "out": sentinel((2, 3, 4)),
                "first_row": 0,
            },
        ),
        "dropout_mask": function(
            "dropout_mask", lambda tmp: {"shape": (2, 3, 4), "p": 0.1, "seed": 7}
        ),
    },
    not_applicable={
        "embed": {},
        "dropout_mask": {
            **ALL_OUT,
            "empty": "an empty shape is a 0-d mask and a size of 0 an empty one: both valid",
            "shape": "one shape",
        },
    },
)

# ---- embed ------------------------------------------------------------------------------
add = FAMILY.cases_for("embed")
add("token_table", "type", RAGGED, TypeError, r"token_table must be an array NumPy can read")
add("token_ids", "type", [[1, None, 2]], TypeError, r"token_ids must be integers; got NoneType")
add("positions", "type", [0, "1", 2], TypeError, r"positions must be integers")
add("offset", "type", 1.0, TypeError, r"offset must be an integer >= 0; got float 1\.0")
add("offset", "type", None, TypeError, r"offset must be an integer >= 0; got NoneType None")
add("dropout", "type", "0.1", TypeError, r"dropout must be a number in \[0, 1\); got str '0\.1'")
add("dropout", "type", None, TypeError, r"dropout must be a number in \[0, 1\); got NoneType")
add("dropout", "type", True, TypeError, r"dropout must be a number in \[0, 1\); got bool True")
add("first_row", "type", 1.5, TypeError, r"first_row must be an integer >= 0; got float 1\.5")
DROP = {"dropout": 0.1}
add("seed", "type", "1", TypeError, EMBED_SEED + r"'1'", also=DROP)
add("seed", "type", 1.5, TypeError, EMBED_SEED + r"1\.5", also=DROP)
add("seed", "type", True, TypeError, EMBED_SEED + r"True", also=DROP)
add(
    "token_table",
    "dtype",
    np.ones((20, 4), np.int32),
    TypeError,
    r"token_table must have a float dtype \(float16, bfloat16, float32, float64\); got dtype int32",
)
add(
    "pos_table",
    "dtype",
    table(8, 4, np.float64),
    TypeError,
    r"token_table and pos_table must share a dtype; got float32 and float64",
)
add("token_ids", "dtype", np.ones((2, 3)), TypeError, r"token_ids must be integers .*float64")
add("positions", "dtype", np.zeros(3), TypeError, r"positions must be integers .*float64")
add(
    "token_ids",
    "rank",
    np.ones((1, 2, 3), int),
    ValueError,
    r"token_ids must be \(T,\) or \(B, T\); got shape \(1, 2, 3\)",
)
add("token_ids", "rank", 3, ValueError, r"token_ids must be \(T,\) or \(B, T\); got shape \(\)")
add("token_table", "rank", np.ones(4, np.float32), ValueError, r"token_table must be a 2-D array")
add("pos_table", "rank", np.ones((2, 4, 4), np.float32), ValueError, r"pos_table must be a 2-D")
add("positions", "rank", np.zeros((1, 2, 3), int), ValueError, r"positions of shape \(1, 2, 3\) do")
add(
    "token_table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"token id 1 at token_ids\[0, 0\] is out of range for a table of 0 rows "
    r"\(token_table; it has no valid token ids\)",
)
add(
    "pos_table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"positions 0\.\.2 \(offset 0 \+ arange\(3\)\) go past pos_table's 0 rows \(it has no rows\)",
)
add(
    "pos_table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"position 0 at positions\[0\] is out of range for a table of 0 rows \(pos_table; it has",
    also={"positions": [0, 1, 2]},
)
# no ids: the positions are checked all the same
add(
    "positions",
    "empty",
    [0, 8],
    IndexError,
    r"position 8 at positions\[1\] is out of range for a table of 8 rows \(pos_table; valid",
    also={"token_ids": np.zeros((1, 0), int), "out": None},
)
add("dropout", "nan", np.nan, ValueError, r"dropout must be in \[0, 1\) .*; got nan")
add("dropout", "nan", np.inf, ValueError, r"dropout must be in \[0, 1\) .*; got inf")
add("offset", "size", -1, ValueError, r"offset must be an integer >= 0; got -1")
add("first_row", "size", -1, ValueError, r"first_row must be an integer >= 0; got -1")
# the mask counts the larger batch's elements in int64: rows of d = 4 values below 2^62
add(
    "first_row",
    "size",
    2**62,
    ValueError,
    r"first_row must be in 0\.\.1152921504606846976 \(rows of 4 values below 2\^62\); "
    r"got 4611686018427387904",
)
add(
    "offset",
    "size",
    2**63,
    IndexError,
    r"positions 9223372036854775808\.\.9223372036854775810 \(offset 9223372036854775808 "
    r"\+ arange\(3\)\) go past pos_table's 8 rows \(valid positions are 0\.\.7\)",
)
add("offset", "size", 2**64, IndexError, r"positions 18446744073709551616\.\..*offset 18446744")
add(
    "token_ids",
    "range",
    [[1, 2, 3], [4, 20, 6]],
    IndexError,
    r"token id 20 at token_ids\[1, 1\] is out of range for a table of 20 rows "
    r"\(token_table; valid token ids are 0\.\.19\)",
)
add("token_ids", "range", [[1, 2, 3], [4, -1, 6]], IndexError, r"token id -1 at token_ids\[1, 1\]")
add(
    "token_ids",
    "range",
    [[1, 2, 3], [4, 2**64, 6]],
    IndexError,
    r"token id 18446744073709551616 at token_ids\[1, 1\] .*\(token_table; valid token ids are 0",
)
add(
    "positions",
    "range",
    [0, 1, 8],
    IndexError,
    r"position 8 at positions\[2\] is out of range for a table of 8 rows "
    r"\(pos_table; valid positions are 0\.\.7\)",
)
add("positions", "range", [[0, 1, 2], [0, -1, 2]], IndexError, r"position -1 at positions\[1, 1\]")
add("offset", "range", 6, IndexError, r"positions 6\.\.8 \(offset 6 \+ arange\(3\)\) go past")
add(
    "dropout",
    "range",
    1.0,
    ValueError,
    r"dropout must be in \[0, 1\) \(a probability of dropping\)",
)
add("dropout", "range", -0.1, ValueError, r"dropout must be in \[0, 1\) .*; got -0\.1")
add("seed", "range", -1, ValueError, r"seed must be in 0\.\.2\*\*64-1; got -1", also=DROP)
add(
    "seed",
    "range",
    2**64,
    ValueError,
    r"seed must be in 0\.\.2\*\*64-1; got 18446744073709551616",
    also=DROP,
)
add(
    "pos_table",
    "shape",
    table(8, 5),
    ValueError,
    r"token_table and pos_table must share embed_dim; got 4 and 5 columns",
)
add(
    "positions",
    "shape",
    [0, 1],
    ValueError,
    r"positions of shape \(2,\) do not broadcast to token_ids' shape \(2, 3\)",
)
add(
    "offset",
    "combination",
    1,
    ValueError,
    r"give positions or offset, not both",
    also={"positions": [0, 1, 2]},
)
out_cases(add, (2, 3, 4), np.float32)
add(
    "out",
    "out_overlap",
    From(lambda a: a["token_table"][:6].reshape(2, 3, 4)),
    ValueError,
    r"out must not overlap tables: they share memory",
)
add(
    "out",
    "out_overlap",
    From(lambda a: a["pos_table"][:6].reshape(2, 3, 4)),
    ValueError,
    r"out must not overlap tables: they share memory",
)
add(
    "out",
    "out_overlap",
    # a Fortran-ordered token table is copied first: the caller's is checked too
    sharing(
        token_table=lambda b: f32(b, 0, (4, 20)).T,
        out=lambda b: b[200:296].view(np.float32).reshape(2, 3, 4),
    ),
    ValueError,
    r"out must not overlap tables: they share memory",
)
add(
    "out",
    "out_overlap",
    sharing(
        token_ids=lambda b: i32(b, 0, (2, 3)),
        out=lambda b: b[:96].view(np.float32).reshape(2, 3, 4),
    ),
    ValueError,
    r"out must not overlap indices: they share memory",
)
add(
    "out",
    "out_overlap",
    sharing(
        positions=lambda b: i32(b, 0, (3,)), out=lambda b: b[:96].view(np.float32).reshape(2, 3, 4)
    ),
    ValueError,
    r"out must not overlap indices: they share memory",
)

# ---- dropout_mask -----------------------------------------------------------------------
add = FAMILY.cases_for("dropout_mask")
SHAPE_IS = r"shape must be an integer or a sequence of integers; got "
add("shape", "type", 1.5, TypeError, SHAPE_IS + r"float 1\.5")
add("shape", "type", None, TypeError, SHAPE_IS + r"NoneType None")
add("shape", "type", (2.0, 3), TypeError, r"shape must be an integer >= 0; got float 2\.0")
add("shape", "type", True, TypeError, r"shape must be an integer >= 0; got bool True")
add("p", "type", "0.1", TypeError, r"p must be a number in \[0, 1\); got str '0\.1'")
add("p", "type", None, TypeError, r"p must be a number in \[0, 1\); got NoneType None")
add("seed", "type", None, TypeError, r"dropout_mask needs the seed whose mask you want")
add("seed", "type", 1.5, TypeError, EMBED_SEED + r"1\.5")
add("seed", "type", True, TypeError, EMBED_SEED + r"True")
add("shape", "dtype", np.array([2.0, 3.0]), TypeError, r"shape must be an integer >= 0; got float")
add("shape", "rank", [[2, 3]], TypeError, r"shape must be an integer >= 0; got list \[2, 3\]")
add("p", "nan", np.nan, ValueError, r"p must be in \[0, 1\) \(a probability of dropping\); got nan")
add("p", "nan", np.inf, ValueError, r"p must be in \[0, 1\) .*; got inf")
add("shape", "size", -1, ValueError, r"shape must be an integer >= 0; got -1")
add("shape", "size", (2, -1), ValueError, r"shape must be an integer >= 0; got -1")
add(
    "shape",
    "size",
    2**63,
    ValueError,
    r"shape \(9223372036854775808,\) is too large: 9223372036854775808 reaches 2\^62",
)
add("shape", "size", (2**64, 5), ValueError, r"shape \(18446744073709551616, 5\) is too large")
add("shape", "size", (5, 2**62), ValueError, r"shape \(5, 4611686018427387904\) is too large")
add("shape", "size", (2**32 + 1, 2**32), ValueError, r"shape \(4294967297, 4294967296\) is too")
add("p", "range", 1.0, ValueError, r"p must be in \[0, 1\) .*; got 1\.0")
add("p", "range", -0.1, ValueError, r"p must be in \[0, 1\) .*; got -0\.1")
add("seed", "range", -1, ValueError, r"seed must be in 0\.\.2\*\*64-1; got -1")
add("seed", "range", 2**64, ValueError, r"seed must be in 0\.\.2\*\*64-1; got 18446744073709551616")

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
        "embed",
        lambda m: m.embed(small_table(), [[-2]], small_table(), dropout=None),
        TypeError,
        "dropout",
    ),
    (
        "embed",
        lambda m: m.embed(small_table(), [9], small_table(), out=np.zeros((1, 2))),
        TypeError,
        "out",
    ),
    (
        "embed",
        lambda m: m.embed(small_table(0), np.array(0), small_table()),
        ValueError,
        "token_ids",
    ),
    (
        "embed",
        lambda m: m.embed(small_table(0), [1], small_table(), out=[]),
        IndexError,
        "token id",
    ),
    (
        "embed",
        lambda m: m.embed(small_table(), [0], small_table(), offset=5, out=[]),
        IndexError,
        "past",
    ),
    (
        "embed",
        lambda m: m.embed(small_table(), [9], small_table(), first_row=-1),
        ValueError,
        "first_row",
    ),
]


@pytest.mark.parametrize(("name", "call", "exc", "text"), TWO_ERRORS)
def test_two_errors_at_once_give_the_same_exception_as_the_twin(name, call, exc, text):
    check_two_errors(call, exc, text)
