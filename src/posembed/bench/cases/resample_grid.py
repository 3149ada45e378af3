"""resample_grid: a ViT's patch grid resampled in 2-D, bicubic and bilinear,
and antialiased bicubic (timm's default) shrinking and growing."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import posembed
from posembed import _core, reference
from posembed.bench.case import Case
from posembed.bench.cases._shared import optional_torch


def build(quick: bool = False) -> list[Case]:
    rng = np.random.default_rng(3)
    torch = optional_torch()
    d = 768
    table = rng.standard_normal((1 + 24 * 24, d), dtype=np.float32)

    def flops(new: tuple[int, int], method: str, antialias: bool) -> int:
        m, half = _core.GridMethod.__members__[method], _core.Align.half_pixel
        return _core.resample_grid_flops(24, 24, *new, d, m, half, antialias)

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
            flops=flops((48, 48), method, antialias=False),
        )

    def antialiased(name: str, new: tuple[int, int]) -> Case:
        def ours() -> np.ndarray:
            return posembed.resample_grid(table, (24, 24), new, prefix=1, antialias=True)

        def twin() -> np.ndarray:
            return reference.resample_grid(table, (24, 24), new, prefix=1, antialias=True)

        impls: dict[str, Callable[[], object]] = {"reference": twin, "posembed": ours}
        if torch is not None:
            tt = torch.from_numpy(table)

            def timm_style() -> object:  # resample_abs_pos_embed with timm's defaults
                grid = tt[1:].reshape(1, 24, 24, d).permute(0, 3, 1, 2)
                out = torch.nn.functional.interpolate(
                    grid, size=new, mode="bicubic", antialias=True, align_corners=False
                )
                return torch.cat([tt[:1], out.permute(0, 2, 3, 1).reshape(-1, d)])

            impls["torch"] = timm_style
        return Case(
            "resample_grid",
            name,
            f"24x24 -> {new[0]}x{new[1]} bicubic, prefix 1, d=768 f32",
            (1 + new[0] * new[1]) * d * 4,
            impls,
            "write fresh",
            lambda: bool(np.array_equal(ours(), twin())),
            flops=flops(new, "bicubic", antialias=True),
        )

    return [
        case("bicubic"),
        case("bilinear"),
        antialiased("antialias shrinking", (16, 16)),
        antialiased("antialias growing", (48, 48)),
    ]
