"""pack: sequence packing plans and the cut of their rows.

The plan's "numpy" column holds TRL's best-fit decreasing where TRL is
installed (never a dependency: the column is left empty without it), run on
the whole corpus at once: ``trl.data_utils._pack_bfd``, the function that
``pack_dataset(strategy="bfd_split")`` maps over batches, over a table of the
same documents (a list column of nulls, so that only the lengths take memory).
The plan at scale has no twin column (see ``WITHOUT_REFERENCE``).
The cut's "numpy" column is NumPy's own way: one fancy index of the tokens and
the position ids from a cumulative sum.

"rows on the fly" cuts a batch of shuffled plan rows from an indexed dataset
(only their documents read, by position), with a completion mask read from a
second indexed dataset; its "numpy" column reads the same rows from the
packed copy (the ``.npy`` arrays ``posembed pack`` writes, the rows'
``input_ids`` and int32 ``position_ids``, and the mask as a third array),
memory-mapped as ``np.load(mmap_mode="r")`` gives them, so the ratio says
what packing on the fly costs against a corpus packed beforehand. Both sides
give the same three arrays (labels, which the packed copy does not hold, are
left out of both; ``labels=True`` adds one more array to write).
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from functools import partial

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case
from posembed.bench.scratch import scratch_dir

CAPACITY = 4096


def corpus_lengths(documents: int, seed: int = 5) -> np.ndarray:
    """Lengths drawn like a pretraining corpus: log-normal, mean about 600
    tokens, about 0.8% of the documents longer than 4096."""
    rng = np.random.default_rng(seed)
    return np.maximum(1, rng.lognormal(np.log(600) - 0.5, 1.0, documents)).astype(np.int64)


def _trl_bfd(lengths: np.ndarray) -> Callable[[], object] | None:
    if importlib.util.find_spec("trl") is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import pyarrow as pa
            from trl.data_utils import _pack_bfd
        except ImportError:
            return None
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    column = pa.LargeListArray.from_arrays(
        pa.array(offsets, pa.int64()), pa.nulls(int(offsets[-1]))
    )
    table = pa.table({"input_ids": column})
    return partial(_pack_bfd, table, CAPACITY, "split")


def _numpy_cut(
    plan: posembed.PackPlan, tokens: np.ndarray, offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The rows by NumPy alone: every slot's token index, then one gather."""
    lengths = plan.lengths
    row_of = np.repeat(np.arange(plan.rows), np.diff(plan.row_offsets))
    slot0 = row_of * plan.capacity + plan.offsets  # each entry's first slot
    first = np.repeat(offsets[plan.documents] + plan.starts - slot0, lengths)
    slots = np.repeat(slot0, lengths) + (
        np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    )
    ids = np.zeros(plan.rows * plan.capacity, tokens.dtype)
    ids[slots] = tokens[slots + first]
    positions = np.zeros(plan.rows * plan.capacity, np.int32)
    positions[slots] = slots - np.repeat(slot0, lengths)
    return ids.reshape(plan.rows, -1), positions.reshape(plan.rows, -1)


def build(quick: bool = False) -> list[Case]:
    cases = []
    # -- the plan against TRL's, same documents
    small = corpus_lengths(20_000 if quick else 200_000)
    impls: dict[str, Callable[[], object]] = {
        "reference": partial(reference.pack, small, CAPACITY),
        "posembed": partial(posembed.pack, small, CAPACITY),
    }
    trl = _trl_bfd(small)
    if trl is not None:
        impls["numpy"] = trl

    def check_small() -> bool:
        plan = posembed.pack(small, CAPACITY)
        return trl is None or plan.rows == len(trl())  # type: ignore[arg-type]

    cases.append(
        Case(
            "pack",
            "plan vs TRL",
            f"best fit, {small.shape[0] // 1000}k documents, capacity {CAPACITY}; vs TRL bfd",
            0,
            impls,
            None,
            check_small,
            in_bytes=small.nbytes,
        )
    )
    # -- the plan at corpus scale: fill and time
    big = corpus_lengths(1_000_000 if quick else 10_000_000)

    def check_big() -> bool:
        bfd = posembed.pack(big, CAPACITY)
        ffd = posembed.pack(big, CAPACITY, strategy="ffd")
        return bfd.fill >= 0.99 and bfd.fill >= ffd.fill

    cases.append(
        Case(
            "pack",
            "plan at scale",
            f"best fit, {big.shape[0] // 1_000_000}M documents (log-normal, mean 600), "
            f"capacity {CAPACITY}",
            0,
            {"posembed": partial(posembed.pack, big, CAPACITY)},
            None,
            check_big,
            in_bytes=big.nbytes,
        )
    )
    # -- the cut of the rows, into fresh arrays
    docs = corpus_lengths(20_000 if quick else 200_000, seed=6)
    plan = posembed.pack(docs, CAPACITY)
    offsets = np.concatenate([[0], np.cumsum(docs)]).astype(np.int64)
    tokens = (np.arange(int(offsets[-1])) % 50_000).astype(np.uint16)
    cut = partial(plan.cut, tokens, offsets, position_dtype=np.int32)
    out_bytes = plan.rows * CAPACITY * (tokens.itemsize + 4)

    def check_cut() -> bool:
        ours = cut()
        ids, positions = _numpy_cut(plan, tokens, offsets)
        placed = np.repeat(ours.documents >= 0, ours.seq_lengths).reshape(ids.shape)
        same_positions = np.array_equal(ours.position_ids[placed], positions[placed])
        return bool(np.array_equal(ours.input_ids, ids)) and bool(same_positions)

    cases.append(
        Case(
            "pack",
            "cut",
            f"{plan.rows} rows of {CAPACITY} uint16 ids + int32 positions",
            out_bytes,
            {
                "reference": partial(
                    reference.pack(docs, CAPACITY).cut, tokens, offsets, position_dtype=np.int32
                ),
                "posembed": cut,
                "numpy": partial(_numpy_cut, plan, tokens, offsets),
            },
            "copy fresh",
            check_cut,
        )
    )
    cases.append(_on_the_fly(quick))
    return cases


def _on_the_fly(quick: bool) -> Case:
    docs = corpus_lengths(20_000 if quick else 200_000, seed=7)
    batch = 16 if quick else 64
    rng = np.random.default_rng(8)
    offsets = np.concatenate([[0], np.cumsum(docs)]).astype(np.int64)
    tokens = rng.integers(1, 50_000, int(offsets[-1])).astype(np.uint16)
    mask = np.asarray(rng.random(tokens.shape[0]) < 0.6).astype(np.uint8)
    folder = scratch_dir()
    posembed.write_indexed(folder / "tokens", tokens, offsets, dtype=np.uint16)
    posembed.write_indexed(folder / "mask", mask, offsets, dtype=np.uint8)
    corpus = posembed.IndexedCorpus(folder / "tokens")
    masks = posembed.IndexedCorpus(folder / "mask")
    plan = posembed.pack(docs, CAPACITY)
    # the packed copy, in the layout of posembed pack's .npy output
    shape = (plan.rows, CAPACITY)
    files = {
        "input_ids": np.lib.format.open_memmap(folder / "input_ids.npy", "w+", np.uint16, shape),
        "position_ids": np.lib.format.open_memmap(
            folder / "position_ids.npy", "w+", np.int32, shape
        ),
        "mask": np.lib.format.open_memmap(folder / "mask.npy", "w+", np.uint8, shape),
    }
    for r0 in range(0, plan.rows, 1024):
        part = plan.cut(
            corpus,
            rows=slice(r0, r0 + 1024),
            position_dtype=np.int32,
            columns={"mask": masks},
        )
        files["input_ids"][r0 : r0 + 1024] = part.input_ids
        files["position_ids"][r0 : r0 + 1024] = part.position_ids
        files["mask"][r0 : r0 + 1024] = part.columns["mask"]
    for a in files.values():
        a.flush()
    del files
    packed = {
        name: np.load(folder / f"{name}.npy", mmap_mode="r")
        for name in ("input_ids", "position_ids", "mask")
    }
    wanted = rng.permutation(plan.rows)[:batch]
    run = partial(plan.cut, corpus, rows=wanted, position_dtype=np.int32, columns={"mask": masks})

    def read_packed() -> dict[str, np.ndarray]:
        return {name: a[wanted] for name, a in packed.items()}

    twin = reference.pack(docs, CAPACITY)
    twin_run = partial(
        twin.cut,
        tokens,
        offsets,
        rows=wanted,
        position_dtype=np.int32,
        columns={"mask": mask},
    )

    def check() -> bool:
        ours, theirs = run(), read_packed()
        same = [
            np.array_equal(ours.input_ids, theirs["input_ids"]),
            np.array_equal(ours.position_ids, theirs["position_ids"]),
            np.array_equal(ours.columns["mask"], theirs["mask"]),
        ]
        return all(same)

    return Case(
        "pack",
        "rows on the fly",
        f"{batch} shuffled rows of {CAPACITY} with a mask column, from a "
        f"{docs.shape[0] // 1000}k-document uint16 .bin; vs the same rows of the packed copy",
        batch * CAPACITY * (2 + 4 + 1),
        {"reference": twin_run, "numpy": read_packed, "posembed": run},
        None,
        check,
    )
