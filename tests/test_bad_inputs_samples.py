"""The bad-input matrix for gpt_samples, gpt_sample_index, GPTSamples.sample and
GPTSamples.samples.

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
SAMPLES = posembed.gpt_samples(LENGTHS, 4, seed=3)  # 6 samples of 4 + 1 tokens
OFFSETS = np.array([0, 5, 14, 14, 26])
TOKENS = np.arange(100, 126, dtype=np.int32)


def corpus() -> tuple[np.ndarray, np.ndarray]:
    return TOKENS.copy(), OFFSETS.copy()


FAMILY = Family(
    targets={
        "gpt_samples": function(
            "gpt_samples",
            lambda tmp: {
                "lengths": LENGTHS.copy(),
                "sequence_length": 4,
                "num_samples": 9,
                "num_epochs": None,
                "seed": 1234,
                "documents": None,
                "add_extra_token_to_sequence": True,
                "drop_last_partial_sequence": True,
                "separate_final_epoch": None,
            },
        ),
        "gpt_sample_index": function(
            "gpt_sample_index",
            lambda tmp: {
                "lengths": LENGTHS.astype(np.int32),
                "document_index": np.array([3, 0, 1, 2, 1], dtype=np.int32),
                "sequence_length": 4,
                "num_epochs": 1,
                "tokens_per_epoch": 35,
                "drop_last_partial_sequence": True,
                "add_extra_token_to_sequence": True,
            },
        ),
        "GPTSamples.sample": method(
            posembed.GPTSamples,
            "sample",
            lambda tmp: {"self": SAMPLES, "i": 1, "corpus": corpus(), "pad_value": -1},
            twin=True,
        ),
        "GPTSamples.samples": method(
            posembed.GPTSamples,
            "samples",
            lambda tmp: {
                "self": SAMPLES,
                "indices": np.array([5, 0, 2]),
                "corpus": corpus(),
                "pad_value": -1,
            },
            twin=True,
        ),
    },
    not_applicable={
        "gpt_samples": {
            **ALL_OUT,
            "shape": "lengths and documents need no common shape: documents index lengths (range)",
        },
        "gpt_sample_index": {
            **ALL_OUT,
            "shape": "lengths and document_index need no common shape: the index's ids index "
            "lengths (range)",
        },
        "GPTSamples.sample": {
            **ALL_OUT,
            "empty": "a sample number is a scalar; a corpus without sequences is rank",
        },
        "GPTSamples.samples": {
            **ALL_OUT,
            "empty": "no indices is valid: a (0, sequence_length + 1) array",
        },
    },
)

# ---- gpt_samples ------------------------------------------------------------------------
add = FAMILY.cases_for("gpt_samples")
add("lengths", "type", RAGGED, TypeError, r"lengths must be an array NumPy can read")
add("lengths", "type", "12", TypeError, r"lengths must be integers; got dtype <U2")
add(
    "sequence_length",
    "type",
    "4",
    TypeError,
    r"sequence_length must be a positive integer; got str '4'",
)
add(
    "sequence_length",
    "type",
    4.0,
    TypeError,
    r"sequence_length must be a positive integer; got float 4\.0",
)
add("num_samples", "type", "9", TypeError, r"num_samples must be an integer >= 0; got str '9'")
add("num_samples", "type", True, TypeError, r"num_samples must be an integer >= 0; got bool")
add(
    "num_epochs",
    "type",
    2.0,
    TypeError,
    r"num_epochs must be a positive integer; got float 2\.0",
    also={"num_samples": None},
)
add("seed", "type", "1", TypeError, r"seed must be an integer in 0\.\.2\*\*32-1; got str '1'")
add("seed", "type", 1.0, TypeError, r"seed must be an integer in 0\.\.2\*\*32-1; got float")
add("seed", "type", None, TypeError, r"seed must be an integer in 0\.\.2\*\*32-1; got NoneType")
add("documents", "type", RAGGED, TypeError, r"documents must be an array NumPy can read")
add(
    "add_extra_token_to_sequence",
    "type",
    1,
    TypeError,
    r"add_extra_token_to_sequence must be True or False; got 1",
)
add(
    "drop_last_partial_sequence",
    "type",
    "yes",
    TypeError,
    r"drop_last_partial_sequence must be True or False; got 'yes'",
)
add(
    "separate_final_epoch",
    "type",
    0,
    TypeError,
    r"separate_final_epoch must be True or False; got 0",
)
add("lengths", "dtype", LENGTHS * 1.0, TypeError, r"lengths must be integers; got dtype float64")
add("lengths", "dtype", LENGTHS > 0, TypeError, r"lengths must be integers; got a bool array")
add("documents", "dtype", [0.0, 1.0], TypeError, r"documents must be integers; got dtype float64")
add(
    "lengths", "rank", LENGTHS.reshape(2, 2), ValueError, r"lengths must be 1-D; got shape \(2, 2\)"
)
add("documents", "rank", np.int64(1), ValueError, r"documents must be 1-D; got shape \(\)")
add("lengths", "empty", [], ValueError, r"lengths must not be empty")
add("documents", "empty", np.zeros(0, np.int64), ValueError, r"documents must not be empty")
add(
    "documents",
    "empty",
    [2],
    ValueError,
    r"documents: the 1 sequences of the split hold no tokens; samples need at least 1",
)
add("lengths", "nan", [5.0, np.nan], TypeError, r"lengths must be integers; got dtype float64")
add(
    "sequence_length",
    "nan",
    np.nan,
    TypeError,
    r"sequence_length must be a positive integer; got float nan",
)
add("sequence_length", "size", 0, ValueError, r"sequence_length must be a positive integer; got 0")
add("num_samples", "size", -1, ValueError, r"num_samples must be an integer >= 0; got -1")
add(
    "num_epochs",
    "size",
    0,
    ValueError,
    r"num_epochs must be a positive integer; got 0",
    also={"num_samples": None},
)
add(
    "num_samples",
    "size",
    2**64,
    ValueError,
    r"num_samples=18446744073709551616 needs \d+ epochs of 26 tokens: the document index "
    r"\(epochs x documents\) is too large",
)
add(
    "num_epochs",
    "size",
    2**61,
    ValueError,
    r"num_epochs=2305843009213693952: the document index \(epochs x documents\) is too large",
    also={"num_samples": None},
)
add("seed", "range", -1, ValueError, r"seed must be an integer in 0\.\.2\*\*32-1; got -1")
add(
    "seed", "range", 2**32, ValueError, r"seed must be an integer in 0\.\.2\*\*32-1; got 4294967296"
)
add(
    "documents",
    "range",
    [0, 4],
    ValueError,
    r"documents\[1\] = 4 is not a sequence of lengths \(valid ids are 0\.\.3\)",
)
add(
    "documents",
    "range",
    [-1],
    ValueError,
    r"documents\[0\] = -1 is not a sequence of lengths",
)
add(
    "lengths",
    "range",
    np.array([5, -9, 0, 12]),
    ValueError,
    r"lengths\[1\] = -9 is negative \(documents\[1\]\); sequence lengths must be >= 0",
)
add(
    "lengths",
    "range",
    np.array([5, 2**63 - 1], dtype=np.uint64),
    ValueError,
    r"lengths: the sequences hold 2\^62 tokens or more",
)
add(
    "num_epochs",
    "combination",
    2,
    ValueError,
    r"give num_samples or num_epochs, not both; got num_samples=9 and num_epochs=2",
)

# ---- gpt_sample_index ---------------------------------------------------------------------
add = FAMILY.cases_for("gpt_sample_index")
add("lengths", "type", RAGGED, TypeError, r"lengths must be an array NumPy can read")
add("document_index", "type", "x", TypeError, r"document_index must be integers; got dtype <U1")
add(
    "sequence_length",
    "type",
    None,
    TypeError,
    r"sequence_length must be a positive integer; got NoneType",
)
add("num_epochs", "type", 1.0, TypeError, r"num_epochs must be a positive integer; got float")
add(
    "tokens_per_epoch",
    "type",
    "35",
    TypeError,
    r"tokens_per_epoch must be a positive integer; got str '35'",
)
add(
    "drop_last_partial_sequence",
    "type",
    None,
    TypeError,
    r"drop_last_partial_sequence must be True or False; got None",
)
add(
    "add_extra_token_to_sequence",
    "type",
    1,
    TypeError,
    r"add_extra_token_to_sequence must be True or False; got 1",
)
add("lengths", "dtype", np.ones(4), TypeError, r"lengths must be integers; got dtype float64")
add(
    "document_index",
    "dtype",
    np.zeros(3, bool),
    TypeError,
    r"document_index must be integers; got a bool array",
)
add("document_index", "rank", [[0, 1]], ValueError, r"document_index must be 1-D; got shape")
add("lengths", "rank", np.int32(5), ValueError, r"lengths must be 1-D; got shape \(\)")
add("lengths", "empty", np.zeros(0, np.int32), ValueError, r"lengths must not be empty")
add("document_index", "empty", [], ValueError, r"document_index must not be empty")
add(
    "document_index",
    "nan",
    [0.0, np.nan],
    TypeError,
    r"document_index must be integers; got dtype float64",
)
add(
    "tokens_per_epoch",
    "nan",
    np.nan,
    TypeError,
    r"tokens_per_epoch must be a positive integer; got float nan",
)
add("sequence_length", "size", -4, ValueError, r"sequence_length must be a positive integer")
add("num_epochs", "size", 0, ValueError, r"num_epochs must be a positive integer; got 0")
add("tokens_per_epoch", "size", 0, ValueError, r"tokens_per_epoch must be a positive integer")
add(
    "tokens_per_epoch",
    "size",
    2**62,
    ValueError,
    r"num_epochs x tokens_per_epoch = 4611686018427387904 tokens: the sample index "
    r"\(samples x sequence_length\) is too large",
)
add(
    "document_index",
    "range",
    np.array([3, 0, 4], dtype=np.int32),
    ValueError,
    r"document_index\[2\] = 4 is not a sequence of lengths \(valid ids are 0\.\.3\)",
)
add(
    "lengths",
    "range",
    np.array([5, 9, 0, -12], dtype=np.int32),
    ValueError,
    r"lengths\[3\] = -12 is negative \(document_index\[0\]\)",
)

# ---- GPTSamples.sample, GPTSamples.samples ------------------------------------------------
for target in ("GPTSamples.sample", "GPTSamples.samples"):
    add = FAMILY.cases_for(target)
    add("corpus", "type", 3, TypeError, r"corpus must be a pair \(tokens, offsets\) or a reader")
    add(
        "corpus",
        "type",
        (TOKENS,),
        TypeError,
        r"corpus must be a pair \(tokens, offsets\) or a reader .*; got a tuple of 1 items",
    )
    add("pad_value", "type", "0", TypeError, r"pad_value must be an integer; got str '0'")
    add("pad_value", "nan", np.nan, TypeError, r"pad_value must be an integer; got float nan")
    add(
        "pad_value", "size", 2**63, ValueError, r"pad_value must fit int64; got 9223372036854775808"
    )
    add(
        "corpus",
        "dtype",
        (TOKENS * 1.0, OFFSETS),
        TypeError,
        r"corpus tokens must be a 1-D integer array; got float64",
    )
    add(
        "corpus",
        "dtype",
        (TOKENS, OFFSETS * 1.0),
        TypeError,
        r"corpus offsets must be a 1-D integer array .*; got float64",
    )
    add(
        "corpus",
        "rank",
        (TOKENS.reshape(2, 13), OFFSETS),
        TypeError,
        r"corpus tokens must be a 1-D integer array; got int32 of shape \(2, 13\)",
    )
    add(
        "corpus",
        "rank",
        (TOKENS, OFFSETS[:1]),
        TypeError,
        r"corpus offsets must be a 1-D integer array of at least 2 entries",
    )
    add(
        "corpus",
        "shape",
        (TOKENS[:20], np.array([0, 5, 14, 14, 20])),
        ValueError,
        r"corpus: sequence 3 holds 6 tokens, but these samples read its tokens",
    )
    add(
        "corpus",
        "shape",
        (TOKENS[:14], OFFSETS[:4]),
        ValueError,
        r"corpus: these samples read sequence 3, but the corpus holds 3 sequences",
    )
    add(
        "corpus",
        "range",
        (TOKENS[:20], OFFSETS),
        ValueError,
        r"corpus offsets: sequence 3 spans 14\.\.26, which is not inside the tokens",
    )

add = FAMILY.cases_for("GPTSamples.sample")
add("i", "type", "0", TypeError, r"i must be an integer; got str '0'")
add("i", "type", 1.0, TypeError, r"i must be an integer; got float 1\.0")
add("i", "type", True, TypeError, r"i must be an integer; got bool True")
add("i", "dtype", np.float32(1), TypeError, r"i must be an integer; got float32")
add("i", "rank", np.array([1]), TypeError, r"i must be an integer; got ndarray")
add("i", "nan", np.nan, TypeError, r"i must be an integer; got float nan")
add("i", "range", 6, IndexError, r"i = 6 is out of range for 6 samples \(0\.\.5\)")
add("i", "range", -1, IndexError, r"i = -1 is out of range for 6 samples \(0\.\.5\)")
add("pad_value", "range", -(2**63) - 1, ValueError, r"pad_value must fit int64")

add = FAMILY.cases_for("GPTSamples.samples")
add("indices", "type", RAGGED, TypeError, r"indices must be an array NumPy can read")
add("indices", "dtype", [0.0, 1.0], TypeError, r"indices must be integers; got dtype float64")
add("indices", "nan", [np.nan], TypeError, r"indices must be integers; got dtype float64")
add(
    "indices", "rank", np.zeros((2, 1), int), ValueError, r"indices must be 1-D; got shape \(2, 1\)"
)
add(
    "indices",
    "range",
    [0, 6, -1],
    IndexError,
    r"indices\[1\] = 6 is out of range for 6 samples \(0\.\.5\); 2 of 3 indices are out of range",
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
