"""The progress bar of a job on a corpus (``chunk``, ``convert``, ``pack``):
tokens done, on standard error when it is a terminal and tqdm is there, and
nothing otherwise."""

from __future__ import annotations

import sys
from typing import Any

from posembed.corpus._source import Documents


class _Quiet:
    n = 0

    def update(self, k: int) -> None:
        self.n += k

    def batch(self, docs: Documents) -> None:
        self.n += int(docs.offsets[-1])

    def close(self) -> None:
        pass


def progress(total: int | None, quiet: bool, command: str = "chunk") -> Any:
    """A tqdm bar of tokens (total None: unknown, a count and a rate), or one that shows nothing."""
    if quiet or not sys.stderr.isatty():
        return _Quiet()
    try:
        from tqdm import tqdm
    except ImportError:
        return _Quiet()
    return tqdm(total=total, unit="tok", unit_scale=True, desc=f"posembed {command}")


class _Estimating:
    """A bar of tokens for an input read in one pass, whose token count is
    known only at the end: its total is estimated from how much of the input
    each batch completes (:attr:`Documents.done`), and the bar says so."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar

    @property
    def n(self) -> int:
        return int(self.bar.n)

    def batch(self, docs: Documents) -> None:
        self.bar.update(int(docs.offsets[-1]))
        if docs.done is not None and docs.done > 0:
            self.bar.total = max(self.bar.n, round(self.bar.n / min(1.0, docs.done)))
            self.bar.refresh()

    def close(self) -> None:
        self.bar.total = self.bar.n  # the count, now known
        self.bar.set_description(self.bar.desc.removesuffix(" (total estimated)"))
        self.bar.close()


def stream_progress(quiet: bool, command: str = "chunk") -> Any:
    """The bar of an input read in one pass (Arrow, Parquet): tokens, the
    total estimated as it is read; or one that shows nothing."""
    bar = progress(None, quiet, f"{command} (total estimated)")
    return bar if isinstance(bar, _Quiet) else _Estimating(bar)
