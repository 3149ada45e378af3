"""The bad-input matrix for resample_grid.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from .badinput_harness import (
    ALL_OUT,
    PAIR,
    RAGGED,
    Case,
    Family,
    function,
    table,
)

FAMILY = Family(
    targets={
        "resample_grid": function(
            "resample_grid",
            lambda tmp: {
                "table": table(1 + 9, 4),
                "grid": (3, 3),
                "new_grid": (4, 5),
                "prefix": 1,
                "method": "bicubic",
                "align": "half_pixel",
                "antialias": False,
            },
        ),
    },
    not_applicable={
        "resample_grid": {
            **ALL_OUT,
            "nan": "NaN and inf in the grid spread to their neighbours as in PyTorch (documented)",
        },
    },
)

# ---- resample_grid ----------------------------------------------------------------------
add = FAMILY.cases_for("resample_grid")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add("grid", "type", 9, TypeError, r"grid " + PAIR + r"; got 9")
add("grid", "type", None, TypeError, r"grid " + PAIR + r"; got None")
add("grid", "type", (3.0, 3), TypeError, r"grid\[0\] must be a positive integer; got float 3\.0")
add("grid", "type", (3, True), TypeError, r"grid\[1\] must be a positive integer; got bool True")
add("new_grid", "type", "45", TypeError, r"new_grid\[0\] must be a positive integer; got str '4'")
add("new_grid", "type", None, TypeError, r"new_grid " + PAIR + r"; got None")
add("prefix", "type", 1.0, TypeError, r"prefix must be an integer >= 0; got float 1\.0")
add("table", "dtype", np.ones((10, 4), np.int64), TypeError, r"table must have a float dtype")
add("table", "rank", np.ones((10,), np.float32), ValueError, r"table must be a 2-D array")
add("grid", "rank", (3, 3, 1), TypeError, r"grid " + PAIR + r"; got \(3, 3, 1\)")
add("new_grid", "rank", (20,), TypeError, r"new_grid " + PAIR)
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    ValueError,
    r"table has 0 rows but prefix \+ H \* W = 1 \+ 3 \* 3 = 10 \(prefix 1, grid \(3, 3\)\)",
)
add("grid", "size", (0, 3), ValueError, r"grid\[0\] must be a positive integer; got 0")
add("new_grid", "size", (4, -1), ValueError, r"new_grid\[1\] must be a positive integer; got -1")
add("new_grid", "size", (2**63, 1), ValueError, r"new_grid is too large: 9223372036854775809 x 4")
add("new_grid", "size", (2**64, 1), ValueError, r"new_grid is too large: 18446744073709551617")
add("new_grid", "size", (2**31, 2**31), ValueError, r"new_grid is too large")
add(
    "grid",
    "size",
    (2**63, 1),
    ValueError,
    r"table has 10 rows but prefix \+ H \* W = .*\(prefix 1, grid \(9223372036854775808, 1\)\)",
)
add("prefix", "size", -1, ValueError, r"prefix must be an integer >= 0; got -1")
add("prefix", "size", 2**64, ValueError, r"prefix \+ H \* W = 18446744073709551616 \+ 3 \* 3")
add(
    "method",
    "range",
    "nearest",
    ValueError,
    r"method must be one of 'bilinear', 'bicubic'; got 'nearest'",
)
add("align", "range", "scale", ValueError, r"align must be one of 'half_pixel', 'corners'; got")
add(
    "prefix",
    "shape",
    2,
    ValueError,
    r"table has 10 rows but prefix \+ H \* W = 2 \+ 3 \* 3 = 11 \(prefix 2, grid \(3, 3\)\)",
)
add("grid", "shape", (2, 5), ValueError, r"prefix \+ H \* W = 1 \+ 2 \* 5 = 11 \(prefix 1, grid")
add("antialias", "type", 1, TypeError, r"antialias must be True or False; got 1")
add("antialias", "type", "yes", TypeError, r"antialias must be True or False; got 'yes'")
add(
    "antialias",
    "combination",
    True,
    ValueError,
    r"antialias=True needs align='half_pixel' .*; got align='corners'",
    also={"align": "corners"},
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
