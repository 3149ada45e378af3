"""What the benchmark measures: a Case (one problem, done by each
implementation) and its Result (their times)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The implementations a case may time, in the table's order.
COLUMNS = ("reference", "numpy", "torch", "posembed")


@dataclass
class Case:
    """One benchmarked problem: the same work done by each implementation."""

    kernel: str
    name: str
    shape: str
    out_bytes: int
    impls: dict[str, Callable[[], object]]
    roofline: str | None = None  # "write warm", "write fresh", "copy warm", ...
    check: Callable[[], bool] | None = None  # posembed agrees with numpy
    in_bytes: int = 0  # input bytes, where throughput is counted on the input (chunk)
    source: Path | None = None  # the input file of a "file copy" roofline
    # the byte ranges (offset, length) of source that a "page cache read" roofline reads
    reads: Any = None
    # the size of the block of posembed's output cache each call's outputs
    # are made on (0: none); a "page cache read" roofline then writes its
    # output bytes into a block of that size from the same cache, once per
    # block the kernel fills: the memory the kernel writes, not other memory
    out_block: int = 0
    # float multiplies and adds the kernel does (0: not a kernel that computes),
    # and whether they are fused multiply-adds (a BLAS product), for the
    # compute roofline
    flops: int = 0
    fused: bool = False
    # random words dropout draws (AES rounds, not float operations): the
    # compute roofline of a case that draws them is the machine drawing as many
    random_words: int = 0
    # why posembed's side of this case cannot run here (a package a plain
    # install leaves out, no room on disk): the case is reported, not timed
    not_measured: str | None = None


def unmeasured(kernel: str, name: str, reason: str) -> Case:
    """A case that cannot be measured on this machine, and why."""
    return Case(kernel, name, "", 0, {}, not_measured=reason)


@dataclass
class Result:
    kernel: str
    name: str
    shape: str
    out_bytes: int
    roofline: str | None
    seconds: dict[str, float] = field(default_factory=dict)
    in_bytes: int = 0
    flops: int = 0
    random_words: int = 0
    not_measured: str | None = None  # why the case has no times

    def speedup(self, other: str) -> float | None:
        if other not in self.seconds or "posembed" not in self.seconds:
            return None
        return self.seconds[other] / self.seconds["posembed"]

    def binding(self) -> str | None:
        """The ceiling that binds, as a roofline model reads it: the memory
        roofline or "compute", whichever takes longer for this case's work."""
        memory, compute = self.seconds.get("roofline"), self.seconds.get("compute")
        if compute is not None and (memory is None or compute > memory):
            return "compute"
        return self.roofline if memory is not None else None

    def roofline_fraction(self) -> float | None:
        """posembed's time against the binding ceiling's (1.0: at the ceiling)."""
        binding = self.binding()
        if binding is None:
            return None
        return self.speedup("compute" if binding == "compute" else "roofline")

    def gbps(self) -> float | None:
        t = self.seconds.get("posembed")
        return self.out_bytes / t / 1e9 if t and self.out_bytes else None

    def input_gbps(self) -> float | None:
        t = self.seconds.get("posembed")
        return self.in_bytes / t / 1e9 if t and self.in_bytes else None
