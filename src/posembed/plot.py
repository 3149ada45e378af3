"""Pictures of position tables (needs matplotlib: ``pip install "posembed[plot]"``).

The seeds' figure: the cosine similarity of every pair of positions, before
and after position interpolation, side by side. A trained table shows a
bright diagonal band that fades with distance; interpolation keeps the band
and stretches it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from posembed._interpolate import interpolate, similarity

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
    target = 2 * rows if length is None else length
    stretched = interpolate(table, target, align=align)
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
