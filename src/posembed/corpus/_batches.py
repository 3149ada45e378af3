"""Batches: the micro-batches of a sample order read from a corpus, read ahead.

A :class:`posembed.BatchOrder` says which samples each rank takes at each
micro-step; this module reads them (GPT samples and blends through
``gpt_batch``, a packing plan's rows through ``PackPlan.cut``, windows from
memory) on background threads, ``prefetch`` micro-batches ahead of the
caller, and keeps the order's position at what the caller was given, never at
what was read ahead, so that its ``state_dict`` resumes exactly.
"""

from __future__ import annotations

import atexit
import collections
import inspect
import itertools
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels._batch_order import BatchOrder
from posembed.kernels._blend_build import GPTBlendSplit
from posembed.kernels._gpt_batch import GPTBatch, _BatchMaker, _cut_parts
from posembed.kernels._pack import PackedRows, PackPlan
from posembed.kernels._samples import GPTSamples
from posembed.kernels._windows import Windows

# What each kind of source reads with; the options a caller may give.
GPT_OPTIONS = ("eod", "reset_position_ids", "reset_attention_mask", "eod_mask_loss", "pad_value")
GPT_OPTIONS_ALL = (*GPT_OPTIONS, "attention_mask")
PACK_OPTIONS = (
    "pad_value",
    "labels",
    "position_dtype",
    "columns",
    "column_pad",
    "position_start",
    "separator_id",
)
MAX_PREFETCH = 1024
# The most tokens the read-ahead reads in one call (several micro-batches at
# once cost less than one call each; a call's outputs live until all its
# micro-batches are dropped).
RUN_TOKENS = 2**20
# The same for the native read-ahead of GPT samples, whose runs cost little
# apart: smaller runs keep fewer bytes in flight (the caller's run, those
# waiting, the one being read), which stay in the cache the caller reads.
NATIVE_RUN_TOKENS = 2**17
# How often a blocked reader or caller looks whether it should stop (seconds).
POLL_S = 0.05


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch of one rank, what iterating :class:`Batches` gives.

    Attributes
    ----------
    step : int
        The micro-step it belongs to, counted from the start of the sample
        stream: its samples follow the ``step * micro_batch_size *
        world_size`` samples all ranks consumed before it. With ``A =
        global_batch_size // (micro_batch_size * world_size)`` accumulation
        steps, it is micro-step ``step % A`` of global batch ``step // A``.
    consumed_samples : int
        The samples all ranks have consumed once this micro-step is done:
        ``(step + 1) * micro_batch_size * world_size``.
    indices : ndarray of int64, shape (micro_batch_size,)
        The samples read (indices into the order's source: GPT samples, the
        blend's samples, the plan's rows or the windows).
    batch : GPTBatch, PackedRows or Windows
        What was read: :func:`posembed.gpt_batch`'s batch for GPT samples
        and blends, :meth:`posembed.PackPlan.cut`'s rows for a packing plan,
        the windows themselves for :class:`posembed.Windows`.
    """

    step: int
    consumed_samples: int
    indices: np.ndarray
    batch: GPTBatch | PackedRows | Windows


_new_object = object.__new__


def _micro_batch(step: int, stride: int, indices: np.ndarray, batch: Any) -> MicroBatch:
    """MicroBatch(step, (step + 1) * stride, indices, batch), its fields set
    straight into the instance's dict (see posembed.kernels._gpt_batch._made):
    the read-ahead's caller makes one per micro-batch."""
    micro = _new_object(MicroBatch)
    fields = micro.__dict__
    fields["step"] = step
    fields["consumed_samples"] = (step + 1) * stride
    fields["indices"] = indices
    fields["batch"] = batch
    return micro


class Batches:
    """The micro-batches of a sample order, read from a corpus ahead of the caller.

    Iterating gives this rank's micro-batches (:class:`MicroBatch`) from the
    order's ``consumed_samples`` on, without end (the order's stream runs
    epoch after epoch) or until ``total_samples``. Background threads read
    ``prefetch`` micro-batches ahead while the caller trains (the reading
    kernels release the GIL). The order's ``consumed_samples`` moves as
    micro-batches are given to the caller, never as they are read ahead, so
    :meth:`state_dict` at any point resumes at the next micro-batch the
    caller has not seen: on the same configuration, or, at a global batch
    boundary, on any world size and data-loader worker count.

    Parameters
    ----------
    order : BatchOrder
        Which samples each micro-batch of this rank takes. Its source says
        what is read: :class:`GPTSamples`, a :class:`GPTBlendSplit`, a
        :class:`PackPlan` or :class:`Windows`.
    corpus : corpus, sequence of corpora, or None
        Where the tokens are: for GPT samples, what :func:`gpt_batch` takes
        (an :class:`IndexedCorpus` on local disk or in an object store, a
        ``(tokens, offsets)`` pair, or a reader); for a blend, one such
        corpus per corpus of the blend, in its order; for a packing plan,
        what :meth:`PackPlan.cut` takes (an :class:`IndexedCorpus`, an Arrow
        list column, or a ``(tokens, offsets)`` pair); None for windows.
    prefetch : int
        Micro-batches read ahead, 0..1024 (0: read when asked for, on the
        caller's thread). They are read in runs of up to ``prefetch``
        micro-batches (and at most 2^20 tokens) in one call of the kernel,
        which costs less than a call each, and each run is handed to the
        caller's thread whole (so up to ``prefetch`` micro-batches, rounded up
        to whole runs, wait, and one more run is being read); a run's arrays
        share one block of memory, reused once all its micro-batches are
        dropped. GPT samples from a local file or from memory (without a
        dense ``attention_mask``) are read by native threads that never take
        the GIL, which fill each run's rows together, one kernel thread
        each, in runs of at most 2^17 tokens. With the ``n`` threads a
        kernel called by the caller would use (:func:`get_num_threads`),
        ``n - 1`` of them read, and the caller's own thread reads a share of
        the rows with them whenever it waits for a run instead of waiting
        idle (with ``n = 1``, one reads and the caller only waits). Other
        sources are read on Python threads, as many (at most one per run
        that may be read ahead), each run's kernel on its share of those
        threads, in runs of at most 2^20 tokens.
    total_samples : int or None
        Stop once the stream has reached this many samples (counted from its
        start, every rank together: a training run's ``train_samples``), a
        multiple of ``micro_batch_size * world_size``; None: never stop.
    **read_options
        How the samples are read. GPT samples and blends: ``eod`` (required),
        ``reset_position_ids``, ``reset_attention_mask``, ``eod_mask_loss``,
        ``pad_value``, ``attention_mask``, as :func:`gpt_batch` takes them.
        Packing plans: the options of :meth:`PackPlan.cut` (``labels`` is
        True unless given). Windows: none.

    Raises
    ------
    TypeError
        An order that is not a :class:`BatchOrder` (or a source it cannot
        read), an unknown read option, a ``prefetch`` or ``total_samples``
        that is not an integer, and what the reader refuses of the corpus or
        the options (checked here, before anything is read).
    ValueError
        A ``prefetch`` outside 0..1024, a ``total_samples`` that is negative
        or not a micro-step boundary, and what the reader refuses.

    Notes
    -----
    One iteration runs at a time: starting another, :meth:`load_state_dict`
    or :meth:`close` ends the one before (its threads stop; its iterator
    gives nothing more). A reading error on a background thread is raised
    in the caller, with its type and message, at the micro-batch it hit.
    """

    def __init__(
        self,
        order: Any,
        corpus: Any = None,
        *,
        prefetch: int = 8,
        total_samples: int | None = None,
        **read_options: Any,
    ) -> None:
        needed = ("sample_at", "state_dict", "load_state_dict", "consumed_samples")
        if not all(hasattr(order, name) for name in needed):
            raise TypeError(f"order must be a posembed.BatchOrder; got {type(order).__name__}")
        self.order = order
        self.corpus = corpus
        self.prefetch = _count(prefetch, "prefetch", MAX_PREFETCH)
        self._stride = int(order.micro_batch_size) * int(order.world_size)
        if total_samples is not None:
            total_samples = _count(total_samples, "total_samples", None)
            if total_samples % self._stride:
                raise ValueError(
                    f"total_samples must be a multiple of micro_batch_size * world_size "
                    f"({self._stride}); got {total_samples}"
                )
        self.total_samples = total_samples
        self._options = read_options
        self._read = _reader(order.source, corpus, read_options)
        self._running: _Iteration | None = None
        self._lock = threading.Lock()

    # -- the position -----------------------------------------------------------------

    @property
    def consumed_samples(self) -> int:
        """The samples of the stream every rank has consumed: the order's."""
        return int(self.order.consumed_samples)

    def state_dict(self) -> dict[str, Any]:
        """Where the caller is: the order's state (consumed samples and fingerprint).

        Returns
        -------
        dict
            :meth:`BatchOrder.state_dict`: plain, JSON-able values. It counts
            the micro-batches given to the caller, never those read ahead.
        """
        state: dict[str, Any] = self.order.state_dict()
        return state

    def load_state_dict(self, state: Any) -> None:
        """Resume where ``state`` was saved (O(1): nothing is replayed).

        Ends a running iteration; the next one starts at the saved position.

        Parameters
        ----------
        state : dict
            What :meth:`state_dict` (or :meth:`BatchOrder.state_dict`) saved.

        Raises
        ------
        ValueError
            What :meth:`BatchOrder.load_state_dict` refuses: a state whose
            order differs (it names each part that changed: the blend
            weights, the lengths, the seed, the batch size, ...), or a
            position that is not a micro-step boundary here.
        """
        self.close()
        self.order.load_state_dict(state)

    # -- iterating --------------------------------------------------------------------

    def __iter__(self) -> Iterator[MicroBatch]:
        return self._iterate(0, 1, advance=True)

    def worker(self, worker: int, num_workers: int) -> Iterator[MicroBatch]:
        """One data-loader worker's share: micro-batches worker, worker + n, ...

        A loader that takes one micro-batch from each worker in turn (as
        PyTorch's ``DataLoader`` does) gives them back in this rank's order.
        The order's position does not move: the loader that reassembles the
        shares counts what it gave (see :mod:`posembed.torch`).

        Parameters
        ----------
        worker : int
            This worker, 0..num_workers-1.
        num_workers : int
            The workers of this rank, at least 1.

        Returns
        -------
        iterator of MicroBatch

        Raises
        ------
        TypeError
            A worker or worker count that is not an integer.
        ValueError
            A worker count below 1 or a worker outside 0..num_workers-1.
        """
        n = _count(num_workers, "num_workers", None)
        if n < 1:
            raise ValueError(f"num_workers must be at least 1; got {n}")
        w = _count(worker, "worker", None)
        if w >= n:
            raise ValueError(f"worker must be 0..{n - 1} (num_workers - 1); got {w}")
        return self._iterate(w, n, advance=False)

    def _share(self, first: int, every: int, group: int = 1) -> Iterator[MicroBatch]:
        """The micro-batches of groups first, first + every, ... of ``group``
        micro-batches each (a worker's share, resumed)."""
        return self._iterate(first, every, advance=False, group=group)

    def _iterate(
        self, first: int, every: int, *, advance: bool, group: int = 1
    ) -> Iterator[MicroBatch]:
        self.close()
        start = self.consumed_samples
        iteration = _Iteration(
            self._read,
            self.order,
            start,
            self._stride,
            first,
            every,
            group,
            self.prefetch,
            None if self.total_samples is None else (self.total_samples - start) // self._stride,
        )
        with self._lock:
            self._running = iteration
        return _yielding(iteration, self.order if advance else None)

    def close(self) -> None:
        """End the running iteration and stop its read-ahead threads (waits for them)."""
        with self._lock:
            running, self._running = self._running, None
        if running is not None:
            running.close()

    def __enter__(self) -> Batches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # a data-loader worker takes the order, the corpus and the options;
        # never a running iteration
        state = self.__dict__.copy()
        state["_running"] = None
        del state["_lock"], state["_read"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._read = _reader(self.order.source, self.corpus, self._options)

    def __repr__(self) -> str:
        source = type(self.order.source).__name__
        return (
            f"Batches({source}, rank {self.order.rank} of {self.order.world_size}, "
            f"{self.order.micro_batch_size} samples a micro-batch, "
            f"consumed_samples={self.consumed_samples}, prefetch={self.prefetch})"
        )


# -- the read-ahead ---------------------------------------------------------------------

# Iterations whose read-ahead threads may be running: stopped (and waited for)
# when the interpreter exits, so that no thread is inside a kernel while the
# process tears down (a daemon thread killed there would abort the process).
_RUNNING: weakref.WeakSet[_Iteration] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for iteration in list(_RUNNING):
        iteration.close()


class _Iteration:
    """The micro-batches of a rank from position start in groups first,
    first + every, ... of ``group`` micro-batches each (group g holds
    micro-batches g * group .. g * group + group - 1), read on threads that
    hold no reference to what iterates them."""

    def __init__(
        self,
        read: Callable[[np.ndarray], Any],
        order: Any,
        start: int,
        stride: int,
        first: int,
        every: int,
        group: int,
        prefetch: int,
        count: int | None,
    ) -> None:
        self.read = read
        self.order = order
        self.start, self.stride, self.first, self.every = start, stride, first, every
        self.group = group
        self.count = count  # micro-batches left to the rank (None: no end)
        self.prefetch = prefetch
        # micro-batches read in one call: up to prefetch, at most RUN_TOKENS
        # (NATIVE_RUN_TOKENS) tokens
        tokens = _sample_tokens(order.source) * int(order.micro_batch_size)
        self.alone = _native_reader(read, order)  # read ahead natively (see native)
        most = NATIVE_RUN_TOKENS if self.alone else RUN_TOKENS
        self.run_length = max(1, min(prefetch, most // max(tokens, 1)))
        self.stop = threading.Event()
        # runs read (or being read) that the caller has not taken: prefetch
        # micro-batches rounded up to whole runs, and the one being read
        self.ahead = max(1, -(-prefetch // self.run_length)) + 1
        self.pending: collections.deque[MicroBatch] = collections.deque()  # of the run taken
        self.reading: _ReadAhead | _NativeAhead | None = None
        self.unread = self.numbers()  # for prefetch 0

    def numbers(self) -> Iterator[int]:
        block = self.first
        while True:
            for i in range(block * self.group, (block + 1) * self.group):
                if self.count is not None and i >= self.count:
                    return
                yield i
            block += self.every

    def item(self, i: int) -> MicroBatch:
        """Micro-batch i of the rank from the iteration's start."""
        given, error = self.run([i])
        if error is not None:
            raise error
        return given[0]

    def run(self, numbers: list[int]) -> tuple[list[MicroBatch], BaseException | None]:
        """Micro-batches ``numbers`` of the rank, read in one call of the kernel
        where the source allows it (one call costs less than several), and the
        error that stopped the reading, if any. A failing run is read again
        one micro-batch at a time, so that those before the one that fails are
        given and the error is raised at the micro-batch it hit."""
        m, rank = int(self.order.micro_batch_size), int(self.order.rank)
        steps = [(self.start + i * self.stride) // self.stride for i in numbers]
        firsts = np.array([step * self.stride + rank * m for step in steps], dtype=np.int64)
        positions = firsts[:, None] + np.arange(m, dtype=np.int64)
        try:
            indices = np.ascontiguousarray(self.order.sample_at(positions), dtype=np.int64)
        except Exception as exc:
            return [], exc
        split = _splitter(self.read) if len(numbers) > 1 else None
        if split is not None:
            try:
                parts = split(indices.reshape(-1), len(numbers), m)
            except Exception:
                pass  # read again one by one, below, to give those before the failure
            else:
                return [
                    MicroBatch(step, (step + 1) * self.stride, row, part)
                    for step, row, part in zip(steps, indices, parts, strict=True)
                ], None
        given: list[MicroBatch] = []
        for step, row in zip(steps, indices, strict=True):
            try:
                given.append(MicroBatch(step, (step + 1) * self.stride, row, self.read(row)))
            except Exception as exc:
                return given, exc
        return given, None

    def begin(self) -> None:
        if self.prefetch and self.reading is None:
            # as many readers as the caller's kernels would use threads: the
            # native ones of one kernel thread each, the caller's thread one
            # of them while it waits; Python ones at most one a run in
            # flight, the threads shared among them
            threads = _core.get_num_threads()
            native = self.native(threads)
            if native is not None:
                self.reading = native
            else:
                readers = max(1, min(threads, self.ahead))
                self.reading = _ReadAhead(self.run, self.numbers(), self.run_length, self.ahead)
                self.reading.start(readers, max(1, threads // readers))
            _RUNNING.add(self)

    def native(self, threads: int) -> _NativeAhead | None:
        """The read-ahead of the GPT batch kernel's own threads, one fewer
        than ``threads`` (at least one; of one kernel thread each, filling
        each run's rows together, with the caller's thread while it waits
        where ``threads`` > 1), where
        it can read alone: GPT samples or a blend's (of a
        :class:`BatchOrder`) from local files or memory, no dense attention
        mask, a run of fewer than 2^31 tokens."""
        read, order = self.read, self.order
        if not self.alone:
            return None
        assert isinstance(read, (_BatchMaker, _BlendRead))
        m = int(order.micro_batch_size)
        if m * self.run_length * _sample_tokens(order.source) >= 2**31 - 1:
            return None  # each micro-batch's own error, from the reads one at a time
        step0 = self.start // self.stride
        ahead = read.read_ahead(
            order,
            step0=step0,
            stride=self.stride,
            offset=int(order.rank) * m,
            m=m,
            first=self.first,
            every=self.every,
            group=self.group,
            # no end, or micro-batches left (none where the position is past
            # total_samples; positions end at 2^62 before a larger count)
            count=-1 if self.count is None or self.count >= 2**62 else max(self.count, 0),
            run_length=self.run_length,
            ahead=self.ahead,
            # at most `threads` threads read at once: the caller's is one
            # of them where there are two or more
            readers=max(1, threads - 1),
            threads=1,
            caller_reads=threads > 1,
        )
        if ahead is None:
            return None
        return _NativeAhead(ahead, step0, self.stride, m)

    def take(self) -> MicroBatch | None:
        """The next micro-batch, None at the end; a reading error is raised here."""
        if self.stop.is_set():
            return None
        if not self.prefetch:
            i = next(self.unread, None)
            return None if i is None else self.item(i)
        if self.pending:
            return self.pending.popleft()
        self.begin()
        reading = self.reading
        if reading is None:  # closed meanwhile, from another thread
            return None
        given, error = reading.take()
        if given:
            self.pending.extend(given)
            return self.pending.popleft()
        self.stop.set()
        if error is not None:
            raise error
        return None

    def close(self) -> None:
        self.stop.set()
        self.pending.clear()
        reading, self.reading = self.reading, None
        if reading is not None:
            reading.close()


class _ReadAhead:
    """Runs of ``length`` micro-batches read ahead on threads of their own.

    Readers take the next run in turn and read it whole; the caller takes
    the runs in the order the readers took them. At most ``ahead`` runs are
    taken by readers and not yet by the caller.

    Why several readers of one kernel thread each (on a machine with no more
    cores than runs in flight) rather than one reader whose kernels use all
    the cores: a thread that runs a kernel on several threads keeps a pool
    of OpenMP helper threads for the rest of its life. With the caller's own
    pool beside it, GNU OpenMP then manages more threads than there are
    cores and lets every idle helper sleep almost at once, so each kernel
    call, the caller's included, waits for its helpers to wake. On a 2-core
    machine that cost an epoch of GPT samples a third of its speed and the
    caller's own kernels up to half of theirs. One reader's Python work
    between calls also overlaps another's kernel.
    """

    def __init__(
        self,
        run: Callable[[list[int]], tuple[list[MicroBatch], BaseException | None]],
        numbers: Iterator[int],
        length: int,
        ahead: int,
    ) -> None:
        self.run, self.numbers, self.length, self.ahead = run, numbers, length, ahead
        self.changed = threading.Condition()
        self.done: dict[int, tuple[list[MicroBatch], BaseException | None]] = {}
        self.claimed = 0  # the next run a reader takes
        self.taken = 0  # the next run the caller takes
        self.last: int | None = None  # the run that ends the reading (its end or error)
        self.closing = False
        self.threads: list[threading.Thread] = []

    def start(self, readers: int, each: int) -> None:
        """Start ``readers`` readers whose kernels use ``each`` threads."""
        for _ in range(readers):
            thread = threading.Thread(
                target=self._read, args=(each,), name="posembed-batches", daemon=True
            )
            self.threads.append(thread)
            thread.start()

    def _read(self, threads: int) -> None:
        """A reader: claim the next run, read it, hand it over; until the end,
        an error or the caller's close."""
        _core.set_calling_thread_threads(threads)
        while True:
            with self.changed:
                while (
                    not self.closing
                    and self.last is None
                    and self.claimed - self.taken >= self.ahead
                ):
                    self.changed.wait(POLL_S)
                if self.closing or self.last is not None:
                    return
                number = self.claimed
                self.claimed += 1
                wanted = list(itertools.islice(self.numbers, self.length))
                if not wanted:
                    self.last = number
                    self.done[number] = ([], None)
                    self.changed.notify_all()
                    return
            try:
                given, error = self.run(wanted)
            except BaseException as exc:  # raised in the caller, at the micro-batch it hit
                given, error = [], exc
            self._hand_over(number, given, error)

    def _hand_over(self, number: int, given: list[MicroBatch], error: BaseException | None) -> None:
        """Run ``number`` read; an error ends the reading there (unless an
        earlier run already ended it)."""
        with self.changed:
            if error is not None and (self.last is None or number < self.last):
                self.last = number
            self.done[number] = (given, error)
            self.changed.notify_all()

    def take(self) -> tuple[list[MicroBatch], BaseException | None]:
        """The next run: its micro-batches and the error that ended it, if any
        (no micro-batches and no error: the end, or the reading was closed)."""
        with self.changed:
            while self.taken not in self.done:
                if self.closing:
                    return [], None
                self.changed.wait(POLL_S)
            given, error = self.done.pop(self.taken)
            if given and error is not None:
                # this run's micro-batches now, its error at the next take
                self.done[self.taken] = ([], error)
                return given, None
            self.taken += 1
            self.changed.notify_all()
            return given, error

    def close(self) -> None:
        """Stop the readers and wait for them (a reader inside a kernel call
        finishes it first)."""
        with self.changed:
            self.closing = True
            self.changed.notify_all()
        for thread in self.threads:
            thread.join()
        self.threads = []
        self.done.clear()  # the runs read and not taken, also those handed over meanwhile


class _NativeAhead:
    """Runs read ahead by the GPT batch kernel's own threads (``_core.GPTBatchAhead``),
    given as :class:`_ReadAhead` gives them. Those threads never take the
    GIL: a reader of Python threads waits for the interpreter at every call,
    the caller's Python and the other readers' included."""

    def __init__(self, ahead: Any, step0: int, stride: int, m: int) -> None:
        self.ahead, self.step0, self.stride, self.m = ahead, step0, stride, m

    def take(self) -> tuple[list[MicroBatch], BaseException | None]:
        """The next run and the error that ended it, as :meth:`_ReadAhead.take`."""
        try:
            got = self.ahead.next()
        except Exception as exc:  # raised in the caller, at the micro-batch it hit
            return [], exc
        given: list[MicroBatch] = []
        step0, stride = self.step0, self.stride
        for numbers, samples, out in got or ():
            for i, row, part in zip(numbers, samples, _cut_parts(out, self.m), strict=True):
                given.append(_micro_batch(step0 + i, stride, row, part))
        return given, None

    def close(self) -> None:
        """Stop the threads and wait for them."""
        self.ahead.close()


def _yielding(iteration: _Iteration, order: Any) -> Iterator[MicroBatch]:
    """Give the micro-batches, moving ``order`` (when given) as each is given."""
    try:
        while True:
            got = iteration.take()
            if got is None:
                return
            if order is not None:
                order.advance(1)
            yield got
    finally:
        iteration.close()


# -- what each source reads with ------------------------------------------------------


def _reader(source: Any, corpus: Any, options: dict[str, Any]) -> Callable[[np.ndarray], Any]:
    """The function that reads a micro-batch's samples, its options checked by
    reading no sample."""
    if isinstance(source, (GPTSamples, GPTBlendSplit)):
        _known(options, GPT_OPTIONS_ALL, type(source).__name__)
        if "eod" not in options:
            raise TypeError(
                "eod (the end-of-document token id) is required to read GPT samples: "
                "Batches(order, corpus, eod=...)"
            )
        if isinstance(source, GPTSamples):
            # the samples, corpus and options checked once, here; each call
            # checks only its indices
            return _BatchMaker(source, corpus, **options)
        return _BlendRead(source, corpus, options)

    elif isinstance(source, PackPlan):
        _known(options, PACK_OPTIONS, "PackPlan")
        cut = {"labels": True, **options}
        tokens, offsets = _pair(corpus)

        def read(indices: np.ndarray) -> Any:
            return source.cut(tokens, offsets, rows=indices, **cut)

    elif isinstance(source, Windows):
        _known(options, (), "Windows")
        if corpus is not None:
            raise TypeError("corpus must be None for windows: they hold their tokens")

        def read(indices: np.ndarray) -> Any:
            return _windows_rows(source, indices)

    else:
        raise TypeError(
            "order's source must be GPTSamples, a GPTBlendSplit, a PackPlan or Windows to be "
            f"read; got {type(source).__name__}"
        )
    read(np.zeros(0, np.int64))  # the corpus and options checked now, nothing read
    return read


# GPTBlendSplit.batch's options that have defaults, with them
_BATCH_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(GPTBlendSplit.batch).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty
}


class _BlendRead:
    """Micro-batches of a blend's split: ``read(indices)`` is
    ``split.batch(indices, corpora, **options)``, ``read.parts(indices, m)``
    the batches of each m indices in turn, read in one call."""

    def __init__(self, split: GPTBlendSplit, corpora: Any, options: dict[str, Any]) -> None:
        self.split, self.corpora = split, corpora
        self.options = {**_BATCH_DEFAULTS, **options}

    def __call__(self, indices: np.ndarray) -> Any:
        return self.parts(indices, 0)[0]

    def parts(self, indices: np.ndarray, m: int) -> list[Any]:
        return self.split._parts(indices, self.corpora, self.options, m)

    def reads_alone(self) -> bool:
        """Whether a batch may need nothing of the caller's (see read_ahead)."""
        return not self.options["attention_mask"]

    def read_ahead(self, order: Any, **plan: Any) -> Any:
        """As :meth:`_BatchMaker.read_ahead`, each row by its corpus's
        reader; None where a corpus or the options do not allow it."""
        return self.split._read_ahead(self.corpora, self.options, order, **plan)


def _native_reader(read: Any, order: Any) -> bool:
    """Whether the micro-batches of ``order`` read by ``read`` may be read
    ahead natively: GPT samples of a :class:`BatchOrder` read alone."""
    return (
        isinstance(read, (_BatchMaker, _BlendRead))
        and type(order) is BatchOrder
        and read.reads_alone()
    )


def _sample_tokens(source: Any) -> int:
    """Tokens a sample of the source holds (a bound, for the run length)."""
    if isinstance(source, GPTBlendSplit):
        return max((int(s.sequence_length) + 1 for s in source.datasets), default=1)
    if isinstance(source, GPTSamples):
        return int(source.sequence_length) + 1
    if isinstance(source, PackPlan):
        return int(source.capacity)
    if isinstance(source, Windows):
        return int(source.size)
    return 1


def _splitter(
    read: Callable[[np.ndarray], Any],
) -> Callable[[np.ndarray, int, int], list[Any]] | None:
    """How a run (the samples of k micro-batches of m samples) is read in one
    call and cut into the k micro-batches' own, each equal to what reading its
    samples alone gives; None where a source is read one micro-batch at a time."""
    if isinstance(read, (_BatchMaker, _BlendRead)):  # the kernel cuts the parts itself
        return lambda indices, k, m: read.parts(indices, m)
    return lambda indices, k, m: _split(read(indices), k, m)


def _split(batch: Any, k: int, m: int) -> list[Any]:
    if isinstance(batch, GPTBatch):
        return _split_gpt(batch, k, m)
    if isinstance(batch, PackedRows):
        return _split_packed(batch, k, m)
    if isinstance(batch, Windows):
        return [_windows_rows(batch, np.arange(j * m, (j + 1) * m)) for j in range(k)]
    raise TypeError(f"cannot split a {type(batch).__name__}")  # no source reads one


def _split_gpt(batch: GPTBatch, k: int, m: int) -> list[GPTBatch]:
    """Rows j*m..(j+1)*m of each field; the flat cu_seqlens of each part are
    the run's between the part's first and last token, shifted to start at 0
    (each document lies in one sample, so in one part), and its own end.
    Computed for all parts at once: one array holds every part's, each
    followed by its end."""
    seq = batch.tokens.shape[1]
    span = m * seq
    flat = batch.cu_seqlens
    cuts = np.searchsorted(flat, np.arange(k + 1, dtype=np.int64) * span)
    counts = np.diff(cuts)  # documents a part (at least one a sample)
    longest = np.maximum.reduceat(np.diff(flat), cuts[:-1])
    part = np.repeat(np.arange(k, dtype=np.int64), counts)
    own = np.empty(int(cuts[-1]) + k, dtype=flat.dtype)
    starts = cuts[:-1] + np.arange(k)  # where part j's entries begin in own
    within = np.arange(int(cuts[-1])) - cuts[part]
    own[starts[part] + within] = flat[:-1] - part * span
    own[starts + counts] = span
    parts = []
    for j in range(k):
        rows = slice(j * m, (j + 1) * m)
        parts.append(
            GPTBatch(
                batch.tokens[rows],
                batch.labels[rows],
                batch.loss_mask[rows],
                batch.position_ids[rows],
                own[starts[j] : starts[j] + counts[j] + 1],
                batch.cu_seqlens_padded[rows],
                int(longest[j]),
                None if batch.attention_mask is None else batch.attention_mask[rows],
            )
        )
    return parts


def _split_packed(rows: PackedRows, k: int, m: int) -> list[PackedRows]:
    """Rows j*m..(j+1)*m, their sequences (``row_segments``) and their
    ``cu_seqlens`` shifted to start at 0, as a cut of those rows alone gives."""
    parts = []
    for j in range(k):
        r = slice(j * m, (j + 1) * m)
        a, b = int(rows.row_segments[j * m]), int(rows.row_segments[(j + 1) * m])
        parts.append(
            PackedRows(
                rows.input_ids[r],
                rows.position_ids[r],
                None if rows.labels is None else rows.labels[r],
                rows.seq_lengths[a:b],
                rows.row_segments[j * m : (j + 1) * m + 1] - a,
                rows.cu_seqlens[a : b + 1] - rows.cu_seqlens[a],
                rows.documents[a:b],
                rows.starts[a:b],
                {name: column[r] for name, column in rows.columns.items()},
            )
        )
    return parts


def _known(options: dict[str, Any], allowed: tuple[str, ...], kind: str) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        listed = ", ".join(allowed) if allowed else "none"
        raise TypeError(f"unknown read option {unknown[0]!r} for {kind}; the options are: {listed}")


def _pair(corpus: Any) -> tuple[Any, Any]:
    if isinstance(corpus, tuple):
        if len(corpus) != 2:
            raise TypeError(
                f"corpus must be (tokens, offsets), an IndexedCorpus or an Arrow list column; "
                f"got a tuple of {len(corpus)}"
            )
        return corpus[0], corpus[1]
    return corpus, None


def _windows_rows(w: Windows, rows: np.ndarray) -> Windows:
    return Windows(
        w.tokens[rows],
        w.starts[rows],
        w.lengths[rows],
        w.documents[rows],
        w.doc_offsets,
        w.size,
        w.step,
        w.tail,
    )


def _count(value: Any, name: str, high: int | None) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__} {value!r}")
    n = int(value)
    if n < 0 or (high is not None and n > high):
        allowed = f"0..{high}" if high is not None else "0 or more"
        raise ValueError(f"{name} must be {allowed}; got {n}")
    return n
