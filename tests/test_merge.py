"""posembed merge (merge_indexed): indexed datasets joined, byte for byte as
megatron-core's IndexedDatasetBuilder.add_index + finalize write them, against
the NumPy twin, the --force rules, and inputs that are bad or change meanwhile."""

from __future__ import annotations

import importlib
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import reference
from posembed.cli import main
from posembed.corpus import _merge
from posembed.io import _indexed
from posembed.io._indexed_write import IndexedWriter

from .conftest import megatron_or_skip


@pytest.fixture(scope="module")
def megatron() -> Any:
    megatron_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module("megatron.core.datasets.indexed_dataset")


def make(
    prefix: Path, rng: np.random.Generator, dtype: Any, documents: int, multimodal: bool = False
) -> Path:
    """A dataset of documents of 0-3 sequences of 0-6 tokens each (empty
    documents and empty sequences both occur), written by posembed's writer."""
    per_doc = rng.integers(0, 4, documents)
    lengths = rng.integers(0, 7, int(per_doc.sum()))
    top = min(int(np.iinfo(dtype).max), 70_000)
    tokens = rng.integers(0, top + 1, int(lengths.sum())).astype(dtype)
    modes = rng.integers(-128, 128, len(lengths)) if multimodal else None
    for suffix in (".bin", ".idx"):
        Path(f"{prefix}{suffix}").unlink(missing_ok=True)
    with IndexedWriter(f"{prefix}.bin", f"{prefix}.idx", dtype, multimodal=multimodal) as w:
        w.write(tokens, lengths, np.cumsum(per_doc), modes)
        w.finish()
    return prefix


def megatron_merge(megatron: Any, prefixes: list[Path], out: Path, multimodal: bool) -> None:
    """What tools/merge_datasets.py does with these inputs, in this order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = megatron.IndexedDataset(str(prefixes[0]), multimodal=multimodal)
        builder = megatron.IndexedDatasetBuilder(
            f"{out}.bin", dtype=first.index.dtype, multimodal=multimodal
        )
        for prefix in prefixes:
            builder.add_index(str(prefix))
        builder.finalize(f"{out}.idx")


def same_files(a: Path, b: Path) -> bool:
    return all(
        Path(f"{a}{suffix}").read_bytes() == Path(f"{b}{suffix}").read_bytes()
        for suffix in (".idx", ".bin")
    )


def assert_nothing_left(folder: Path, before: set[str]) -> None:
    assert set(os.listdir(folder)) == before  # no output, no temporary folder


@pytest.mark.parametrize("multimodal", [False, True], ids=["plain", "multimodal"])
@pytest.mark.parametrize("dtype", [np.uint16, np.int32], ids=["uint16", "int32"])
def test_merge_equals_megatrons_add_index_byte_for_byte(tmp_path, rng, megatron, dtype, multimodal):
    prefixes = [
        make(tmp_path / f"in{k}", rng, dtype, n, multimodal) for k, n in enumerate([30, 0, 1, 45])
    ]
    megatron_merge(megatron, prefixes, tmp_path / "theirs", multimodal)
    meta = posembed.merge_indexed(prefixes, tmp_path / "ours")
    twin = reference.merge_indexed(prefixes, tmp_path / "twin")
    assert same_files(tmp_path / "ours", tmp_path / "theirs")
    assert same_files(tmp_path / "twin", tmp_path / "theirs")
    assert {**meta, "output": "twin"} == {**twin, "output": "twin"}
    merged = posembed.IndexedCorpus(tmp_path / "ours", multimodal=multimodal)
    parts = [posembed.IndexedCorpus(p, multimodal=multimodal or None) for p in prefixes]
    assert meta["documents"] == len(merged) == sum(len(p) for p in parts)
    assert meta["sequences"] == sum(len(p.sequence_lengths) for p in parts)
    assert meta["multimodal"] is multimodal
    assert meta["dtype"] == np.dtype(dtype).name
    assert [merged[i].tolist() for i in range(len(merged))] == [
        p[i].tolist() for p in parts for i in range(len(p))
    ]


def test_a_folder_is_taken_in_merge_datasets_order(tmp_path, rng, megatron):
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "sub").mkdir()  # a folder inside is passed over, as merge_datasets.py does
    names = ["b", "a10", "a2", "B.x"]
    for k, name in enumerate(names):
        make(folder / name, rng, np.uint16, 5 + k)
    extra = make(tmp_path / "extra", rng, np.uint16, 4)
    order = [folder / name for name in sorted(names)]
    megatron_merge(megatron, [*order, extra], tmp_path / "theirs", False)
    meta = posembed.merge_indexed([folder, f"{extra}.idx"], tmp_path / "ours")
    assert meta["inputs"] == [str(p) for p in [*order, extra]]
    assert same_files(tmp_path / "ours", tmp_path / "theirs")
    reference.merge_indexed([folder, extra], tmp_path / "twin")
    assert same_files(tmp_path / "twin", tmp_path / "theirs")
    # a file of the folder that is no half of a pair
    (folder / "notes.txt").write_text("shards of the web crawl")
    with pytest.raises(ValueError, match=r"holds notes\.txt without notes\.idx"):
        posembed.merge_indexed(folder, tmp_path / "again")
    with pytest.raises(ValueError, match=r"\w"):  # the twin's words are its own
        reference.merge_indexed(folder, tmp_path / "again")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="holds no indexed dataset"):
        posembed.merge_indexed(empty, tmp_path / "again")
    with pytest.raises(ValueError, match="no indexed dataset to merge"):
        posembed.merge_indexed([], tmp_path / "again")
    with pytest.raises(ValueError, match=r"\w"):  # the twin's words are its own
        reference.merge_indexed([], tmp_path / "again")
    assert not list(tmp_path.glob("again*"))


def test_the_force_rules_of_convert(tmp_path, rng, capsys):
    a, b = make(tmp_path / "a", rng, np.uint16, 6), make(tmp_path / "b", rng, np.uint16, 7)
    out = tmp_path / "out"
    assert main(["merge", str(a), str(b), "-o", str(out)]) == 0
    summary = capsys.readouterr().out
    assert summary.startswith("2 datasets, 13 documents, ")
    assert summary.rstrip().endswith(f"tokens of uint16 -> {out}.bin, {out}.idx")
    first = Path(f"{out}.idx").read_bytes()
    assert main(["merge", str(b), str(a), "-o", str(out)]) == 2
    assert "exists; pass --force to replace it" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"out\.idx exists; pass force=True to replace it"):
        posembed.merge_indexed([b, a], out)
    assert main(["merge", str(b), str(a), "-o", str(out), "--force", "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    assert Path(f"{out}.idx").read_bytes() != first  # replaced, in the other order
    # the output is never an input, and never a file that is no indexed dataset
    for target in (a, b):
        with pytest.raises(ValueError, match=r"would replace the input"):
            posembed.merge_indexed([a, b], target, force=True)
    (tmp_path / "notes.idx").write_text("not an index")
    with pytest.raises(ValueError, match=r"posembed replaces only an indexed dataset"):
        posembed.merge_indexed([a, b], tmp_path / "notes", force=True)
    assert (tmp_path / "notes.idx").read_text() == "not an index"
    with pytest.raises(TypeError, match="force must be"):
        posembed.merge_indexed([a], tmp_path / "x", force=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="each input must be a path"):
        posembed.merge_indexed([a, 3], tmp_path / "x")  # type: ignore[list-item]


def test_bad_inputs_are_refused_and_leave_nothing(tmp_path, rng):
    a = make(tmp_path / "a", rng, np.uint16, 6)
    wide = make(tmp_path / "wide", rng, np.int32, 6)
    modal = make(tmp_path / "modal", rng, np.uint16, 6, multimodal=True)
    damaged = make(tmp_path / "damaged", rng, np.uint16, 6)
    raw = bytearray(Path(f"{damaged}.idx").read_bytes())
    raw[-8:] = (10**6).to_bytes(8, "little")  # the last document index past the sequences
    Path(f"{damaged}.idx").write_bytes(bytes(raw))
    short = make(tmp_path / "short", rng, np.uint16, 6)
    with open(f"{short}.bin", "r+b") as f:
        f.truncate(os.path.getsize(f"{short}.bin") - 2)
    cases = [
        ([a, wide], rf"{wide}\.idx holds tokens of int32, but {a}\.idx holds uint16"),
        ([a, modal], rf"{modal}\.idx is multimodal .* but {a}\.idx is not"),
        ([a, damaged], rf"{damaged}\.idx: not a valid indexed dataset: document_indices"),
        ([a, short], rf"{short}\.bin: not a valid indexed dataset: it holds"),
        ([a, tmp_path / "missing"], r"missing\.idx"),
        ([a, ""], r"input '' names no indexed dataset"),
    ]
    before = set(os.listdir(tmp_path))
    for inputs, message in cases:
        with pytest.raises(ValueError, match=message):
            posembed.merge_indexed(inputs, tmp_path / "sub" / "out")
        with pytest.raises(ValueError, match=r"\w"):  # the twin's words are its own
            reference.merge_indexed(inputs, tmp_path / "sub" / "twin")
        assert_nothing_left(tmp_path, before)


def test_inputs_changed_while_merging_leave_nothing(tmp_path, rng, monkeypatch):
    a, b = make(tmp_path / "a", rng, np.uint16, 20), make(tmp_path / "b", rng, np.uint16, 20)
    before = set(os.listdir(tmp_path))
    look = _merge._first_look

    def then_rewrite(prefix: Path) -> Any:  # b rewritten once both were first seen
        part = look(prefix)
        if prefix == b:
            make(b, np.random.default_rng(5), np.uint16, 3)
        return part

    monkeypatch.setattr(_merge, "_first_look", then_rewrite)
    with pytest.raises(ValueError, match=rf"{b}\.idx: input changed while merging"):
        posembed.merge_indexed([a, b], tmp_path / "out")
    assert_nothing_left(tmp_path, before)
    monkeypatch.setattr(_merge, "_first_look", look)

    # a .bin that shrinks while it is copied
    copy = _merge.copy_file

    def shrinking(fd: int, out: Any, path: Any, count: int) -> None:
        os.truncate(path, count // 2)
        copy(fd, out, path, count)

    monkeypatch.setattr(_merge, "copy_file", shrinking)
    a, b = make(tmp_path / "a", rng, np.uint16, 20), make(tmp_path / "b", rng, np.uint16, 20)
    before = set(os.listdir(tmp_path))
    with pytest.raises(ValueError, match=r"a\.bin: the file ended early"):
        posembed.merge_indexed([a, b], tmp_path / "out")
    assert_nothing_left(tmp_path, before)


def test_more_tokens_than_the_offsets_hold_is_refused(tmp_path, rng, monkeypatch):
    a = make(tmp_path / "a", rng, np.int32, 30)
    size = os.path.getsize(f"{a}.bin")
    monkeypatch.setattr(_indexed, "MAX_BYTES", size + 1)  # one input fits, two do not
    before = set(os.listdir(tmp_path))
    with pytest.raises(ValueError, match=r"the 2 datasets hold .* more than an indexed"):
        posembed.merge_indexed([a, a], tmp_path / "out")
    assert_nothing_left(tmp_path, before)
