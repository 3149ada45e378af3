"""The bad-input matrix for resize_checkpoint.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .badinput_harness import (
    ALL_OUT,
    PAIR,
    RANDOM,
    SEED_IS,
    Case,
    Family,
    From,
    checkpoint,
    function,
)

FAMILY = Family(
    targets={
        "resize_checkpoint": function(
            "resize_checkpoint",
            lambda tmp: {
                "src": checkpoint(tmp),
                "dst": tmp / "out.safetensors",
                "key": "pos",
                "length": 20,
                "init": None,
                "align": None,
                "prefix": 0,
                "seed": None,
                "grid": None,
                "new_grid": None,
                "method": None,
                "overwrite": False,
            },
            twin=False,
        ),
    },
    not_applicable={
        "resize_checkpoint": {
            **ALL_OUT,
            "nan": "no float argument; NaN in the table is resized like any value",
        },
    },
)

# ---- resize_checkpoint ------------------------------------------------------------------
add = FAMILY.cases_for("resize_checkpoint")
GRID = {"length": None, "new_grid": (4, 4), "prefix": 5}  # pos: 5 rows + a 3x3 grid
add("src", "type", 3, TypeError, r"src must be a path \(str or os\.PathLike\); got int")
add("dst", "type", None, TypeError, r"dst must be a path \(str or os\.PathLike\); got NoneType")
add("key", "type", 3, TypeError, r"key must be a str; got int 3")
add("key", "type", b"pos", TypeError, r"key must be a str; got bytes")
add("length", "type", "20", TypeError, r"length must be a positive integer; got str '20'")
add("prefix", "type", 1.0, TypeError, r"prefix must be an integer >= 0; got float 1\.0")
add("seed", "type", "x", TypeError, SEED_IS + r"; got 'x'", also=RANDOM)
add("new_grid", "type", 4, TypeError, r"new_grid " + PAIR + r"; got 4", also={"length": None})
add("grid", "type", 3, TypeError, r"grid " + PAIR + r"; got 3", also=GRID)
add(
    "key",
    "dtype",
    "ids",
    TypeError,
    r"'ids' has dtype I64; resizing supports F16, BF16, F32, F64",
    named="'ids'",
)
add(
    "key",
    "rank",
    "bias",
    ValueError,
    r"'bias' has shape \(4,\); a position table must be \(rows, d\)",
    named="'bias'",
)
add("key", "empty", "", ValueError, r"no tensor named '' in the checkpoint", named="tensor named")
add(
    "src",
    "empty",
    From(lambda a: (a["src"].write_bytes(b""), a["src"])[1]),
    ValueError,
    r"model\.safetensors: not a valid safetensors file: 0 bytes is too short",
    named="model.safetensors",
)
add("length", "size", 0, ValueError, r"length must be a positive integer; got 0")
add("length", "size", -1, ValueError, r"length must be a positive integer; got -1")
add("length", "size", 2**63, ValueError, r"length is too large: 4 x 9223372036854775808 x 14")
add("length", "size", 2**64, ValueError, r"length is too large: 4 x 18446744073709551616 x 14")
add("prefix", "size", -1, ValueError, r"prefix must be an integer >= 0; got -1")
add(
    "new_grid",
    "size",
    (0, 4),
    ValueError,
    r"new_grid\[0\] must be a positive integer; got 0",
    also=GRID,
)
add(
    "new_grid",
    "size",
    (2**63, 1),
    ValueError,
    r"new_grid is too large: 9223372036854775808 x",
    also=GRID,
)
add(
    "new_grid",
    "size",
    (2**64, 1),
    ValueError,
    r"new_grid is too large: 18446744073709551616",
    also=GRID,
)
add(
    "prefix",
    "range",
    14,
    ValueError,
    r"prefix must be less than the 14 rows of 'pos' \(shape \(14, 4\)\) so that position rows "
    r"remain; got 14",
)
add(
    "prefix",
    "range",
    2**64,
    ValueError,
    r"prefix must be less than the 14 rows .*18446744073709551616",
)
add("init", "range", "nope", ValueError, r"init must be one of 'interpolate', .*; got 'nope'")
add("align", "range", "nope", ValueError, r"align must be one of 'scale', .*; got 'nope'")
add(
    "method",
    "range",
    "nearest",
    ValueError,
    r"method must be one of 'bilinear', 'bicubic'",
    also=GRID,
)
add(
    "align",
    "range",
    "scale",
    ValueError,
    r"align for a grid must be 'half_pixel' or 'corners'",
    also=GRID,
)
add("seed", "range", -1, ValueError, SEED_IS + r"; got -1", also=RANDOM)
add(
    "key",
    "range",
    "nope",
    ValueError,
    r"no tensor named 'nope' in the checkpoint",
    named="tensor named",
)
add(
    "grid",
    "shape",
    (4, 4),
    ValueError,
    r"grid 4x4 has 16 cells but 'pos' has 9 position rows",
    also=GRID,
)
add(
    "new_grid",
    "shape",
    (4, 4),
    ValueError,
    r"'pos' has 12 position rows \(prefix 2 not counted\), not a square grid; give grid=",
    also={"length": None, "prefix": 2},
    named="grid=",
)
add(
    "length",
    "shape",
    10,
    ValueError,
    r"length 10 is shorter than the 14 position rows of 'pos' \(prefix 0 not counted\)",
    also={"init": "tile"},
)
add("new_grid", "combination", (4, 4), ValueError, r"give length or new_grid, not both")
add("seed", "combination", 1, ValueError, r"seed applies to init='random' only; got init=None")
add(
    "align",
    "combination",
    "corners",
    ValueError,
    r"align applies to interpolation only",
    also={"init": "zeros"},
)
add("grid", "combination", (3, 3), ValueError, r"grid and method apply to a grid resize only")
add(
    "init",
    "combination",
    "tile",
    ValueError,
    r"init and seed apply to a 1-D resize only",
    also=GRID,
)
add("length", "combination", None, TypeError, r"give length \(position rows\) or new_grid")
add(
    "src",
    "file",
    From(lambda a: a["src"].parent / "nope.safetensors"),
    FileNotFoundError,
    r"nope\.safetensors: no such file",
    named="nope.safetensors",
)
add(
    "src",
    "file",
    From(lambda a: a["src"].parent),
    FileNotFoundError,
    r": a model folder holds config\.json; there is none",
    named="folder",
)
add(
    "dst",
    "file",
    From(lambda a: (a["dst"].write_bytes(b"precious"), a["dst"])[1]),
    FileExistsError,
    r"out\.safetensors exists; pass overwrite=True to replace it",
    named="out.safetensors",
)
add(
    "dst",
    "file",
    From(lambda a: a["src"].parent),
    IsADirectoryError,
    r"output .* is a folder; give a file path",
    named="output",
)
add(
    "dst",
    "file",
    From(lambda a: a["src"].parent / "missing" / "out.safetensors"),
    FileNotFoundError,
    r"output folder .*missing does not exist",
    named="output",
)
add(
    "dst",
    "file",
    From(lambda a: a["src"]),
    ValueError,
    r"output .*model\.safetensors is the input file; write to a new path",
    also={"overwrite": True},
    named="output",
)

del add

# == the tests ==========================================================================

pytestmark = pytest.mark.usefixtures("restore_threads")


@pytest.mark.parametrize("case", FAMILY.cases, ids=FAMILY.case_id)
def test_bad_input_is_refused_and_nothing_is_modified(case: Case, tmp_path: Path):
    FAMILY.check_refused(case, tmp_path)


@pytest.mark.parametrize("name", list(FAMILY.targets))
def test_valid_arguments_succeed_and_modify_no_input(name: str, tmp_path: Path):
    FAMILY.check_valid(name, tmp_path)
