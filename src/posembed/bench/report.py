"""What ``posembed bench`` prints and writes: the machine, the tables, the JSON."""

from __future__ import annotations

import dataclasses
import datetime
import os
import platform
import textwrap
from typing import Any

import numpy as np

import posembed
from posembed.bench.case import COLUMNS, Result
from posembed.bench.cases._shared import OPTIONAL, optional_torch, optional_versions
from posembed.bench.scaling import ScalingResult
from posembed.bench.sizes import (
    Caches,
    Sizes,
    caches,
    describe_reporting,
    free_page_reporting,
    sizes,
)


def machine(quick: bool = False) -> dict[str, Any]:
    """What the figures were measured on, and the cache-derived problem sizes."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    torch = optional_torch()
    return {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "threads": posembed.get_num_threads(),
        "simd": posembed.config()["simd"],
        "posembed": posembed.__version__,
        "numpy": np.__version__,
        "torch": None if torch is None else torch.__version__,
        "optional_packages": optional_versions(),
        "caches": dataclasses.asdict(caches()),
        "problem_sizes": dataclasses.asdict(sizes(quick)),
        "memory": {"free_page_reporting_bytes": free_page_reporting()},
    }


def describe(info: dict[str, Any]) -> list[str]:
    """The header lines of a run: the machine, then its caches and the problem
    sizes taken from them, and whether its host takes freed memory back."""
    flat = {k: v for k, v in info.items() if not isinstance(v, dict)}
    lines = [", ".join(f"{k}: {v}" for k, v in flat.items())]
    if "caches" in info and "problem_sizes" in info:
        found = Caches(**info["caches"])
        lines.append(f"caches: {found.describe()}")
        problems = Sizes(**info["problem_sizes"]).describe(found.last_level_name)
        lines.append(f"cache-sized problems: {problems}")
    reporting = describe_reporting(info.get("memory", {}).get("free_page_reporting_bytes"))
    if reporting is not None:
        lines.append(reporting)
    return lines


def _fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e3:.2f} ms"


def _fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def _table(rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(row) + " |" for row in rows]
        lines.insert(1, "|" + "---|" * len(rows[0]))
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_results(
    results: list[Result], info: dict[str, Any] | None = None, markdown: bool = False
) -> str:
    """A plain-text (or Markdown) table; speed-ups are other / posembed time (above 1 is
    faster)."""
    head = [
        "kernel",
        "case",
        "shape",
        *COLUMNS,
        "vs ref",
        "vs numpy",
        "vs torch",
        "GB/s",
        "roofline",
        "of roofline",
    ]
    rows = [head]
    for r in results:
        gbps = r.gbps()
        rows.append(
            [
                r.kernel,
                r.name,
                r.shape if r.not_measured is None else f"not measured: {r.not_measured}",
                *(_fmt_time(r.seconds.get(c)) for c in COLUMNS),
                _fmt_ratio(r.speedup("reference")),
                _fmt_ratio(r.speedup("numpy")),
                _fmt_ratio(r.speedup("torch")),
                "-" if gbps is None else f"{gbps:.1f}",
                r.binding() or "-",
                _fmt_ratio(r.roofline_fraction()),
            ]
        )
    lines = [*describe(info), ""] if info else []
    lines += _table(rows, markdown).splitlines()
    missing = _missing(info)
    if missing:
        lines.append("")
        lines += [missing] if markdown else textwrap.wrap(missing, 100)
    if not markdown:
        lines.append("")
        lines.append(
            "times are medians; 'vs X' = X time / posembed time; 'of roofline' = roofline "
            "time / posembed time, against the ceiling that binds (the memory roofline, or "
            "'compute': the case's float operations, or dropout's random bits, at this "
            "machine's peak rate)"
        )
    return "\n".join(lines)


def _missing(info: dict[str, Any] | None) -> str | None:
    """The optional packages this run went without, and how to get them."""
    versions = (info or {}).get("optional_packages") or {}
    how = {label: command for _, label, command in OPTIONAL.values()}
    gone = [f"{k} ({how[k]})" for k, version in versions.items() if version is None and k in how]
    if not gone:
        return None
    return (
        "not installed here, so their columns are empty and the cases that need them are "
        "not measured: " + ", ".join(gone)
    )


def format_scaling(results: list[ScalingResult], markdown: bool = False) -> str:
    """Seconds at each thread count and the speed-up over the first count."""
    if not results:
        return ""
    counts = sorted(results[0].seconds)
    head = ["kernel", "problem", "size", "MB written"]
    head += [f"{n} thread{'s' if n > 1 else ''}" for n in counts]
    head += [f"speed-up {n}/{counts[0]}" for n in counts[1:]]
    rows = [head]
    for r in results:
        rows.append(
            [
                r.kernel,
                r.problem,
                r.size,
                f"{r.nbytes / 1e6:.1f}",
                *(_fmt_time(r.seconds.get(n)) for n in counts),
                *(_fmt_ratio(r.speedup(n)) for n in counts[1:]),
            ]
        )
    return _table(rows, markdown)


def to_dict(
    results: list[Result], info: dict[str, Any], scaling: list[ScalingResult] | None = None
) -> dict[str, Any]:
    """The raw figures (``--json``, and what ``--plot`` draws)."""
    return {
        "machine": info,
        "results": [
            {
                "kernel": r.kernel,
                "case": r.name,
                "shape": r.shape,
                "out_bytes": r.out_bytes,
                "in_bytes": r.in_bytes,
                "roofline": r.roofline,
                "flops": r.flops,
                "random_words": r.random_words,
                "binding": r.binding(),
                "seconds": r.seconds,
                "speedup": {c: r.speedup(c) for c in ("reference", "numpy", "torch")},
                "roofline_fraction": r.roofline_fraction(),
                "not_measured": r.not_measured,
            }
            for r in results
        ],
        "scaling": [
            {
                "kernel": r.kernel,
                "problem": r.problem,
                "size": r.size,
                "bytes": r.nbytes,
                "seconds": {str(n): t for n, t in r.seconds.items()},
                "speedup": {str(n): v for n, v in r.speedups.items()},
            }
            for r in scaling or []
        ],
    }
