"""resample_grid: a ViT's patch grid resampled in 2-D, bicubic and bilinear."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case
from posembed.bench.cases._shared import optional_torch


def build(quick: bool = False) -> list[Case]:
    rng = np.random.default_rng(3)
    torch = optional_torch()
    d = 768
    table = rng.standard_normal((1 + 24 * 24, d), dtype=np.float32)

    def case(method: str) -> Case:
        def ours() -> np.ndarray:
            return posembed.resample_grid(table, (24, 24), (48, 48), prefix=1, method=method)

        def twin() -> np.ndarray:
            return reference.resample_grid(table, (24, 24), (48, 48), prefix=1, method=method)

        impls: dict[str, Callable[[], object]] = {"reference": twin, "posembed": ours}
        if torch is not None:
            tt = torch.from_numpy(table)

            def timm_style() -> object:  # what timm's resample_abs_pos_embed does
                grid = tt[1:].reshape(1, 24, 24, d).permute(0, 3, 1, 2)
                new = torch.nn.functional.interpolate(grid, size=(48, 48), mode=method)
                return torch.cat([tt[:1], new.permute(0, 2, 3, 1).reshape(-1, d)])

            impls["torch"] = timm_style
        return Case(
            "resample_grid",
            method,
            "24x24 -> 48x48, prefix 1, d=768 f32",
            (1 + 48 * 48) * d * 4,
            impls,
            "write fresh",
            lambda: bool(np.array_equal(ours(), twin())),
        )

    return [case("bicubic"), case("bilinear")]
