"""The bad-input matrix for BatchOrder and its methods.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed

from .badinput_harness import ALL_OUT, KINDS, RAGGED, Case, Family, function, method

ARGS: dict[str, Any] = {
    "global_batch_size": 8,
    "micro_batch_size": 2,
    "world_size": 2,
    "rank": 1,
    "seed": 3,
    "shuffle": None,
    "consumed_samples": 4,
}


def order() -> posembed.BatchOrder:
    return posembed.BatchOrder(100, **ARGS)


def state(**changes: Any) -> dict[str, Any]:
    saved = order().state_dict()
    saved.update(changes)
    return saved


NUMBER = {
    "empty": "a micro-batch or batch number is a scalar",
    "shape": "one scalar argument",
}

FAMILY = Family(
    targets={
        "BatchOrder": function("BatchOrder", lambda tmp: {"source": 100, **ARGS}),
        "BatchOrder.positions": method(
            posembed.BatchOrder, "positions", lambda tmp: {"self": order(), "i": 3}, twin=True
        ),
        "BatchOrder.micro_batch": method(
            posembed.BatchOrder, "micro_batch", lambda tmp: {"self": order(), "i": 3}, twin=True
        ),
        "BatchOrder.micro_batches": method(
            posembed.BatchOrder,
            "micro_batches",
            lambda tmp: {"self": order(), "start": 2, "stop": 5},
            twin=True,
        ),
        "BatchOrder.global_batch": method(
            posembed.BatchOrder, "global_batch", lambda tmp: {"self": order(), "k": 30}, twin=True
        ),
        "BatchOrder.sample_at": method(
            posembed.BatchOrder,
            "sample_at",
            lambda tmp: {"self": order(), "positions": np.array([[0, 99], [100, 10**12]])},
            twin=True,
        ),
        "BatchOrder.worker_micro_batches": method(
            posembed.BatchOrder,
            "worker_micro_batches",
            lambda tmp: {"self": order(), "worker": 1, "num_workers": 3, "stop": 10},
            twin=True,
        ),
        "BatchOrder.advance": method(
            posembed.BatchOrder,
            "advance",
            lambda tmp: {"self": order(), "micro_batches": 5},
            twin=True,
        ),
        "BatchOrder.epoch_of": method(
            posembed.BatchOrder,
            "epoch_of",
            lambda tmp: {"self": order(), "position": 250},
            twin=True,
        ),
        "BatchOrder.fingerprint": method(
            posembed.BatchOrder, "fingerprint", lambda tmp: {"self": order()}, twin=True
        ),
        "BatchOrder.state_dict": method(
            posembed.BatchOrder, "state_dict", lambda tmp: {"self": order()}, twin=True
        ),
        "BatchOrder.load_state_dict": method(
            posembed.BatchOrder,
            "load_state_dict",
            lambda tmp: {"self": order(), "state": state(consumed_samples=40)},
            twin=True,
        ),
    },
    not_applicable={
        "BatchOrder": {**ALL_OUT},
        "BatchOrder.positions": {**ALL_OUT, **NUMBER},
        "BatchOrder.micro_batch": {**ALL_OUT, **NUMBER},
        "BatchOrder.micro_batches": {
            **ALL_OUT,
            "empty": "start == stop is a valid range of no micro-batches",
        },
        "BatchOrder.global_batch": {**ALL_OUT, **NUMBER},
        "BatchOrder.sample_at": {
            **ALL_OUT,
            "rank": "positions of any shape are taken",
            "empty": "no positions give no samples",
            "size": "no count is given: the positions are values (range)",
            "shape": "one array argument",
        },
        "BatchOrder.worker_micro_batches": {
            **ALL_OUT,
            "empty": "num_workers=0 (reading in the main process) reads as one worker",
            "shape": "scalar arguments: worker past num_workers is range",
        },
        "BatchOrder.advance": {**ALL_OUT, **NUMBER},
        "BatchOrder.epoch_of": {
            **ALL_OUT,
            **NUMBER,
            "size": "a position is a value, not a count (range)",
        },
        "BatchOrder.fingerprint": {
            k: "takes no arguments (an extra one is unknown)" for k in KINDS
        },
        "BatchOrder.state_dict": {k: "takes no arguments (an extra one is unknown)" for k in KINDS},
        "BatchOrder.load_state_dict": {
            **ALL_OUT,
            "dtype": "a dict, no array",
            "rank": "a dict, no array",
            "shape": "one argument",
        },
    },
)

# ---- BatchOrder ---------------------------------------------------------------------------
add = FAMILY.cases_for("BatchOrder")
add("source", "type", "100", TypeError, r"source must be a number of samples .*; got str")
add("source", "type", True, TypeError, r"source must be a number of samples .*; got bool")
add("source", "type", np.arange(5), TypeError, r"source must be .*PackPlan or Windows; got ndarray")
add("source", "size", 0, ValueError, r"source must hold at least one sample; got 0")
add("source", "size", 2**64, ValueError, r"source: 18446744073709551616 samples an epoch reach")
add(
    "source",
    "empty",
    posembed.pack(np.zeros(0, np.int64), 8),
    ValueError,
    r"source \(PackPlan\) must hold at least one sample; got 0",
)
add(
    "global_batch_size",
    "type",
    "8",
    TypeError,
    r"global_batch_size must be a positive integer; got str",
)
add(
    "global_batch_size",
    "dtype",
    np.float64(8),
    TypeError,
    r"global_batch_size must be a positive integer; got float64",
)
add(
    "world_size",
    "rank",
    np.array([2]),
    TypeError,
    r"world_size must be a positive integer; got ndarray",
)
add(
    "micro_batch_size",
    "nan",
    float("nan"),
    TypeError,
    r"micro_batch_size must be a positive integer; got float nan",
)
add(
    "micro_batch_size", "size", 0, ValueError, r"micro_batch_size must be a positive integer; got 0"
)
add("world_size", "size", -1, ValueError, r"world_size must be a positive integer; got -1")
add(
    "global_batch_size",
    "size",
    2**62,
    ValueError,
    r"global_batch_size 4611686018427387904 .* reaches 2\^62",
)
add("consumed_samples", "size", -4, ValueError, r"consumed_samples must be an integer >= 0; got -4")
add("consumed_samples", "size", 2**62, ValueError, r"consumed_samples must be below 2\^62")
add("rank", "range", 2, ValueError, r"rank must be in 0..world_size - 1 = 1; got 2")
add("seed", "range", -1, ValueError, r"seed must be an integer >= 0; got -1")
add("seed", "range", 2**64, ValueError, r"seed must be in 0..2\^64 - 1; got 18446744073709551616")
add("seed", "type", 1.5, TypeError, r"seed must be an integer >= 0; got float 1.5")
add("shuffle", "type", 1, TypeError, r"shuffle must be True or False; got 1")
add(
    "global_batch_size",
    "shape",
    10,
    ValueError,
    r"global_batch_size must be a multiple of micro_batch_size \* world_size = 2 \* 2 = 4; got 10",
)
add(
    "consumed_samples",
    "range",
    6,
    ValueError,
    r"consumed_samples must be a multiple of micro_batch_size \* world_size = 2 \* 2 = 4 "
    r"\(a micro-step boundary\); got 6",
)
add("sauce", "unknown", 1, TypeError, r"unexpected keyword argument 'sauce'")


def numbers(target: str, arg: str) -> Any:
    """The cases every micro-batch or batch number has; returns ``add`` for more."""
    add = FAMILY.cases_for(target)
    add(arg, "type", "0", TypeError, rf"{arg} must be an integer >= 0; got str '0'")
    add(arg, "type", True, TypeError, rf"{arg} must be an integer >= 0; got bool True")
    add(arg, "dtype", np.float32(1), TypeError, rf"{arg} must be an integer >= 0; got float32")
    add(arg, "rank", np.array([1]), TypeError, rf"{arg} must be an integer >= 0; got ndarray")
    add(arg, "nan", float("nan"), TypeError, rf"{arg} must be an integer >= 0; got float nan")
    add(
        arg,
        "range",
        -1,
        IndexError,
        rf"{arg} -1 is out of range: the stream of batches is counted from 0",
    )
    return add


# ---- positions, micro_batch, global_batch --------------------------------------------------
for target, arg in (("BatchOrder.positions", "i"), ("BatchOrder.micro_batch", "i")):
    add = numbers(target, arg)
    add(arg, "size", 2**61, ValueError, rf"{arg} 2305843009213693952 reaches past position 2\^62")
add = numbers("BatchOrder.global_batch", "k")
add("k", "size", 2**60, ValueError, r"k 1152921504606846976 reaches past position 2\^62")

# ---- micro_batches ---------------------------------------------------------------------------
add = numbers("BatchOrder.micro_batches", "start")
add("stop", "range", -2, IndexError, r"stop -2 is out of range")
add("stop", "shape", 1, ValueError, r"stop must be >= start = 2; got 1")
add("stop", "size", 2**61, ValueError, r"stop - 1 2305843009213693951 reaches past position 2\^62")

# ---- sample_at ---------------------------------------------------------------------------------
add = FAMILY.cases_for("BatchOrder.sample_at")
add("positions", "type", RAGGED, TypeError, r"positions must be an array NumPy can read")
add(
    "positions",
    "dtype",
    np.array([1.5]),
    TypeError,
    r"positions must be integers; got dtype float64",
)
add("positions", "dtype", np.array(["1"]), TypeError, r"positions must be integers; got dtype <U1")
add("positions", "dtype", [2**70], TypeError, r"positions must be integers; got dtype object")
add(
    "positions",
    "nan",
    np.array([np.nan]),
    TypeError,
    r"positions must be integers; got dtype float64",
)
add(
    "positions",
    "range",
    np.array([0, -1]),
    IndexError,
    r"positions: position -1 is out of range: positions are 0..2\^62 - 1",
)
add(
    "positions",
    "range",
    np.array([2**62]),
    IndexError,
    r"positions: position 4611686018427387904 is out of range",
)
add(
    "positions",
    "range",
    np.array([2**64 - 1], np.uint64),
    IndexError,
    r"positions: position 18446744073709551615 is out of range",
)

# ---- worker_micro_batches ----------------------------------------------------------------------
add = FAMILY.cases_for("BatchOrder.worker_micro_batches")
add("worker", "type", "1", TypeError, r"worker must be an integer >= 0; got str '1'")
add(
    "num_workers",
    "dtype",
    np.float32(3),
    TypeError,
    r"num_workers must be an integer >= 0; got float32",
)
add(
    "num_workers",
    "rank",
    np.array([3]),
    TypeError,
    r"num_workers must be an integer >= 0; got ndarray",
)
add("stop", "nan", float("nan"), TypeError, r"stop must be an integer >= 0; got float nan")
add("num_workers", "size", -1, ValueError, r"num_workers must be an integer >= 0; got -1")
add("stop", "size", -1, ValueError, r"stop must be an integer >= 0; got -1")
add("worker", "range", 3, ValueError, r"worker must be in 0..2 for num_workers=3; got 3")

# ---- advance -------------------------------------------------------------------------------------
add = FAMILY.cases_for("BatchOrder.advance")
add("micro_batches", "type", "5", TypeError, r"micro_batches must be an integer >= 0; got str '5'")
add(
    "micro_batches",
    "dtype",
    np.float64(5),
    TypeError,
    r"micro_batches must be an integer >= 0; got float64",
)
add(
    "micro_batches",
    "rank",
    np.array([5]),
    TypeError,
    r"micro_batches must be an integer >= 0; got ndarray",
)
add(
    "micro_batches",
    "nan",
    float("nan"),
    TypeError,
    r"micro_batches must be an integer >= 0; got float nan",
)
add("micro_batches", "size", -1, ValueError, r"micro_batches must be an integer >= 0; got -1")
add(
    "micro_batches",
    "range",
    2**62,
    ValueError,
    r"micro_batches 4611686018427387904 would take consumed_samples past 2\^62",
)

# ---- epoch_of ------------------------------------------------------------------------------------
add = FAMILY.cases_for("BatchOrder.epoch_of")
add("position", "type", "5", TypeError, r"position must be an integer >= 0; got str '5'")
add("position", "dtype", np.float64(5), TypeError, r"position must be an integer >= 0; got float64")
add("position", "rank", np.array([5]), TypeError, r"position must be an integer >= 0; got ndarray")
add("position", "nan", float("nan"), TypeError, r"position must be an integer >= 0; got float nan")
add("position", "range", -1, ValueError, r"position must be an integer >= 0; got -1")

# ---- fingerprint, state_dict ---------------------------------------------------------------------
FAMILY.cases_for("BatchOrder.fingerprint")(
    "full", "unknown", True, TypeError, r"unexpected keyword argument 'full'"
)
FAMILY.cases_for("BatchOrder.state_dict")(
    "full", "unknown", True, TypeError, r"unexpected keyword argument 'full'"
)

# ---- load_state_dict -----------------------------------------------------------------------------
add = FAMILY.cases_for("BatchOrder.load_state_dict")
add(
    "state",
    "type",
    [("consumed_samples", 8)],
    TypeError,
    r"state must be a dict from BatchOrder.state_dict\(\); got list",
)
add("state", "empty", {}, ValueError, r"state must have format 'posembed.BatchOrder/1'; got None")
add(
    "state",
    "range",
    state(format="posembed.BatchOrder/0"),
    ValueError,
    r"state must have format 'posembed.BatchOrder/1'; got 'posembed.BatchOrder/0'",
)
add(
    "state",
    "range",
    state(fingerprint=None),
    ValueError,
    r"state\['fingerprint'\] must be a dict; got NoneType",
)
add(
    "state",
    "combination",
    posembed.BatchOrder(100, **{**ARGS, "seed": 4}).state_dict(),
    ValueError,
    r"the saved state is of another sample order; the seed changed: saved 4, given 3",
)
add(
    "state",
    "range",
    state(consumed_samples=6),
    ValueError,
    r"consumed_samples must be a multiple of micro_batch_size \* world_size = 2 \* 2 = 4",
    named="consumed_samples",
)
add(
    "state",
    "size",
    state(consumed_samples=-4),
    ValueError,
    r"consumed_samples must be an integer >= 0; got -4",
    named="consumed_samples",
)
add(
    "state",
    "nan",
    state(consumed_samples=float("nan")),
    TypeError,
    r"consumed_samples must be an integer >= 0; got float nan",
    named="consumed_samples",
)
add(
    "state",
    "type",
    state(consumed_samples="8"),
    TypeError,
    r"consumed_samples must be an integer >= 0; got str '8'",
    named="consumed_samples",
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


def test_a_refused_state_changes_nothing():
    o = order()
    with pytest.raises(ValueError, match="consumed_samples"):
        o.load_state_dict(state(consumed_samples=6))
    assert o.consumed_samples == 4
