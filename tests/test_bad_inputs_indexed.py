"""The bad-input matrix for Megatron indexed datasets: IndexedCorpus (its
constructor, read and to_arrays), write_indexed and merge_indexed.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``. A bad file is one of the corpus's
two files altered after it was written (a field of the ``.idx`` patched, the
``.bin`` cut short); the twin, built on the same files, must refuse it with
the same exception type.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import reference

from .badinput_harness import (
    ALL_OUT,
    KINDS,
    RAGGED,
    SCALARS,
    Case,
    Family,
    From,
    Target,
    function,
)

# 9 tokens in 4 documents, one of them empty: 3 sequences (3, 4 and 2 tokens) of
# uint16, 5 document indices; the .idx is 34 + 12 x 3 + 8 x 5 = 110 bytes.
TOKENS = np.arange(1, 10)
OFFSETS = np.array([0, 3, 3, 7, 9])
LENGTHS_AT, POINTERS_AT, DOCUMENTS_AT = 34, 46, 70


def corpus_at(tmp: Path) -> Path:
    prefix = tmp / "corpus"
    if not Path(f"{prefix}.idx").exists():
        posembed.write_indexed(prefix, TOKENS, OFFSETS)
    return prefix


def opened(tmp: Path) -> posembed.IndexedCorpus:
    return posembed.IndexedCorpus(corpus_at(tmp))


def patched(offset: int, data: bytes, suffix: str = ".idx") -> From:
    """The corpus with ``data`` written over its file at ``offset``."""

    def build(args: dict[str, Any]) -> Any:
        prefix = args["prefix"]
        with open(f"{prefix}{suffix}", "r+b") as f:
            f.seek(offset)
            f.write(data)
        return prefix

    return From(build)


def cut(size: int, suffix: str = ".idx", arg: str = "prefix") -> From:
    """The corpus (or the opened one, ``arg="self"``) with a file cut to ``size`` bytes."""

    def build(args: dict[str, Any]) -> Any:
        value = args[arg]
        prefix = value.prefix if arg == "self" else value
        os.truncate(f"{prefix}{suffix}", size)
        return value

    return From(build)


def replaced(make: Any, suffix: str) -> From:
    """The corpus with ``make(path)`` put in the place of one of its files."""

    def build(args: dict[str, Any]) -> Any:
        path = Path(f"{args['prefix']}{suffix}")
        path.unlink()
        make(path)
        return args["prefix"]

    return From(build)


def rewritten(args: dict[str, Any]) -> Any:
    """The opened corpus's .bin rewritten in place: the same size, other tokens."""
    corpus = args["self"]
    data = corpus.bin_path.read_bytes()
    corpus.bin_path.write_bytes(data[::-1])
    os.utime(corpus.bin_path, ns=(0, 0))
    return corpus


def with_input(name: str, **options: Any) -> From:
    """The inputs and one more dataset, written with ``options``."""

    def build(args: dict[str, Any]) -> Any:
        prefix = Path(args["inputs"][0]).parent / name
        posembed.write_indexed(prefix, TOKENS, OFFSETS, **options)
        return [*args["inputs"], prefix]

    return From(build)


def empty_folder(path: Path) -> Path:
    path.mkdir()
    return path


def damaged_input(args: dict[str, Any]) -> Any:
    """The inputs, the first with its last document index past the sequences."""
    with open(f"{args['inputs'][0]}.idx", "r+b") as f:
        f.seek(DOCUMENTS_AT + 8 * 4)
        f.write(struct.pack("<q", 99))
    return args["inputs"]


def method_of_corpus(name: str, valid: Any) -> Target:
    """A method of IndexedCorpus; the twin's call is on a twin opened on the same files."""

    def call(module: Any, args: dict[str, Any]) -> Any:
        rest = dict(args)
        obj = rest.pop("self")
        if module is reference:
            obj = reference.IndexedCorpus(obj.prefix, documents=obj.documents)
        return getattr(obj, name)(**rest)

    return Target(valid, call, getattr(posembed.IndexedCorpus, name), twin=True)


FAMILY = Family(
    targets={
        "IndexedCorpus": function(
            "IndexedCorpus",
            lambda tmp: {"prefix": corpus_at(tmp), "documents": "documents"},
        ),
        "IndexedCorpus.read": method_of_corpus(
            "read", lambda tmp: {"self": opened(tmp), "start": 1, "stop": 8}
        ),
        "IndexedCorpus.to_arrays": method_of_corpus("to_arrays", lambda tmp: {"self": opened(tmp)}),
        "write_indexed": function(
            "write_indexed",
            lambda tmp: {
                "prefix": tmp / "out",
                "tokens": TOKENS.copy(),
                "offsets": OFFSETS.copy(),
                "dtype": None,
                "append_eod": 0,
                "vocab_size": 100,
                "force": False,
            },
        ),
        "merge_indexed": function(
            "merge_indexed",
            lambda tmp: {
                "inputs": [corpus_at(tmp), corpus_at(tmp)],
                "output": tmp / "merged",
                "force": False,
            },
        ),
    },
    not_applicable={
        "IndexedCorpus": {
            **ALL_OUT,
            "rank": "no array argument; the files' arrays are 1-D by the format, their sizes "
            "from the header (size)",
            "nan": "no float argument; a float dtype code in the file is refused (dtype)",
        },
        "IndexedCorpus.read": {
            **ALL_OUT,
            **{k: "two integers: " + SCALARS for k in ("dtype", "rank", "shape")},
            "empty": "an empty range (start == stop) reads no tokens and is valid",
            "nan": "NaN is a float, refused as a type (type)",
        },
        "IndexedCorpus.to_arrays": {
            k: "takes no argument; the file it reads changing is its case (file)" for k in KINDS
        },
        "write_indexed": {**ALL_OUT},
        "merge_indexed": {
            **ALL_OUT,
            "rank": "paths, no array argument; the files' arrays are 1-D by the format",
            "nan": "no number argument",
            "size": "no count argument; a merged size past the format's int64 byte offsets "
            "needs files of 2^62 bytes (tests/test_merge.py lowers the limit to check it)",
        },
    },
)

PATH_IS = r"prefix must be a path \(str or os\.PathLike\); got "
INVALID = r"corpus\.idx: not a valid indexed dataset: "

# ---- IndexedCorpus -------------------------------------------------------------------
add = FAMILY.cases_for("IndexedCorpus")
add("prefix", "type", 3, TypeError, PATH_IS + "int")
add("prefix", "type", b"corpus", TypeError, PATH_IS + "bytes")
add("prefix", "type", None, TypeError, PATH_IS + "NoneType")
add("documents", "type", 1, TypeError, r"documents must be 'documents' or 'sequences'; got int")
add(
    "documents",
    "range",
    "tokens",
    ValueError,
    r"documents must be 'documents' or 'sequences'; got 'tokens'",
)
add("prefix", "empty", "", ValueError, r"prefix must name the files PREFIX\.idx and PREFIX\.bin")
add(
    "prefix",
    "empty",
    cut(0),
    ValueError,
    INVALID + r"it is 0 bytes, shorter than the 34-byte header",
    named="corpus.idx",
)
add(
    "prefix",
    "dtype",
    patched(17, b"\x07"),
    ValueError,
    INVALID + r"dtype code 7 is float32, which holds no token ids",
    named="dtype code",
)
add(
    "prefix",
    "dtype",
    patched(17, b"\x0c"),
    ValueError,
    INVALID + r"dtype code 12 is unknown",
    named="dtype code",
)
add(
    "prefix",
    "range",
    patched(0, b"MMIDIDY"),
    ValueError,
    INVALID + r"magic is b'MMIDIDY\\x00\\x00', not",
    named="magic",
)
add(
    "prefix",
    "range",
    patched(9, struct.pack("<Q", 2)),
    ValueError,
    INVALID + r"version is 2; only version 1 exists",
    named="version",
)
add(
    "prefix",
    "size",
    patched(18, struct.pack("<Q", 2**62)),
    ValueError,
    INVALID + r"sequence count 4611686018427387904 and document count 5 need",
    named="sequence count",
)
add(
    "prefix",
    "size",
    patched(26, struct.pack("<Q", 0)),
    ValueError,
    INVALID + r"document count is 0",
    named="document count",
)
add(
    "prefix",
    "size",
    patched(LENGTHS_AT, struct.pack("<i", -1)),
    ValueError,
    INVALID + r"sequence_lengths\[0\] is -1; lengths are >= 0",
    named="sequence_lengths",
)
add(
    "prefix",
    "range",
    patched(POINTERS_AT + 8, struct.pack("<q", 8)),
    ValueError,
    INVALID + r"sequence_pointers\[1\] is 8: it leaves a gap after the previous sequence",
    named="sequence_pointers",
)
add(
    "prefix",
    "range",
    patched(POINTERS_AT + 8, struct.pack("<q", 2)),
    ValueError,
    INVALID + r"sequence_pointers\[1\] is 2: it overlaps the previous sequence",
    named="sequence_pointers",
)
add(
    "prefix",
    "range",
    patched(DOCUMENTS_AT + 16, struct.pack("<q", 7)),
    ValueError,
    INVALID + r"document_indices\[2\] is 7, past the sequence count 3",
    named="document_indices",
)
add(
    "prefix",
    "range",
    patched(DOCUMENTS_AT + 32, struct.pack("<q", 2)),
    ValueError,
    INVALID + r"document_indices end at 2, not at the sequence count 3",
    named="document_indices",
)
add(
    "prefix",
    "shape",
    patched(18, struct.pack("<Q", 4)),
    ValueError,
    INVALID + r"sequence count 4 and document count 5 need 122 bytes \(126 with sequence "
    r"modes\); the file has 110",
    named="sequence count",
)
add(
    "prefix",
    "shape",
    cut(17, ".bin"),
    ValueError,
    r"corpus\.bin: not a valid indexed dataset: it holds 17 bytes, but corpus\.idx describes "
    r"9 tokens of uint16 \(18 bytes\)",
    named="corpus.bin",
)
add(
    "prefix",
    "file",
    From(lambda a: a["prefix"].parent / "nope"),
    ValueError,
    r"nope\.idx \(the index \(\.idx\) of an indexed dataset\): no such file",
    named="nope.idx",
)
add(
    "prefix",
    "file",
    replaced(os.mkfifo, ".bin"),
    ValueError,
    r"corpus\.bin \(the data \(\.bin\) of an indexed dataset\): not a regular file; give a "
    r"regular file",
    named="corpus.bin",
)
add(
    "prefix",
    "file",
    replaced(Path.mkdir, ".idx"),
    ValueError,
    r"corpus\.idx \(the index \(\.idx\) of an indexed dataset\): a folder; give a regular file",
    named="corpus.idx",
)

# ---- IndexedCorpus.read --------------------------------------------------------------
add = FAMILY.cases_for("IndexedCorpus.read")
add("start", "type", "1", TypeError, r"start must be an integer; got str '1'")
add("stop", "type", 8.0, TypeError, r"stop must be an integer; got float 8\.0")
add("stop", "type", None, TypeError, r"stop must be an integer; got NoneType")
RANGE = r"start and stop must satisfy 0 <= start <= stop <= 9 \(the token count\); got "
add("start", "size", -1, ValueError, RANGE + r"start=-1, stop=8")
add("stop", "size", 2**64, ValueError, RANGE + r"start=1, stop=18446744073709551616")
add("stop", "range", 10, ValueError, RANGE + r"start=1, stop=10")
add("start", "range", 9, ValueError, RANGE + r"start=9, stop=8")
add(
    "self",
    "file",
    cut(17, ".bin", "self"),
    ValueError,
    r"corpus\.bin: .*(input changed while reading \(18 bytes became 17\)|it holds 17 bytes)",
    named="corpus.bin",
)

# ---- IndexedCorpus.to_arrays ---------------------------------------------------------
add = FAMILY.cases_for("IndexedCorpus.to_arrays")
add(
    "self",
    "file",
    cut(4, ".bin", "self"),
    ValueError,
    r"corpus\.bin: .*(input changed while reading \(18 bytes became 4\)|it holds 4 bytes)",
    named="corpus.bin",
)
add(
    "self",
    "file",
    From(rewritten),
    ValueError,
    r"corpus\.bin: input changed while reading \(it was modified or replaced\)",
    named="corpus.bin",
    twin=False,  # the twin reads the file whole each time: it sees the new tokens
)
add(
    "self",
    "file",
    From(lambda a: (a["self"].bin_path.unlink(), a["self"])[1]),
    ValueError,
    r"corpus\.bin: input changed while reading \(it was removed\)",
    named="corpus.bin",
)

# ---- write_indexed -------------------------------------------------------------------
add = FAMILY.cases_for("write_indexed")
INTEGERS = r" must be an array of integers; got "
add("prefix", "type", 3, TypeError, PATH_IS + "int")
add("tokens", "type", RAGGED, TypeError, "tokens" + INTEGERS + r"a list that is no array")
add("tokens", "type", "123", TypeError, "tokens" + INTEGERS + r"dtype <U3")
add("offsets", "type", None, TypeError, "offsets" + INTEGERS + r"dtype object")
add(
    "append_eod",
    "type",
    "0",
    TypeError,
    r"append_eod must be an integer >= 0 or None; got str '0'",
)
add(
    "vocab_size",
    "type",
    True,
    TypeError,
    r"vocab_size must be an integer >= 1 or None; got bool True",
)
add("force", "type", "yes", TypeError, r"force must be True or False; got str 'yes'")
add("dtype", "type", 3, TypeError, r"dtype must be a numpy integer dtype; got 3")
add("tokens", "dtype", TOKENS.astype(np.float32), TypeError, "tokens" + INTEGERS + "dtype float32")
add("tokens", "dtype", TOKENS > 3, TypeError, "tokens" + INTEGERS + "dtype bool")
add("offsets", "dtype", OFFSETS.astype(float), TypeError, "offsets" + INTEGERS + "dtype float64")
add(
    "dtype",
    "dtype",
    np.float32,
    TypeError,
    r"dtype must be one of the indexed dataset's token dtypes \(.*\); got float32",
)
add("dtype", "dtype", np.uint32, TypeError, r"dtype must be one of .*; got uint32")
add("tokens", "rank", TOKENS.reshape(3, 3), ValueError, r"tokens must be 1-D; got shape \(3, 3\)")
add("offsets", "rank", np.array(0), ValueError, r"offsets must be 1-D; got shape \(\)")
add(
    "offsets",
    "empty",
    np.zeros(0, np.int64),
    ValueError,
    r"offsets must hold at least one value \(0: no documents\); got none",
)
add(
    "append_eod",
    "nan",
    float("nan"),
    TypeError,
    r"append_eod must be an integer >= 0 or None; got float nan",
)
add(
    "vocab_size",
    "nan",
    float("inf"),
    TypeError,
    r"vocab_size must be an integer >= 1 or None; got float inf",
)
add("vocab_size", "size", 0, ValueError, r"vocab_size must be an integer >= 1 or None; got 0")
add("append_eod", "size", -1, ValueError, r"append_eod must be an integer >= 0 or None; got -1")
add(
    "tokens",
    "range",
    np.array([1, 2, 3, 4, 5, 6, 7, 8, 100]),
    ValueError,
    r"tokens\[8\] is 100, not an id of a vocab_size of 100 \(0\.\.99\)",
)
add(
    "tokens",
    "range",
    np.array([1, 2, 3, 4, -5, 6, 7, 8, 9]),
    ValueError,
    r"tokens\[4\] is -5; token ids are >= 0",
    also={"vocab_size": None},
)
# a dtype that holds -5 does not make it an id: refused whatever the options
add(
    "tokens",
    "range",
    np.array([1, 2, 3, 4, -5, 6, 7, 8, 9]),
    ValueError,
    r"tokens\[4\] is -5; token ids are >= 0",
    also={"vocab_size": None, "dtype": np.int32},
)
add(
    "tokens",
    "range",
    np.array([1, 2, 3, 4, -5, 6, 7, 8, 9], np.int8),
    ValueError,
    r"tokens\[4\] is -5; token ids are >= 0",
    also={"vocab_size": None, "dtype": np.int8},
)
add(
    "tokens",
    "range",
    np.array([1, 2, 3, 4, 300, 6, 7, 8, 9]),
    ValueError,
    r"tokens\[4\] is 300, which does not fit uint8 \(0\.\.255\)",
    also={"vocab_size": None, "dtype": np.uint8},
)
add("append_eod", "range", 100, ValueError, r"append_eod 100 is not an id of a vocab_size of 100")
add(
    "append_eod",
    "range",
    300,
    ValueError,
    r"append_eod 300 does not fit uint8",
    also={"vocab_size": None, "dtype": np.uint8},
)
add(
    "offsets",
    "range",
    np.array([0, 3, 2, 7, 9]),
    ValueError,
    r"offsets must not decrease; offsets\[2\] is 2 after 3",
)
add("offsets", "range", np.array([1, 3, 9]), ValueError, r"offsets must start at 0; got offsets")
# a uint64 offset past int64 is named as given, not as the -1 it wraps to
add(
    "offsets",
    "range",
    np.array([0, 2**64 - 1, 9], np.uint64),
    ValueError,
    r"offsets\[1\] is 18446744073709551615; offsets run from 0 to the token count 9",
)
add(
    "offsets",
    "shape",
    np.array([0, 3, 8]),
    ValueError,
    r"offsets must end at the token count 9; got offsets\[-1\] = 8",
)
add(
    "prefix",
    "file",
    From(lambda a: (Path(f"{a['prefix']}.idx").write_bytes(b"precious"), a["prefix"])[1]),
    FileExistsError,
    r"out\.idx exists; pass force=True to replace it",
    named="out.idx",
)
add(
    "prefix",
    "file",
    From(lambda a: (Path(f"{a['prefix']}.bin").mkdir(), a["prefix"])[1]),
    IsADirectoryError,
    r"output .*out\.bin is a folder; give a prefix for two files",
    named="out.bin",
    also={"force": True},
)
add(
    "prefix",
    "file",
    From(lambda a: a["prefix"].parent / "missing" / "out"),
    FileNotFoundError,
    r"output folder .*missing does not exist",
    named="missing",
)
# a prefix that names a folder, or ends in a separator: never DIR.bin beside DIR
add(
    "prefix",
    "file",
    From(lambda a: (a["prefix"].mkdir(), a["prefix"])[1]),
    IsADirectoryError,
    r"output .*out is a folder; give PREFIX for PREFIX\.bin and PREFIX\.idx",
    named="out",
)
add(
    "prefix",
    "empty",
    From(lambda a: f"{a['prefix']}{os.sep}"),
    ValueError,
    r"prefix must name the files PREFIX\.idx and PREFIX\.bin; got '.*out/'",
    named="out/",
)

# ---- merge_indexed -------------------------------------------------------------------
add = FAMILY.cases_for("merge_indexed")
add("inputs", "type", 3, TypeError, r"inputs must be a path or a list or tuple of paths; got int")
add(
    "inputs",
    "type",
    [b"corpus"],
    TypeError,
    r"each input must be a path \(str or os\.PathLike\); got bytes",
    named="input",
)
add("output", "type", 3, TypeError, r"output must be a path \(str or os\.PathLike\); got int")
add("force", "type", "yes", TypeError, r"force must be True or False; got 'yes'")
add(
    "inputs",
    "dtype",
    with_input("wide", dtype=np.int32),
    ValueError,
    r"wide\.idx holds tokens of int32, but .*corpus\.idx holds uint16",
    named="int32",
)
add("inputs", "empty", [], ValueError, r"no indexed dataset to merge", named="indexed dataset")
add(
    "inputs",
    "empty",
    From(lambda a: empty_folder(Path(a["inputs"][0]).parent / "shards")),
    ValueError,
    r"folder .*shards holds no indexed dataset",
    named="shards",
)
add(
    "output",
    "range",
    From(lambda a: a["inputs"][0]),
    ValueError,
    r"output .*corpus\.idx would replace the input .*corpus\.idx",
    also={"force": True},
)
add(
    "inputs",
    "shape",
    with_input("images", modes=[1, 2, 3, 4]),
    ValueError,
    r"images\.idx is multimodal \(a mode for each sequence\) but .*corpus\.idx is not",
    named="multimodal",
)
add(
    "inputs",
    "file",
    From(lambda a: [*a["inputs"], Path(a["inputs"][0]).parent / "missing"]),
    ValueError,
    r"missing\.idx \(the index \(\.idx\) of an indexed dataset\): no such file",
    named="missing.idx",
)
add(
    "inputs",
    "file",
    From(damaged_input),
    ValueError,
    INVALID + r"document_indices\[4\] is 99, past the sequence count 3",
    named="corpus.idx",
)
add(
    "output",
    "file",
    From(lambda a: (a["output"].with_suffix(".idx").write_bytes(b"precious"), a["output"])[1]),
    ValueError,
    r"output .*merged: .*merged\.idx is not part of an indexed dataset",
    also={"force": True},
)
add(
    "output",
    "combination",
    From(lambda a: (posembed.write_indexed(a["output"], TOKENS, OFFSETS), a["output"])[1]),
    ValueError,
    r"merged\.idx exists; pass force=True to replace it",
    named="merged.idx",
)

del add

# == the tests ==========================================================================


@pytest.mark.parametrize("case", FAMILY.cases, ids=FAMILY.case_id)
def test_bad_input_is_refused_and_nothing_is_modified(case: Case, tmp_path: Path):
    FAMILY.check_refused(case, tmp_path)


@pytest.mark.parametrize("case", FAMILY.twin_cases(), ids=FAMILY.case_id)
def test_the_twin_raises_the_same_exception_type(case: Case, tmp_path: Path):
    FAMILY.check_twin(case, tmp_path)


@pytest.mark.parametrize("name", list(FAMILY.targets))
def test_valid_arguments_succeed_and_modify_no_input(name: str, tmp_path: Path):
    FAMILY.check_valid(name, tmp_path)
