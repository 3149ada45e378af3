"""The bad-input matrix for the posembed commands.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed

from .badinput_harness import (
    ALL_OUT,
    KINDS,
    OMIT,
    OUT_KINDS,
    SEED_IS,
    UNSANITIZED,
    Case,
    CommandError,
    Family,
    From,
    UsageError,
    checkpoint,
    command,
    table,
)

# A command's output is a path: an output in the way, one that is the input (or
# holds it) and a missing folder are its cases of kind "file".
CLI_OUT = {k: "no out= array: the output is a path (kind file)" for k in OUT_KINDS}


def _chunk_valid(tmp: Path) -> dict[str, Any]:
    np.save(tmp / "tokens.npy", np.arange(100, dtype=np.int32))
    (tmp / "tokens.bin").write_bytes(np.arange(100, dtype=np.uint16).tobytes())
    return {
        "input": tmp / "tokens.npy",
        "--output": tmp / "out",
        "--size": 8,
        "--step": None,
        "--overlap": None,
        "--tail": None,
        "--dtype": None,
        "--offsets": None,
        "--pad-value": None,
        "--threads": None,
        "--force": False,
        "--quiet": True,
    }


def _merge_valid(tmp: Path) -> dict[str, Any]:
    for name in ("a", "b"):
        posembed.write_indexed(tmp / name, np.arange(9), [0, 3, 3, 7, 9])
    return {
        "input": tmp / "a",
        "INPUT": tmp / "b",
        "--output": tmp / "merged",
        "--force": False,
        "--quiet": True,
    }


def _dataset(name: str, **options: Any) -> From:
    """Another indexed dataset beside the inputs, written with ``options``."""

    def build(args: dict[str, Any]) -> Path:
        prefix = args["input"].parent / name
        posembed.write_indexed(prefix, np.arange(9), [0, 3, 3, 7, 9], **options)
        return prefix

    return From(build)


def _empty_folder(args: dict[str, Any]) -> Path:
    folder = args["input"].parent / "shards"
    folder.mkdir()
    return folder


def _convert_valid(tmp: Path) -> dict[str, Any]:
    np.save(tmp / "tokens.npy", np.arange(100, dtype=np.int32))
    (tmp / "tokens.bin").write_bytes(np.arange(100, dtype=np.uint16).tobytes())
    return {
        "input": tmp / "tokens.npy",
        "--output": tmp / "ds",
        "--dtype": None,
        "--offsets": None,
        "--column": None,
        "--documents": None,
        "--append-eod": None,
        "--vocab-size": None,
        "--output-dtype": None,
        "--force": False,
        "--quiet": True,
    }


def _pack_valid(tmp: Path) -> dict[str, Any]:
    np.save(tmp / "tokens.npy", np.arange(100, dtype=np.int32))
    np.save(tmp / "offsets.npy", np.array([0, 30, 30, 100]))
    (tmp / "tokens.bin").write_bytes(np.arange(100, dtype=np.uint16).tobytes())
    return {
        "input": tmp / "tokens.npy",
        "--output": tmp / "out",
        "--size": 64,
        "--strategy": None,
        "--split": None,
        "--shard-tokens": None,
        "--format": None,
        "--dtype": None,
        "--offsets": tmp / "offsets.npy",
        "--documents": None,
        "--column": None,
        "--pad-value": None,
        "--force": False,
        "--quiet": True,
    }


def _samples_valid(tmp: Path) -> dict[str, Any]:
    posembed.write_indexed(tmp / "ds", np.arange(100) % 7, [0, 30, 30, 100])
    return {
        "input": tmp / "ds",
        "--output": tmp / "out",
        "--sequence-length": 8,
        "--num-samples": None,
        "--epochs": None,
        "--seed": None,
        "--no-extra-token": False,
        "--separate-final-epoch": None,
        "--documents": None,
        "--force": False,
    }


def _crafted_index(args: dict[str, Any], code: int) -> Path:
    """The valid input with another dtype code in its .idx."""
    idx = Path(f"{args['input']}.idx")
    raw = bytearray(idx.read_bytes())
    raw[17] = code
    idx.write_bytes(bytes(raw))
    return Path(args["input"])


def _resize_valid(tmp: Path) -> dict[str, Any]:
    return {
        "src": checkpoint(tmp),
        "--key": "pos",
        "--length": 20,
        "--new-grid": None,
        "--grid": None,
        "--method": None,
        "--init": None,
        "--align": None,
        "--prefix": None,
        "--offset": None,
        "--seed": None,
        "--force": False,
        "--output": tmp / "out.safetensors",
    }


def _plot_valid(tmp: Path) -> dict[str, Any]:
    np.save(tmp / "table.npy", table(8, 4))
    return {
        "table": tmp / "table.npy",
        "--length": None,
        "--align": None,
        "--output": tmp / "f.png",
    }


FAMILY = Family(
    targets={
        "cli bench": command(
            "bench",
            valid=lambda tmp: {
                "--quick": True,
                "--repeat": 1,
                "--only": "extend",
                "--threads": None,
                "--json": tmp / "bench.json",
                "--plot": None,
                "--markdown": False,
            },
        ),
        "cli chunk": command("chunk", valid=_chunk_valid),
        "cli convert": command("convert", valid=_convert_valid),
        "cli merge": command("merge", valid=_merge_valid),
        "cli pack": command("pack", valid=_pack_valid),
        "cli samples": command("samples", valid=_samples_valid),
        "cli resize": command("resize", valid=_resize_valid),
        "cli plot similarity": command("plot", "similarity", valid=_plot_valid),
        "cli config": command("config", valid=lambda tmp: {}),
    },
    not_applicable={
        "cli bench": {
            **ALL_OUT,
            **{k: "no array or file input" for k in ("dtype", "rank", "shape")},
        },
        "cli chunk": {**CLI_OUT},
        "cli convert": {**CLI_OUT},
        "cli merge": {
            **CLI_OUT,
            "type": "every argument is a path or a flag: a path of the wrong kind is a file case",
            "rank": "reads indexed datasets, whose arrays are 1-D by their format",
            "nan": "no number option",
            "size": "no count option; a merged size past the format's int64 byte offsets "
            "needs files of 2^62 bytes (tests/test_merge.py lowers the limit to check it)",
        },
        "cli pack": {**CLI_OUT},
        "cli samples": {
            **CLI_OUT,
            "rank": "reads an indexed dataset, whose arrays are 1-D by its format",
        },
        "cli resize": {**CLI_OUT},
        "cli plot similarity": {
            **CLI_OUT,
            "shape": "one table; its shape is rank and empty",
        },
        "cli config": {k: "takes no arguments (an extra one is unknown)" for k in KINDS},
    },
)

# ---- posembed bench ---------------------------------------------------------------------
add = FAMILY.cases_for("cli bench")
add("--repeat", "type", "x", UsageError, r"argument --repeat: invalid _repeat value: 'x'")
add("--threads", "type", "1,x", UsageError, r"argument --threads: must be a count or a comma list")
add("--repeat", "nan", "nan", UsageError, r"argument --repeat: invalid _repeat value: 'nan'")
add("--only", "empty", "", UsageError, r"--only: no kernel in ''; choose from gather,")
add("--only", "empty", ",", UsageError, r"--only: no kernel in ','")
add("--threads", "empty", "", UsageError, r"argument --threads: must be a count or a comma list")
add("--repeat", "size", 0, UsageError, r"argument --repeat: must be at least 1; got 0")
add("--repeat", "size", -1, UsageError, r"argument --repeat: must be at least 1; got -1")
add(
    "--repeat",
    "size",
    2**63,
    UsageError,
    r"argument --repeat: must be at most 1000; got 9223372036854775808",
)
add("--repeat", "size", 2**64, UsageError, r"argument --repeat: must be at most 1000")
add(
    "--threads",
    "size",
    "0,2",
    UsageError,
    r"argument --threads: counts must be at least 1; got '0,2'",
)
add(
    "--threads",
    "size",
    2**63,
    CommandError,
    r"--threads: n must be in 1\.\.\d+ .*; got 9223372036854775808",
)
add(
    "--threads",
    "size",
    f"1,{2**64}",
    CommandError,
    r"--threads: n must be in 1\.\.\d+ .*18446744073709551616",
)
add("--only", "range", "nope", UsageError, r"--only: unknown kernel 'nope'; choose from gather,")
add(
    "--json",
    "file",
    From(lambda a: a["--json"].parent / "no" / "bench.json"),
    CommandError,
    r"--json .*bench\.json: folder .*no does not exist",
)
add(
    "--json",
    "file",
    From(lambda a: a["--json"].parent),
    CommandError,
    r"--json .* is a folder; give a file path",
)
add(
    "--plot",
    "file",
    From(lambda a: a["--json"].parent / "no" / "bench.png"),
    CommandError,
    r"--plot .*bench\.png: folder .*no does not exist",
    needs="matplotlib",
)
add("--bogus", "unknown", True, UsageError, r"unrecognized arguments: --bogus")


def store_cases(add: Any, input_name: str = "tokens.npy") -> None:
    """A store that fails: an input missing there, an output naming a whole bucket."""
    missing = f"memory://posembed-tests-missing/{input_name}"
    add(
        "input",
        "file",
        missing,
        CommandError,
        re.escape(missing) + r": no such file in the store",
        named=missing,
        needs="fsspec",
    )
    add(
        "--output",
        "file",
        "s3://posembed-tests-bucket",
        CommandError,
        r"output s3://posembed-tests-bucket names a whole bucket, not a prefix in it",
        named="s3://posembed-tests-bucket",
        needs="s3fs",
    )


# ---- posembed chunk ---------------------------------------------------------------------
add = FAMILY.cases_for("cli chunk")
store_cases(add)
RAW = {"input": From(lambda a: a["input"].parent / "tokens.bin")}


def saved(name: str, array: np.ndarray, key: str = "input") -> From:
    def build(args: dict[str, Any]) -> Path:
        path = args[key].parent / name
        np.save(path, array)
        return path

    return From(build)


def token_file_input_cases(add: Any) -> None:
    """The cases of a command whose input is a token file (chunk, convert)."""
    add(
        "input",
        "dtype",
        saved("floats.npy", np.zeros(10)),
        CommandError,
        r"floats\.npy: tokens must be a 1-D integer array; got float64 of shape \(10,\)",
        named="floats.npy",
    )
    add(
        "input",
        "rank",
        saved("square.npy", np.zeros((10, 10), np.int32)),
        CommandError,
        r"square\.npy: tokens must be a 1-D integer array; got int32 of shape \(10, 10\)",
        named="square.npy",
    )
    add(
        "input",
        "empty",
        From(lambda a: (a["input"].write_bytes(b""), a["input"])[1]),
        CommandError,
        r"tokens\.npy: not a readable \.npy file \(it is empty\)",
        named="tokens.npy",
    )
    add(
        "input",
        "file",
        From(lambda a: a["input"].parent / "missing.npy"),
        CommandError,
        r"missing\.npy: no such file",
        named="missing.npy",
    )


token_file_input_cases(add)
add("--size", "type", "x", UsageError, r"argument --size: invalid int value: 'x'")
add("--size", "type", 1.5, UsageError, r"argument --size: invalid int value: '1\.5'")
add("--pad-value", "type", "x", UsageError, r"argument --pad-value: invalid int value: 'x'")
add("--threads", "type", "x", UsageError, r"argument --threads: invalid _positive value: 'x'")
add(
    "--dtype",
    "dtype",
    "float32",
    CommandError,
    r"--dtype must be an integer type; got float32",
    also=RAW,
)
add(
    "--offsets",
    "dtype",
    saved("offsets.npy", np.array([0.0, 100.0])),
    CommandError,
    r"--offsets .*offsets\.npy: offsets must be a 1-D integer array; got float64",
)
add(
    "--offsets",
    "empty",
    From(
        lambda a: (
            a["input"].with_name("offsets.npy").write_bytes(b""),
            a["input"].with_name("offsets.npy"),
        )[1]
    ),
    CommandError,
    r"--offsets .*offsets\.npy: not a readable \.npy file \(it is empty\)",
)
add(
    "--offsets",
    "empty",
    saved("offsets.npy", np.zeros(0, np.int64)),
    CommandError,
    r"--offsets .*: offsets must start at 0 and end at len\(tokens\) = 100; got \[\]\.\.\[\]",
)
add("--size", "nan", "nan", UsageError, r"argument --size: invalid int value: 'nan'")
add("--size", "size", 0, CommandError, r"--size must be a positive integer; got 0")
add("--size", "size", -1, CommandError, r"--size must be a positive integer; got -1")
for n in (2**59, 2**62, 2**63, 2**64):
    add(
        "--size",
        "size",
        n,
        CommandError,
        rf"--size {n} is too large: a window must stay below 2\^59",
    )
add("--step", "size", 0, CommandError, r"step must be a positive integer; got 0")
add("--overlap", "size", -1, CommandError, r"overlap must be an integer >= 0; got -1")
add("--threads", "size", 0, UsageError, r"argument --threads: must be at least 1; got 0")
add(
    "--threads",
    "size",
    2**63,
    CommandError,
    r"--threads: n must be in 1\.\.\d+ .*; got 9223372036854775808",
)
add(
    "--threads",
    "size",
    2**64,
    CommandError,
    r"--threads: n must be in .*; got 18446744073709551616",
)
add(
    "--step",
    "range",
    9,
    CommandError,
    r"step must be in 1\.\.8 \(at most size, or tokens are skipped\); got 9",
)
add("--overlap", "range", 8, CommandError, r"overlap must be in 0\.\.7 \(less than size 8\); got 8")
add("--tail", "range", "nope", UsageError, r"argument --tail: invalid choice: 'nope'")
add("--pad-value", "range", 2**31, CommandError, r"--pad-value 2147483648 does not fit int32")
add(
    "--pad-value",
    "range",
    -1,
    CommandError,
    r"--pad-value -1 does not fit uint16",
    also=RAW | {"--dtype": "uint16"},
)
add("--dtype", "range", "nope", CommandError, r"--dtype 'nope' is not a NumPy dtype", also=RAW)
add(
    "--offsets",
    "range",
    saved("offsets.npy", np.array([0, 50, 40, 100])),
    CommandError,
    r"--offsets .*offsets must not decrease; offsets\[2\] = 40 < 50",
)
add(
    "--offsets",
    "shape",
    saved("offsets.npy", np.array([0, 50, 101])),
    CommandError,
    r"--offsets .*offsets must start at 0 and end at len\(tokens\) = 100; got \[0\]\.\.\[101\]",
)
add(
    "--dtype",
    "combination",
    "uint64",
    CommandError,
    r"--dtype applies to raw token files; a \.npy file names its own",
)
add(
    "--dtype",
    "dtype",
    "V3",
    CommandError,
    r"--dtype must be an integer type; got \|V3",
    also=RAW,
)
add(
    "input",
    "shape",
    From(
        lambda a: (
            a["input"].with_suffix(".bin").write_bytes(bytes(201)),
            a["input"].with_suffix(".bin"),
        )[1]
    ),
    CommandError,
    r"tokens\.bin: 201 bytes is not a whole number of uint16 tokens \(2 bytes each\)",
    also={"--dtype": "uint16"},
    named="tokens.bin",
)
add(
    "--overlap",
    "combination",
    2,
    UsageError,
    r"argument --overlap: not allowed with argument --step",
    also={"--step": 2},
)
add(
    "--dtype",
    "combination",
    None,
    CommandError,
    r"tokens\.bin: a raw token file needs --dtype \(e\.g\. uint16\)",
    also=RAW,
)


def posembed_folder(args: dict[str, Any], meta: str = "{}") -> Path:
    """An output folder as posembed writes one (its meta.json a JSON object)."""
    args["--output"].mkdir()
    (args["--output"] / "meta.json").write_text(meta)
    return Path(args["--output"])


def link_to(target: str, make: Any) -> Any:
    """A symbolic link at --output to ``target`` (next to the input), made by
    ``make(path)`` first."""

    def build(args: dict[str, Any]) -> Path:
        first = next(v for k, v in args.items() if k in ("input", "src"))
        make(first.parent / target)
        args["--output"].symlink_to(first.parent / target)
        return Path(args["--output"])

    return From(build)


def fifo(args: dict[str, Any], key: str = "--output") -> Path:
    os.mkfifo(args[key])
    return Path(args[key])


add(
    "--output",
    "file",
    From(posembed_folder),
    CommandError,
    r"out exists; pass --force to replace it",
    named="out",
)
# --force replaces only a folder posembed wrote: nothing else, whatever is there
# (devices: tests/test_outdir.py)
add(
    "--output",
    "file",
    From(lambda a: (a["--output"].mkdir(), a["--output"])[1]),
    CommandError,
    r"output .*out is a folder posembed did not write \(no meta\.json or index\.json",
    also={"--force": True},
    named="out",
)
add(
    "--output",
    "file",
    From(lambda a: posembed_folder(a, meta="[]")),
    CommandError,
    r"output .*out is a folder posembed did not write",
    also={"--force": True},
    named="out",
)
add(
    "--output",
    "file",
    From(lambda a: (a["--output"].write_bytes(b"precious"), a["--output"])[1]),
    CommandError,
    r"output .*out is a file, not a folder posembed wrote; write to a new path",
    also={"--force": True},
    named="out",
)
add(
    "--output",
    "file",
    From(fifo),
    CommandError,
    r"output .*out is a FIFO, not a folder posembed wrote",
    also={"--force": True},
    named="out",
)
add(
    "--output",
    "file",
    link_to("o2", lambda p: posembed_folder({"--output": p})),
    CommandError,
    r"output .*out is a symbolic link; posembed replaces only a folder it wrote, never a link",
    also={"--force": True},
    named="out",
)
# --force would have replaced the input with the windows
add(
    "--output",
    "file",
    From(lambda a: a["input"]),
    CommandError,
    r"output .*tokens\.npy would replace the input .*tokens\.npy; write to a new path",
    also={"--force": True},
)
# a folder that holds the input
add(
    "--output",
    "file",
    From(lambda a: a["input"].parent),
    CommandError,
    r"output .* would replace the input .*tokens\.npy",
    also={"--force": True},
)
add(
    "--output",
    "file",
    saved("offsets.npy", np.array([0, 100])),
    CommandError,
    r"output .*offsets\.npy would replace the input .*offsets\.npy",
    also={"--force": True, "--offsets": From(lambda a: a["input"].parent / "offsets.npy")},
)
add("--size", "unknown", OMIT, UsageError, r"the following arguments are required: --size")
add("--bogus", "unknown", True, UsageError, r"unrecognized arguments: --bogus")

# ---- posembed convert -------------------------------------------------------------------
add = FAMILY.cases_for("cli convert")
store_cases(add)
token_file_input_cases(add)
add("--append-eod", "type", "x", UsageError, r"argument --append-eod: invalid int value: 'x'")
add("--vocab-size", "type", 1.5, UsageError, r"argument --vocab-size: invalid int value: '1\.5'")
add("--output-dtype", "dtype", "float32", UsageError, r"argument --output-dtype: invalid choice")
add("--vocab-size", "nan", "nan", UsageError, r"argument --vocab-size: invalid int value: 'nan'")
add("--vocab-size", "size", 0, CommandError, r"--vocab-size must be an integer >= 1; got 0")
add("--append-eod", "size", -1, CommandError, r"--append-eod must be an integer >= 0; got -1")
add(
    "--vocab-size",
    "range",
    50,
    CommandError,
    r"token id 99 in document 0: a --vocab-size of 50 has ids 0\.\.49",
)
add(
    "--output-dtype",
    "range",
    "uint8",
    CommandError,
    r"token id 300 in --append-eod: --output-dtype uint8 holds at most 255",
    also={"--append-eod": 300},
)
add("--documents", "range", "pages", UsageError, r"argument --documents: invalid choice")
add(
    "--offsets",
    "shape",
    saved("offsets.npy", np.array([0, 50, 101])),
    CommandError,
    r"--offsets .*offsets must start at 0 and end at len\(tokens\) = 100; got \[0\]\.\.\[101\]",
)
add(
    "--append-eod",
    "combination",
    60,
    CommandError,
    r"--append-eod 60 is not an id of a --vocab-size of 50",
    also={"--vocab-size": 50},
)
add(
    "--documents",
    "combination",
    "sequences",
    CommandError,
    r"--documents applies to indexed datasets \(PREFIX\.bin and PREFIX\.idx\); .* is a token",
)
add(
    "--dtype",
    "combination",
    "uint16",
    CommandError,
    r"--dtype applies to raw token files; a \.npy file names its own",
)
add(
    "--output",
    "file",
    From(lambda a: (a["--output"].with_suffix(".idx").write_bytes(b"precious"), a["--output"])[1]),
    CommandError,
    r"output .*ds: .*ds\.idx is not part of an indexed dataset .*lacks its header",
    also={"--force": True},
)
add(
    "--output",
    "file",
    From(lambda a: (a["--output"].with_suffix(".bin").write_bytes(b"precious"), a["--output"])[1]),
    CommandError,
    r"output .*ds: .*ds\.bin is not part of an indexed dataset \(no ds\.idx\)",
    also={"--force": True},
)
add(
    "--output",
    "file",
    From(lambda a: (os.mkfifo(a["--output"].with_suffix(".bin")), a["--output"])[1]),
    CommandError,
    r"output .*ds\.bin is a FIFO; posembed replaces only an indexed dataset's files",
    also={"--force": True},
)
add(
    "--output",
    "file",
    From(lambda a: a["input"].with_suffix("")),
    CommandError,
    r"output .*tokens\.bin would replace the input .*tokens\.bin",
    also={
        "--force": True,
        "input": From(lambda a: a["input"].parent / "tokens.bin"),
        "--dtype": "uint16",
    },
)
add("--output", "unknown", OMIT, UsageError, r"the following arguments are required: -o/--output")
add("--bogus", "unknown", True, UsageError, r"unrecognized arguments: --bogus")

# ---- posembed pack ----------------------------------------------------------------------
add = FAMILY.cases_for("cli pack")
store_cases(add)
token_file_input_cases(add)
add("--size", "type", "x", UsageError, r"argument --size: invalid int value: 'x'")
add("--size", "nan", "nan", UsageError, r"argument --size: invalid int value: 'nan'")
add("--size", "size", 0, CommandError, r"--size must be an integer in 1\.\.2147483647; got 0")
add("--shard-tokens", "size", 0, CommandError, r"--shard-tokens must be an integer >= 64; got 0")
add("--strategy", "range", "best", UsageError, r"argument --strategy: invalid choice: 'best'")
add("--format", "range", "csv", UsageError, r"argument --format: invalid choice: 'csv'")
add(
    "--split",
    "range",
    "refuse",
    CommandError,
    r"document 2 has 70 tokens, more than --size 64 \(--split refuse",
)
add(
    "--offsets",
    "shape",
    saved("offsets.npy", np.array([0, 50, 101])),
    CommandError,
    r"--offsets .*offsets must start at 0 and end at len\(tokens\) = 100; got \[0\]\.\.\[101\]",
)
add(
    "--pad-value",
    "range",
    2**40,
    CommandError,
    r"--pad-value 1099511627776 does not fit int32",
)
add(
    "--documents",
    "combination",
    "sequences",
    CommandError,
    r"--documents applies to indexed datasets \(PREFIX\.bin and PREFIX\.idx\); .* is a token",
)
add(
    "--output",
    "file",
    From(lambda a: (a["--output"].write_bytes(b"precious"), a["--output"])[1]),
    CommandError,
    r"output .*out is a file, not a folder posembed wrote",
    also={"--force": True},
)
add("--size", "unknown", OMIT, UsageError, r"the following arguments are required: --size")
add("--bogus", "unknown", True, UsageError, r"unrecognized arguments: --bogus")

# ---- posembed samples -------------------------------------------------------------------
add = FAMILY.cases_for("cli samples")
add("--sequence-length", "type", "x", UsageError, r"argument --sequence-length: invalid int")
add("--seed", "type", 1.5, UsageError, r"argument --seed: invalid int value: '1\.5'")
add(
    "input",
    "dtype",
    From(lambda a: _crafted_index(a, code=7)),
    CommandError,
    r"ds\.idx: not a valid indexed dataset: dtype code 7 is float32, which holds no token ids",
    named="ds.idx",
)
add(
    "input",
    "empty",
    From(lambda a: (Path(f"{a['input']}.idx").write_bytes(b""), a["input"])[1]),
    CommandError,
    r"ds\.idx: not a valid indexed dataset: it is 0 bytes, shorter than the 34-byte header",
    named="ds.idx",
)
add("--num-samples", "nan", "nan", UsageError, r"argument --num-samples: invalid int value")
add("--sequence-length", "size", 0, CommandError, r"--sequence-length must be an integer >= 1")
add("--epochs", "size", 0, CommandError, r"--epochs must be an integer >= 1; got 0")
add("--num-samples", "size", -1, CommandError, r"--num-samples must be an integer >= 0; got -1")
add("--seed", "range", 2**32, CommandError, r"--seed must be an integer in 0\.\.4294967295")
add("--documents", "range", "pages", UsageError, r"argument --documents: invalid choice")
add(
    "input",
    "shape",
    From(lambda a: (Path(f"{a['input']}.bin").write_bytes(b"\0" * 3), a["input"])[1]),
    CommandError,
    r"ds\.bin: not a valid indexed dataset: it holds 3 bytes, but ds\.idx describes",
    named="ds.bin",
)
add(
    "--epochs",
    "combination",
    2,
    UsageError,
    r"argument --epochs: not allowed with argument --num-samples",
    also={"--num-samples": 5},
)
add(
    "input",
    "file",
    From(lambda a: a["input"].parent / "missing"),
    CommandError,
    r"missing: not an indexed dataset \(no .*missing\.idx\)",
    named="missing",
)
add(
    "--output",
    "file",
    From(lambda a: (a["--output"].write_bytes(b"precious"), a["--output"])[1]),
    CommandError,
    r"output .*out is a file, not a folder posembed wrote",
    also={"--force": True},
)
add("--output", "unknown", OMIT, UsageError, r"the following arguments are required: -o/--output")
add("--bogus", "unknown", True, UsageError, r"unrecognized arguments: --bogus")

# ---- posembed resize --------------------------------------------------------------------
add = FAMILY.cases_for("cli resize")
CLI_GRID = {"--length": None, "--new-grid": "4x4", "--prefix": 5}
add("--length", "type", "x", UsageError, r"argument --length: invalid _positive value: 'x'")
add(
    "--seed",
    "type",
    "x",
    UsageError,
    r"argument --seed: invalid int value: 'x'",
    also={"--init": "random"},
)
add("--prefix", "type", 1.5, UsageError, r"argument --prefix: invalid _non_negative value: '1\.5'")
add(
    "--new-grid",
    "type",
    "x",
    UsageError,
    r"argument --new-grid: must be HEIGHTxWIDTH such as 24x24; got 'x'",
    also={"--length": None},
)
add(
    "--key",
    "dtype",
    "ids",
    CommandError,
    r"'ids' has dtype I64; resizing supports F16, BF16, F32, F64",
    named="'ids'",
)
add(
    "--key",
    "rank",
    "bias",
    CommandError,
    r"'bias' has shape \(4,\); a position table must be",
    named="'bias'",
)
add(
    "--key",
    "empty",
    "",
    CommandError,
    r"no tensor named '' in the checkpoint",
    named="tensor named",
)
add(
    "src",
    "empty",
    From(lambda a: (a["src"].write_bytes(b""), a["src"])[1]),
    CommandError,
    r"model\.safetensors: not a valid safetensors file: 0 bytes is too short",
    named="model.safetensors",
)
add("--length", "nan", "nan", UsageError, r"argument --length: invalid _positive value: 'nan'")
add("--length", "size", 0, UsageError, r"argument --length: must be at least 1; got 0")
add("--length", "size", -1, UsageError, r"argument --length: must be at least 1; got -1")
add("--length", "size", 2**63, CommandError, r"length is too large: 4 x 9223372036854775808 x 14")
add("--length", "size", 2**64, CommandError, r"length is too large: 4 x 18446744073709551616 x 14")
add("--prefix", "size", -1, UsageError, r"argument --prefix: must be at least 0; got -1")
add(
    "--new-grid",
    "size",
    "0x4",
    UsageError,
    r"argument --new-grid: height and width must be at least 1; got '0x4'",
    also=CLI_GRID,
)
add(
    "--new-grid",
    "size",
    f"{2**63}x1",
    CommandError,
    r"new_grid is too large: 9223372036854775808 x 4",
    also=CLI_GRID,
)
add(
    "--new-grid",
    "size",
    f"{2**64}x2",
    CommandError,
    r"new_grid is too large: 36893488147419103232 x 4",
    also=CLI_GRID,
)
add("--prefix", "range", 14, CommandError, r"prefix must be less than the 14 rows of 'pos'")
add(
    "--prefix",
    "range",
    2**64,
    CommandError,
    r"prefix must be less than the 14 rows .*18446744073709551616",
)
add("--init", "range", "nope", UsageError, r"argument --init: invalid choice: 'nope'")
add("--align", "range", "nope", UsageError, r"argument --align: invalid choice: 'nope'")
add(
    "--method",
    "range",
    "nearest",
    UsageError,
    r"argument --method: invalid choice: 'nearest'",
    also=CLI_GRID,
)
add(
    "--align",
    "range",
    "scale",
    CommandError,
    r"align for a grid must be 'half_pixel' or 'corners'",
    also=CLI_GRID,
)
add("--seed", "range", -1, CommandError, SEED_IS + r"; got -1", also={"--init": "random"})
add(
    "--key",
    "range",
    "nope",
    CommandError,
    r"no tensor named 'nope' in the checkpoint",
    named="tensor named",
)
add(
    "--grid",
    "shape",
    "4x4",
    CommandError,
    r"grid 4x4 has 16 cells but 'pos' has 9 position rows",
    also=CLI_GRID,
)
add(
    "--length",
    "shape",
    10,
    CommandError,
    r"length 10 is shorter than the 14 position rows",
    also={"--init": "tile"},
)
add(
    "--new-grid",
    "combination",
    "4x4",
    UsageError,
    r"give --length T \(position rows\) or --new-grid HxW",
)
add(
    "--length",
    "combination",
    None,
    UsageError,
    r"give --length T \(position rows\) or --new-grid HxW",
)
add(
    "--offset",
    "combination",
    2,
    UsageError,
    r"argument --offset: not allowed with argument --prefix",
    also={"--prefix": 2},
)
add("--seed", "combination", 1, CommandError, r"seed applies to init='random' only; got init=None")
add(
    "src",
    "file",
    From(lambda a: a["src"].parent / "nope.safetensors"),
    CommandError,
    r"nope\.safetensors: no such file",
    named="nope.safetensors",
)
add(
    "--output",
    "file",
    From(lambda a: (a["--output"].write_bytes(b"precious"), a["--output"])[1]),
    CommandError,
    r"out\.safetensors exists; pass --force to replace it",
    named="out.safetensors",
)
add(
    "--output",
    "file",
    From(lambda a: a["src"]),
    CommandError,
    r"output .*model\.safetensors is the input file; write to a new path",
    also={"--force": True},
)
# --force replaces only a regular file: never a FIFO or a link (devices: tests/test_outdir.py)
add(
    "--output",
    "file",
    From(fifo),
    CommandError,
    r"output .*out\.safetensors is a FIFO, not a regular file",
    named="out.safetensors",
)
add(
    "--output",
    "file",
    link_to("precious", lambda p: p.write_bytes(b"precious")),
    CommandError,
    r"output .*out\.safetensors is a symbolic link; only a regular file is replaced",
    also={"--force": True},
    named="out.safetensors",
)
add(
    "--output",
    "file",
    From(lambda a: a["src"].parent / "no" / "o.safetensors"),
    CommandError,
    r"output folder .*no does not exist",
)
add("--key", "unknown", OMIT, UsageError, r"--key is required for a safetensors file")

# ---- posembed plot similarity -----------------------------------------------------------
# Its errors, also those found while running, stop through argparse (tests/test_plot.py).
add = FAMILY.cases_for("cli plot similarity")
MPL = {"needs": "matplotlib"}
add("--length", "type", "x", UsageError, r"argument --length: invalid _positive value: 'x'")
add(
    "table",
    "dtype",
    saved("ints.npy", np.zeros((4, 4), np.int32), "table"),
    UsageError,
    r"ints\.npy: table must have a float dtype .*got dtype int32",
    named="ints.npy",
)
add(
    "table",
    "dtype",
    From(lambda a: (np.save(a["table"], np.array([[None]]), allow_pickle=True), a["table"])[1]),
    UsageError,
    r"table\.npy: not a valid \.npy file: dtype object holds Python objects, which are never",
)
add(
    "table",
    "rank",
    saved("flat.npy", np.zeros(5, np.float32), "table"),
    UsageError,
    r"flat\.npy: table must be a 2-D array",
    named="flat.npy",
)
add(
    "table",
    "empty",
    saved("none.npy", np.zeros((0, 4), np.float32), "table"),
    UsageError,
    r"none\.npy: table must have at least one row",
    named="none.npy",
)
add("--length", "nan", "nan", UsageError, r"argument --length: invalid _positive value: 'nan'")
add("--length", "size", 0, UsageError, r"argument --length: must be at least 1; got 0")
add(
    "--length",
    "size",
    2**63,
    UsageError,
    r"table\.npy: length is too large: 4 x 9223372036854775808 x 8",
)
add("--length", "size", 2**64, UsageError, r"length is too large: 4 x 18446744073709551616 x 8")
# 512 PiB of float32 rows: past the 2^62 check, and past any address space
add(
    "--length",
    "size",
    2**55,
    UsageError,
    r"table\.npy: not enough memory for --length 36028797018963968",
    needs=UNSANITIZED,
)
add("--align", "range", "nope", UsageError, r"argument --align: invalid choice: 'nope'")
add(
    "table",
    "file",
    From(lambda a: a["table"].parent / "nope.npy"),
    UsageError,
    r"cannot read .*nope\.npy",
    named="nope.npy",
)
add(
    "--output",
    "file",
    From(lambda a: a["table"].parent / "no" / "f.png"),
    UsageError,
    r"cannot write .*f\.png",
    named="f.png",
    **MPL,
)
add(
    "--output",
    "file",
    From(lambda a: a["table"].parent / "f.nope"),
    UsageError,
    r"table\.npy: Format 'nope' is not supported",
    named="Format",
    **MPL,
)
add("--output", "unknown", OMIT, UsageError, r"the following arguments are required: -o/--output")

# ---- posembed config --------------------------------------------------------------------
add = FAMILY.cases_for("cli config")
add("--bogus", "unknown", True, UsageError, r"posembed: error: unrecognized arguments: --bogus")
add("extra", "unknown", "extra", UsageError, r"unrecognized arguments: extra")

# ---- posembed merge ---------------------------------------------------------------------
add = FAMILY.cases_for("cli merge")
add(
    "INPUT",
    "dtype",
    _dataset("wide", dtype=np.int32),
    CommandError,
    r"wide\.idx holds tokens of int32, but .*a\.idx holds uint16",
    named="int32",
)
add(
    "INPUT",
    "empty",
    From(_empty_folder),
    CommandError,
    r"folder .*shards holds no indexed dataset",
    named="shards",
)
add(
    "--output",
    "range",
    From(lambda a: a["input"]),
    CommandError,
    r"output .*a\.idx would replace the input .*a\.idx",
    also={"--force": True},
)
add(
    "INPUT",
    "shape",
    _dataset("images", modes=[1, 2, 3, 4]),
    CommandError,
    r"images\.idx is multimodal \(a mode for each sequence\) but .*a\.idx is not",
    named="multimodal",
)
add(
    "INPUT",
    "file",
    From(lambda a: a["input"].parent / "missing"),
    CommandError,
    r"missing\.idx \(the index \(\.idx\) of an indexed dataset\): no such file",
    named="missing.idx",
)
add(
    "INPUT",
    "file",
    From(lambda a: (os.truncate(f"{a['INPUT']}.bin", 4), a["INPUT"])[1]),
    CommandError,
    r"b\.bin: not a valid indexed dataset: it holds 4 bytes",
    named="b.bin",
)
add(
    "--output",
    "file",
    From(lambda a: (a["--output"].with_suffix(".idx").write_bytes(b"precious"), a["--output"])[1]),
    CommandError,
    r"output .*merged: .*merged\.idx is not part of an indexed dataset",
    also={"--force": True},
)
add(
    "--output",
    "combination",
    From(lambda a: (posembed.write_indexed(a["--output"], [1], [0, 1]), a["--output"])[1]),
    CommandError,
    r"merged\.idx exists; pass --force to replace it",
    named="merged.idx",
)
add("--output", "unknown", OMIT, UsageError, r"the following arguments are required: -o/--output")
add("--bogus", "unknown", True, UsageError, r"unrecognized arguments: --bogus")

del add

# == the tests ==========================================================================

pytestmark = pytest.mark.usefixtures("restore_threads")


@pytest.mark.parametrize("case", FAMILY.cases, ids=FAMILY.case_id)
def test_bad_input_is_refused_and_nothing_is_modified(case: Case, tmp_path: Path):
    FAMILY.check_refused(case, tmp_path)


@pytest.mark.parametrize("name", list(FAMILY.targets))
def test_valid_arguments_succeed_and_modify_no_input(name: str, tmp_path: Path):
    FAMILY.check_valid(name, tmp_path)
