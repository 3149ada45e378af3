"""The bad-input matrix for pack, PackPlan.cut and PackPlan.row.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import posembed

from .badinput_harness import ALL_OUT, RAGGED, Case, Family, function, method

LENGTHS = np.array([5, 9, 0, 12])  # 26 tokens
OFFSETS = np.array([0, 5, 14, 14, 26])
TOKENS = np.arange(100, 126, dtype=np.int32)
MASK = (np.arange(26) % 3 == 0).astype(np.uint8)  # a per-token column
PLAN = posembed.pack(LENGTHS, 8)


def plan_arguments() -> dict[str, object]:
    """PLAN's arguments, its arrays as writeable copies (a plan built by hand)."""
    return {
        "document_lengths": LENGTHS.copy(),
        "capacity": 8,
        "strategy": "bfd",
        "split": "pieces",
        **{name: np.array(getattr(PLAN, name)) for name in PLAN_ARRAYS},
    }


PLAN_ARRAYS = ("row_offsets", "documents", "starts", "lengths", "offsets")

FAMILY = Family(
    targets={
        "pack": function(
            "pack",
            lambda tmp: {
                "lengths": LENGTHS.copy(),
                "capacity": 8,
                "strategy": "bfd",
                "split": "pieces",
            },
        ),
        "PackPlan": function("PackPlan", lambda tmp: plan_arguments(), twin=False),
        "PackPlan.cut": method(
            posembed.PackPlan,
            "cut",
            lambda tmp: {
                "self": PLAN,
                "tokens": TOKENS.copy(),
                "offsets": OFFSETS.copy(),
                "rows": None,
                "pad_value": 0,
                "labels": True,
                "position_dtype": np.int64,
                "columns": {"mask": MASK.copy()},
                "column_pad": 0,
                "position_start": 2,
                "separator_id": -100,
            },
            twin=False,
        ),
        "PackPlan.unpack": method(
            posembed.PackPlan,
            "unpack",
            lambda tmp: {"self": PLAN, "values": np.zeros((PLAN.rows, 8, 2), np.float32)},
            twin=False,
        ),
        "PackPlan.row": method(
            posembed.PackPlan, "row", lambda tmp: {"self": PLAN, "r": 1}, twin=False
        ),
    },
    not_applicable={
        "pack": {
            **ALL_OUT,
            "empty": "no documents is a valid plan of no rows",
            "shape": "one array: nothing to fit together (a length past the capacity is range)",
        },
        "PackPlan": {**ALL_OUT},
        "PackPlan.cut": {**ALL_OUT},
        "PackPlan.unpack": {
            **ALL_OUT,
            "nan": "values are copied as they are: NaN is a value",
            "size": "no count is given: the plan sets the sizes (shape)",
            "range": "values are copied as they are: any value is allowed",
        },
        "PackPlan.row": {
            **ALL_OUT,
            "empty": "a row number is a scalar",
            "size": "a row number is an index (range)",
            "shape": "one scalar argument",
        },
    },
)

# ---- pack -------------------------------------------------------------------------------
add = FAMILY.cases_for("pack")
add("lengths", "type", RAGGED, TypeError, r"lengths must be an array NumPy can read")
add("lengths", "type", "12", TypeError, r"lengths must be integers; got dtype <U2")
add("capacity", "type", "8", TypeError, r"capacity must be a positive integer; got str '8'")
add("capacity", "type", True, TypeError, r"capacity must be a positive integer; got bool")
add("strategy", "type", 1, ValueError, r"strategy must be one of 'bfd', 'ffd', 'wrapped'; got 1")
add("lengths", "dtype", LENGTHS * 1.0, TypeError, r"lengths must be integers; got dtype float64")
add("lengths", "dtype", LENGTHS > 0, TypeError, r"lengths must be integers; got dtype bool")
add("lengths", "rank", LENGTHS[None], ValueError, r"lengths must be 1-D; got shape \(1, 4\)")
add("capacity", "nan", float("nan"), TypeError, r"capacity must be a positive integer; got float")
add("capacity", "size", 0, ValueError, r"capacity must be a positive integer; got 0")
add("capacity", "size", 2**31, ValueError, r"capacity must be at most 2\^31 - 1; got 2147483648")
add(
    "lengths",
    "range",
    np.array([5, -1]),
    ValueError,
    r"lengths\[1\] = -1 is negative; lengths must be >= 0",
)
add("strategy", "range", "best", ValueError, r"strategy must be one of 'bfd', 'ffd', 'wrapped'")
add("split", "range", "drop", ValueError, r"split must be one of 'pieces', 'truncate', 'refuse'")
add(
    "split",
    "range",
    "refuse",
    ValueError,
    r"document 1 has 9 tokens, more than the capacity of 8 \(split='refuse'",
)

# ---- PackPlan, built by hand ------------------------------------------------------------
# PLAN: rows [0, 1, 2, 4, 5]; documents [1, 3, 0, 1, 3], starts [0, 0, 0, 8, 8],
# lengths [8, 8, 5, 1, 4], offsets [0, 0, 0, 5, 0]
assert PLAN.documents.tolist() == [1, 3, 0, 1, 3]
assert PLAN.offsets.tolist() == [0, 0, 0, 5, 0]
add = FAMILY.cases_for("PackPlan")
add("documents", "type", RAGGED, TypeError, r"documents must be an array NumPy can read")
add("capacity", "type", "8", TypeError, r"capacity must be a positive integer; got str '8'")
add("capacity", "type", True, TypeError, r"capacity must be a positive integer; got bool")
add("strategy", "type", 2, ValueError, r"strategy must be one of 'bfd', 'ffd', 'wrapped'; got 2")
add(
    "offsets",
    "dtype",
    np.array([0.0, 0, 0, 5, 0]),
    TypeError,
    r"offsets must be integers; got dtype float64",
)
add("starts", "dtype", np.zeros(5, bool), TypeError, r"starts must be integers; got dtype bool")
add(
    "document_lengths",
    "dtype",
    LENGTHS * 1.0,
    TypeError,
    r"document_lengths must be integers; got dtype float64",
)
add("lengths", "rank", np.ones((5, 1), np.int64), ValueError, r"lengths must be 1-D; got shape")
add(
    "row_offsets",
    "empty",
    np.zeros(0, np.int64),
    ValueError,
    r"row_offsets must have shape \(rows \+ 1,\), from 0 to the 5 entries; got \(0,\)",
)
add(
    "documents",
    "empty",
    np.zeros(0, np.int64),
    ValueError,
    r"documents must have shape \(5,\), one value per entry as starts, lengths and offsets "
    r"have; got \(0,\)",
)
add("capacity", "nan", float("nan"), TypeError, r"capacity must be a positive integer; got float")
add("capacity", "size", 0, ValueError, r"capacity must be a positive integer; got 0")
add("capacity", "size", 2**31, ValueError, r"capacity must be at most 2\^31 - 1; got 2147483648")
add(
    "offsets",
    "size",
    np.array([0, 0, 0, 2**63], np.uint64),
    ValueError,
    r"offsets\[3\] = 9223372036854775808 does not fit int64",
)
add(
    "offsets",
    "shape",
    np.array([0, 0, 0, 5]),
    ValueError,
    r"offsets must have shape \(5,\), one value per entry as documents, starts and lengths "
    r"have; got \(4,\)",
)
add("starts", "shape", np.zeros(6, np.int64), ValueError, r"starts must have shape \(5,\)")
add(
    "row_offsets",
    "shape",
    np.array([0, 1, 2, 4]),
    ValueError,
    r"row_offsets\[3\] = 4; row_offsets must end at 5, the number of entries",
)
add(
    "document_lengths",
    "shape",
    LENGTHS[:3].copy(),
    ValueError,
    r"documents\[1\] = 3; documents must be in 0\.\.2, the documents' numbers",
    named="documents",
)
add("split", "range", "drop", ValueError, r"split must be one of 'pieces', 'truncate', 'refuse'")
add(
    "offsets",
    "range",
    np.array([0, 0, 0, 3, 0]),
    ValueError,
    r"offsets\[3\] = 3; entry 3 must start at 5, where entry 2 ends",
)
add(
    "documents",
    "range",
    np.array([1, 3, 0, 1, 1]),
    ValueError,
    r"starts\[4\] = 8, lengths\[4\] = 4: entry 4 runs past the end of document 1",
    named="lengths",
)
add(
    "starts",
    "range",
    np.array([0, 0, 0, 7, 8]),
    ValueError,
    r"starts\[3\] = 7, lengths\[3\] = 1: entries 0 and 3 both hold token 7 of document 1; "
    r"a document's entries must not overlap",
)
add(
    "lengths",
    "range",
    np.array([8, 8, 5, 1, 9]),
    ValueError,
    r"lengths\[4\] = 9; an entry's length must be in 1\.\.8 \(the capacity\)",
)
add(
    "row_offsets",
    "range",
    np.array([0, 2, 1, 4, 5]),
    ValueError,
    r"row_offsets\[2\] = 1 after row_offsets\[1\] = 2; row_offsets must rise",
)
add(
    "document_lengths",
    "range",
    np.array([5, 9, 0, 13]),
    ValueError,
    r"documents: document 3 gets 12 tokens from its entries; the plan places 13 of it "
    r"\(document_lengths\[3\] = 13\)",
)
add(
    "document_lengths",
    "range",
    np.array([5, -9, 0, 12]),
    ValueError,
    r"document_lengths\[1\] = -9 is negative; document_lengths must be >= 0",
)

# ---- PackPlan.cut -----------------------------------------------------------------------
add = FAMILY.cases_for("PackPlan.cut")
add("tokens", "type", RAGGED, TypeError, r"tokens must be an array NumPy can read")
add("offsets", "type", RAGGED, TypeError, r"offsets must be an array NumPy can read")
add("rows", "type", 3, TypeError, r"rows must be a slice, a range or a 1-D array of row numbers")
add("rows", "dtype", np.array([0.5]), TypeError, r"rows must be integers \(row numbers\)")
add("rows", "rank", np.zeros((1, 2), np.int64), ValueError, r"rows must be 1-D; got shape")
add("rows", "range", np.array([0, 99]), IndexError, r"rows\[1\] = 99 is out of range; .* 0\.\.")
add("rows", "range", [-1], IndexError, r"rows\[0\] = -1 is out of range")
add("columns", "type", [MASK], TypeError, r"columns must be a dict of column name")
add("columns", "type", {1: MASK}, TypeError, r"columns: a column name must be a str; got int")
add(
    "columns",
    "dtype",
    {"mask": MASK.astype(str)},
    TypeError,
    r"columns\['mask'\] must hold numbers \(bool, int, float\); got dtype <U",
)
add("columns", "rank", {"mask": MASK[None]}, ValueError, r"columns\['mask'\] must be 1-D")
add(
    "columns",
    "shape",
    {"mask": MASK[:5]},
    ValueError,
    r"columns\['mask'\] has 5 values; the tokens have 26",
)
add("column_pad", "type", "0", TypeError, r"column_pad for column 'mask' must be an integer")
add("column_pad", "range", 300, ValueError, r"column_pad for column 'mask' = 300 does not fit")
add("column_pad", "range", {"m": 1}, ValueError, r"column_pad names 'm', which is not one of")
add("position_start", "type", "2", TypeError, r"position_start must be an integer; got str")
add("position_start", "range", -1, ValueError, r"position_start must be >= 0; got -1")
add(
    "position_start",
    "size",
    2**63,
    ValueError,
    r"position_start 9223372036854775808 \+ capacity 8 - 1 does not fit position_dtype int64",
)
add("separator_id", "type", 1.5, TypeError, r"separator_id must be an integer; got float 1.5")
add(
    "separator_id",
    "range",
    2**63,
    ValueError,
    r"separator_id 9223372036854775808 does not fit position_dtype int64",
)
add("pad_value", "type", "0", TypeError, r"pad_value must be an integer; got str '0'")
add("labels", "type", 1, TypeError, r"labels must be True or False; got 1")
add("position_dtype", "dtype", np.float32, TypeError, r"position_dtype must be int64 or int32")
add("tokens", "dtype", TOKENS * 1.0, TypeError, r"tokens must be integers; got dtype float64")
add("offsets", "dtype", OFFSETS * 1.0, TypeError, r"offsets must be integers; got dtype float64")
add("tokens", "rank", TOKENS.reshape(2, 13), ValueError, r"tokens must be 1-D; got shape \(2, 13\)")
add(
    "offsets",
    "rank",
    OFFSETS[None],
    ValueError,
    r"offsets must have shape \(5,\) for 4 documents; got \(1, 5\)",
)
add(
    "tokens",
    "empty",
    TOKENS[:0],
    ValueError,
    r"offsets must lie in 0\.\.0 \(the tokens given\); got 0\.\.26",
)
add("pad_value", "nan", float("nan"), TypeError, r"pad_value must be an integer; got float nan")
add(
    "pad_value",
    "size",
    2**70,
    ValueError,
    r"pad_value 1180591620717411303424 does not fit the tokens' dtype int32",
)
add("pad_value", "range", -(2**40), ValueError, r"pad_value -1099511627776 does not fit")
add("rows", "range", slice(0, 3, 2), ValueError, r"rows must be consecutive \(step 1\); got step 2")
add(
    "offsets",
    "shape",
    np.array([0, 5, 13, 13, 26]),
    ValueError,
    r"offsets give document 1 8 tokens; the plan was made with 9",
)
add(
    "tokens",
    "shape",
    TOKENS[:20],
    ValueError,
    r"offsets must lie in 0\.\.20 \(the tokens given\); got 0\.\.26",
)

# ---- PackPlan.unpack --------------------------------------------------------------------
add = FAMILY.cases_for("PackPlan.unpack")
add("values", "type", RAGGED, TypeError, r"values must be an array NumPy can read")
add(
    "values",
    "dtype",
    np.empty((PLAN.rows, 8), object),
    TypeError,
    r"values must be an array of numbers, not of Python objects",
)
add("values", "rank", np.zeros(8), ValueError, r"values must have shape \(\d+, 8, \.\.\.\)")
add(
    "values",
    "empty",
    np.zeros((0, 8)),
    ValueError,
    r"values must have shape \(\d+, 8, \.\.\.\) for this plan; got \(0, 8\)",
)
add(
    "values",
    "shape",
    np.zeros((PLAN.rows, 9)),
    ValueError,
    r"values must have shape .*; got \(\d+, 9\)",
)

# ---- PackPlan.row -----------------------------------------------------------------------
add = FAMILY.cases_for("PackPlan.row")
add("r", "type", "0", TypeError, r"r must be an integer; got str '0'")
add("r", "type", True, TypeError, r"r must be an integer; got bool True")
add("r", "dtype", np.float32(1), TypeError, r"r must be an integer; got float32")
add("r", "rank", np.array([1]), TypeError, r"r must be an integer; got ndarray")
add("r", "nan", np.nan, TypeError, r"r must be an integer; got float nan")
add("r", "range", 99, IndexError, r"row 99 is out of range for a plan of \d+ rows")
add("r", "range", -99, IndexError, r"row -99 is out of range for a plan of \d+ rows")
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
