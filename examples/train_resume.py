"""Train a tiny GPT-2 on posembed's batches, stop, and resume elsewhere.

A small corpus is generated and written as a Megatron indexed dataset; its GPT
samples (Megatron's ``GPTDataset`` indices) are read by ``posembed.Batches``
through ``posembed.torch.BatchLoader``. A transformers ``GPT2LMHeadModel`` of a
few thousand parameters trains on CPU, data parallel over simulated ranks: each
rank's micro-batches give gradients, averaged over the ranks and accumulated
over the micro-steps of a global batch, then one optimizer step.

The run stops after a few optimizer steps on 2 ranks with no loader worker,
saves the model, the optimizer and the loader's state, and resumes on 4 ranks
with one worker each. The global batches it reads are those of an
uninterrupted run on one rank, sample for sample and token for token, and the
losses follow the same course. Run it with ``python examples/train_resume.py``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import posembed

EOD, VOCAB, SEQ = 0, 64, 16
GLOBAL, MICRO = 8, 2  # samples per optimizer step, per micro-batch and rank
STEPS, STOP_AT = 6, 3  # optimizer steps in all; where the first run stops


def make_corpus(folder: Path) -> tuple[posembed.IndexedCorpus, posembed.GPTSamples]:
    rng = np.random.default_rng(0)
    lengths = rng.integers(4, 40, 120)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(1, VOCAB, int(offsets[-1])).astype(np.uint16)
    tokens[offsets[1:] - 1] = EOD
    posembed.write_indexed(folder / "corpus", tokens, offsets, force=True)
    corpus = posembed.IndexedCorpus(folder / "corpus", documents="sequences")
    samples = posembed.gpt_samples(corpus.sequence_lengths, SEQ, num_samples=40, seed=7)
    return corpus, samples


def make_model() -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=SEQ,
        n_embd=16,
        n_layer=1,
        n_head=2,
        resid_pdrop=0.0,
        bos_token_id=EOD,
        eos_token_id=EOD,
    )
    config.embd_pdrop = config.attn_pdrop = 0.0
    return GPT2LMHeadModel(config)


def loss_of(model: Any, item: dict[str, Any]) -> Any:
    """Megatron's loss: labels already shifted, masked by loss_mask."""
    import torch

    logits = model(input_ids=item["tokens"], position_ids=item["position_ids"]).logits
    per_token = torch.nn.functional.cross_entropy(
        logits.reshape(-1, VOCAB), item["labels"].reshape(-1), reduction="none"
    )
    mask = item["loss_mask"].reshape(-1)
    return (per_token * mask).sum() / mask.sum()


def train(
    corpus: Any,
    samples: Any,
    world_size: int,
    workers: int,
    steps: int,
    checkpoint: Path | None = None,
    resume: Path | None = None,
) -> tuple[list[np.ndarray], list[float]]:
    """Optimizer steps on ``world_size`` simulated ranks; the tokens of each
    global batch read and each step's loss."""
    import torch

    from posembed.torch import BatchLoader

    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loaders = []
    for rank in range(world_size):
        order = posembed.BatchOrder(
            samples,
            global_batch_size=GLOBAL,
            micro_batch_size=MICRO,
            world_size=world_size,
            rank=rank,
        )
        loaders.append(BatchLoader(posembed.Batches(order, corpus, eod=EOD), num_workers=workers))
    if resume is not None:
        model.load_state_dict(torch.load(resume / "model.pt"))
        optimizer.load_state_dict(torch.load(resume / "optimizer.pt"))
        state = json.loads((resume / "loader.json").read_text())
        for loader in loaders:  # every rank saved the same state: rank 0's is kept
            loader.load_state_dict(state)
    accumulation = GLOBAL // (MICRO * world_size)
    streams = [iter(loader) for loader in loaders]
    seen, losses = [], []
    for _ in range(steps):
        optimizer.zero_grad()
        rows, total = [], 0.0
        for _ in range(accumulation):
            for stream in streams:  # the ranks, one after another
                item = next(stream)
                loss = loss_of(model, item) / (accumulation * world_size)
                loss.backward()  # as an all-reduce would average the ranks' gradients
                rows.append(item["tokens"].numpy())
                total += float(loss.detach())
        optimizer.step()
        seen.append(np.concatenate(rows))
        losses.append(total)
    for loader in loaders:
        loader.close()
    if checkpoint is not None:
        checkpoint.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), checkpoint / "model.pt")
        torch.save(optimizer.state_dict(), checkpoint / "optimizer.pt")
        (checkpoint / "loader.json").write_text(json.dumps(loaders[0].state_dict()))
    return seen, losses


def main(verbose: bool = True) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus, samples = make_corpus(folder)
        whole, whole_losses = train(corpus, samples, world_size=1, workers=0, steps=STEPS)
        first, first_losses = train(
            corpus, samples, world_size=2, workers=0, steps=STOP_AT, checkpoint=folder / "ckpt"
        )
        second, second_losses = train(
            corpus, samples, world_size=4, workers=1, steps=STEPS - STOP_AT, resume=folder / "ckpt"
        )
    resumed = first + second
    for k, (a, b) in enumerate(zip(whole, resumed, strict=True)):
        # the same samples of a global batch, in the same order
        assert np.array_equal(a, b), f"global batch {k} differs"
    losses = first_losses + second_losses
    assert np.allclose(whole_losses, losses, rtol=1e-4), (whole_losses, losses)
    if verbose:
        print("step  loss (1 rank)  loss (2 ranks, then 4 ranks with a worker each)")
        for k, (a, b) in enumerate(zip(whole_losses, losses, strict=True)):
            print(f"{k:4d}  {a:13.4f}  {b:13.4f}")
        print(f"{STEPS} global batches of {GLOBAL} samples: the same after resuming")
    return whole_losses, losses


if __name__ == "__main__":
    main()
