"""The calls mode's target for the sample order: ``BatchOrder(...)`` built
from drawn arguments, then one of its reads (``micro_batches``,
``global_batch``, ``sample_at`` or a state saved and loaded), against its
twin. Counts stay small: a read never asks for more than a few hundred
indices, or for positions past 2^62 (which both must refuse)."""

from __future__ import annotations

from typing import Any

import numpy as np

import posembed
from posembed import reference

from .calls_builders import Builder, target
from .calls_values import NOT_INTS, ODD_SEEDS, ODD_SIZES
from .common import HUGE, Call, Value

READS = ["micro_batches", "global_batch", "sample_at", "state"]


def _order_read(module: Any) -> Any:
    """module.BatchOrder(*pos, **kw) and its read named by kw["read"]."""

    def call(pos: list[Any], kw: dict[str, Any]) -> Any:
        kw = dict(kw)
        read, where = kw.pop("read"), kw.pop("where")
        order = module.BatchOrder(*pos, **kw)
        if read == "micro_batches":
            return order.micro_batches(where, where + 3)
        if read == "global_batch":
            return order.global_batch(where)
        if read == "sample_at":
            return order.sample_at(np.array([where, where + 1, 0]))
        state = order.state_dict()
        order.load_state_dict(state)
        return np.append(order.micro_batch(0), state["consumed_samples"])

    return call


def _count(b: Builder, lo: int, hi: int) -> Any:
    """A small count, or (rarely) a value both must refuse or take alike (no
    2^31 or 2^32: honest requests for many GiB of indices)."""
    r = b.r
    if r.chance(8):
        return r.pick([*ODD_SIZES, *NOT_INTS, HUGE, 0])
    return r.int(lo, hi)


@target("BatchOrder")
def _batch_order(b: Builder) -> Call:
    r = b.r
    call = Call("BatchOrder", _order_read(posembed), _order_read(reference))
    source = _count(b, 1, 500)
    m, world = r.int(1, 4), r.pick([1, 2, 4])
    steps = r.int(1, 3)
    call.add("source", Value(source))
    g = _count(b, 0, 0) if r.chance(8) else r.int(1, 2) * m * world * steps
    call.add("global_batch_size", Value(g), keyword=True)
    call.add("micro_batch_size", Value(m if not r.chance(8) else _count(b, 0, 4)), keyword=True)
    call.add("world_size", Value(world if not r.chance(8) else _count(b, 0, 4)), keyword=True)
    call.add("rank", Value(r.int(0, world - 1) if not r.chance(8) else _count(b, 0, 8)), True)
    seed = r.pick(ODD_SEEDS) if r.chance(8) else r.int(0, 2**64 - 1)
    b.maybe(call, "seed", lambda: Value(seed))
    b.maybe(call, "shuffle", lambda: Value(r.pick([None, True, False, 1, "yes"])))
    consumed = _count(b, 0, 10) if r.chance(8) else m * world * r.int(0, 10**6)
    b.maybe(call, "consumed_samples", lambda: Value(consumed))
    call.add("read", Value(r.pick(READS)), keyword=True)
    where = r.int(0, 1000) if not r.chance(8) else r.pick([-1, HUGE, 2**63 - 1, 2.5, None])
    call.add("where", Value(where), keyword=True)
    return b.finish(call)
