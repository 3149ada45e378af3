"""The PyTorch adapter: posembed's batches in a ``DataLoader``, resumed anywhere.

:class:`BatchDataset` is an ``IterableDataset`` over :class:`posembed.Batches`:
each data-loader worker reads its share of the rank's micro-batches, as dicts of
tensors that share the arrays' memory. :class:`BatchLoader` runs it in a
``DataLoader`` and counts the micro-batches it gave, so that its
``state_dict`` is the sample order's own (consumed samples and a fingerprint):
saved at an optimizer step, it resumes on any world size and worker count.
PyTorch is needed only here; ``import posembed`` never imports it.
"""

from __future__ import annotations

from posembed.torch._dataset import BatchDataset, BatchLoader, tensors

__all__ = ["BatchDataset", "BatchLoader", "tensors"]
