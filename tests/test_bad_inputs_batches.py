"""The bad-input matrix for Batches and its methods.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed

from .badinput_harness import ALL_OUT, KINDS, Case, Family, function, method

RNG = np.random.default_rng(5)
LENGTHS = RNG.integers(3, 30, 50)
OFFSETS = np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int64)
TOKENS = RNG.integers(1, 100, int(OFFSETS[-1])).astype(np.int32)
SAMPLES = posembed.gpt_samples(LENGTHS, 8, num_samples=20, seed=2)


def order() -> posembed.BatchOrder:
    return posembed.BatchOrder(SAMPLES, global_batch_size=8, micro_batch_size=2, world_size=2)


def batches() -> posembed.Batches:
    return posembed.Batches(order(), (TOKENS.copy(), OFFSETS.copy()), prefetch=0, eod=0)


def state(**changes: Any) -> dict[str, Any]:
    saved = order().state_dict()
    saved.update(changes)
    return saved


NO_ARGUMENTS = {k: "takes no arguments (an extra one is unknown)" for k in KINDS}
SCALARS = {"empty": "scalar arguments", "shape": "scalar arguments"}

FAMILY = Family(
    targets={
        "Batches": function(
            "Batches",
            lambda tmp: {
                "order": order(),
                "corpus": (TOKENS.copy(), OFFSETS.copy()),
                "prefetch": 2,
                "total_samples": 40,
                "eod": 0,
            },
            twin=False,
        ),
        "Batches.worker": method(
            posembed.Batches,
            "worker",
            lambda tmp: {"self": batches(), "worker": 1, "num_workers": 3},
            twin=False,
        ),
        "Batches.state_dict": method(
            posembed.Batches, "state_dict", lambda tmp: {"self": batches()}, twin=False
        ),
        "Batches.load_state_dict": method(
            posembed.Batches,
            "load_state_dict",
            lambda tmp: {"self": batches(), "state": state(consumed_samples=8)},
            twin=False,
        ),
        "Batches.close": method(
            posembed.Batches, "close", lambda tmp: {"self": batches()}, twin=False
        ),
    },
    not_applicable={
        "Batches": {**ALL_OUT},
        "Batches.worker": {**ALL_OUT, **SCALARS},
        "Batches.state_dict": NO_ARGUMENTS,
        "Batches.close": NO_ARGUMENTS,
        "Batches.load_state_dict": {
            **ALL_OUT,
            "dtype": "a dict, no array",
            "rank": "a dict, no array",
            "empty": "an empty dict is a state of no format (range)",
            "nan": "a dict, no number",
            "size": "the position is a value of the state (range)",
            "shape": "one argument",
        },
    },
)

# ---- Batches ----------------------------------------------------------------------------------
add = FAMILY.cases_for("Batches")
add("order", "type", SAMPLES, TypeError, r"order must be a posembed\.BatchOrder; got GPTSamples")
add("prefetch", "type", "2", TypeError, r"prefetch must be an integer; got str '2'")
add("prefetch", "type", True, TypeError, r"prefetch must be an integer; got bool True")
add("prefetch", "dtype", np.float64(2), TypeError, r"prefetch must be an integer; got float64")
add("prefetch", "rank", np.array([2]), TypeError, r"prefetch must be an integer; got ndarray")
add("prefetch", "nan", float("nan"), TypeError, r"prefetch must be an integer; got float nan")
add("prefetch", "size", -1, ValueError, r"prefetch must be 0\.\.1024; got -1")
add(
    "prefetch", "size", 2**70, ValueError, r"prefetch must be 0\.\.1024; got 1180591620717411303424"
)
add("total_samples", "size", -4, ValueError, r"total_samples must be 0 or more; got -4")
add(
    "total_samples",
    "shape",
    6,
    ValueError,
    r"total_samples must be a multiple of micro_batch_size \* world_size \(4\); got 6",
)
add("corpus", "type", "tokens.bin", TypeError, r"corpus must be a pair \(tokens, offsets\)")
add(
    "corpus",
    "dtype",
    (TOKENS.astype(np.float64), OFFSETS),
    TypeError,
    r"corpus tokens must be a 1-D integer array; got float64",
)
add(
    "corpus",
    "rank",
    (TOKENS.reshape(1, -1), OFFSETS),
    TypeError,
    r"corpus tokens must be a 1-D integer array; got int32 of shape \(1, ",
)
add(
    "corpus",
    "empty",
    (TOKENS[:0], OFFSETS[:1]),
    TypeError,
    r"corpus offsets must be a 1-D integer array of at least 2 entries",
)
add(
    "corpus",
    "shape",
    (TOKENS, OFFSETS[:-5]),
    ValueError,
    r"corpus: it holds 45 sequences \(46 offsets\), but these samples were built from the "
    r"lengths of 50",
)
add("eod", "type", "0", TypeError, r"eod must be an integer token id; got str '0'")
add(
    "eod",
    "range",
    2**40,
    ValueError,
    r"eod = 1099511627776 is not a token id of the corpus's int32 tokens",
)
add("eos", "unknown", 1, TypeError, r"unknown read option 'eos' for GPTSamples")

# ---- worker -----------------------------------------------------------------------------------
add = FAMILY.cases_for("Batches.worker")
for arg in ("worker", "num_workers"):
    add(arg, "type", "1", TypeError, rf"{arg} must be an integer; got str '1'")
    add(arg, "dtype", np.float32(1), TypeError, rf"{arg} must be an integer; got float32")
    add(arg, "rank", np.array([1]), TypeError, rf"{arg} must be an integer; got ndarray")
    add(arg, "nan", float("nan"), TypeError, rf"{arg} must be an integer; got float nan")
add("num_workers", "size", 0, ValueError, r"num_workers must be at least 1; got 0")
add("num_workers", "size", -2, ValueError, r"num_workers must be 0 or more; got -2")
add("worker", "range", 3, ValueError, r"worker must be 0\.\.2 \(num_workers - 1\); got 3")
add("worker", "range", -1, ValueError, r"worker must be 0 or more; got -1")

# ---- state_dict, close: no arguments ------------------------------------------------------------
for target in ("Batches.state_dict", "Batches.close"):
    FAMILY.cases_for(target)(
        "extra", "unknown", 1, TypeError, r"unexpected keyword argument 'extra'"
    )

# ---- load_state_dict ----------------------------------------------------------------------------
add = FAMILY.cases_for("Batches.load_state_dict")
add("state", "type", "x", TypeError, r"state must be a dict from BatchOrder\.state_dict\(\)")
add(
    "state",
    "range",
    state(consumed_samples=6),
    ValueError,
    r"consumed_samples must be a multiple of micro_batch_size \* world_size",
    named="consumed_samples",
)
add("state", "range", {}, ValueError, r"state must have format 'posembed\.BatchOrder/1'")


@pytest.mark.parametrize("case", FAMILY.cases, ids=FAMILY.case_id)
def test_bad_input_is_refused_and_nothing_is_modified(case: Case, tmp_path: Path):
    FAMILY.check_refused(case, tmp_path)


@pytest.mark.parametrize("name", list(FAMILY.targets))
def test_valid_arguments_succeed_and_modify_no_input(name: str, tmp_path: Path):
    FAMILY.check_valid(name, tmp_path)


def test_a_refused_state_leaves_the_position():
    b = batches()
    next(iter(b))
    with pytest.raises(ValueError, match="consumed_samples"):
        b.load_state_dict(state(consumed_samples=6))
    assert b.consumed_samples == 4
