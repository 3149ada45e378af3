"""The bad-input matrix for the LearnedPositionEmbedding class: its constructor and methods.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import posembed

from .badinput_harness import (
    ALL_OUT,
    EMBED_SEED,
    KINDS,
    RAGGED,
    RANDOM,
    SCALARS,
    SEED,
    SEED_IS,
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
)


def lpe() -> posembed.LearnedPositionEmbedding:
    return posembed.LearnedPositionEmbedding(10, 4, seed=SEED)


LPE = posembed.LearnedPositionEmbedding


FAMILY = Family(
    targets={
        "LearnedPositionEmbedding": function(
            "LearnedPositionEmbedding",
            lambda tmp: {
                "max_seq_len": 10,
                "embed_dim": 4,
                "init_std": 0.02,
                "seed": SEED,
                "dtype": np.float32,
                "dropout": 0.1,
            },
        ),
        "LearnedPositionEmbedding.from_table": method(
            LPE,
            "from_table",
            lambda tmp: {"self": lpe(), "table": table(10, 4), "copy": True, "dropout": 0.1},
            twin=True,
        ),
        "LearnedPositionEmbedding.__call__": method(
            LPE,
            "__call__",
            lambda tmp: {
                "self": lpe(),
                "positions": np.array([[1, 2, 9]]),
                "mode": "raise",
                "out": sentinel((1, 3, 4)),
            },
            twin=True,
        ),
        "LearnedPositionEmbedding.interpolate": method(
            LPE,
            "interpolate",
            lambda tmp: {"self": lpe(), "length": 16, "align": "scale"},
            twin=True,
        ),
        "LearnedPositionEmbedding.extend": method(
            LPE,
            "extend",
            lambda tmp: {
                "self": lpe(),
                "length": 16,
                "init": "interpolate",
                "std": None,
                "seed": None,
                "align": None,
            },
            twin=True,
        ),
        "LearnedPositionEmbedding.embed": method(
            LPE,
            "embed",
            lambda tmp: {
                "self": lpe(),
                "token_table": table(20, 4),
                "token_ids": np.array([[1, 2, 3]]),
                "training": False,
                "seed": None,
                "offset": 0,
            },
            twin=True,
        ),
        "LearnedPositionEmbedding.windows": method(
            LPE,
            "windows",
            lambda tmp: {
                "self": lpe(),
                "tokens": np.arange(25, dtype=np.int32),
                "step": None,
                "out": sentinel((3, 10), np.int32),
            },
            twin=True,
        ),
    },
    not_applicable={
        "LearnedPositionEmbedding": {
            **ALL_OUT,
            "rank": SCALARS,
            "shape": SCALARS,
        },
        "LearnedPositionEmbedding.from_table": {
            **ALL_OUT,
            "size": "every size comes from the table",
            "shape": "one array in",
        },
        "LearnedPositionEmbedding.__call__": {
            "rank": "positions may have any shape",
            "empty": "the instance has at least one row (its constructor says so); "
            "no positions is a valid, empty lookup",
            "size": "no size argument",
            "shape": "one array in besides out= (out_shape)",
        },
        "LearnedPositionEmbedding.interpolate": {
            **ALL_OUT,
            **{k: "one count and one choice; no array argument" for k in KINDS[1:5]},
            "shape": SCALARS,
        },
        "LearnedPositionEmbedding.extend": {
            **ALL_OUT,
            **{
                k: "counts, choices and numbers; no array argument"
                for k in ("dtype", "rank", "empty")
            },
            "shape": SCALARS,
        },
        "LearnedPositionEmbedding.embed": {
            **ALL_OUT,
            "nan": "the dropout rate is the instance's, checked by its constructor; "
            "no float argument here",
        },
        "LearnedPositionEmbedding.windows": {
            "empty": "no tokens is a valid call with no windows",
            "nan": "integers only: a NaN pad_value is a type error (posembed.windows' cases)",
            "shape": "one token array",
        },
    },
)

# ---- LearnedPositionEmbedding (the constructor) -----------------------------------------
add = FAMILY.cases_for("LearnedPositionEmbedding")
for name in ("max_seq_len", "embed_dim"):
    add(name, "type", "4", TypeError, rf"{name} must be a positive integer; got str '4'")
    add(name, "type", 4.0, TypeError, rf"{name} must be a positive integer; got float 4\.0")
    add(name, "type", None, TypeError, rf"{name} must be a positive integer; got NoneType None")
    add(name, "type", True, TypeError, rf"{name} must be a positive integer; got bool True")
    add(name, "empty", 0, ValueError, rf"{name} must be a positive integer; got 0")
    add(name, "size", -1, ValueError, rf"{name} must be a positive integer; got -1")
    for n in (2**63, 2**64):
        add(name, "size", n, ValueError, rf"max_seq_len x embed_dim = .*{n}.* is too large")
add(
    "max_seq_len",
    "size",
    2**31,
    ValueError,
    r"max_seq_len x embed_dim = 2147483648 x 2147483648",
    also={"embed_dim": 2**31},
)
add(
    "init_std", "type", None, TypeError, r"init_std must be a number >= 0 or 'scaled'; got NoneType"
)
add("init_std", "type", [0.02], TypeError, r"init_std must be a number >= 0 or 'scaled'; got list")
add("init_std", "type", True, TypeError, r"init_std must be a number >= 0 or 'scaled'; got bool")
add("dropout", "type", "x", TypeError, r"dropout must be a number in \[0, 1\); got str 'x'")
add("seed", "type", "x", TypeError, SEED_IS + r"; got 'x'")
add("seed", "type", 1.5, TypeError, SEED_IS + r"; got 1\.5")
add("seed", "type", True, TypeError, SEED_IS + r"; got bool True")
add(
    "dtype",
    "dtype",
    np.int32,
    TypeError,
    r"dtype must be one of float16, bfloat16, float32, float64; got int32",
)
add("dtype", "dtype", np.complex64, TypeError, r"dtype must be one of .*; got complex64")
add("dtype", "dtype", "nope", TypeError, r"dtype must be one of .*; got 'nope'")
add("dtype", "dtype", None, TypeError, r"dtype must be one of .*; got None")
add(
    "init_std",
    "nan",
    np.nan,
    ValueError,
    r"init_std must be a finite number >= 0 or 'scaled'; got nan",
)
add(
    "init_std",
    "nan",
    np.inf,
    ValueError,
    r"init_std must be a finite number >= 0 or 'scaled'; got inf",
)
add("dropout", "nan", np.nan, ValueError, r"dropout must be in \[0, 1\) .*; got nan")
add(
    "init_std",
    "range",
    -1.0,
    ValueError,
    r"init_std must be a finite number >= 0 or 'scaled'; got -1\.0",
)
add(
    "init_std",
    "range",
    "xavier",
    ValueError,
    r"init_std must be a number >= 0 or 'scaled'; got 'xavier'",
)
add(
    "init_std",
    "range",
    1e300,
    ValueError,
    r"init_std 1e\+300 is too large for float32: the table overflows",
)
add(
    "init_std",
    "range",
    1e6,
    ValueError,
    r"init_std 1000000\.0 is too large for float16",
    also={"dtype": np.float16},
)
add("dropout", "range", 1.0, ValueError, r"dropout must be in \[0, 1\) .*; got 1\.0")
add("seed", "range", -1, ValueError, SEED_IS + r"; got -1 \(")

# ---- LearnedPositionEmbedding.from_table ------------------------------------------------
add = FAMILY.cases_for("LearnedPositionEmbedding.from_table")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add("dropout", "type", "x", TypeError, r"dropout must be a number in \[0, 1\); got str 'x'")
add(
    "table",
    "dtype",
    np.ones((10, 4), np.int32),
    TypeError,
    r"table must have a float dtype \(float16, bfloat16, float32, float64\); got dtype int32",
)
add("table", "dtype", np.array([[object()]]), TypeError, r"table must have a fixed-size dtype")
add("table", "rank", np.ones(4, np.float32), ValueError, r"table must be a 2-D array .*\(4,\)")
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    ValueError,
    r"table must have at least one row and one column; got shape \(0, 4\)",
)
add(
    "table",
    "empty",
    np.zeros((4, 0), np.float32),
    ValueError,
    r"table must have at least one row and one column",
)
add("dropout", "nan", np.nan, ValueError, r"dropout must be in \[0, 1\) .*; got nan")
add("dropout", "range", 1.0, ValueError, r"dropout must be in \[0, 1\) .*; got 1\.0")

# ---- LearnedPositionEmbedding.__call__ --------------------------------------------------
add = FAMILY.cases_for("LearnedPositionEmbedding.__call__")
add("positions", "type", [[1, None, 2]], TypeError, r"positions must be integers; got NoneType")
add(
    "positions",
    "dtype",
    np.array([[1.0, 2.0, 3.0]]),
    TypeError,
    r"positions must be integers .*float64",
)
add("positions", "nan", np.array([[1.0, np.nan, 3.0]]), TypeError, r"positions must be integers")
add(
    "positions",
    "range",
    [[1, 2, 10]],
    IndexError,
    r"position 10 at positions\[0, 2\] is out of range for a table of 10 rows "
    r"\(valid positions are 0\.\.9\)",
)
add(
    "positions", "range", [[1, 2**64, 3]], IndexError, r"position 18446744073709551616 at positions"
)
add("mode", "range", "nope", ValueError, r"mode must be 'raise', 'clip' or 'wrap'; got 'nope'")
out_cases(add, (1, 3, 4), np.float32)
# (the twin's instance has a table of its own: twin=False)
add(
    "out",
    "out_overlap",
    From(lambda a: a["self"].embeddings[:3].reshape(1, 3, 4)),
    ValueError,
    r"out must not overlap table: they share memory",
    twin=False,
)

# ---- LearnedPositionEmbedding.interpolate, .extend --------------------------------------
add = FAMILY.cases_for("LearnedPositionEmbedding.interpolate")
add("length", "type", "16", TypeError, r"length must be a positive integer; got str '16'")
add("length", "size", 0, ValueError, r"length must be a positive integer; got 0")
add("length", "size", 2**63, ValueError, r"length is too large: 4 x 9223372036854775808 x 10")
add("length", "size", 2**64, ValueError, r"length is too large: 4 x 18446744073709551616 x 10")
add("align", "range", "nope", ValueError, r"align must be one of 'scale', .*; got 'nope'")
add = FAMILY.cases_for("LearnedPositionEmbedding.extend")
add("length", "type", 16.0, TypeError, r"length must be a positive integer; got float 16\.0")
add("std", "type", "1", TypeError, r"std must be a number >= 0; got str '1'", also=RANDOM)
add("seed", "type", "x", TypeError, SEED_IS + r"; got 'x'", also=RANDOM)
add("std", "nan", np.nan, ValueError, r"std must be a finite number >= 0; got nan", also=RANDOM)
add("length", "size", -1, ValueError, r"length must be a positive integer; got -1")
add("length", "size", 2**63, ValueError, r"length is too large: 4 x 9223372036854775808 x 10")
add("length", "range", 9, ValueError, r"length must be at least the table's 10 rows .*; got 9")
add("init", "range", "nope", ValueError, r"init must be one of .*; got 'nope'")
add("seed", "range", -1, ValueError, SEED_IS + r"; got -1", also=RANDOM)
add("std", "combination", 0.1, ValueError, r"std and seed apply to init='random' only")

# ---- LearnedPositionEmbedding.embed -----------------------------------------------------
add = FAMILY.cases_for("LearnedPositionEmbedding.embed")
TRAIN = {"training": True}
add("training", "type", "yes", TypeError, r"training must be True or False; got 'yes'")
add("training", "type", None, TypeError, r"training must be True or False; got None")
add("token_table", "type", RAGGED, TypeError, r"token_table must be an array NumPy can read")
add("token_ids", "type", [[1, None]], TypeError, r"token_ids must be integers; got NoneType")
add("offset", "type", 1.0, TypeError, r"offset must be an integer >= 0; got float 1\.0")
add("seed", "type", "1", TypeError, EMBED_SEED + r"'1'", also=TRAIN)
add(
    "token_table",
    "dtype",
    table(20, 4, np.float64),
    TypeError,
    r"token_table and pos_table must share a dtype; got float64 and float32",
)
add("token_ids", "dtype", np.ones((1, 3)), TypeError, r"token_ids must be integers .*float64")
add(
    "token_ids",
    "rank",
    np.ones((1, 1, 3), int),
    ValueError,
    r"token_ids must be \(T,\) or \(B, T\)",
)
add(
    "token_table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"token id 1 at token_ids\[0, 0\] is out of range for a table of 0 rows \(token_table;",
)
add("offset", "size", -1, ValueError, r"offset must be an integer >= 0; got -1")
add(
    "offset",
    "size",
    2**63,
    IndexError,
    r"positions 9223372036854775808\.\.9223372036854775810 \(offset",
)
add("token_ids", "range", [[1, 20, 3]], IndexError, r"token id 20 at token_ids\[0, 1\]")
add(
    "offset",
    "range",
    8,
    IndexError,
    r"positions 8\.\.10 \(offset 8 \+ arange\(3\)\) go past pos_table's 10 rows "
    r"\(valid positions are 0\.\.9\)",
)
add("seed", "range", -1, ValueError, r"seed must be in 0\.\.2\*\*64-1; got -1", also=TRAIN)
add(
    "token_table",
    "shape",
    table(20, 5),
    ValueError,
    r"token_table and pos_table must share embed_dim; got 5 and 4 columns",
)

# ---- LearnedPositionEmbedding.windows ---------------------------------------------------
add = FAMILY.cases_for("LearnedPositionEmbedding.windows")
add("tokens", "type", [[1], [2, 3]], TypeError, r"tokens must be an array NumPy can read")
add("step", "type", 2.5, TypeError, r"step must be a positive integer; got float 2\.5")
add("tokens", "dtype", np.arange(25.0), TypeError, r"tokens must be integers; got dtype float64")
add(
    "tokens",
    "rank",
    np.zeros((5, 5), np.int32),
    ValueError,
    r"tokens must be 1-D; got shape \(5, 5\)",
)
add("step", "size", 0, ValueError, r"step must be a positive integer; got 0")
add("step", "size", 2**64, ValueError, r"step must be in 1\.\.10 \(at most size")
add(
    "step",
    "range",
    11,
    ValueError,
    r"step must be in 1\.\.10 \(at most size, or tokens are skipped\); got 11",
)
add("stride", "unknown", 2, TypeError, r"windows\(\) got an unexpected keyword argument 'stride'")
out_cases(add, (3, 10), np.int32)
add(
    "out",
    "out_overlap",
    sharing(
        tokens=lambda b: i32(b, 0, (25,)), out=lambda b: b[40:160].view(np.int32).reshape(3, 10)
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
