"""The bad-input matrix for set_num_threads and show_config.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from .badinput_harness import (
    ALL_OUT,
    KINDS,
    SCALARS,
    Case,
    Family,
    function,
)

FAMILY = Family(
    targets={
        "set_num_threads": function("set_num_threads", lambda tmp: {"n": None}, twin=False),
        "show_config": function("show_config", lambda tmp: {"file": io.StringIO()}, twin=False),
    },
    not_applicable={
        "set_num_threads": {
            **ALL_OUT,
            **{k: SCALARS for k in ("dtype", "rank", "empty", "shape")},
            "nan": "NaN is a float, refused as a type (type)",
            "range": "its range is the size check (size)",
        },
        "show_config": {
            **ALL_OUT,
            **{k: "its only argument is a stream" for k in KINDS[1:8]},
        },
    },
)

# ---- set_num_threads, show_config -------------------------------------------------------
add = FAMILY.cases_for("set_num_threads")
add("n", "type", "2", TypeError, r"n must be an integer or None; got str '2'")
add("n", "type", 1.5, TypeError, r"n must be an integer or None; got float 1\.5")
add("n", "type", True, TypeError, r"n must be an integer or None; got bool True")
add("n", "type", np.nan, TypeError, r"n must be an integer or None; got float nan")
THREADS = r"n must be in 1\.\.\d+ \(4 per CPU\), or None for the default; got "
for n in (0, -1, 2**63, 2**64, 10**6):
    add("n", "size", n, ValueError, THREADS + str(n))
add = FAMILY.cases_for("show_config")
add(
    "file",
    "type",
    3,
    TypeError,
    r"file must be a text stream \(with a write method\) or None; got int",
)
add("file", "type", "out.txt", TypeError, r"file must be a text stream .*; got str")

del add

# == the tests ==========================================================================

pytestmark = pytest.mark.usefixtures("restore_threads")


@pytest.mark.parametrize("case", FAMILY.cases, ids=FAMILY.case_id)
def test_bad_input_is_refused_and_nothing_is_modified(case: Case, tmp_path: Path):
    FAMILY.check_refused(case, tmp_path)


@pytest.mark.parametrize("name", list(FAMILY.targets))
def test_valid_arguments_succeed_and_modify_no_input(name: str, tmp_path: Path):
    FAMILY.check_valid(name, tmp_path)
