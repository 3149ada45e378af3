"""The bad-input matrix for gpt_blend, split_ranges and write_megatron_cache, and
the blend options of ``posembed samples``.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``. The command's blend options take
several words each, which the harness's argument lists do not hold: their
cases run below through the same rules (status 2, one error line, nothing
written).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

import posembed
from posembed import cli

from .badinput_harness import ALL_OUT, RAGGED, Case, Family, From, function, method

A, B = np.full(40, 9), np.full(30, 7)
TOKENIZER = {"class": "tiny"}


def corpus_of(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tokens 0..11 (7 the end of a document) for sequences of these lengths."""
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return np.arange(int(offsets[-1])) % 12, offsets


def split_batch(tmp: Path) -> dict[str, object]:
    return {
        "self": named_blend().train,
        "indices": np.array([3, 0, 19]),
        "corpora": [corpus_of(A), corpus_of(B)],
        "eod": 7,
        "reset_position_ids": True,
        "reset_attention_mask": True,
        "eod_mask_loss": True,
        "pad_value": -1,
        "attention_mask": False,
    }


def named_blend() -> posembed.GPTBlend:
    return posembed.gpt_blend(
        [("data/a", A), ("data/b", B)], [1, 3], split="90,8,2", sizes=[20, 2, 1], sequence_length=8
    )


FAMILY = Family(
    targets={
        "GPTBlendSplit.batch": method(posembed.GPTBlendSplit, "batch", split_batch, twin=False),
        "gpt_blend": function(
            "gpt_blend",
            lambda tmp: {
                "corpora": [A.copy(), B.copy()],
                "weights": [1.0, 3.0],
                "split": "90,8,2",
                "per_split": None,
                "sizes": [20, 2, 1],
                "sequence_length": 8,
                "seed": 1,
                "mid_level_dataset_surplus": 0.005,
                "add_extra_token_to_sequence": True,
                "drop_last_partial_validation_sequence": True,
            },
            twin=False,
        ),
        "split_ranges": function(
            "split_ranges",
            lambda tmp: {"split": "969,30,1", "num_sequences": 1000, "second_split": None},
            twin=False,
        ),
        "write_megatron_cache": function(
            "write_megatron_cache",
            lambda tmp: {
                "blend": named_blend(),
                "path_to_cache": tmp / "cache",
                "tokenizer": dict(TOKENIZER),
            },
            twin=False,
        ),
    },
    not_applicable={
        "GPTBlendSplit.batch": {
            **ALL_OUT,
            "empty": "no indices is valid: a batch of 0 samples",
            "size": "takes no counts; a batch past int32's cu_seqlens is gpt_batch's case",
        },
        "gpt_blend": {**ALL_OUT},
        "split_ranges": {
            **ALL_OUT,
            "dtype": "takes no arrays: a string and a count",
            "rank": "takes no arrays: a string and a count",
        },
        "write_megatron_cache": {
            **ALL_OUT,
            "dtype": "takes no arrays: the blend's come from gpt_blend",
            "rank": "takes no arrays: the blend's come from gpt_blend",
            "empty": "an empty tokenizer description is valid, as Megatron writes it",
            "nan": "a NaN in the tokenizer's identifiers is written as Megatron's JSON writes it",
            "size": "takes no counts",
            "range": "takes no values with a range",
            "shape": "takes no arguments that must fit together",
        },
    },
)

# ---- GPTBlendSplit.batch (each corpus's rows are gpt_batch's: its cases are there) ---
add = FAMILY.cases_for("GPTBlendSplit.batch")
add("corpora", "type", "ab", TypeError, r"corpora must be a list or tuple of 2 corpora")
add(
    "corpora",
    "type",
    [5, 6],
    TypeError,
    r"corpora\[0\]: corpus must be a pair \(tokens, offsets\) or a reader",
)
add("eod", "type", "7", TypeError, r"eod must be an integer token id; got str '7'")
add("indices", "type", RAGGED, TypeError, r"indices must be an array NumPy can read")
add("indices", "dtype", [0.0, 1.0], TypeError, r"indices must be integers; got dtype float64")
add("indices", "rank", np.zeros((2, 1), int), ValueError, r"indices must be 1-D; got shape")
add("indices", "nan", [np.nan], TypeError, r"indices must be integers; got dtype float64")
add("indices", "range", [0, 20], IndexError, r"indices\[1\] = 20 is out of range for 20 samples")
add("corpora", "shape", From(lambda a: a["corpora"][:1]), ValueError, r"corpora must hold one")
add(
    "corpora",
    "shape",
    From(lambda a: [a["corpora"][1], a["corpora"][0]]),
    ValueError,
    r"corpora\[0\]: corpus: it holds 30 sequences .* built from the lengths of 40",
)

# ---- gpt_blend ----------------------------------------------------------------------------
add = FAMILY.cases_for("gpt_blend")
add("corpora", "type", "prefix", TypeError, r"corpora must be a list of corpora")
add("corpora", "type", [RAGGED], TypeError, r"corpora\[0\]: lengths must be an array NumPy")
add("weights", "type", "13", TypeError, r"weights must be numbers, one per corpus")
add("weights", "type", [1.0, "3"], TypeError, r"weights\[1\] must be a number; got str")
add("split", "type", 969, TypeError, r"split must be a string such as '969,30,1'; got int")
add("sizes", "type", 20, TypeError, r"sizes must be a list of 3 entries")
add("sequence_length", "type", "8", TypeError, r"sequence_length must be a positive integer")
add("seed", "type", 1.5, TypeError, r"seed must be an integer in 0\.\.2\*\*32-1")
add("mid_level_dataset_surplus", "type", "0.1", TypeError, r"mid_level_dataset_surplus must be")
add("add_extra_token_to_sequence", "type", 1, TypeError, r"add_extra_token_to_sequence must be")
add(
    "drop_last_partial_validation_sequence",
    "type",
    "no",
    TypeError,
    r"drop_last_partial_validation_sequence must be a bool",
)
add("corpora", "dtype", [A * 1.0, B], TypeError, r"corpora\[0\]: lengths .*got dtype float64")
add("weights", "dtype", [1 + 2j, 1.0], TypeError, r"weights\[0\] must be a number")
add("corpora", "rank", [A.reshape(4, 10), B], ValueError, r"corpora\[0\]: lengths must be 1-D")
add("corpora", "empty", [], ValueError, r"corpora: the blend holds no corpora")
add("corpora", "empty", [A[:0], B], ValueError, r"corpora\[0\]: lengths must not be empty")
add("split", "empty", "", ValueError, r"split '' is empty")
add("weights", "nan", [np.nan, 1.0], ValueError, r"weights\[0\] is nan; each weight must be")
add("weights", "nan", [np.inf, 1.0], ValueError, r"weights\[0\] is inf; each weight must be")
add("split", "nan", "nan,1", ValueError, r"split 'nan,1': 'nan' is not a number >= 0")
add(
    "mid_level_dataset_surplus",
    "nan",
    float("nan"),
    ValueError,
    r"mid_level_dataset_surplus must be a finite number >= 0; got nan",
)
add("sequence_length", "size", 0, ValueError, r"sequence_length must be a positive integer")
add("sizes", "size", [-1, 2, 1], ValueError, r"sizes\[0\] must be >= 0; got -1")
add(
    "corpora",
    "size",
    [A] * 40_000,
    ValueError,
    r"corpora: a blend of 40000 corpora; .* at most 32766",
    also={"weights": None},
)
add("weights", "range", [-1.0, 3.0], ValueError, r"weights\[0\] is -1\.0; each weight must be")
add("weights", "range", [0, 3.0], ValueError, r"weights\[0\] is 0; each weight must be")
add("split", "range", "-90,8,2", ValueError, r"split '-90,8,2': '-90' is not a number >= 0")
add("split", "range", "0,0,0", ValueError, r"split '0,0,0' is all zeros")
add("seed", "range", 2**32, ValueError, r"seed must be an integer in 0\.\.2\*\*32-1")
add("weights", "shape", [1.0], ValueError, r"weights: 1 weights for 2 corpora")
add("sizes", "shape", [20, 2], ValueError, r"sizes must hold 3 entries")
add("split", "shape", "90,8,1,1", ValueError, r"split '90,8,1,1' has 4 parts")
add(
    "sizes",
    "combination",
    [20, None, 1],
    ValueError,
    r"sizes \[20, None, 1\]: a weighted blend \(weights\) needs the samples wanted",
)
add(
    "per_split",
    "combination",
    [([A, B], None), None, None],
    ValueError,
    r"give corpora .* or per_split .*, exactly one of them",
)
add(
    "mid_level_dataset_surplus",
    "combination",
    0.0,
    IndexError,
    r"the train blend draws 3 samples from corpora\[1\], .* oversamples it; raise "
    r"mid_level_dataset_surplus",
    also={
        "corpora": [np.full(10, 33), np.array([65]), np.full(10, 33)],
        "weights": [1, 7, 1],
        "split": "1",
        "sizes": [2, 0, 0],
        "sequence_length": 32,
    },
)
add(
    "corpora",
    "file",
    From(lambda a: [a["corpora"][0], "/nonexistent/posembed/missing"]),
    ValueError,
    r"missing\.idx .*: no such file",
    named="missing",
)

# ---- split_ranges -------------------------------------------------------------------------
add = FAMILY.cases_for("split_ranges")
add("split", "type", 969, TypeError, r"split must be a string such as '969,30,1'; got int")
add("num_sequences", "type", 10.0, TypeError, r"num_sequences must be an integer; got float")
add("second_split", "type", [1, 2], TypeError, r"split must be a string", named="split")
add("split", "empty", " ", ValueError, r"split ' ' is empty")
add("split", "empty", "1,,2", ValueError, r"split '1,,2': '' is not a number >= 0")
add("split", "nan", "1,nan", ValueError, r"split '1,nan': 'nan' is not a number >= 0")
add("split", "nan", "9" * 400, ValueError, r"split '9+': its numbers must be finite")
add("num_sequences", "size", -1, ValueError, r"num_sequences must be >= 0; got -1")
add("split", "range", "99,-1", ValueError, r"split '99,-1': '-1' is not a number >= 0")
add("split", "range", "1e3,1", ValueError, r"split '1e3,1': '1e3' is not a number >= 0")
add("split", "range", "a,b", ValueError, r"split 'a,b': 'a' is not a number >= 0")
add("second_split", "range", "0", ValueError, r"split '0' is all zeros", named="split")
add("split", "shape", "1,2,3,4", ValueError, r"split '1,2,3,4' has 4 parts")

# ---- write_megatron_cache -----------------------------------------------------------------
add = FAMILY.cases_for("write_megatron_cache")
add("blend", "type", {"train": None}, TypeError, r"blend must be a GPTBlend .*; got dict")
add("path_to_cache", "type", 5, TypeError, r"path_to_cache must be a folder path; got int")
add("tokenizer", "type", object(), TypeError, r"tokenizer must be the tokenizer's unique_ident")
add("tokenizer", "type", {"a": object()}, TypeError, r"tokenizer: its identifiers cannot be")
add(
    "blend",
    "combination",
    posembed.gpt_blend([A, B], None, split="1", sizes=[10, 0, 0], sequence_length=8),
    ValueError,
    r"blend: the train split's corpus 0 was given as lengths without a name: .* give it as",
)
add(
    "path_to_cache",
    "file",
    From(lambda a: (a["path_to_cache"].write_bytes(b"precious"), a["path_to_cache"])[1]),
    FileExistsError,
    r"path_to_cache .*cache: no folder can be made there",
)


# == the tests ==========================================================================

pytestmark = pytest.mark.usefixtures("restore_threads")


@pytest.mark.parametrize("case", FAMILY.cases, ids=FAMILY.case_id)
def test_bad_input_is_refused_and_nothing_is_modified(case: Case, tmp_path: Path):
    FAMILY.check_refused(case, tmp_path)


@pytest.mark.parametrize("name", list(FAMILY.targets))
def test_valid_arguments_succeed_and_modify_no_input(name: str, tmp_path: Path):
    FAMILY.check_valid(name, tmp_path)


# -- the command's blend options ------------------------------------------------------------

BLEND_COMMAND = [
    (["--blend", "30", "{a}", "x", "{b}"], r"--blend: .* 'x' stands where a weight should"),
    (["--blend", "{a}", "--split", "1,-1"], r"split '1,-1': '-1' is not a number >= 0"),
    (["--blend", "{a}", "--split", "1,2,3,4"], r"split '1,2,3,4' has 4 parts"),
    (["--blend", "0", "{a}", "1", "{b}"], r"weights\[0\] is 0.0; each weight must be"),
    (["--blend", "nan", "{a}", "1", "{b}"], r"weights\[0\] is nan"),
    (["--blend", "1", "{a}", "1", "{b}", "--sizes", "9", "none", "1"], r"every split"),
    (["--blend", "{a}", "--sizes", "9", "x", "1"], r"--sizes: 'x' is not a sample count"),
    (["--blend", "{a}", "--sizes", "9", "-1", "1"], r"sizes\[1\] must be >= 0; got -1"),
    (["--blend", "{a}", "--tokenizer-identifiers", "{{"], r"--tokenizer-identifiers is not JSON"),
    (["--blend", "{a}", "--tokenizer-identifiers", "[1]"], r"tokenizer must be the tokenizer's"),
    (["--blend", "{a}", "--no-cache"], r"give --megatron-cache DIR"),
    (["--blend", "{a}", "--num-samples", "5"], r"--num-samples is for one input"),
    (["--blend", "{a}", "--train-blend", "{b}"], r"give --blend or per-split blends, not both"),
    (["--train-blend", "{a}", "--split", "1"], r"--split divides --blend"),
    (["--blend", "{a}", "-o", "{tmp}/out"], r"give no input and no -o"),
    (["--blend", "{tmp}/missing"], r"missing\.idx .*: no such file"),
    (["--blend", "{a}", "--megatron-cache", "{a}.idx"], r"File exists|Not a directory"),
    (["--blend", "{a}", "--split", "1", "--mid-level-dataset-surplus", "-1"], r"surplus must"),
    (["{a}", "-o", "{tmp}/out", "--split", "1", "--no-cache"], r"--split goes with --blend"),
]


@pytest.mark.parametrize(("argv", "match"), BLEND_COMMAND)
def test_the_blend_options_refuse_in_one_line_and_write_nothing(
    argv: list[str], match: str, tmp_path: Path
):
    posembed.write_indexed(tmp_path / "a", np.arange(3000) % 7, np.arange(0, 3001, 3))
    posembed.write_indexed(tmp_path / "b", np.arange(2000) % 5, np.arange(0, 2001, 4))
    words = [w.format(a=tmp_path / "a", b=tmp_path / "b", tmp=tmp_path) for w in argv]
    if "--no-cache" in words:
        words.remove("--no-cache")
    else:
        if "--megatron-cache" not in words:
            words += ["--megatron-cache", str(tmp_path / "cache")]
        if "--tokenizer-identifiers" not in words:
            words += ["--tokenizer-identifiers", json.dumps(TOKENIZER)]
    if "--sizes" not in words and any(w.endswith("blend") for w in words):
        words += ["--sizes", "9", "1", "1"]
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        status = cli.main(["samples", "--sequence-length", "8", *words])
    lines = err.getvalue().splitlines()
    assert status == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("posembed samples: error: ")
    assert out.getvalue() == ""
    assert re.search(match, lines[0]), lines[0]
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before
