"""Pictures of position tables (needs matplotlib: ``pip install "posembed[plot]"``).

The similarity figure: the cosine similarity of every pair of positions,
before and after position interpolation, side by side. A trained table shows a
bright diagonal band that fades with distance; interpolation keeps the band
and stretches it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from posembed.kernels._interpolate import interpolate
from posembed.kernels._similarity import similarity

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("posembed.plot needs matplotlib: pip install 'posembed[plot]'") from None
    return Figure


def similarity_figure(
    table: Any, length: int | None = None, *, align: str = "scale", cmap: str = "viridis"
) -> Figure:
    """A figure of two heatmaps: ``similarity(table)`` and the similarity of
    ``interpolate(table, length, align=align)`` (``length`` defaults to 2 L).

    Uses matplotlib's object API only (no pyplot state), so it is safe in
    scripts, servers and threads; save it with ``fig.savefig(path)``.
    """
    rows = np.shape(table)[0] if np.ndim(table) == 2 else 0
    new_length = 2 * rows if length is None else length
    stretched = interpolate(table, new_length, align=align)
    before, after = similarity(table), similarity(stretched)

    fig: Figure = _figure_class()(figsize=(10.5, 4.8), layout="constrained")
    axes = fig.subplots(1, 2)
    panels = [
        (axes[0], before, f"original: {before.shape[0]} positions"),
        (axes[1], after, f"interpolated ({align}): {after.shape[0]} positions"),
    ]
    images = []
    for ax, sim, title in panels:
        images.append(ax.imshow(sim, cmap=cmap, vmin=-1, vmax=1, interpolation="nearest"))
        ax.set_title(title)
        ax.set_xlabel("position")
        ax.set_ylabel("position")
    fig.colorbar(images[0], ax=axes, shrink=0.85, label="cosine similarity")
    fig.suptitle("Position similarity before and after interpolation")
    return fig


def save_similarity_figure(
    table: Any, path: str, length: int | None = None, *, align: str = "scale", dpi: int = 120
) -> None:
    """Draw :func:`similarity_figure` and write it to ``path`` (PNG, SVG, PDF, ...)."""
    similarity_figure(table, length, align=align).savefig(path, dpi=dpi)


def bench_figure(data: dict[str, Any]) -> Figure:
    """Bar charts of one ``posembed bench`` run (the dict ``--json`` writes).

    Left: posembed's speed-up over the reference twin, NumPy and PyTorch per
    case (log scale; right of 1 is faster). Middle: the fraction of the
    same-run roofline that binds each case (memory, or compute where the
    case's operations take longer) it reaches (1 = at the roofline). Right,
    when the run had ``--threads 1,2``: each kernel's thread speed-up, in
    cache and in memory, against perfect scaling (the ratio of the counts).
    """
    results = data["results"]
    scaling = data.get("scaling") or []
    panels = 3 if scaling else 2
    height = max(4.0, 0.32 * max(len(results), len(scaling)) + 1.5)
    fig: Figure = _figure_class()(figsize=(6.0 * panels, height), layout="constrained")
    axes = fig.subplots(1, panels)
    labels = [
        f"{r['kernel']}: {r['case']}" + (" (not measured)" if r.get("not_measured") else "")
        for r in results
    ]
    y = np.arange(len(results))

    ax = axes[0]
    others = [("reference", "tab:gray"), ("numpy", "tab:blue"), ("torch", "tab:orange")]
    width = 0.8 / len(others)
    for k, (other, color) in enumerate(others):
        values = [r["speedup"].get(other) for r in results]
        shown = [(i, v) for i, v in enumerate(values) if v]
        if shown:
            idx, vals = zip(*shown, strict=True)
            ax.barh(np.array(idx) + (k - 1) * width, vals, width, color=color, label=f"vs {other}")
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel("speed-up (other time / posembed time)")
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title("posembed against the others")

    ax = axes[1]
    fractions = [r["roofline_fraction"] or 0.0 for r in results]
    ax.barh(y, fractions, 0.6, color="tab:green")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(
        y,
        [
            f"{lab} ({r.get('binding', r['roofline']) or 'none'})"
            for lab, r in zip(labels, results, strict=True)
        ],
    )
    ax.invert_yaxis()
    ax.set_xlabel("fraction of the same-run roofline that binds")
    ax.set_title("posembed against its roofline (memory or compute)")

    if scaling:
        ax = axes[2]
        rows = [f"{s['kernel']}: {s['problem']} ({s['size']})" for s in scaling]
        counts = sorted(int(n) for n in scaling[0]["seconds"])
        top = str(counts[-1])
        speedups = [s["speedup"][top] or 0.0 for s in scaling]
        colors = ["tab:purple" if s["size"] == "in cache" else "tab:cyan" for s in scaling]
        ys = np.arange(len(scaling))
        ax.barh(ys, speedups, 0.6, color=colors)
        perfect = counts[-1] / counts[0]
        ax.axvline(
            perfect, color="red", linewidth=0.8, linestyle="--", label=f"perfect: {perfect:g}x"
        )
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(ys, rows)
        ax.invert_yaxis()
        ax.set_xlabel(f"speed-up, {counts[0]} -> {counts[-1]} threads")
        ax.legend(loc="lower right", fontsize="small")
        ax.set_title("thread scaling (purple: in cache)")

    m = data.get("machine", {})
    c = m.get("caches")
    cache = f", {c['last_level_name']} {c['last_level'] / 2**20:g} MiB" if c else ""
    fig.suptitle(
        f"posembed bench, {m.get('date', '')}: {m.get('cpu', '')}{cache}, {m.get('threads', '')} "
        f"threads, SIMD {m.get('simd', '')}"
    )
    return fig


def save_bench_figure(data: dict[str, Any], path: str, *, dpi: int = 110) -> None:
    """Draw :func:`bench_figure` and write it to ``path``."""
    bench_figure(data).savefig(path, dpi=dpi)
