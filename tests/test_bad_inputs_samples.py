"""The bad-input matrix for gpt_samples, gpt_sample_index, GPTSamples.sample and
GPTSamples.samples, and more cases of ``posembed samples``.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``. The command is a target of the
commands' family (``test_bad_inputs_cli.py``); its cases here
(``COMMAND_CASES``: a corpus without tokens, counts too large to build, a
store that fails, a corrupt index) go through that family's checks, and the
census counts them with its own.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed

from . import test_bad_inputs_cli
from .badinput_harness import (
    ALL_OUT,
    RAGGED,
    Case,
    CommandError,
    Family,
    From,
    function,
    method,
)

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
        r"corpus: sequence 3 holds 6 tokens, but these samples were built from lengths where "
        r"it holds 12: read them only from the corpus whose lengths built them",
    )
    add(
        "corpus",
        "shape",
        (np.arange(100, 127, dtype=np.int32), np.array([0, 5, 14, 14, 27])),
        ValueError,
        r"corpus: sequence 3 holds 13 tokens, but these samples were built from lengths where "
        r"it holds 12",
    )
    add(
        "corpus",
        "shape",
        (TOKENS[:14], OFFSETS[:4]),
        ValueError,
        r"corpus: it holds 3 sequences \(4 offsets\), but these samples were built from the "
        r"lengths of 4: read them only from the corpus whose lengths built them",
    )
    add(
        "corpus",
        "shape",
        (np.arange(100, 130, dtype=np.int32), np.array([0, 5, 14, 14, 26, 30])),
        ValueError,
        r"corpus: it holds 5 sequences \(6 offsets\), but these samples were built from the "
        r"lengths of 4",
    )
    add(
        "corpus",
        "range",
        (TOKENS.astype(np.uint64) + np.uint64(2**63), OFFSETS),
        ValueError,
        r"corpus: sequence \d holds token id 92233720368547759\d\d \(its token \d+\), which "
        r"int64 cannot hold: .* token ids must be in 0\.\.2\^63-1",
    )
    add(
        "self",
        "dtype",
        dataclasses.replace(SAMPLES, lengths=LENGTHS * 1.0),
        TypeError,
        r"GPTSamples\.lengths must be None or a 1-D integer array; got float64 of shape \(4,\)",
        named="GPTSamples.lengths",
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

# ---- posembed samples (a target of test_bad_inputs_cli's family) --------------------------
CLI = test_bad_inputs_cli.FAMILY
COMMAND_CASES: list[Case] = []
TOO_LARGE = r"is too large: the {} would .*; it must stay below 2\^62"


def command_case(arg: str, kind: str, bad: Any, match: str, **kw: Any) -> None:
    """A case of ``posembed samples`` that must end with one error line, status 2."""
    COMMAND_CASES.append(Case("cli samples", arg, kind, bad, CommandError, match, **kw))


def no_tokens(documents: list[int]) -> From:
    """The valid input rewritten as an indexed dataset of these empty documents."""

    def build(args: dict[str, Any]) -> Path:
        prefix = Path(args["input"])
        posembed.write_indexed(prefix, np.zeros(0, np.int32), documents, force=True)
        return prefix

    return From(build)


def index_bytes(change: Any) -> From:
    """The valid input with its .idx bytes changed by ``change(bytearray)``."""

    def build(args: dict[str, Any]) -> Path:
        idx = Path(f"{args['input']}.idx")
        raw = bytearray(idx.read_bytes())
        idx.write_bytes(bytes(change(raw) or raw))
        return Path(args["input"])

    return From(build)


def _set(raw: bytearray, at: int, data: bytes) -> None:
    raw[at : at + len(data)] = data


command_case(
    "input",
    "empty",
    no_tokens([0]),
    r"ds: the indexed dataset holds no tokens \(0 sequences\); samples need at least 1",
    named="ds",
)
command_case(
    "input",
    "empty",
    no_tokens([0, 0, 0, 0]),
    r"ds: the indexed dataset holds no tokens \(3 documents\); samples need at least 1",
    named="ds",
    also={"--documents": "documents"},
)
command_case(
    "--sequence-length",
    "size",
    2**62,
    r"--sequence-length 4611686018427387904 with one epoch " + TOO_LARGE.format("sample index"),
)
command_case(
    "--sequence-length",
    "size",
    2**64,
    r"--sequence-length 18446744073709551616 with --epochs 3 " + TOO_LARGE.format("sample index"),
    also={"--epochs": 3},
)
command_case(
    "--num-samples",
    "size",
    2**62,
    r"--num-samples 4611686018427387904 \(with --sequence-length 8: 368934881474191033 epochs "
    r"of 100 tokens\) " + TOO_LARGE.format("sample index"),
)
command_case(
    "--num-samples",
    "size",
    10**30,
    r"--num-samples 1000000000000000000000000000000 \(with --sequence-length 8: \d+ epochs of "
    r"100 tokens\) is too large: the document index would hold \d+ x 2 sequences; it must "
    r"stay below 2\^62 entries",
)
command_case(
    "--epochs",
    "size",
    2**62,
    r"--epochs 4611686018427387904 is too large: the document index would hold "
    r"4611686018427387904 x 2 sequences; it must stay below 2\^62 entries",
)
command_case(
    "--epochs",
    "size",
    2**63,
    r"--epochs 9223372036854775808 is too large: the document index would hold "
    r"9223372036854775808 x 3 documents",
    also={"--documents": "documents"},
)
command_case(
    "input",
    "type",
    index_bytes(lambda raw: _set(raw, 0, b"XX")),
    r"ds\.idx: not a valid indexed dataset: magic is b'XXIDIDX",
    named="ds.idx",
)
command_case(
    "input",
    "range",
    index_bytes(lambda raw: _set(raw, 9, b"\x02")),
    r"ds\.idx: not a valid indexed dataset: version is 2; only version 1 exists",
    named="ds.idx",
)
command_case(
    "input",
    "range",
    index_bytes(lambda raw: _set(raw, 34, (-5).to_bytes(4, "little", signed=True))),
    r"ds\.idx: not a valid indexed dataset: sequence_lengths\[0\] is -5; lengths are >= 0",
    named="ds.idx",
)
command_case(
    "input",
    "shape",
    index_bytes(lambda raw: raw[:-3]),
    r"ds\.idx: not a valid indexed dataset: sequence count 2 and document count 4 need 90 "
    r"bytes .*; the file has 87",
    named="ds.idx",
)
command_case(
    "input",
    "file",
    From(lambda a: (Path(f"{a['input']}.bin").unlink(), a["input"])[1]),
    r"ds\.bin \(the data \(\.bin\) of an indexed dataset\): no such file",
    named="ds.bin",
)


def _folder_for_index(args: dict[str, Any]) -> Path:
    idx = Path(f"{args['input']}.idx")
    idx.unlink()
    idx.mkdir()
    return Path(args["input"])


command_case(
    "input",
    "file",
    From(_folder_for_index),
    r"ds\.idx \(the index \(\.idx\) of an indexed dataset\): a folder; give a regular file",
    named="ds.idx",
)
command_case(
    "input",
    "file",
    "memory://posembed-tests-missing/ds",
    r"memory://posembed-tests-missing/ds\.idx: no such file in the store",
    named="memory://posembed-tests-missing/ds",
    needs="fsspec",
)
command_case(
    "input",
    "file",
    "nope://bucket/ds",
    r"nope://bucket/ds\.\w+: not a URL fsspec reads \(Protocol not known: nope\)",
    named="nope://bucket/ds",
    needs="fsspec",
)
command_case(
    "--output",
    "file",
    "memory://posembed-tests/out",
    r"output memory://posembed-tests/out: posembed samples writes a local folder, not a URL",
)

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


def command_case_id(case: Case) -> str:
    return f"{case.target}:{case.arg}:{case.kind}:{COMMAND_CASES.index(case)}"


@pytest.mark.parametrize("case", COMMAND_CASES, ids=command_case_id)
def test_the_command_refuses_in_one_line_and_modifies_nothing(case: Case, tmp_path: Path):
    """Through the commands' family: status 2, exactly one line ``posembed samples:
    error: ...`` matching the case (an exception raised past the command's handler,
    a traceback, fails it), the folder as it was."""
    CLI.check_refused(case, tmp_path)


@pytest.mark.parametrize(
    "argv",
    [
        ["--sequence-length", "8", "--epochs", str(2**62)],
        ["--sequence-length", str(2**62)],
        ["--sequence-length", "8", "--num-samples", str(2**62)],
        ["--sequence-length", "8", "empty"],
    ],
    ids=["epochs", "sequence-length", "num-samples", "no tokens"],
)
def test_the_command_exits_2_with_one_line_in_a_process_of_its_own(tmp_path: Path, argv: list[str]):
    """As a user runs it: exit status 2 and one error line, no traceback (status 1)."""
    posembed.write_indexed(tmp_path / "ds", np.arange(100) % 7, [0, 30, 30, 100])
    posembed.write_indexed(tmp_path / "empty", np.zeros(0, np.int32), [0, 0])
    given = "empty" if "empty" in argv else "ds"
    argv = [a for a in argv if a != "empty"]
    before = sorted(p.name for p in tmp_path.iterdir())
    done = subprocess.run(
        [sys.executable, "-m", "posembed.cli", "samples", given, "-o", "out", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith("posembed samples: error: "), errors
    assert sorted(p.name for p in tmp_path.iterdir()) == before
