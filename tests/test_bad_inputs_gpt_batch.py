"""The bad-input matrix for gpt_batch and GPTSamples.batch.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import posembed

from .badinput_harness import ALL_OUT, RAGGED, Case, Family, From, function, method

LENGTHS = np.array([5, 9, 0, 12])  # 26 tokens
SAMPLES = posembed.gpt_samples(LENGTHS, 4, seed=3)  # 6 samples of 4 + 1 tokens
OFFSETS = np.array([0, 5, 14, 14, 26])
TOKENS = np.arange(100, 126, dtype=np.int32)
TOKENS[[4, 13, 20]] = 7  # end-of-document tokens
# samples of 2^30 tokens, built by hand: three of them pass int32's cu_seqlens
HUGE = posembed.GPTSamples(
    np.array([0], np.int32),
    np.array([[0, 0], [0, 4]], np.int32),
    np.array([0], np.uint32),
    1,
    2**30,
    True,
)


def corpus() -> tuple[np.ndarray, np.ndarray]:
    return TOKENS.copy(), OFFSETS.copy()


def valid(tmp: Path) -> dict[str, object]:
    return {
        "samples": SAMPLES,
        "indices": np.array([5, 0, 2]),
        "corpus": corpus(),
        "eod": 7,
        "reset_position_ids": True,
        "reset_attention_mask": True,
        "eod_mask_loss": False,
        "pad_value": -1,
        "attention_mask": False,
    }


def valid_method(tmp: Path) -> dict[str, object]:
    args = valid(tmp)
    args["self"] = args.pop("samples")
    return args


NOT_APPLICABLE = {
    **ALL_OUT,
    "empty": "no indices is valid: a batch of 0 samples (cu_seqlens [0]); a corpus without "
    "sequences is rank (its offsets need 2 entries)",
}
FAMILY = Family(
    targets={
        "gpt_batch": function("gpt_batch", valid),
        # the twin has no method: posembed.reference.gpt_batch is called on GPTSamples
        "GPTSamples.batch": method(posembed.GPTSamples, "batch", valid_method, twin=False),
    },
    not_applicable={"gpt_batch": NOT_APPLICABLE, "GPTSamples.batch": NOT_APPLICABLE},
)
for target in ("gpt_batch", "GPTSamples.batch"):
    add = FAMILY.cases_for(target)
    if target == "gpt_batch":
        add("samples", "type", "x", TypeError, r"samples must be the GPTSamples")
    add("indices", "type", RAGGED, TypeError, r"indices must be an array NumPy can read")
    add("eod", "type", "7", TypeError, r"eod must be an integer token id; got str '7'")
    add("eod", "type", True, TypeError, r"eod must be an integer token id; got bool")
    add("reset_position_ids", "type", 1, TypeError, r"reset_position_ids must be True or False")
    add("attention_mask", "type", "yes", TypeError, r"attention_mask must be True or False")
    add("eod_mask_loss", "type", None, TypeError, r"eod_mask_loss must be True or False")
    add("pad_value", "type", 1.5, TypeError, r"pad_value must be an integer; got float")
    add("corpus", "type", 5, TypeError, r"corpus must be a pair \(tokens, offsets\) or a reader")
    add("indices", "dtype", [0.0, 1.0], TypeError, r"indices must be integers; got dtype float64")
    add(
        "corpus",
        "dtype",
        From(lambda a: (TOKENS * 1.0, OFFSETS.copy())),
        TypeError,
        r"corpus tokens must be a 1-D integer array; got float64",
    )
    add(
        "indices",
        "rank",
        np.zeros((2, 1), int),
        ValueError,
        r"indices must be 1-D; got shape \(2, 1\)",
    )
    add(
        "corpus",
        "rank",
        From(lambda a: (TOKENS.copy(), np.array([0]))),
        TypeError,
        r"corpus offsets must be a 1-D integer array of at least 2 entries",
    )
    add("indices", "nan", [np.nan], TypeError, r"indices must be integers; got dtype float64")
    add("eod", "nan", np.nan, TypeError, r"eod must be an integer token id; got float nan")
    add(
        "indices",
        "size",
        [0, 0, 0],
        ValueError,
        r"indices: 3 samples of 1073741824 tokens are 3221225472 tokens, but cu_seqlens are "
        r"int32",
        also={"samples" if target == "gpt_batch" else "self": HUGE},
    )
    add(
        "indices",
        "range",
        [0, 6, -1],
        IndexError,
        r"indices\[1\] = 6 is out of range for 6 samples \(0\.\.5\); 2 of 3 indices are out",
    )
    add("eod", "range", 2**63, ValueError, r"eod must fit int64 \(the samples' dtype\)")
    add(
        "eod",
        "range",
        2**40,
        ValueError,
        r"eod = 1099511627776 is not a token id of the corpus's int32 tokens",
    )
    add("pad_value", "range", -(2**63) - 1, ValueError, r"pad_value must fit int64")
    add(
        "corpus",
        "shape",
        From(lambda a: (TOKENS[:14].copy(), OFFSETS[:3].copy())),
        ValueError,
        r"corpus: it holds 2 sequences \(3 offsets\), but these samples were built from the "
        r"lengths of 4",
    )
    add(
        "corpus",
        "range",
        From(lambda a: (TOKENS.copy(), np.array([0, 5, 14, 14, 27]))),
        ValueError,
        r"corpus offsets: sequence \d spans",
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
