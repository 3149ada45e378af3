"""BatchDataset and BatchLoader: posembed's batches through PyTorch's data loaders."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from posembed.corpus._batches import Batches, MicroBatch, _sample_tokens

try:
    import torch
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "posembed.torch needs PyTorch (pip install torch); the rest of posembed does not"
    ) from exc

DATASET_FORMAT = "posembed.BatchDataset/1"
# What BatchLoader sets itself: its own items (groups of micro-batches), in the rank's order.
LOADER_OWNS = ("batch_size", "shuffle", "sampler", "batch_sampler", "drop_last", "in_order")


def tensors(micro_batch: MicroBatch) -> dict[str, Any]:
    """A micro-batch as a dict of tensors that share its arrays' memory.

    Parameters
    ----------
    micro_batch : MicroBatch
        What iterating :class:`posembed.Batches` gives.

    Returns
    -------
    dict
        ``"step"`` and ``"consumed_samples"`` (int), ``"indices"`` (int64
        tensor), and each array of the batch under its attribute's name
        (``tokens``, ``labels``, ``loss_mask``, ``position_ids``,
        ``cu_seqlens``, ... of a :class:`posembed.GPTBatch`; ``input_ids``,
        ``position_ids``, ``labels``, ``cu_seqlens``, ... of
        :class:`posembed.PackedRows`, whose ``columns`` stay a dict of tensors;
        ``tokens``, ``starts``, ``lengths``,
        ``documents`` of windows), made with ``torch.from_numpy`` (no copy);
        ``max_seqlen`` stays an int. Token dtypes are kept (a ``uint16``
        corpus gives ``torch.uint16`` ids where packed rows or windows hold
        the corpus's own tokens).

    Raises
    ------
    TypeError
        Something that is not a :class:`posembed.MicroBatch`.
    """
    out: dict[str, Any] = {}
    for key, value in _fields(micro_batch).items():
        if isinstance(value, np.ndarray):
            out[key] = _tensor(value)
        elif isinstance(value, dict):  # packed rows' columns
            out[key] = {name: _tensor(column) for name, column in value.items()}
        else:
            out[key] = value
    return out


def _fields(micro_batch: MicroBatch) -> dict[str, Any]:
    """What :func:`tensors` gives, its arrays still NumPy's."""
    if not isinstance(micro_batch, MicroBatch):
        raise TypeError(
            f"micro_batch must be a posembed.MicroBatch; got {type(micro_batch).__name__}"
        )
    out: dict[str, Any] = {
        "step": micro_batch.step,
        "consumed_samples": micro_batch.consumed_samples,
        "indices": micro_batch.indices,
    }
    for field in dataclasses.fields(micro_batch.batch):
        if field.name == "doc_offsets":  # the whole corpus's, not the batch's
            continue
        value = getattr(micro_batch.batch, field.name)
        if isinstance(value, np.ndarray) or (isinstance(value, dict) and field.name == "columns"):
            out[field.name] = value
        elif isinstance(value, (int, np.integer)) and field.name == "max_seqlen":
            out[field.name] = int(value)
    return out


def _tensor(a: np.ndarray) -> Any:
    if not a.flags.writeable:  # torch wants memory it may write; never share read-only
        a = a.copy()
    return torch.from_numpy(a)


# A worker's item as it crosses to the loop: every array of a group of
# micro-batches in one block of bytes (PyTorch moves each tensor of an item
# through a shared memory segment of its own, a segment costs more than its
# bytes, and each item costs the loader's queues and threads more again),
# and where each lies in it.
BLOCK, LAYOUT = "_posembed_block", "_posembed_layout"
_ALIGN = 64
# The most tokens a worker's item holds (its micro-batches, at most
# GROUP_MOST of them): items of several micro-batches cost less than one
# item each.
GROUP_TOKENS = 2**19
GROUP_MOST = 8


def _one_block(micro_batches: list[MicroBatch]) -> dict[str, Any]:
    """:func:`tensors` of each micro-batch with all their arrays copied into
    one uint8 tensor; :func:`_from_block` gives :func:`tensors`' dicts back."""
    parts: list[tuple[list[str], dict[str, Any], list[tuple[Any, ...]]]] = []
    arrays: list[np.ndarray] = []
    at = 0
    for micro_batch in micro_batches:
        fields = _fields(micro_batch)
        plain: dict[str, Any] = {}
        layout: list[tuple[Any, ...]] = []
        for key, value in fields.items():
            if isinstance(value, np.ndarray):
                named: list[tuple[str | None, np.ndarray]] = [(None, value)]
            elif isinstance(value, dict):
                plain[key] = {}  # filled in by name; stays empty without columns
                named = list(value.items())
            else:
                plain[key] = value
                continue
            for name, a in named:
                dtype = torch.from_numpy(np.empty(0, a.dtype)).dtype  # (a may be read-only)
                layout.append((key, name, dtype, a.shape, at, a.nbytes))
                arrays.append(a)
                at += -(-a.nbytes // _ALIGN) * _ALIGN
        parts.append((list(fields), plain, layout))
    block = _shared_bytes(max(at, 1))
    raw = block.numpy()
    entries = [entry for _, _, layout in parts for entry in layout]
    for (_, _, _, _, start, nbytes), a in zip(entries, arrays, strict=True):
        raw[start : start + nbytes].view(a.dtype).reshape(a.shape)[...] = a
    return {BLOCK: block, LAYOUT: parts}


def _shared_bytes(n: int) -> Any:
    """A uint8 tensor of n bytes in shared memory from the start, so that the
    loader sends it as it is (a tensor in private memory is copied into a
    new shared segment when a worker's item is sent)."""
    new_shared = getattr(torch.UntypedStorage, "_new_shared", None)
    if new_shared is None:  # pragma: no cover - PyTorch without it copies once more
        return torch.empty(n, dtype=torch.uint8)
    return torch.empty(0, dtype=torch.uint8).set_(new_shared(n))


def _from_block(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The dicts of tensors a worker sent in one block, each tensor a view of it."""
    block = item[BLOCK]
    out = []
    for order, plain, layout in item[LAYOUT]:
        fields = dict(plain)
        for key, name, dtype, shape, start, nbytes in layout:
            t = block[start : start + nbytes].view(dtype).reshape(shape)
            if name is None:
                fields[key] = t
            else:
                fields[key][name] = t
        out.append({key: fields[key] for key in order})
    return out


def _group(batches: Batches) -> int:
    """Micro-batches a worker's item holds: at most GROUP_TOKENS tokens, GROUP_MOST."""
    order = batches.order
    tokens = _sample_tokens(order.source) * int(order.micro_batch_size)
    return max(1, min(GROUP_MOST, GROUP_TOKENS // max(tokens, 1)))


class BatchDataset(IterableDataset):  # type: ignore[type-arg,misc,unused-ignore]
    """The micro-batches of :class:`posembed.Batches` as a PyTorch ``IterableDataset``.

    In a ``DataLoader(dataset, batch_size=None, num_workers=n)`` each worker
    reads its share (micro-batches w, w + n, ...; ``get_worker_info()``
    says which), on its own read-ahead threads, and the loader, which takes
    one item from each worker in turn, gives them back in the rank's order.
    Each item is :func:`tensors` of a micro-batch.

    ``state_dict`` and ``load_state_dict`` are what torchdata's
    ``StatefulDataLoader`` calls in each worker: its state holds, per worker,
    the micro-batches that worker gave, and resumes only with the same
    worker count. To resume on another worker count or world size, save
    :class:`BatchLoader`'s state instead.

    Parameters
    ----------
    batches : Batches
        The rank's micro-batches; iterating starts at its order's
        ``consumed_samples``.

    Raises
    ------
    TypeError
        ``batches`` that is not a :class:`posembed.Batches`.
    """

    def __init__(self, batches: Batches) -> None:
        if not isinstance(batches, Batches):
            raise TypeError(f"batches must be a posembed.Batches; got {type(batches).__name__}")
        self.batches = batches
        self._resume = 0  # micro-batches this worker gave before a loaded state
        self._live: dict[str, Any] | None = None
        # BatchLoader's workers: items of `_group` micro-batches, their arrays in one block
        self._one_block = False
        self._group = 1

    @staticmethod
    def _worker() -> tuple[int, int]:
        info = get_worker_info()
        return (0, 1) if info is None else (int(info.id), int(info.num_workers))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        worker, num_workers = self._worker()
        given, self._resume = self._resume, 0
        live: dict[str, Any] = {
            "worker": worker,
            "num_workers": num_workers,
            "given": given,
            "order": self.batches.state_dict(),  # its position: the share's start
        }
        self._live = live
        grouped = self._one_block and get_worker_info() is not None
        group = self._group if grouped else 1
        # `given` counts items: the share resumes at this worker's next one
        share = self.batches._share(worker + given * num_workers, num_workers, group)
        return _counting(share, live, group if grouped else 0)

    def state_dict(self) -> dict[str, Any]:
        """This worker's position: the order's state where its share began, and
        how many micro-batches it gave since.

        Returns
        -------
        dict
            Plain values: ``"order"`` (:meth:`BatchOrder.state_dict`),
            ``"worker"``, ``"num_workers"``, ``"given"`` and ``"format"``.
        """
        if self._live is None:
            worker, num_workers = self._worker()
            live = {
                "worker": worker,
                "num_workers": num_workers,
                "given": self._resume,
                "order": self.batches.state_dict(),
            }
        else:
            live = self._live
        return {
            "format": DATASET_FORMAT,
            "order": live["order"],
            "worker": live["worker"],
            "num_workers": live["num_workers"],
            "given": live["given"],
        }

    def load_state_dict(self, state: Any) -> None:
        """Resume this worker where ``state`` was saved (O(1): nothing is replayed).

        Parameters
        ----------
        state : dict
            What :meth:`state_dict` returned in the same worker.

        Raises
        ------
        TypeError
            A state that is not a dict of this format.
        ValueError
            A state saved by another worker or worker count (resume through
            :class:`BatchLoader` to change it), and what
            :meth:`BatchOrder.load_state_dict` refuses (it names what changed).
        """
        if not isinstance(state, dict) or state.get("format") != DATASET_FORMAT:
            raise TypeError(
                f"state must be what BatchDataset.state_dict() returned (format "
                f"{DATASET_FORMAT!r}); got {type(state).__name__}"
            )
        worker, num_workers = self._worker()
        if (state["worker"], state["num_workers"]) != (worker, num_workers):
            raise ValueError(
                f"the state was saved by worker {state['worker']} of {state['num_workers']}; "
                f"this is worker {worker} of {num_workers}: a data loader's own state resumes "
                "only with the same worker count (save BatchLoader's state to change it)"
            )
        given = state["given"]
        if isinstance(given, bool) or not isinstance(given, int) or given < 0:
            raise ValueError(f"the state's given must be a count of 0 or more; got {given!r}")
        self.batches.load_state_dict(state["order"])
        self._resume, self._live = given, None


def _counting(
    share: Iterator[MicroBatch], live: dict[str, Any], group: int
) -> Iterator[dict[str, Any]]:
    """The share's items: each micro-batch's :func:`tensors`, or with a
    ``group``, each group's micro-batches in one block (the last group may
    be short, at the end of the share)."""
    if not group:
        for micro_batch in share:
            live["given"] += 1
            yield tensors(micro_batch)
        return
    held: list[MicroBatch] = []
    for micro_batch in share:
        held.append(micro_batch)
        if len(held) == group:
            live["given"] += 1
            yield _one_block(held)
            held = []
    if held:
        live["given"] += 1
        yield _one_block(held)


class BatchLoader:
    """A PyTorch ``DataLoader`` over :class:`BatchDataset` whose state resumes anywhere.

    Iterating gives the rank's micro-batches in order (:func:`tensors` of
    each), read by ``num_workers`` worker processes (or the calling process
    with 0), and counts them: :meth:`state_dict` is the sample order's state
    (the consumed samples and the order's fingerprint), with no worker in it.
    Saved after an optimizer step (a whole global batch), it resumes on any
    world size that divides the global batch and any worker count; saved
    between the micro-steps of a global batch, on the same world size and
    micro-batch size (any worker count).

    Parameters
    ----------
    batches : Batches
        The rank's micro-batches.
    num_workers : int
        Worker processes (0: read in this process, on its read-ahead threads,
        each item's tensors over the micro-batch's own memory). A worker
        takes groups of consecutive micro-batches in turn (up to 8, of at
        most 2^19 tokens together) and copies each group's arrays into one
        block of shared memory, which crosses to this process as one item
        (a shared memory segment and a trip through the loader's queues cost
        more than their bytes); this process gives its micro-batches back
        one at a time, each a dict of views of that block with the same
        names, dtypes and shapes as in-process.
    **dataloader_options
        Other ``torch.utils.data.DataLoader`` options (``pin_memory``,
        ``prefetch_factor``, ``multiprocessing_context``, ``timeout``,
        ``worker_init_fn``, ...). The loader sets ``batch_size=None`` (it
        groups micro-batches itself) and keeps items in order; workers are started
        for each iteration, so that each starts at the position it was given.

    Raises
    ------
    TypeError
        ``batches`` that is not a :class:`posembed.Batches`, or an option the
        loader sets itself (batching, sampling, ordering).
    ValueError
        ``persistent_workers=True``: a persistent worker would keep reading
        from where it was, not from a loaded state.
    """

    def __init__(self, batches: Batches, *, num_workers: int = 0, **dataloader_options: Any):
        self.dataset = BatchDataset(batches)
        self.dataset._one_block = True  # unpacked in _in_order
        self.dataset._group = _group(batches)
        owned = sorted(set(dataloader_options) & set(LOADER_OWNS))
        if owned:
            raise TypeError(
                f"{owned[0]} is set by BatchLoader (one micro-batch an item, in the rank's "
                "order); give the micro-batch size to the BatchOrder"
            )
        if dataloader_options.get("persistent_workers"):
            raise ValueError(
                "persistent_workers=True is refused: a persistent worker goes on from where it "
                "was, not from a loaded state"
            )
        self._options = {"num_workers": num_workers, **dataloader_options}
        DataLoader(self.dataset, batch_size=None, **self._options)  # its checks, now
        self._running: Iterator[dict[str, Any]] | None = None

    @property
    def batches(self) -> Batches:
        """The rank's :class:`posembed.Batches`."""
        return self.dataset.batches

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.close()
        loader = DataLoader(self.dataset, batch_size=None, **self._options)
        self._running = _in_order(loader, self.batches)
        return self._running

    def close(self) -> None:
        """End the running iteration (its workers stop)."""
        running, self._running = self._running, None
        if running is not None:
            running.close()  # type: ignore[attr-defined]

    def state_dict(self) -> dict[str, Any]:
        """The sample order's state after the micro-batches given so far.

        Returns
        -------
        dict
            :meth:`BatchOrder.state_dict`: consumed samples and fingerprint,
            plain JSON-able values, the same on every rank after a global
            batch.
        """
        return self.batches.state_dict()

    def load_state_dict(self, state: Any) -> None:
        """Resume at the saved position (O(1)); ends a running iteration.

        Parameters
        ----------
        state : dict
            What :meth:`state_dict` (or :meth:`posembed.Batches.state_dict`,
            :meth:`BatchOrder.state_dict`) saved, on any world size and
            worker count.

        Raises
        ------
        ValueError
            What :meth:`BatchOrder.load_state_dict` refuses (it names each
            part of the order that changed), or a position that is not a
            micro-step boundary of this configuration.
        """
        self.close()
        self.batches.load_state_dict(state)

    def __repr__(self) -> str:
        return f"BatchLoader({self.batches!r}, num_workers={self._options['num_workers']})"


def _in_order(loader: Any, batches: Batches) -> Iterator[dict[str, Any]]:
    """The loader's items, checked to come in the rank's order, the order moved
    as each is given."""
    order = batches.order
    stride = int(order.micro_batch_size) * int(order.world_size)
    expected = int(order.consumed_samples) // stride
    items = iter(loader)
    try:
        for item in items:
            for micro_batch in _from_block(item) if BLOCK in item else [item]:
                if micro_batch["step"] != expected:
                    raise RuntimeError(
                        f"the data loader gave micro-step {micro_batch['step']} where "
                        f"{expected} was next: its items must come in order, one from each "
                        "worker in turn"
                    )
                order.advance(1)
                expected += 1
                yield micro_batch
    finally:
        # the workers stop now, even where an error's traceback keeps this frame
        del items
