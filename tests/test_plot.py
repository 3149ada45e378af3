"""The classic picture: similarity heatmaps before and after interpolation."""

from __future__ import annotations

import numpy as np
import pytest

from posembed import cli

pytest.importorskip("matplotlib")  # the test extra installs it

from posembed import plot


def smooth_table(rows=64, dim=32):
    pos = np.arange(rows)[:, None]
    freqs = np.arange(1, dim // 2 + 1)[None, :] / rows
    return np.concatenate([np.sin(pos * freqs), np.cos(pos * freqs)], axis=1).astype(np.float32)


def test_figure_has_both_heatmaps():
    fig = plot.similarity_figure(smooth_table(), 96, align="corners")
    images = [ax.get_images()[0].get_array() for ax in fig.axes if ax.get_images()]
    assert [im.shape for im in images] == [(64, 64), (96, 96)]
    assert "96 positions" in fig.axes[1].get_title()
    np.testing.assert_allclose(np.diag(images[0]), 1, atol=1e-5)


def test_cli_writes_a_png(tmp_path, capsys):
    src = tmp_path / "table.npy"
    np.save(src, smooth_table())
    out = tmp_path / "fig.png"
    assert cli.main(["plot", "similarity", str(src), "--length", "128", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in capsys.readouterr().out


def test_cli_reports_an_unwritable_output(tmp_path, capsys):
    src = tmp_path / "table.npy"
    np.save(src, smooth_table())
    with pytest.raises(SystemExit) as exc:
        cli.main(["plot", "similarity", str(src), "-o", str(tmp_path / "no" / "dir" / "x.png")])
    assert exc.value.code == 2
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "text"),
    [(None, "cannot read"), (np.zeros(5), "2-D"), (np.zeros((4, 4), int), "float")],
)
def test_cli_reports_bad_tables(tmp_path, capsys, content, text):
    src = tmp_path / "table.npy"
    if content is not None:
        np.save(src, content)
    with pytest.raises(SystemExit) as exc:
        cli.main(["plot", "similarity", str(src), "-o", str(tmp_path / "x.png")])
    assert exc.value.code == 2
    assert text in capsys.readouterr().err
