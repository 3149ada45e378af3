"""What the benchmark measures: a Case (one problem, done by each
implementation) and its Result (their times)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass
class Result:
    kernel: str
    name: str
    shape: str
    out_bytes: int
    roofline: str | None
    seconds: dict[str, float] = field(default_factory=dict)
    in_bytes: int = 0

    def speedup(self, other: str) -> float | None:
        if other not in self.seconds or "posembed" not in self.seconds:
            return None
        return self.seconds[other] / self.seconds["posembed"]

    def roofline_fraction(self) -> float | None:
        return self.speedup("roofline")

    def gbps(self) -> float | None:
        t = self.seconds.get("posembed")
        return self.out_bytes / t / 1e9 if t and self.out_bytes else None

    def input_gbps(self) -> float | None:
        t = self.seconds.get("posembed")
        return self.in_bytes / t / 1e9 if t and self.in_bytes else None
