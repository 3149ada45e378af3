"""resize: a safetensors checkpoint with its position table resized."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case
from posembed.bench.cases._shared import numpy_interpolate
from posembed.bench.scratch import scratch_dir
from posembed.io import _safetensors


def build(quick: bool = False) -> list[Case]:
    # A RoBERTa-base-like checkpoint: a (514, 768) float32 position table among
    # other tensors (256 MB in all, 16 MB quick). The work is the copy of
    # everything else; the roofline is the same file copied by the OS.
    work = scratch_dir()
    src = work / "model.safetensors"
    key = "embeddings.position_embeddings.weight"
    rng = np.random.default_rng(11)
    table = (0.02 * rng.standard_normal((514, 768))).astype(np.float32)
    layers = 2 if quick else 40
    tensors: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": rng.standard_normal((1000, 768))
    }
    tensors[key] = table
    for i in range(layers):
        tensors[f"encoder.layer.{i}.weight"] = np.full((768, 2048), i, np.float32)
    _safetensors.write_file(src, tensors, {"format": "pt"})
    nbytes = src.stat().st_size

    def ours() -> object:  # a new output, as the roofline's copy (replacing one costs more)
        (work / "posembed.safetensors").unlink(missing_ok=True)
        return posembed.resize_checkpoint(
            src, work / "posembed.safetensors", key, 1024, prefix=2, overwrite=True
        )

    def reference_way() -> object:  # the twin: the whole file in memory
        (work / "reference.safetensors").unlink(missing_ok=True)
        return reference.resize_checkpoint(src, work / "reference.safetensors", key, 1024, prefix=2)

    impls: dict[str, Callable[[], object]] = {"reference": reference_way, "posembed": ours}
    try:
        from safetensors.numpy import load_file, save_file
    except ImportError:  # not a dependency: the column is left empty without it
        pass
    else:

        def safetensors_way() -> None:  # what users write: load it all, replace, save
            state = load_file(src)
            pos = state[key]
            state[key] = np.concatenate([pos[:2], numpy_interpolate(pos[2:], 1024)])
            (work / "numpy.safetensors").unlink(missing_ok=True)
            save_file(state, work / "numpy.safetensors")

        impls["numpy"] = safetensors_way

    def check() -> bool:
        ours()
        out = work / "posembed.safetensors"
        with open(src, "rb") as f:
            before = _safetensors.read_header(f, src)
        with open(out, "rb") as f:
            after = _safetensors.read_header(f, out)
            got = _safetensors.read_tensor(f, after, key)
        want = np.concatenate([table[:2], posembed.interpolate(table[2:], 1024)])
        grown = after.data_bytes == before.data_bytes + 512 * 768 * 4
        return bool(np.array_equal(got, want)) and grown

    return [
        Case(
            "resize",
            "checkpoint",
            f"{nbytes >> 20} MB safetensors, (514, 768) float32 table to 2 + 1024 rows",
            nbytes,
            impls,
            "file copy",
            check,
            in_bytes=nbytes,
            source=src,
        )
    ]
