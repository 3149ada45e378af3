"""posembed.torch: Batches through PyTorch's DataLoader and torchdata's StatefulDataLoader.

A loader interrupted at random global batches and resumed on other world sizes
(4 -> 2 -> 8 ranks in one process) and worker counts (0, 3 and 1 workers)
gives the uninterrupted run's global batches, tensors and all; the
StatefulDataLoader's own state resumes on the same worker count; items are
tensors over the batch's memory; a worker's reading error reaches the loop.
CI runs these with PyTorch installed (POSEMBED_REQUIRE_TORCH=1).
"""

from __future__ import annotations

import gc
import os
from typing import Any

import numpy as np
import pytest

import posembed

from .conftest import torch_or_skip
from .test_batches import EOD, STEPS, Failing, G, M, corpus, make_sources, order, take


@pytest.fixture(scope="module")
def torch() -> Any:
    return torch_or_skip()


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return make_sources(tmp_path_factory)


def stateful_or_skip() -> Any:
    if os.environ.get("POSEMBED_REQUIRE_TORCH") == "1":
        from torchdata.stateful_dataloader import StatefulDataLoader
    else:
        module = pytest.importorskip("torchdata.stateful_dataloader")
        StatefulDataLoader = module.StatefulDataLoader
    return StatefulDataLoader


def loader_run(
    source: Any, data: Any, options: dict[str, Any], fields: tuple[str, ...], plan: list[tuple]
) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """(world size, workers, global batches) segments through BatchLoader, each
    resumed from the state rank 0's loader saved; the global batches' samples
    and data, the ranks' micro-batches put back in order."""
    from posembed.torch import BatchLoader

    out, state = [], None
    for world_size, workers, steps in plan:
        per_rank = []
        for rank in range(world_size):
            batches = posembed.Batches(order(source, world_size, rank), data, **options)
            loader = BatchLoader(batches, num_workers=workers)
            if state is not None:
                loader.load_state_dict(state)
            got = take(loader, steps * G // (M * world_size))
            loader.close()
            per_rank.append(got)
            if rank == 0:
                saved = loader.state_dict()
        state = saved
        a = G // (M * world_size)
        for k in range(steps):
            parts = [per_rank[r][k * a + s] for s in range(a) for r in range(world_size)]
            indices = np.concatenate([p["indices"].numpy() for p in parts])
            data_k = {n: np.concatenate([p[n].numpy() for p in parts]) for n in fields}
            out.append((indices, data_k))
    return out


# 3 workers on a machine of 2 CPUs: PyTorch warns, and the test means it
MORE_WORKERS_THAN_CPUS = pytest.mark.filterwarnings("ignore:This DataLoader will create")


@MORE_WORKERS_THAN_CPUS
@pytest.mark.parametrize("kind", ["samples", "packed"])
def test_pytorch_loader_resumes_on_other_world_sizes_and_worker_counts(torch, sources, kind):
    source, data, options, fields = sources[kind]
    whole = loader_run(source, data, options, fields, [(1, 0, STEPS)])
    cut = sorted(np.random.default_rng(7).choice(np.arange(1, STEPS), 2, replace=False).tolist())
    plan = [(4, 0, cut[0]), (2, 3, cut[1] - cut[0]), (8, 1, STEPS - cut[1])]
    resumed = loader_run(source, data, options, fields, plan)
    for k, ((i1, d1), (i2, d2)) in enumerate(zip(whole, resumed, strict=True)):
        np.testing.assert_array_equal(i1, i2, err_msg=f"global batch {k}")
        for name in fields:
            np.testing.assert_array_equal(d1[name], d2[name], err_msg=f"{name}, batch {k}")
    reference_order = order(source)
    for k, (indices, _) in enumerate(whole):
        np.testing.assert_array_equal(indices, reference_order.global_batch(k))


@MORE_WORKERS_THAN_CPUS
def test_pytorch_loader_resumes_between_micro_steps_on_another_worker_count(torch, sources):
    from posembed.torch import BatchLoader

    samples, indexed, options, _ = sources["samples"]
    plain = BatchLoader(posembed.Batches(order(samples, 2, 1), indexed, **options))
    whole = [item["indices"].numpy() for item in take(plain, 12)]
    first = BatchLoader(posembed.Batches(order(samples, 2, 1), indexed, **options), num_workers=2)
    head = [item["indices"].numpy() for item in take(first, 5)]  # mid global batch
    state = first.state_dict()
    first.close()
    assert state["consumed_samples"] == 5 * M * 2
    second = BatchLoader(posembed.Batches(order(samples, 2, 1), indexed, **options), num_workers=3)
    second.load_state_dict(state)
    tail = [item["indices"].numpy() for item in take(second, 7)]
    np.testing.assert_array_equal(np.concatenate(head + tail), np.concatenate(whole))


# torchdata 0.11 calls a function PyTorch 2.13 deprecates
@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")
@pytest.mark.parametrize("workers", [0, 2])
def test_pytorch_stateful_dataloader_resumes_with_its_own_state(torch, sources, workers):
    StatefulDataLoader = stateful_or_skip()
    from posembed.torch import BatchDataset

    samples, indexed, options, _ = sources["samples"]

    def loader() -> Any:
        batches = posembed.Batches(order(samples, 2, 0), indexed, **options)
        return StatefulDataLoader(BatchDataset(batches), batch_size=None, num_workers=workers)

    whole = [item["tokens"].numpy() for item in take(loader(), 10)]
    first = loader()
    it = iter(first)
    head = [next(it)["tokens"].numpy() for _ in range(3)]
    state = first.state_dict()
    del it
    second = loader()
    second.load_state_dict(state)
    tail = [item["tokens"].numpy() for item in take(second, 7)]
    np.testing.assert_array_equal(np.concatenate(head + tail), np.concatenate(whole))
    del first, second  # their iterators, workers and read-ahead threads, now
    gc.collect()


def test_pytorch_items_are_tensors_over_the_batch_memory(torch, sources):
    from posembed.torch import tensors

    samples, indexed, options, fields = sources["samples"]
    micro = next(iter(posembed.Batches(order(samples), indexed, prefetch=0, **options)))
    item = tensors(micro)
    for name in fields:
        assert np.shares_memory(item[name].numpy(), getattr(micro.batch, name)), name
    assert item["tokens"].dtype == torch.int64
    assert item["loss_mask"].dtype == torch.float32
    assert isinstance(item["max_seqlen"], int)
    assert (item["step"], item["consumed_samples"]) == (0, M)
    with pytest.raises(TypeError, match=r"posembed\.MicroBatch"):
        tensors(micro.batch)


def test_pytorch_worker_errors_reach_the_loop(torch):
    from posembed.torch import BatchLoader

    tokens, offsets = corpus(1, 60)
    samples = posembed.gpt_samples(np.diff(offsets), 16, num_samples=40, seed=3)
    for workers in (0, 2):
        batches = posembed.Batches(order(samples), Failing((tokens, offsets), 6), eod=EOD)
        with pytest.raises(OSError, match="the disk went away at token"):
            for _ in BatchLoader(batches, num_workers=workers):
                pass
        gc.collect()  # the loader the error's traceback kept: its worker stops now


def test_pytorch_loader_refuses_what_would_reorder(torch, sources):
    from posembed.torch import BatchDataset, BatchLoader

    samples, indexed, options, _ = sources["samples"]
    batches = posembed.Batches(order(samples), indexed, **options)
    with pytest.raises(TypeError, match="batch_size is set by BatchLoader"):
        BatchLoader(batches, batch_size=4)
    with pytest.raises(ValueError, match="persistent_workers"):
        BatchLoader(batches, num_workers=1, persistent_workers=True)
    with pytest.raises(TypeError, match=r"posembed\.Batches"):
        BatchDataset(samples)
    dataset = BatchDataset(batches)
    state = dataset.state_dict()
    state["worker"] = 1
    with pytest.raises(ValueError, match="saved by worker 1 of 1; this is worker 0 of 1"):
        dataset.load_state_dict(state)


def test_pytorch_packed_rows_columns_are_tensors_too(torch, sources):
    from posembed.torch import tensors

    plan, indexed, _, _ = sources["packed"]
    mask = np.arange(int(indexed.offsets[-1])) % 3 == 0
    with posembed.Batches(order(plan), indexed, columns={"mask": mask}) as batches:
        micro = next(iter(batches))
    item = tensors(micro)
    assert item["columns"]["mask"].dtype == torch.bool
    assert np.shares_memory(item["columns"]["mask"].numpy(), micro.batch.columns["mask"])
    assert item["input_ids"].dtype == torch.uint16  # the corpus's own token type


@pytest.mark.parametrize("kind", ["samples", "packed"])
def test_pytorch_worker_items_cross_in_one_block_and_equal_the_in_process_items(
    torch, sources, kind
):
    from posembed.torch import BatchLoader, tensors
    from posembed.torch._dataset import _group

    source, data, options, _ = sources[kind]
    if kind == "packed":
        mask = np.arange(int(data.offsets[-1])) % 3 == 0
        options = {**options, "columns": {"mask": mask}}
    loader = BatchLoader(posembed.Batches(order(source), data, **options), num_workers=2)
    group = _group(loader.batches)
    assert group > 1  # small micro-batches: several an item
    n = 2 * group + 3  # two whole items (one from each worker), then part of a third
    with posembed.Batches(order(source), data, prefetch=0, **options) as batches:
        expected = [tensors(mb) for mb in take(batches, n)]  # they keep their memory
    got = take(loader, n)
    loader.close()
    blocks = []
    for g, w in zip(got, expected, strict=True):
        assert list(g) == list(w)
        storages = set()
        for key, value in w.items():
            pairs = value.items() if isinstance(value, dict) else [(None, value)]
            for name, t in pairs:
                have = g[key] if name is None else g[key][name]
                if isinstance(t, torch.Tensor):
                    assert have.dtype == t.dtype, (key, name)
                    assert have.shape == t.shape, (key, name)
                    assert torch.equal(have, t), (key, name)
                    storages.add(have.untyped_storage().data_ptr())
                else:
                    assert have == t, key
        assert len(storages) == 1  # every tensor a view of the one block
        blocks.append(storages.pop())
    # a worker's item holds `group` micro-batches in one block
    assert blocks == [blocks[k // group * group] for k in range(n)]
    assert len(set(blocks)) == 3
