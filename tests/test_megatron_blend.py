"""gpt_blend, split_ranges and write_megatron_cache against megatron-core's own builder.

Megatron's ``BlendedMegatronDatasetBuilder(GPTDataset, sizes, ...).build()``
runs on small indexed datasets written by posembed, and every array of every
split (each corpus's three indices, the blend's two) must equal posembed's,
dtypes included; then Megatron's builder, pointed at the cache posembed
wrote and with its own index builders made to fail, must load the same.
"""

from __future__ import annotations

import json
import logging
import math
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import reference
from posembed.cli import main

from .conftest import megatron_or_skip

TOKENIZER = {"class": "tiny", "vocab": 1000}


def megatron() -> types.SimpleNamespace:
    megatron_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import blended_megatron_dataset_config as config_module
        from megatron.core.datasets import gpt_dataset, helpers
        from megatron.core.datasets.blended_dataset import BlendedDataset
        from megatron.core.datasets.blended_megatron_dataset_builder import (
            BlendedMegatronDatasetBuilder,
        )
    logging.getLogger("megatron").setLevel(logging.ERROR)
    return types.SimpleNamespace(
        Builder=BlendedMegatronDatasetBuilder,
        BlendedDataset=BlendedDataset,
        GPTDataset=gpt_dataset.GPTDataset,
        GPTDatasetConfig=gpt_dataset.GPTDatasetConfig,
        gpt_dataset=gpt_dataset,
        helpers=helpers,
        config_module=config_module,
    )


def build_megatron(m: Any, sizes: list[Any], cache: str = "", **kw: Any) -> list[Any]:
    """Megatron's builder; path_to_cache "" keeps every index in memory."""
    config = m.GPTDatasetConfig(
        tokenizer=types.SimpleNamespace(vocab_size=1000, eod=0, unique_identifiers=TOKENIZER),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        path_to_cache=cache,
        **kw,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(m.Builder(m.GPTDataset, sizes, lambda: True, config).build())


def same(a: Any, b: Any) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_array_equal(a, b)


def same_gpt(ours: posembed.GPTSamples, theirs: Any) -> None:
    same(ours.document_index, theirs.document_index)
    same(ours.sample_index, theirs.sample_index)
    same(ours.shuffle_index, theirs.shuffle_index)


def same_build(ours: posembed.GPTBlend, theirs: list[Any]) -> int:
    """Every split equal to Megatron's; the number of splits that hold a dataset."""
    held = 0
    for part, other in zip(ours.splits, theirs, strict=True):
        if part is None:
            assert other is None
            continue
        held += 1
        assert type(other).__name__ == ("BlendedDataset" if part.blended else "GPTDataset")
        assert part.split == (other.split if part.blended else other.index_split).name
        if part.blended:
            same(part.dataset_index, other.dataset_index)
            same(part.dataset_sample_index, other.dataset_sample_index)
            assert list(part.weights or ()) == list(other.weights)
            assert part.size == other.size
            assert len(part.datasets) == len(other.datasets)
            for k, (mine, theirs_k) in enumerate(zip(part.datasets, other.datasets, strict=True)):
                same_gpt(mine, theirs_k)
                assert part.num_samples[k] == theirs_k.num_samples
        else:
            same_gpt(part.datasets[0], other)
            assert part.num_samples[0] == other.num_samples
        assert len(part) == len(other)
    return held


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Five small indexed datasets of 500 to 1500 sequences of 1 to 90 tokens."""
    folder = tmp_path_factory.mktemp("corpora")
    rng = np.random.default_rng(7)
    prefixes = []
    for k in range(5):
        lengths = rng.integers(1, 90, int(rng.integers(500, 1501)))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        tokens = rng.integers(1, 1000, int(offsets[-1]))
        prefix = str(folder / f"corpus_{k}")
        posembed.write_indexed(prefix, tokens, offsets, vocab_size=1000)
        prefixes.append(prefix)
    return prefixes


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An indexed dataset of 20 sequences: "99,1" gives its test split none."""
    prefix = str(tmp_path_factory.mktemp("small") / "small")
    lengths = np.arange(5, 25)
    posembed.write_indexed(
        prefix, np.ones(int(lengths.sum()), np.int32), np.r_[0, np.cumsum(lengths)]
    )
    return prefix


# -- splits ---------------------------------------------------------------------------


def test_split_ranges_equal_megatrons():
    m = megatron()
    cfg = m.config_module
    for text in ["969,30,1", "99,1", "1", "98,2,0", "0,1,0", "1,1,1", "0.5,0.25", "100,0,0"]:
        for count in [0, 1, 7, 10, 999, 1000, 12345]:
            matrix = cfg.convert_split_vector_to_split_matrix(cfg.parse_and_normalize_split(text))
            theirs = [
                None if e is None else (round(e[0] * count), round(e[1] * count)) for e in matrix
            ]
            assert posembed.split_ranges(text, count) == theirs, (text, count)
    a, b = cfg.parse_and_normalize_split("90,5,5"), cfg.parse_and_normalize_split("80,10,10")
    matrix = cfg.convert_split_vector_to_split_matrix(a, b)
    theirs = [None if e is None else (round(e[0] * 100), round(e[1] * 100)) for e in matrix]
    assert posembed.split_ranges("90,5,5", 100, second_split="80,10,10") == theirs


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  ",
        "-1,2",
        "nan",
        "1,nan",
        "a,b",
        "1,2,3,4",
        "0,0,0",
        "0",
        "1e3",
        "1,,2",
        ".",
        "9" * 309 + ",9" + "0" * 308,
    ],
)
def test_malformed_split_strings_are_refused(text: str):
    with pytest.raises(ValueError, match="split") as info:
        posembed.split_ranges(text, 10)
    assert repr(text) in str(info.value)


# -- blends ---------------------------------------------------------------------------


def test_blends_equal_megatrons_builder(corpora: list[str], small: str):
    m = megatron()
    rng = np.random.default_rng(3)
    held = 0
    configs: list[dict[str, Any]] = [
        # a weighted blend, several seeds, splits and sizes (multi-epoch corpora included)
        dict(blend=(corpora[:3], [0.2, 0.5, 0.3]), split="969,30,1", sizes=[300, 20, 5]),
        dict(blend=(corpora, [1, 2, 3, 4, 5]), split="80,15,5", sizes=[2000, 100, 40]),
        dict(blend=(corpora[1:3], [3.0, 1.0]), split="1", sizes=[50, 0, 0]),
        dict(blend=(corpora[:1], [1.0]), split="90,10", sizes=[100, 10, 0]),
        # no weights: one epoch each, blended to a size, or exhaustively
        dict(blend=(corpora[:3], None), split="70,20,10", sizes=[400, 30, None]),
        dict(blend=(corpora, None), split="50,50,0", sizes=[None, None, None]),
        dict(blend=(corpora[2:], None), split="50,50,0", sizes=[100, 0, None]),
        # one corpus without weights: lone GPTDatasets
        dict(blend=(corpora[:1], None), split="969,30,1", sizes=[500, 50, None]),
        dict(blend=(corpora[3:4], None), split="99,1", sizes=[None, 7, 3]),
        dict(blend=([small], None), split="98,1,1", sizes=[40, None, None]),  # valid: none
        # one blend per split
        dict(
            blend_per_split=[(corpora[:2], [1.0, 2.0]), (corpora[2:3], None), None],
            sizes=[200, 10, None],
        ),
        dict(
            blend_per_split=[(corpora[:3], None), None, (corpora[3:], None)],
            sizes=[None, None, 20],
        ),
    ]
    for case, cfg in enumerate(configs):
        seed = int(rng.integers(0, 2**32))
        seq = int(rng.choice([8, 16, 33]))
        extra = case % 3 != 1
        drop = case % 2 == 0
        surplus = [0.005, 0.02, 0.0][case % 3] if case != 1 else 0.005
        sizes = cfg.pop("sizes")
        kw = dict(
            random_seed=seed,
            sequence_length=seq,
            mid_level_dataset_surplus=surplus,
            add_extra_token_to_sequence=extra,
            drop_last_partial_validation_sequence=drop,
            **cfg,
        )
        try:
            theirs = build_megatron(m, sizes, **kw)
        except IndexError:  # Megatron's oversampling refusal: ours must refuse it too
            with pytest.raises(IndexError, match="oversamples"):
                build_ours(cfg, sizes, seed, seq, surplus, extra, drop)
            continue
        ours = build_ours(cfg, sizes, seed, seq, surplus, extra, drop)
        held += same_build(ours, theirs)
    assert held >= 25


def build_ours(
    cfg: dict[str, Any],
    sizes: list[Any],
    seed: int,
    seq: int,
    surplus: float,
    extra: bool,
    drop: bool,
) -> posembed.GPTBlend:
    common = dict(
        sizes=sizes,
        sequence_length=seq,
        seed=seed,
        mid_level_dataset_surplus=surplus,
        add_extra_token_to_sequence=extra,
        drop_last_partial_validation_sequence=drop,
    )
    if "blend" in cfg:
        prefixes, weights = cfg["blend"]
        return posembed.gpt_blend(prefixes, weights, split=cfg["split"], **common)
    return posembed.gpt_blend(per_split=cfg["blend_per_split"], **common)


def test_lengths_give_the_prefixes_results(corpora: list[str]):
    lengths = [posembed.IndexedCorpus(p, documents="sequences").sequence_lengths for p in corpora]
    kw: dict[str, Any] = dict(split="90,8,2", sizes=[300, 30, 3], sequence_length=16, seed=5)
    a = posembed.gpt_blend(corpora[:3], [1, 1, 2], **kw)
    b = posembed.gpt_blend(lengths[:3], [1, 1, 2], **kw)
    for x, y in zip(a.splits, b.splits, strict=True):
        assert x is not None
        assert y is not None
        same(x.dataset_index, y.dataset_index)
        same(x.dataset_sample_index, y.dataset_sample_index)
        assert y.names == (None, None, None)
        assert x.names == tuple(corpora[:3])
    assert "train" in repr(a.train)
    assert "GPTBlend(" in repr(a)


# -- Megatron's cache -----------------------------------------------------------------


def test_megatrons_builder_loads_the_cache(corpora: list[str], tmp_path: Path, monkeypatch):
    m = megatron()
    cache = tmp_path / "cache"
    cases = [
        (dict(blend=(corpora[:3], [0.3, 0.3, 0.4]), split="969,30,1"), [200, 20, 4]),
        (dict(blend=(corpora[1:4], None), split="80,20"), [None, None, None]),
        (dict(blend=(corpora[:1], None), split="99,1"), [60, None, None]),
        (dict(blend_per_split=[(corpora[:2], None), (corpora[2:3], None), None]), [100, 5, None]),
    ]
    built = []
    for cfg, sizes in cases:
        ours = build_ours(dict(cfg), sizes, 77, 16, 0.005, True, True)
        written = posembed.write_megatron_cache(ours, cache, tokenizer=TOKENIZER)
        assert all(p.parent == cache for p in written)
        built.append(ours)
    assert not list(cache.glob(".*"))  # no temporary file left

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Megatron built an index instead of loading posembed's cache")

    # Megatron's builders of every index fail if called: it must load them all
    monkeypatch.setattr(m.helpers, "build_sample_idx", refuse)
    monkeypatch.setattr(m.helpers, "build_blending_indices", refuse)
    monkeypatch.setattr(m.helpers, "build_exhaustive_blending_indices", refuse)
    monkeypatch.setattr(m.gpt_dataset, "_build_document_index", refuse)
    monkeypatch.setattr(m.gpt_dataset.numpy.random, "RandomState", refuse)
    held = 0
    for (cfg, sizes), ours in zip(cases, built, strict=True):
        theirs = build_megatron(
            m, sizes, cache=str(cache), random_seed=77, sequence_length=16, **cfg
        )
        held += same_build(ours, theirs)
    assert held == 9
    for part in built[0].splits:
        assert part is not None
        descriptions = [
            json.loads(path.read_text())
            for path in cache.glob(f"*-BlendedDataset-{part.split}-description.txt")
        ]
        assert [d["weights"] for d in descriptions if d["size"] == part.size] == [
            list(part.weights or ())
        ]


def test_the_cache_needs_names_and_a_tokenizer(corpora: list[str], tmp_path: Path):
    lengths = posembed.IndexedCorpus(corpora[0], documents="sequences").sequence_lengths
    blend = posembed.gpt_blend([lengths], None, split="1", sizes=[10, 0, 0], sequence_length=8)
    with pytest.raises(ValueError, match="prefix"):
        posembed.write_megatron_cache(blend, tmp_path / "c", tokenizer=TOKENIZER)
    named = posembed.gpt_blend(
        [("a/prefix", lengths)], None, split="1", sizes=[10, 0, 0], sequence_length=8
    )
    with pytest.raises(TypeError, match="tokenizer"):
        posembed.write_megatron_cache(named, tmp_path / "c", tokenizer=object())
    assert not (tmp_path / "c").exists()


# -- hostile inputs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([1.0, -1.0], "above 0"),
        ([1.0, float("nan")], "above 0"),
        ([0.0, 0.0], "above 0"),
        ([1.0, 0.0], "above 0"),
        ([1.0], "one per corpus"),
        ([1e308, 1e308], "sum"),
    ],
)
def test_bad_weights_are_refused(weights: list[float], match: str):
    lengths = [np.full(20, 10), np.full(30, 7)]
    with pytest.raises(ValueError, match=match):
        posembed.gpt_blend(lengths, weights, split="1", sizes=[10, 0, 0], sequence_length=8)


def test_other_bad_arguments_are_refused():
    lengths = [np.full(20, 10), np.full(30, 7)]
    kw: dict[str, Any] = dict(split="1", sequence_length=8)
    with pytest.raises(ValueError, match="every split"):
        posembed.gpt_blend(lengths, [1, 1], sizes=[10, None, None], **kw)
    with pytest.raises(ValueError, match="3 entries"):
        posembed.gpt_blend(lengths, None, sizes=[10, 0], **kw)
    with pytest.raises(ValueError, match="exactly one"):
        posembed.gpt_blend(None, None, sizes=[10, 0, 0], sequence_length=8)
    with pytest.raises(ValueError, match="none of them"):  # 20 sequences: valid gets none
        posembed.gpt_blend(lengths, [1, 1], split="99,1", sizes=[10, 5, 0], sequence_length=8)
    with pytest.raises(ValueError, match="no samples"):  # one epoch of no sequences: none
        posembed.gpt_blend(lengths, None, split="99,1", sizes=[10, 5, 0], sequence_length=8)
    with pytest.raises(ValueError, match="per_split holds no blend"):
        posembed.gpt_blend(per_split=[None, None, None], sizes=[1, 1, 1], sequence_length=8)
    with pytest.raises(ValueError, match=r"per_split\[2\] weights\[0\] is -1"):
        posembed.gpt_blend(
            per_split=[(lengths, None), None, (lengths, [-1, 1])],
            sizes=[1, 1, 1],
            sequence_length=8,
        )
    with pytest.raises(ValueError, match="mid_level_dataset_surplus"):
        posembed.gpt_blend(lengths, [1, 1], sizes=[1, 0, 0], mid_level_dataset_surplus=-1, **kw)


def test_a_blend_of_40000_corpora_is_refused():
    lengths = [np.full(4, 3)] * 40_000
    with pytest.raises(ValueError, match="32766"):
        posembed.gpt_blend(lengths, None, split="1", sizes=[100, 0, 0], sequence_length=4)


def test_an_oversampling_blend_is_refused(tmp_path: Path):
    # weights 1:7:1 share 2 samples as 1, 2 and 1, yet draw 3 from the middle
    # corpus, whose 65 tokens hold exactly 2 samples of 32 (+ 1): with no
    # surplus the blend oversamples it, and Megatron's builder refuses it too
    m = megatron()
    prefixes = []
    for k, lengths in enumerate([np.full(10, 33), np.array([65]), np.full(10, 33)]):
        prefixes.append(str(tmp_path / f"c{k}"))
        posembed.write_indexed(
            prefixes[-1], np.ones(int(lengths.sum()), np.int32), np.r_[0, np.cumsum(lengths)]
        )
    kw: dict[str, Any] = dict(split="1", mid_level_dataset_surplus=0.0)
    with pytest.raises(IndexError, match="oversamples"):
        build_megatron(
            m, [2, 0, 0], blend=(prefixes, [1, 7, 1]), random_seed=1, sequence_length=32, **kw
        )
    with pytest.raises(IndexError, match=r"draws 3 samples from corpora\[1\]") as info:
        posembed.gpt_blend(prefixes, [1, 7, 1], sizes=[2, 0, 0], sequence_length=32, **kw)
    assert "mid_level_dataset_surplus" in str(info.value)
    blend = posembed.gpt_blend(prefixes, [1, 7, 1], sizes=[2, 0, 0], sequence_length=32, split="1")
    assert blend.train is not None
    assert len(blend.train) == 4  # the default surplus builds more


# -- the command ----------------------------------------------------------------------


def test_the_command_writes_megatrons_cache(corpora: list[str], tmp_path: Path, capsys):
    m = megatron()
    cache = tmp_path / "cache"
    code = main(
        [
            "samples",
            "--blend", "30", corpora[0], "70", corpora[1],
            "--split", "90,8,2",
            "--sizes", "100", "10", "2",
            "--sequence-length", "16",
            "--seed", "9",
            "--megatron-cache", str(cache),
            "--tokenizer-identifiers", json.dumps(TOKENIZER),
        ]
    )  # fmt: skip
    assert code == 0
    assert "train" in capsys.readouterr().out
    theirs = build_megatron(
        m,
        [100, 10, 2],
        cache=str(cache),
        random_seed=9,
        sequence_length=16,
        blend=([corpora[0], corpora[1]], [30.0, 70.0]),
        split="90,8,2",
    )
    ours = posembed.gpt_blend(
        corpora[:2], [30, 70], split="90,8,2", sizes=[100, 10, 2], sequence_length=16, seed=9
    )
    assert same_build(ours, theirs) == 3
    assert math.isclose(sum(ours.train.weights or ()), 1.0)  # type: ignore[union-attr]
    assert main(["samples", "--blend", corpora[0], "--split", "1,x", "--sizes", "1", "0", "0",
                 "--sequence-length", "4", "--megatron-cache", str(cache),
                 "--tokenizer-identifiers", "{}"]) != 0  # fmt: skip
    assert "split" in capsys.readouterr().err


@pytest.mark.usefixtures("restore_threads")
def test_the_blend_is_the_same_on_any_thread_count():
    rng = np.random.default_rng(5)
    lengths = [rng.integers(1, 50, int(rng.integers(300, 600))) for _ in range(6)]
    kw: dict[str, Any] = dict(split="80,15,5", sizes=[900, 60, 20], sequence_length=16, seed=3)
    posembed.set_num_threads(1)
    one = posembed.gpt_blend(lengths, [1, 2, 3, 4, 5, 6], **kw)
    posembed.set_num_threads(4)
    four = posembed.gpt_blend(lengths, [1, 2, 3, 4, 5, 6], **kw)
    for a, b in zip(one.splits, four.splits, strict=True):
        assert a is not None
        assert b is not None
        same(a.dataset_index, b.dataset_index)
        for x, y in zip(a.datasets, b.datasets, strict=True):
            same_gpt(x, y)


# -- batches of a blend ---------------------------------------------------------------


def test_a_blends_batches_equal_megatrons_blended_dataset(tmp_path: Path):
    """Each row of GPTBlendSplit.batch is BlendedDataset[i], with all three switches."""
    m = megatron()
    rng = np.random.default_rng(11)
    prefixes, weights, eod = [], [0.5, 0.2, 0.3], 7
    for k in range(3):  # tokens 0..11: about one EOD in 12, empty sequences too
        lengths = rng.integers(0, 40, 300)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        prefixes.append(str(tmp_path / f"c{k}"))
        posembed.write_indexed(prefixes[-1], rng.integers(0, 12, int(offsets[-1])), offsets)
    config = m.GPTDatasetConfig(
        tokenizer=types.SimpleNamespace(vocab_size=1000, eod=eod, unique_identifiers=TOKENIZER),
        reset_position_ids=True,
        reset_attention_mask=True,
        eod_mask_loss=True,
        path_to_cache="",
        random_seed=5,
        sequence_length=48,
        blend=(prefixes, weights),
        split="90,8,2",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = list(m.Builder(m.GPTDataset, [120, 30, 5], lambda: True, config).build())
    ours = posembed.gpt_blend(
        prefixes, weights, split="90,8,2", sizes=[120, 30, 5], sequence_length=48, seed=5
    )
    readers = [posembed.IndexedCorpus(p, documents="sequences") for p in prefixes]
    switches = dict(reset_position_ids=True, reset_attention_mask=True, eod_mask_loss=True)
    for part, other in zip(ours.splits[:2], theirs[:2], strict=True):
        assert part is not None
        assert part.blended
        indices = np.random.default_rng(1).permutation(len(part))[:40]
        batch = part.batch(indices, readers, eod=eod, attention_mask=True, **switches)
        assert len(set(part.dataset_index[indices].tolist())) == 3  # rows from every corpus
        width = 48
        flat = []
        for row, i in enumerate(indices.tolist()):
            item = other[i]
            assert int(item["dataset_id"]) == int(part.dataset_index[i])
            for name in ("tokens", "labels", "loss_mask", "position_ids", "attention_mask"):
                same(getattr(batch, name)[row], item[name].numpy())
            # the row's documents: after each EOD, as its attention mask says
            ends = np.flatnonzero(item["tokens"].numpy()[:-1] == eod) + 1
            flat += [row * width, *(row * width + ends)]
        assert batch.cu_seqlens.tolist() == [*flat, len(indices) * width]
        assert batch.max_seqlen == int(np.diff(batch.cu_seqlens).max())
    with pytest.raises(ValueError, match=r"corpora must hold one corpus per corpus of the blend"):
        ours.train.batch([0], readers[:2], eod=eod)
    with pytest.raises(IndexError, match=r"indices\[0\] = 120 is out of range"):
        ours.train.batch([120], readers, eod=eod)


GPT_FIELDS = ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens", "cu_seqlens_padded")


def _blend_sources(tmp_path: Path) -> tuple[Any, list[Any], list[tuple[np.ndarray, np.ndarray]]]:
    """A blend of three corpora (an EOD in about 12 tokens, some sequences
    of one token) and the corpora: local files and in-memory pairs."""
    rng = np.random.default_rng(21)
    files, pairs = [], []
    for k in range(3):
        lengths = rng.integers(1, 40, 200)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        tokens = rng.integers(0, 12, int(offsets[-1])).astype(np.int32)
        posembed.write_indexed(tmp_path / f"c{k}", tokens, offsets, dtype=np.uint16)
        files.append(posembed.IndexedCorpus(tmp_path / f"c{k}", documents="sequences"))
        pairs.append((tokens, offsets))
    lengths = [np.diff(offsets) for _, offsets in pairs]
    blend = posembed.gpt_blend(
        lengths, [0.5, 0.2, 0.3], split="90,10,0", sizes=[150, 15, 0], sequence_length=24, seed=9
    )
    return blend, files, pairs


class _Through:
    """A reader with no local file: its rows are read through ``.read``."""

    def __init__(self, data: tuple[np.ndarray, np.ndarray]) -> None:
        self.tokens, self.offsets = data

    def read(self, start: int, stop: int) -> np.ndarray:
        return self.tokens[start:stop]


@pytest.mark.usefixtures("restore_threads")
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("where", ["files", "memory", "one read through"])
def test_a_blends_batch_is_each_corpus_sample_in_its_row(tmp_path: Path, threads, where):
    # every row is what reading its sample alone from its own corpus gives,
    # read in one call (a reader without a file: corpus by corpus)
    blend, files, pairs = _blend_sources(tmp_path)
    corpora: list[Any] = {"files": files, "memory": pairs}.get(where) or [
        files[0],
        _Through(pairs[1]),
        pairs[2],
    ]
    posembed.set_num_threads(threads)
    switches = dict(reset_position_ids=True, reset_attention_mask=True, eod_mask_loss=True)
    for part in (blend.train, blend.valid):
        assert part is not None
        indices = np.random.default_rng(threads).integers(0, len(part), 37)
        got = part.batch(indices, corpora, eod=7, attention_mask=True, **switches)
        assert len(set(part.dataset_index[indices].tolist())) == 3
        flat = [0]
        for row, i in enumerate(indices.tolist()):
            d, local = int(part.dataset_index[i]), int(part.dataset_sample_index[i])
            alone = posembed.gpt_batch(
                part.datasets[d], [local], corpora[d], eod=7, attention_mask=True, **switches
            )
            for name in ("tokens", "labels", "loss_mask", "position_ids", "attention_mask"):
                same(getattr(got, name)[row], getattr(alone, name)[0])
            same(got.cu_seqlens_padded[row], alone.cu_seqlens_padded[0])
            flat[-1:] = list(row * 24 + alone.cu_seqlens)
        assert got.cu_seqlens.tolist() == flat
        assert got.max_seqlen == int(np.diff(got.cu_seqlens).max())
        twin = reference.gpt_blend_batch(
            part, indices, corpora, eod=7, attention_mask=True, **switches
        )
        for name in (*GPT_FIELDS, "attention_mask"):
            same(getattr(got, name), getattr(twin, name))
        assert got.max_seqlen == twin.max_seqlen
    empty = blend.train.batch(np.zeros(0, np.int64), corpora, eod=7)
    assert empty.tokens.shape == (0, 24)
    assert empty.cu_seqlens.tolist() == [0]


def _shortened(data: tuple[np.ndarray, np.ndarray], sequence: int) -> tuple[np.ndarray, ...]:
    """The corpus with one token of ``sequence`` gone: not the one its lengths built."""
    tokens, offsets = data
    shorter = offsets.copy()
    shorter[sequence + 1 :] -= 1
    return np.delete(tokens, offsets[sequence]), shorter


def test_a_blends_batch_raises_the_first_corpus_error(tmp_path: Path):
    # corpus 0 misses a token its last row reads, corpus 2 one its first row
    # reads (an earlier row of the batch): the error is corpus 0's, as
    # reading corpus 0's rows first gives it
    blend, _, pairs = _blend_sources(tmp_path)
    part = blend.train
    indices = np.arange(40)
    which, local = part.dataset_index[indices], part.dataset_sample_index[indices]
    assert np.flatnonzero(which == 2)[0] < np.flatnonzero(which == 0)[-1]
    corpora: list[Any] = list(pairs)
    errors = []
    for d, pick in ((0, -1), (2, 0)):
        samples = part.datasets[d]
        sample = samples.shuffle_index[local[which == d][pick]]
        corpora[d] = _shortened(
            pairs[d], int(samples.document_index[samples.sample_index[sample][0]])
        )
        with pytest.raises(ValueError, match=r"^corpus: ") as alone:
            posembed.gpt_batch(samples, local[which == d], corpora[d], eod=7)
        errors.append(str(alone.value))
    assert errors[0] != errors[1]
    with pytest.raises(ValueError, match=r"^corpus: ") as ours:
        part.batch(indices, corpora, eod=7)
    assert str(ours.value) == errors[0]


def test_a_blend_whose_indices_were_changed_is_refused_by_name(tmp_path: Path):
    blend, files, _ = _blend_sources(tmp_path)
    part = blend.train
    corpus_of, sample_of = part.dataset_index.copy(), part.dataset_sample_index.copy()
    part.dataset_index[5] = 3
    with pytest.raises(ValueError, match=r"dataset_index: the blend's samples name corpus 3"):
        part.batch([5], files, eod=7)
    part.dataset_index[5] = corpus_of[5]
    d = int(corpus_of[5])
    part.dataset_sample_index[5] = len(part.datasets[d])
    with pytest.raises(ValueError, match=rf"dataset_sample_index: sample 5 of the blend names "
                       rf"sample {len(part.datasets[d])} of corpus {d}"):  # fmt: skip
        part.batch([4, 5], files, eod=7)
    part.dataset_sample_index[5] = sample_of[5]
    same(part.batch([5], files, eod=7).tokens, part.batch([5], files, eod=7).tokens)
