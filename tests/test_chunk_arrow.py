"""`posembed chunk` on Arrow and Parquet corpora: a list column, one document per
row, from a saved dataset, Parquet (files, folders, many row groups) and Arrow
IPC files and streams; windows identical to the token file with its offsets;
Parquet output that `datasets` loads; bad input in one line; bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import posembed  # noqa: E402
import posembed.corpus._chunk as chunk_module  # noqa: E402
import posembed.corpus._pipeline as pipeline_module  # noqa: E402
from posembed.cli import main  # noqa: E402
from posembed.corpus import _sink_parquet  # noqa: E402
from posembed.corpus._chunk import ChunkError, chunk_file, prepare_chunk  # noqa: E402

from .conftest import run_peak_rss, skip_if_sanitized  # noqa: E402

NAMES = ("windows", "starts", "lengths", "documents")


@pytest.fixture(autouse=True)
def _offline_hub(tmp_path, monkeypatch):
    # datasets and transformers never touch the real caches, nor the network
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _documents(seed: int = 5, count: int = 300) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 400, count)
    lengths[[0, 3, count - 1]] = 0  # empty documents, first and last included
    lengths[count // 2] = 2500  # one longer than many windows
    return [rng.integers(0, 30_000, n).astype(np.int32) for n in lengths]


def _table(docs: list[np.ndarray], value_type=None) -> object:
    ids = pa.array([d.tolist() for d in docs], pa.list_(value_type or pa.int32()))
    return pa.table({"text": [f"doc {i}" for i in range(len(docs))], "input_ids": ids})


def _write_ipc(path: Path, table, *, stream: bool, rows: int = 40) -> None:
    with pa.OSFile(str(path), "wb") as f:
        new = pa.ipc.new_stream if stream else pa.ipc.new_file
        with new(f, table.schema) as writer:
            writer.write_table(table, max_chunksize=rows)


def _npy_corpus(folder: Path, docs: list[np.ndarray]) -> tuple[Path, Path]:
    lengths = [d.shape[0] for d in docs]
    np.save(folder / "tokens.npy", np.concatenate(docs))
    np.save(folder / "offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    return folder / "tokens.npy", folder / "offsets.npy"


def _sources(folder: Path, docs: list[np.ndarray]) -> dict[str, Path]:
    """The same corpus in every form the command reads."""
    import datasets

    table = _table(docs)
    made = {}
    ds = datasets.Dataset(table)
    ds.save_to_disk(str(folder / "saved"), max_shard_size=20_000)  # several shards
    made["save_to_disk"] = folder / "saved"
    ds.to_parquet(str(folder / "export.parquet"))
    made["to_parquet"] = folder / "export.parquet"
    pq.write_table(table, folder / "groups.parquet", row_group_size=7)
    made["row groups"] = folder / "groups.parquet"
    (folder / "parts").mkdir()
    for k, begin in enumerate(range(0, len(docs), 120)):
        pq.write_table(table.slice(begin, 120), folder / "parts" / f"part-{k:02d}.parquet")
    made["parquet folder"] = folder / "parts"
    _write_ipc(folder / "file.arrow", table, stream=False)
    made["ipc file"] = folder / "file.arrow"
    _write_ipc(folder / "stream.arrow", table, stream=True)
    made["ipc stream"] = folder / "stream.arrow"
    return made


def _same_files(a: Path, b: Path) -> None:
    for name in NAMES:
        assert (a / f"{name}.npy").read_bytes() == (b / f"{name}.npy").read_bytes(), name


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("arrow")
    docs = _documents()
    tokens, offsets = _npy_corpus(folder, docs)
    return folder, docs, tokens, offsets, _sources(folder, docs)


KINDS = ["save_to_disk", "to_parquet", "row groups", "parquet folder", "ipc file", "ipc stream"]
SHAPES = [
    {"size": 64, "overlap": 16},
    {"size": 16, "step": 16, "tail": "drop"},
    {"size": 100, "step": 7, "tail": "shift"},
    {"size": 5000, "tail": "pad", "pad_value": -1},
]


@pytest.mark.parametrize("kind", KINDS)
def test_every_form_gives_the_token_file_s_windows_byte_for_byte(corpus, tmp_path, kind):
    _folder, docs, tokens, offsets, sources = corpus
    for k, shape in enumerate(SHAPES):
        want, got = tmp_path / f"want{k}", tmp_path / f"got{k}"
        ref = chunk_file(tokens, want, offsets_path=offsets, quiet=True, **shape)
        meta = chunk_file(sources[kind], got, quiet=True, **shape)
        _same_files(want, got)
        for key in ("tokens", "documents", "windows", "size", "step", "tail", "dtype"):
            assert meta[key] == ref[key], key
        assert meta["column"] == "input_ids"
        assert meta["documents"] == len(docs)


def test_small_batches_give_the_same_windows(corpus, tmp_path, monkeypatch):
    # batches of a few rows and a few windows each: batch edges everywhere
    _, _, tokens, offsets, sources = corpus
    monkeypatch.setattr(chunk_module, "MEMORY_BYTES", 40_000)
    import posembed.corpus._source_arrow as arrow_module

    monkeypatch.setattr(arrow_module, "BATCH_BYTES", 3000)
    chunk_file(tokens, tmp_path / "want", size=32, step=5, offsets_path=offsets, quiet=True)
    for kind in ("row groups", "ipc stream"):
        chunk_file(sources[kind], tmp_path / kind, size=32, step=5, quiet=True)
        _same_files(tmp_path / "want", tmp_path / kind)


def test_arrow_input_cuts_on_one_thread_unless_asked(corpus, tmp_path, thread_counts):
    # the decoders and the cut take the call's count: one by default, beside
    # the reading and writing threads, whatever the global count; the files
    # are the same for every count
    import posembed.corpus._source_arrow as arrow_module

    _, _, tokens, offsets, sources = corpus
    seen = thread_counts.seen
    thread_counts.watch(pipeline_module, "_cut", "cut")
    thread_counts.watch(arrow_module, "_csr", "decode")
    chunk_file(tokens, tmp_path / "want", size=64, overlap=16, offsets_path=offsets, quiet=True)
    posembed.set_num_threads(3)
    try:
        for threads in (None, 2):
            seen.clear()
            got = tmp_path / f"got-{threads}"
            chunk_file(sources["row groups"], got, size=64, overlap=16, threads=threads, quiet=True)
            assert {where for where, _ in seen} == {"cut", "decode"}
            assert {count for _, count in seen} == {threads or 1}
            assert posembed.get_num_threads() == 3
            _same_files(tmp_path / "want", got)
    finally:
        posembed.set_num_threads(None)


def test_the_command_reads_a_saved_dataset_with_another_column(corpus, tmp_path, capsys):
    _folder, docs, _, _, _ = corpus
    import datasets

    ds = datasets.Dataset.from_dict({"ids": [d.tolist() for d in docs]})
    ds.save_to_disk(str(tmp_path / "saved"))
    args = ["chunk", str(tmp_path / "saved"), "-o", str(tmp_path / "out"), "--size", "64"]
    assert main([*args, "--column", "ids"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.endswith(f"in {len(docs)} documents -> {tmp_path / 'out'}")
    flat = np.concatenate(docs).astype(ds.features["ids"].feature.dtype)
    offsets = np.concatenate([[0], np.cumsum([d.shape[0] for d in docs])])
    want = posembed.windows(flat, 64, offsets=offsets)
    assert np.array_equal(np.load(tmp_path / "out" / "windows.npy"), want.tokens)
    assert np.array_equal(np.load(tmp_path / "out" / "documents.npy"), want.documents)


def test_a_tokenized_dataset_chunks_as_its_flat_tokens(tmp_path):
    # a real tokenizer (WordLevel, built here) over generated text, mapped the
    # way the HF examples do, saved, then chunked by the command
    datasets = pytest.importorskip("datasets")
    tokenizers = pytest.importorskip("tokenizers")
    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(500)]
    texts = [" ".join(rng.choice(words, int(n))) for n in rng.integers(0, 120, 150)]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    model = tokenizers.models.WordLevel(vocab, unk_token="[UNK]")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()

    def tokenize(batch):
        return {"input_ids": [e.ids for e in tok.encode_batch(batch["text"])]}

    ds = datasets.Dataset.from_dict({"text": texts}).map(tokenize, batched=True)
    ds.save_to_disk(str(tmp_path / "tokenized"))
    out = tmp_path / "windows"
    assert (
        main(
            [
                "chunk",
                str(tmp_path / "tokenized"),
                "-o",
                str(out),
                "--size",
                "32",
                "--overlap",
                "8",
                "--quiet",
            ]
        )
        == 0
    )
    column = ds.data.column("input_ids")
    flat = column.combine_chunks().values.to_numpy()
    offsets = np.concatenate([[0], np.cumsum([len(ids) for ids in ds["input_ids"]])])
    assert flat.shape[0] == offsets[-1] > 0
    want = posembed.windows(flat, 32, overlap=8, offsets=offsets)
    got = np.load(out / "windows.npy")
    assert got.dtype == flat.dtype
    assert np.array_equal(got, want.tokens)
    for name in ("starts", "lengths", "documents"):
        assert np.array_equal(np.load(out / f"{name}.npy"), getattr(want, name))


@pytest.mark.parametrize("kind", ["to_parquet", "ipc stream"])
def test_parquet_output_loads_with_datasets_and_equals_the_npy_output(
    corpus, tmp_path, monkeypatch, kind
):
    datasets = pytest.importorskip("datasets")
    _, _, tokens, offsets, sources = corpus
    npy, parquet = tmp_path / "npy", tmp_path / "parquet"
    chunk_file(tokens, npy, size=48, overlap=8, offsets_path=offsets, quiet=True)
    monkeypatch.setattr(chunk_module, "MEMORY_BYTES", 200_000)  # small batches: many row groups
    meta = chunk_file(sources[kind], parquet, size=48, overlap=8, format="parquet", quiet=True)
    assert meta["format"] == "parquet"
    assert sorted(p.name for p in parquet.iterdir()) == ["meta.json", "windows.parquet"]
    assert pq.ParquetFile(parquet / "windows.parquet").metadata.num_row_groups > 1
    ds = datasets.load_dataset(
        "parquet",
        data_files=str(parquet / "windows.parquet"),
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    assert ds.features["input_ids"].length == 48
    want = {name: np.load(npy / f"{name}.npy") for name in NAMES}
    assert ds.features["input_ids"].feature.dtype == want["windows"].dtype.name
    table = ds.data  # the Arrow table datasets loaded: values as stored

    def column(name: str) -> np.ndarray:
        return table.column(name).combine_chunks().to_numpy(zero_copy_only=False)

    ids = table.column("input_ids").combine_chunks().flatten().to_numpy().reshape(-1, 48)
    assert np.array_equal(ids, want["windows"])
    assert ids.dtype == want["windows"].dtype
    mask = table.column("attention_mask").combine_chunks().flatten().to_numpy().reshape(-1, 48)
    assert np.array_equal(mask, np.arange(48)[None, :] < want["lengths"][:, None])
    assert mask.dtype == np.int8
    for name, array in (("document", "documents"), ("start", "starts"), ("length", "lengths")):
        assert np.array_equal(column(name), want[array]), name


def test_a_token_file_writes_parquet_too_and_force_replaces_it(corpus, tmp_path, monkeypatch):
    _, _, tokens, offsets, _ = corpus
    out = tmp_path / "out"
    # row groups of at most 10 windows (the writer holds one encoded whole)
    monkeypatch.setattr(_sink_parquet, "ROW_GROUP_BYTES", 10 * 64 * 4)
    chunk_file(tokens, out, size=64, offsets_path=offsets, format="parquet", quiet=True)
    meta = pq.ParquetFile(out / "windows.parquet").metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert max(groups) == 10
    first = pq.read_table(out / "windows.parquet")
    want = posembed.windows(np.load(tokens), 64, offsets=np.load(offsets))
    assert np.array_equal(
        first.column("input_ids").combine_chunks().flatten().to_numpy().reshape(-1, 64),
        want.tokens,
    )
    # the folder is posembed's (meta.json): --force replaces it, with npy now
    with pytest.raises(ChunkError, match="exists; pass --force"):
        chunk_file(tokens, out, size=64, offsets_path=offsets, quiet=True)
    chunk_file(tokens, out, size=64, offsets_path=offsets, quiet=True, force=True)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*(f"{n}.npy" for n in NAMES), "meta.json"]
    )


# ---- bad input: a ChunkError, one line and exit 2 from the command ------------------------


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    # the error is the last thing printed, on one line (after any progress
    # bars a library printed while making the input)
    lines = [ln for ln in err.splitlines() if ln.startswith("posembed chunk: error")]
    assert len(lines) == 1, err
    assert err.endswith(lines[0] + "\n"), err
    assert "Traceback" not in err
    return lines[0]


def _refused(src: Path, out: Path, capsys, pattern: str, *extra: str) -> None:
    with pytest.raises(ChunkError, match=pattern):
        chunk_file(src, out, size=8, quiet=True, **_kwargs(extra))
    assert main(["chunk", str(src), "-o", str(out), "--size", "8", *extra]) == 2
    assert _one_line(capsys)
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".posembed-")]


def _kwargs(extra: tuple[str, ...]) -> dict[str, object]:
    """chunk_file's arguments for the command's options."""
    names = {"--offsets": "offsets_path", "--pad-value": "pad_value"}
    kwargs: dict[str, object] = {}
    for option, value in zip(extra[::2], extra[1::2], strict=True):
        name = names.get(option, option.lstrip("-"))
        kwargs[name] = int(value) if name == "pad_value" else value
    return kwargs


class _Bar:
    """tqdm as the bars use it, recording (tokens so far, total, description)."""

    seen: ClassVar[list[tuple[int, int | None, str]]] = []

    def __init__(self, total=None, unit="", unit_scale=False, desc=""):
        self.n, self.total, self.desc = 0, total, desc

    def update(self, k):
        self.n += k

    def refresh(self):
        _Bar.seen.append((self.n, self.total, self.desc))

    def set_description(self, desc):
        self.desc = desc

    def close(self):
        _Bar.seen.append((self.n, self.total, self.desc))


@pytest.mark.parametrize("kind", KINDS)
def test_the_progress_bar_estimates_its_total(corpus, tmp_path, monkeypatch, kind):
    import tqdm

    _, docs, _, _, sources = corpus
    count = sum(d.shape[0] for d in docs)
    monkeypatch.setattr(tqdm, "tqdm", _Bar)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    from posembed.corpus._convert import convert_file
    from posembed.corpus._pack_output import pack_file

    run = {
        "chunk": lambda: chunk_file(sources[kind], tmp_path / "c", size=64),
        "convert": lambda: convert_file(sources[kind], tmp_path / "mg"),
        "pack": lambda: pack_file(sources[kind], tmp_path / "p", size=512),
    }
    for command, make in run.items():
        _Bar.seen = []
        make()
        *running, last = _Bar.seen
        assert last == (count, count, f"posembed {command}")  # the count, once known
        # while reading: an estimate, said to be one, never below what was read,
        # and near the count for these even documents (the last one exact)
        assert running
        for n, total, desc in running:
            assert desc == f"posembed {command} (total estimated)"
            assert total is not None
            assert n <= total <= 3 * count
        assert abs(running[-1][1] - count) <= count // 100  # all but a footer read


def test_a_missing_column_lists_those_present(corpus, tmp_path, capsys):
    _, _, _, _, sources = corpus
    for kind in KINDS:
        _refused(
            sources[kind],
            tmp_path / "out",
            capsys,
            r"no column 'tokens' \(its columns: 'text', 'input_ids'\); choose one with --column",
            "--column",
            "tokens",
        )


def test_column_names_with_line_breaks_stay_on_one_line(tmp_path, capsys):
    # names are the file's text: each is quoted, a long list cut short, and the
    # command's error stays one line whatever characters they hold
    ids = pa.array([[1, 2]], pa.list_(pa.int64()))
    names = ["a\nb", "c\x0cd\x1c", "e\u2028"] + [f"n{i}" for i in range(30)]
    table = pa.table([ids] * len(names), names=names)
    _write_ipc(tmp_path / "c.arrow", table, stream=True)
    _refused(
        tmp_path / "c.arrow",
        tmp_path / "out",
        capsys,
        r"its columns: 'a\\nb', 'c\\x0cd\\x1c', 'e\\u2028', 'n0', .*'n16', and 13 more\)",
    )


def test_a_null_row_is_named(tmp_path, capsys):
    ids = pa.array([[1, 2], [3], [4], None, [5]], pa.list_(pa.int64()))
    pq.write_table(pa.table({"input_ids": ids}), tmp_path / "n.parquet", row_group_size=2)
    _refused(
        tmp_path / "n.parquet",
        tmp_path / "out",
        capsys,
        r"n\.parquet: row 3 of column "
        r"'input_ids' is null; every row must be a list of token ids",
    )
    ids = pa.array([[1, 2], [3, None]], pa.list_(pa.int64()))
    _write_ipc(tmp_path / "v.arrow", pa.table({"input_ids": ids}), stream=True)
    _refused(
        tmp_path / "v.arrow",
        tmp_path / "out",
        capsys,
        r"row 1 of column 'input_ids' "
        r"holds a null token id",
    )


@pytest.mark.parametrize(("decoders", "queued"), [(1, 1), (2, 1), (3, 4)])
def test_row_groups_decoded_on_several_threads_give_the_same_windows(
    tmp_path, monkeypatch, decoders, queued
):
    # row groups of 7 rows, batches of a few rows: the decoding threads' queues
    # fill and drain, and the windows are those of the flat tokens all the same
    import posembed.corpus._source_arrow as arrow_module

    rng = np.random.default_rng(5)
    docs = [rng.integers(0, 1000, int(n)).tolist() for n in rng.integers(0, 90, 60)]
    pq.write_table(
        pa.table({"input_ids": pa.array(docs, pa.list_(pa.int32()))}),
        tmp_path / "g.parquet",
        row_group_size=7,
    )
    monkeypatch.setattr(arrow_module, "DECODERS", decoders)
    monkeypatch.setattr(arrow_module, "QUEUED", queued)
    monkeypatch.setattr(arrow_module, "BATCH_BYTES", 64)
    default = pa.default_memory_pool().backend_name
    chunk_file(tmp_path / "g.parquet", tmp_path / "out", size=16, overlap=4, quiet=True)
    assert pa.default_memory_pool().backend_name == default  # put back after the run
    flat = np.array([t for d in docs for t in d], np.int32)
    offsets = np.cumsum([0] + [len(d) for d in docs])
    want = posembed.windows(flat, 16, overlap=4, offsets=offsets)
    assert np.array_equal(np.load(tmp_path / "out" / "windows.npy"), want.tokens)
    assert np.array_equal(np.load(tmp_path / "out" / "documents.npy"), want.documents)


@pytest.mark.parametrize("decoders", [1, 2, 3])
def test_row_groups_are_decoded_no_further_ahead_than_the_reading(tmp_path, monkeypatch, decoders):
    # row groups of one batch each, fewer than a decoder's queue holds: a
    # decoder that finished one must not start the next until the reading
    # reaches the row group decoders - 1 before it, or all would be held at once
    import concurrent.futures

    import posembed.corpus._source_arrow as arrow_module

    n_groups, group_rows = 12, 5
    docs = [[i, i + 1] for i in range(n_groups * group_rows)]
    src = tmp_path / "g.parquet"
    pq.write_table(
        pa.table({"input_ids": pa.array(docs, pa.list_(pa.int32()))}),
        src,
        row_group_size=group_rows,
    )
    submitted: list[int] = []

    class Recording(concurrent.futures.ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            submitted.append(args[0])
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(arrow_module, "ThreadPoolExecutor", Recording)
    monkeypatch.setattr(arrow_module, "DECODERS", decoders)
    monkeypatch.setattr(arrow_module, "QUEUED", 4)
    corpus = arrow_module.open_corpus(src, "input_ids")
    rows = []
    for batch in arrow_module._documents(corpus):
        group = batch.first_row // group_rows
        assert submitted == list(range(min(n_groups, group + decoders)))
        rows.append(batch.first_row)
    assert rows == list(range(0, n_groups * group_rows, group_rows))


@pytest.mark.parametrize(
    ("column", "pattern"),
    [
        (pa.array([[1.5], [2.0]], pa.list_(pa.float32())), r"holds float, not integer token ids"),
        (pa.array([1, 2], pa.int64()), r"is int64, not a list of token ids"),
        (pa.array([["a"], ["b"]]), r"holds string, not integer token ids"),
    ],
    ids=["float lists", "integers", "strings"],
)
def test_a_column_of_another_type_is_refused(tmp_path, capsys, column, pattern):
    pq.write_table(pa.table({"input_ids": column}), tmp_path / "c.parquet")
    _refused(
        tmp_path / "c.parquet",
        tmp_path / "out",
        capsys,
        r"c\.parquet: column 'input_ids' " + pattern,
    )


def test_a_truncated_parquet_file_is_refused(corpus, tmp_path, capsys):
    _, _, _, _, sources = corpus
    data = sources["row groups"].read_bytes()
    for cut in (0, 3, len(data) // 2, len(data) - 3):
        (tmp_path / "t.parquet").write_bytes(data[:cut])
        _refused(
            tmp_path / "t.parquet",
            tmp_path / "out",
            capsys,
            r"t\.parquet: not a readable "
            r"Parquet file",
        )


def test_a_truncated_arrow_stream_is_refused(corpus, tmp_path, capsys):
    _, _, _, _, sources = corpus
    data = sources["ipc stream"].read_bytes()
    (tmp_path / "t.arrow").write_bytes(data[: len(data) // 2])
    _refused(
        tmp_path / "t.arrow",
        tmp_path / "out",
        capsys,
        r"t\.arrow: not a readable Arrow "
        r"IPC stream file",
    )


def _saved(tmp_path: Path, state: object) -> Path:
    folder = tmp_path / "saved"
    folder.mkdir()
    _write_ipc(folder / "data-00000-of-00001.arrow", _table(_documents(count=5)), stream=True)
    (folder / "dataset_info.json").write_text("{}")
    text = state if isinstance(state, str) else json.dumps(state)
    (folder / "state.json").write_text(text)
    return folder


@pytest.mark.parametrize(
    ("state", "pattern"),
    [
        ({"_data_files": [{"filename": "../outside.arrow"}]}, r"not a file name inside"),
        ({"_data_files": [{"filename": "/etc/passwd"}]}, r"not a file name inside"),
        ({"_data_files": [{"filename": "sub/../../x.arrow"}]}, r"not a file name inside"),
        ({"_data_files": [{"filename": "link.arrow"}]}, r"'link\.arrow' is a link out of"),
        ({"_data_files": "data-00000-of-00001.arrow"}, r"no \"_data_files\" list"),
        ({"_data_files": []}, r"no \"_data_files\" list"),
        ([1, 2], r"no \"_data_files\" list"),
        ({"_data_files": [{"filename": 7}]}, r"without a \"filename\" string"),
        ("[" * 5000 + "]" * 5000, r"nests 5000 levels deep"),
        ('{"_data_files": NaN}', r"NaN is not JSON"),
        ({"_data_files": [{"filename": "missing.arrow"}]}, r"missing\.arrow: no such file"),
    ],
    ids=[
        "dotdot",
        "absolute",
        "nested dotdot",
        "link out",
        "not a list",
        "empty",
        "array",
        "no filename",
        "deep",
        "nan",
        "missing",
    ],
)
def test_a_crafted_state_json_is_refused(tmp_path, capsys, state, pattern):
    (tmp_path / "outside.arrow").write_bytes(b"secret")
    folder = _saved(tmp_path, state)
    os.symlink(tmp_path / "outside.arrow", folder / "link.arrow")
    _refused(folder, tmp_path / "out", capsys, pattern)


def test_a_saved_dataset_dict_asks_for_one_split(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"input_ids": [[1, 2, 3]]})
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(tmp_path / "dd"))
    _refused(
        tmp_path / "dd",
        tmp_path / "out",
        capsys,
        r"a saved DatasetDict .*give one "
        r"split's folder, e\.g\. .*dd/train",
    )
    chunk_file(tmp_path / "dd" / "train", tmp_path / "out", size=2, quiet=True)
    assert np.load(tmp_path / "out" / "windows.npy").tolist() == [[1, 2], [3, 0]]


def test_token_file_options_are_refused_for_arrow_input(corpus, tmp_path, capsys):
    _, _, tokens, offsets, sources = corpus
    src = sources["to_parquet"]
    _refused(
        src, tmp_path / "out", capsys, r"--dtype applies to raw token files", "--dtype", "int32"
    )
    _refused(
        src,
        tmp_path / "out",
        capsys,
        r"--offsets applies to token files",
        "--offsets",
        str(offsets),
    )
    _refused(
        tokens,
        tmp_path / "out",
        capsys,
        r"--column applies to Arrow and Parquet input",
        "--column",
        "ids",
    )
    _refused(
        src,
        tmp_path / "out",
        capsys,
        r"--pad-value 99999999999 does not fit int32",
        "--pad-value",
        "99999999999",
    )


def test_files_of_a_folder_must_agree_on_the_token_type(tmp_path, capsys):
    (tmp_path / "parts").mkdir()
    pq.write_table(_table(_documents(count=4)), tmp_path / "parts" / "a.parquet")
    pq.write_table(_table(_documents(count=4), pa.int64()), tmp_path / "parts" / "b.parquet")
    _refused(
        tmp_path / "parts",
        tmp_path / "out",
        capsys,
        r"b\.parquet: column 'input_ids' "
        r"holds int64 tokens, .*a\.parquet int32",
    )


def test_without_pyarrow_the_error_names_the_extra(corpus, tmp_path, capsys, monkeypatch):
    _, _, tokens, _offsets, sources = corpus
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    for src, extra in ((sources["to_parquet"], []), (tokens, ["--format", "parquet"])):
        with pytest.raises(ImportError, match=r"pip install 'posembed\[arrow\]'"):
            chunk_file(src, tmp_path / "out", size=8, quiet=True, **_kwargs(tuple(extra)))
        assert main(["chunk", str(src), "-o", str(tmp_path / "out"), "--size", "8", *extra]) == 2
        assert "pip install 'posembed[arrow]'" in _one_line(capsys)
        assert not (tmp_path / "out").exists()


def test_a_file_replaced_after_the_checks_is_refused(corpus, tmp_path, monkeypatch):
    _, docs, _, _, _ = corpus
    import posembed.corpus._source_arrow as arrow_module

    src = tmp_path / "c.parquet"
    pq.write_table(_table(docs), src)
    opened = arrow_module.open_corpus

    def then_rewrite(*args):
        corpus = opened(*args)
        pq.write_table(_table(docs[::-1]), src)  # another file at the path
        return corpus

    monkeypatch.setattr(arrow_module, "open_corpus", then_rewrite)
    with pytest.raises(ChunkError, match=r"c\.parquet: input changed while reading"):
        chunk_file(src, tmp_path / "out", size=8, quiet=True)
    assert not (tmp_path / "out").exists()


# ---- memory ----------------------------------------------------------------------------------

# The command after the imports that any run makes, so that the idle run
# (no arguments) counts them too.
PEAK_CHILD = textwrap.dedent(
    """
    import sys
    import numpy, pyarrow, pyarrow.parquet, pyarrow.ipc
    import posembed, posembed.corpus._chunk, posembed.corpus._source_arrow
    from posembed.cli import main
    sys.exit(main(sys.argv[1:]) if len(sys.argv) > 1 else 0)
    """
)
# Beyond MEMORY_BYTES: the threads' stacks, the interpreter's and the
# allocators' own memory (as for a token file), and Parquet's read buffer and
# decoding of a batch.
ALLOWANCE = 24 << 20


def _peak(*args: object) -> int:
    # measured from a fresh parent (see conftest): a child forked from this
    # test process would start from its memory
    done, peak_kib = run_peak_rss([sys.executable, "-c", PEAK_CHILD, *map(str, args)])
    assert done.returncode == 0, done.stderr
    return peak_kib << 10


@skip_if_sanitized
@pytest.mark.parametrize("form", ["parquet", "parquet groups", "arrow"])
def test_a_corpus_larger_than_the_budget_in_bounded_memory(tmp_path, form):
    # 32 Mi int32 tokens (128 MiB, twice the budget) in one Parquet row group,
    # or IPC batches of 1 Mi tokens: read a batch at a time, never the whole
    # row group or file; or in 32 row groups of 4 MiB, decoded two at a time
    n_docs, length = 32 * 1024, 1024
    values = (np.arange(n_docs * length, dtype=np.int64) % 50_021).astype(np.int32)
    offsets = np.arange(0, n_docs * length + 1, length, dtype=np.int32)
    ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    table = pa.table({"input_ids": ids})
    src = tmp_path / f"big.{form.split()[0]}"
    if form == "parquet":
        pq.write_table(table, src, row_group_size=n_docs, compression="none")
        assert pq.ParquetFile(src).metadata.num_row_groups == 1
    elif form == "parquet groups":
        pq.write_table(table, src, row_group_size=1024, compression="none")
        meta = pq.ParquetFile(src).metadata
        assert meta.num_row_groups == 32
    else:
        _write_ipc(src, table, stream=True, rows=1024)
    del table, ids, values
    idle = _peak()
    out = tmp_path / "out"
    extra = _peak("chunk", src, "-o", out, "--size", "1536", "--overlap", "512", "--quiet") - idle
    print(form, extra >> 20)
    assert extra < chunk_module.MEMORY_BYTES + ALLOWANCE, extra >> 20
    windows = np.load(out / "windows.npy", mmap_mode="r")
    assert windows.shape == (n_docs, 1536)
    assert windows[-1, 0] == ((n_docs - 1) * length) % 50_021
    assert np.load(out / "lengths.npy")[-1] == length


def test_dask_takes_token_files_only(corpus, tmp_path, capsys):
    _, _, tokens, _, sources = corpus
    out = str(tmp_path / "out")
    nowhere = "tcp://127.0.0.1:1"
    assert (
        main(
            [
                "chunk",
                str(tokens),
                "-o",
                out,
                "--size",
                "8",
                "--dask",
                nowhere,
                "--format",
                "parquet",
            ]
        )
        == 2
    )
    assert "--dask writes .npy parts from a token file" in _one_line(capsys)
    with pytest.raises(
        ChunkError, match=r"Arrow, Parquet and folders of windows are read in one process"
    ):
        prepare_chunk(sources["to_parquet"], out, size=8)
    assert not (tmp_path / "out").exists()


def test_the_system_pool_switch_nests_and_puts_the_default_back():
    # two runs on two threads make readers at once: the caller's default pool
    # is put back when the last one is done, whatever the order they end in
    import posembed.corpus._source_arrow as arrow_module

    default = pa.default_memory_pool().backend_name
    first, second = arrow_module._system_pool(pa), arrow_module._system_pool(pa)
    first.__enter__()
    second.__enter__()
    assert pa.default_memory_pool().backend_name == "system"
    first.__exit__(None, None, None)
    assert pa.default_memory_pool().backend_name == "system"
    second.__exit__(None, None, None)
    assert pa.default_memory_pool().backend_name == default


# Two files the fuzz harness crafted: each stopped the command without its one
# line (a traceback; pyarrow's uncaught exception aborting the process).
def test_a_crafted_ipc_batch_is_one_line(tmp_path, capsys):
    ids = pa.array([[1, 2], [3], [4, 5, 6]], pa.list_(pa.int16()))
    _write_ipc(tmp_path / "s.arrow", pa.table({"tokens": ids}), stream=True)
    data = bytearray((tmp_path / "s.arrow").read_bytes())
    data[40] ^= 4
    (tmp_path / "s.arrow").write_bytes(bytes(data))
    assert main(["chunk", str(tmp_path / "s.arrow"), "-o", str(tmp_path / "o"), "--size", "2",
                 "--column", "tokens", "--quiet"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.startswith("posembed chunk: error: "), err
    assert err.count("\n") == 1, err


def test_a_parquet_file_with_crafted_column_metadata_is_refused_not_aborted(tmp_path):
    ids = pa.array([[1, 2], [3], [4, 5, 6]], pa.list_(pa.int16()))
    pq.write_table(pa.table({"tokens": ids}), tmp_path / "c.parquet")
    data = bytearray((tmp_path / "c.parquet").read_bytes())
    data[127] ^= 1  # a size histogram of the column chunk's metadata
    (tmp_path / "c.parquet").write_bytes(bytes(data))
    code = (
        "import sys; from posembed.cli import main; "
        f"sys.exit(main(['chunk', {str(tmp_path / 'c.parquet')!r}, '-o', "
        f"{str(tmp_path / 'o')!r}, '--size', '2', '--column', 'tokens', '--quiet']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode in (0, 2), done.stderr  # never a signal
    assert done.stderr.count("\n") <= 1, done.stderr


@pytest.mark.parametrize("form", ["parquet", "ipc stream"])
def test_a_column_name_that_is_not_utf8_is_one_line(tmp_path, capsys, form):
    table = pa.table({"input_ids": pa.array([[1, 2]], pa.list_(pa.int16())), "zzzz": [1]})
    src = tmp_path / ("u.parquet" if form == "parquet" else "u.arrow")
    if form == "parquet":
        pq.write_table(table, src)
    else:
        _write_ipc(src, table, stream=True)
    src.write_bytes(src.read_bytes().replace(b"zzzz", b"z\xffzz"))
    # a column not there: the message would list the names, one not UTF-8
    args = ["--size", "2", "--column", "tokens", "--quiet"]
    code = main(["chunk", str(src), "-o", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("posembed chunk: error: "), err
    assert err.count("\n") == 1, err
