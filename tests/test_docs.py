"""The README's quick start and every page in docs/ run as written.

A page's ```python blocks run in order in one namespace, in a fresh folder;
its ```console blocks run each ``$ posembed ...`` line through the command's
``main`` there, and the lines shown after it must be what it printed (a
``...`` in a shown line stands for any text).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from posembed import cli

from .conftest import megatron_or_skip, torch_or_skip

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"```(python|console)\n(.*?)```", flags=re.S)


def run_page(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run every block of the page; return what the python blocks printed."""
    printed = io.StringIO()
    namespace: dict[str, object] = {"__name__": "__doc_page__"}
    blocks = BLOCK.findall(path.read_text())
    assert blocks, f"{path.name} has no runnable block"
    for kind, body in blocks:
        if kind == "python":
            with contextlib.redirect_stdout(printed):
                exec(compile(body, str(path), "exec"), namespace)
        else:
            run_console(body, capsys)
    return printed.getvalue()


def run_console(body: str, capsys: pytest.CaptureFixture[str]) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            assert commands, f"output before any command: {line!r}"
            commands[-1][1].append(line)
    for command, shown in commands:
        argv = shlex.split(command)
        assert argv[0] == "posembed", f"only posembed commands run here: {command!r}"
        capsys.readouterr()
        assert cli.main(argv[1:]) == 0, command
        got = capsys.readouterr().out.splitlines()
        assert len(got) == len(shown), (command, got)
        for want_line, got_line in zip(shown, got, strict=True):
            pattern = ".*".join(re.escape(part) for part in want_line.split("..."))
            assert re.fullmatch(pattern, got_line), (command, want_line, got_line)


def test_readme_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    printed = run_page(README, capsys)
    assert "position 128 at positions[1]" in printed
    assert "0..127" in printed


def test_every_task_has_a_page():
    names = {p.stem for p in PAGES}
    required = {"resize-checkpoint", "chunk-corpus", "vit-grid", "pytorch"}
    required |= {"hf-datasets", "hf-model-folder", "timm", "megatron"}
    assert required <= names
    readme = README.read_text()
    for page in PAGES:
        assert f"docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"


# Pages that run PyTorch: its models (transformers' included) or its resampling.
TORCH_PAGES = {"pytorch.md", "hf-model-folder.md", "timm.md"}
# Pages that run megatron-core (which needs PyTorch): CI reruns this file with it
# installed and POSEMBED_REQUIRE_MEGATRON=1.
MEGATRON_PAGES = {"megatron.md"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_runs(page, tmp_path, monkeypatch, capsys):
    if page.name in TORCH_PAGES:
        # PyTorch is optional; CI reruns the *pytorch* tests with it installed
        # and POSEMBED_REQUIRE_TORCH=1, where a missing torch fails instead.
        torch_or_skip()
    if page.name in MEGATRON_PAGES:
        megatron_or_skip()
    # a page builds its models locally: nothing is downloaded or cached in $HOME
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / ".hf"))
    monkeypatch.chdir(tmp_path)
    run_page(page, capsys)
