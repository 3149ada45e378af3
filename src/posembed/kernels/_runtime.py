"""The kernels' runtime: how many threads they take, what build and SIMD level runs them."""

from __future__ import annotations

import contextlib
import operator
import platform
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TextIO

from posembed import _core


def _version() -> str:
    """The installed distribution's version (``0+unknown`` in a bare source tree)."""
    try:
        return version("posembed")
    except PackageNotFoundError:
        return "0+unknown"


# looked up once: config() runs before every command
VERSION = _version()


def set_num_threads(n: int | None) -> None:
    """Use at most ``n`` threads in every kernel; ``None`` follows OpenMP again.

    Until this is called (and after ``set_num_threads(None)``), each call
    takes OpenMP's thread count for the calling thread: ``OMP_NUM_THREADS``
    when set, else the number of CPUs OpenMP sees, or the limit that
    ``threadpoolctl.threadpool_limits(n, user_api="openmp")`` (or
    ``omp_set_num_threads``) put on that thread. A count set here wins over
    all of those, in every thread.

    Calls that move less than ``config()["parallel_min_bytes"]`` (256 KiB)
    stay on the calling thread, and larger ones take one thread per 256 KiB
    at most, so small calls never pay for waking a team. Results never depend
    on the thread count. In a child process forked after posembed used
    threads, kernels run on one thread whatever this says: GNU OpenMP's pool
    does not survive ``fork`` (use the "spawn" or "forkserver" start methods
    for parallel workers).

    Parameters
    ----------
    n : int or None
        The thread count, 1..``config()["max_num_threads"]`` (4 per CPU), or
        None for OpenMP's default.

    Raises
    ------
    TypeError
        An ``n`` that is neither an integer nor None (a bool included).
    ValueError
        An ``n`` outside 1..max_num_threads.
    """
    if n is None:
        _core.set_num_threads(0)
        return
    if isinstance(n, bool):
        raise TypeError(f"n must be an integer or None; got bool {n!r}")
    try:
        k = operator.index(n)
    except TypeError:
        raise TypeError(f"n must be an integer or None; got {type(n).__name__} {n!r}") from None
    top = _core.config()["max_num_threads"]
    if not 1 <= k <= top:
        raise ValueError(f"n must be in 1..{top} (4 per CPU), or None for the default; got {k}")
    _core.set_num_threads(k)


@contextlib.contextmanager
def calling_thread_threads(n: int | None) -> Iterator[None]:
    """Kernels called on this thread take ``n`` threads until the block ends,
    whatever :func:`set_num_threads` says; other threads are not affected.
    ``None`` changes nothing. ``n`` is checked by the caller."""
    if n is None:
        yield
        return
    before = _core.set_calling_thread_threads(n)
    try:
        yield
    finally:
        _core.set_calling_thread_threads(before)


def get_num_threads() -> int:
    """The number of threads a large kernel call uses.

    Returns
    -------
    int
        The count :func:`set_num_threads` set, else OpenMP's for the calling
        thread (1 in a child forked after posembed used threads). Inside
        :func:`posembed.chunk.chunk_file`, its own threads use the count of
        that call instead (its ``threads``).
    """
    return _core.get_num_threads()


def config() -> dict[str, Any]:
    """Build and run-time facts: version, compiler, OpenMP, SIMD level, threads.

    Returns
    -------
    dict of str to Any
        A new dict: ``version``, ``python``, the compiled module's facts
        (``compiler``, ``build_type``, ``sanitized`` (an ASan + UBSan build),
        ``openmp``, ``openmp_version``, ``simd``
        (the level that runs), ``cpu_simd``, ``simd_levels``, ``dropout_rng``,
        ``num_threads``, ``default_num_threads``, ``num_threads_set``,
        ``max_num_threads``, ``forked_child``, ``parallel_min_bytes``,
        ``stream_min_bytes``) and ``machine``.
    """
    facts: dict[str, Any] = {"version": VERSION, "python": platform.python_version()}
    facts.update(_core.config())
    facts["machine"] = platform.machine()
    return facts


def show_config(file: TextIO | None = None) -> None:
    """Print :func:`config` as aligned ``name : value`` lines.

    Parameters
    ----------
    file : text stream, optional
        Where to print; default ``sys.stdout``.

    Raises
    ------
    TypeError
        A ``file`` without a ``write`` method.
    """
    if file is not None and not callable(getattr(file, "write", None)):
        raise TypeError(
            f"file must be a text stream (with a write method) or None; got {type(file).__name__}"
        )
    out = sys.stdout if file is None else file
    facts = config()
    width = max(map(len, facts))
    for key, value in facts.items():
        print(f"{key:<{width}} : {value}", file=out)
