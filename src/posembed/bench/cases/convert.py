"""convert: ``posembed convert``, a corpus written as a Megatron indexed dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case, unmeasured
from posembed.bench.cases._shared import absent, corpus, write_parquet
from posembed.bench.scratch import scratch_dir

EOD = 50_256  # GPT-2's end of text


def _out_bytes(tokens: int, documents: int) -> int:
    """The .bin (uint16 tokens and one EOD a document) and the .idx (34 bytes,
    12 a sequence, 8 a document index)."""
    return (tokens + documents) * 2 + 34 + 12 * documents + 8 * (documents + 1)


def _remove(prefix: Path) -> None:
    for suffix in (".bin", ".idx"):
        Path(f"{prefix}{suffix}").unlink(missing_ok=True)


def build(quick: bool = False) -> list[Case]:
    from posembed.corpus._convert import convert_file

    work = scratch_dir()
    data = corpus(4_000 if quick else 64_000, np.uint16, seed=12)
    np.save(work / "convert-tokens.npy", data.tokens)
    np.save(work / "convert-offsets.npy", data.offsets)
    out_bytes = _out_bytes(data.tokens.shape[0], data.lengths.shape[0])

    def ours(src: Path, **options: Any) -> object:
        # the last run's output removed first (as the chunk case removes its
        # folder, and the roofline its file): its pages are not written back
        # while this run writes
        _remove(work / "converted")
        return convert_file(src, work / "converted", append_eod=EOD, quiet=True, **options)

    def from_npy() -> object:
        return ours(work / "convert-tokens.npy", offsets_path=work / "convert-offsets.npy")

    def reference_way() -> None:  # both arrays loaded, written whole by the NumPy twin
        tokens = np.load(work / "convert-tokens.npy")
        offsets = np.load(work / "convert-offsets.npy")
        _remove(work / "reference")
        reference.write_indexed(work / "reference", tokens, offsets, append_eod=EOD)

    def check(prefix: Path) -> bool:
        got = posembed.IndexedCorpus(prefix)
        lengths = got.sequence_lengths.astype(np.int64) - 1
        return bool(np.array_equal(lengths, data.lengths) and got.dtype == np.uint16)

    def check_npy() -> bool:
        from_npy()
        tokens, _ = posembed.IndexedCorpus(work / "converted").to_arrays()
        ends = data.offsets[1:] + np.arange(1, data.lengths.shape[0] + 1) - 1
        return check(work / "converted") and bool((tokens[ends] == EOD).all())

    cases = [
        Case(
            "convert",
            "token file",
            f"{data.tokens.nbytes >> 20} MB .npy of uint16 + offsets, {len(data.lengths)} "
            "documents, EOD appended",
            out_bytes,
            {"reference": reference_way, "posembed": from_npy},
            "file write",
            check_npy,
            in_bytes=data.tokens.nbytes,
        )
    ]
    try:
        import pyarrow.parquet as pq
    except ImportError:
        cases.append(unmeasured("convert", "Parquet file", absent("pyarrow")))
        return cases
    src = work / "convert.parquet"
    write_parquet(src, data._replace(tokens=data.tokens.astype(np.int32)))

    def from_parquet() -> object:
        return ours(src)

    def reference_parquet() -> None:  # the whole column read, written by the NumPy twin
        column = pq.read_table(src).column(0).combine_chunks()
        tokens, offsets = column.values.to_numpy(), column.offsets.to_numpy()
        _remove(work / "reference")
        reference.write_indexed(work / "reference", tokens, offsets, append_eod=EOD)

    def check_parquet() -> bool:
        from_parquet()
        return check(work / "converted")

    cases.append(
        Case(
            "convert",
            "Parquet file",
            f"{data.tokens.nbytes * 2 >> 20} MB of int32 tokens in {len(data.lengths)} "
            "documents, Parquet on disk, EOD appended; roofline: pyarrow decoding the column",
            out_bytes,
            {"reference": reference_parquet, "posembed": from_parquet},
            "parquet decode",
            check_parquet,
            in_bytes=data.tokens.nbytes * 2,
            source=src,
        )
    )
    return cases
