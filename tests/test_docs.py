"""The README's quick start and every guide in docs/ run as written.

The guides are the pages directly in docs/ (the site's home page, index.md,
aside); the reference pages are in docs/reference/. A guide's ```python blocks
run in order in one namespace, in a fresh folder; its ```console blocks run
each ``$ posembed ...`` line through the command's ``main`` there, and the
lines shown after it must be what it printed (a ``...`` in a shown line stands
for any text). The other pages have no such block, and the command-line
reference's ```text blocks that start with ``usage: posembed`` are the
commands' own ``--help``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import shlex
from pathlib import Path

import pytest

from posembed import cli

from .conftest import megatron_or_skip, torch_or_skip

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
HOME = DOCS / "index.md"
# every page of the site, and the guides among them: the pages run here
ALL_PAGES = sorted(DOCS.rglob("*.md"))
PAGES = sorted(p for p in DOCS.glob("*.md") if p != HOME)
CLI_PAGE = DOCS / "reference" / "cli.md"
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
    required |= {"hf-datasets", "hf-model-folder", "timm", "megatron", "dask", "threads"}
    assert required <= names
    reference = {p.stem for p in (DOCS / "reference").glob("*.md")}
    assert {"api", "cli", "benchmark", "architecture", "developing"} <= reference
    readme = README.read_text()
    home = HOME.read_text()
    for page in ALL_PAGES:
        if page == HOME:
            continue
        name = page.relative_to(DOCS).as_posix()
        assert f"(docs/{name})" in readme, f"README.md does not link docs/{name}"
        assert f"({name})" in home, f"docs/index.md does not link {name}"


def test_readme_links_resolve():
    # the site's own links are checked by mkdocs build --strict; the README's here
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert local
    for link in local:
        assert (ROOT / link).is_file(), f"README.md links {link}, which does not exist"


def test_every_page_is_in_the_site():
    # mkdocs build --strict fails on a page left out of the nav too (CI runs
    # it); this says so without MkDocs installed
    config = (ROOT / "mkdocs.yml").read_text()
    listed = re.findall(r"^\s*- (?:[^\n]*: )?(\S+\.md)$", config, flags=re.M)
    assert sorted(listed) == sorted(p.relative_to(DOCS).as_posix() for p in ALL_PAGES)


@pytest.mark.parametrize(
    "page", [p for p in ALL_PAGES if p not in PAGES], ids=lambda p: p.relative_to(DOCS).as_posix()
)
def test_reference_pages_have_no_unrun_block(page):
    # a python or console block is run only on a guide: elsewhere it would
    # be shown to users without ever being checked
    assert not BLOCK.findall(page.read_text())


HELP_BLOCK = re.compile(r"```text\n(usage: posembed\b.*?)```", flags=re.S)


def _normal(text: str) -> str:
    """Help text with its layout left out: every run of whitespace one space,
    and an option's metavar written once (Python 3.13's argparse writes
    ``-o, --output OUTPUT`` where earlier ones write ``-o OUTPUT, --output
    OUTPUT``), so that any supported Python compares what the help says."""
    text = re.sub(r"(?<![\w-])(-\w) (\S+), (--[\w-]+) \2(?!\S)", r"\1, \3 \2", text)
    return " ".join(text.split())


def _live_help(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps at the terminal's width
    monkeypatch.setenv("NO_COLOR", "1")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(SystemExit) as stop:
        cli.main([*argv, "--help"])
    assert stop.value.code == 0, argv
    return printed.getvalue()


def test_cli_page_is_the_commands_help(monkeypatch):
    documented: dict[tuple[str, ...], str] = {}
    for shown in HELP_BLOCK.findall(CLI_PAGE.read_text()):
        words = shown.split()[2:]  # after "usage: posembed"
        command = tuple(itertools.takewhile(str.isidentifier, words))
        assert command not in documented, f"posembed {' '.join(command)} shown twice"
        documented[command] = shown
    # every command and subcommand, from `posembed --help` down, has its block
    wanted: list[tuple[str, ...]] = [()]
    for command in wanted:
        live = _live_help(list(command), monkeypatch)
        name = " ".join(("posembed", *command))
        assert command in documented, f"docs/reference/cli.md lacks {name} --help"
        assert _normal(documented[command]) == _normal(live), (
            f"docs/reference/cli.md's {name} is not its --help now; "
            f"paste the output of: COLUMNS=80 {name} --help"
        )
        sub = re.search(r"\{([\w,]+)\} \.\.\.$", _normal(live.split("\n\n")[0]))
        if sub:
            wanted += [(*command, word) for word in sub.group(1).split(",")]
    assert sorted(documented) == sorted(wanted)


# Pages that run PyTorch: its models (transformers' included) or its resampling.
TORCH_PAGES = {"pytorch.md", "hf-model-folder.md", "timm.md", "train-batches.md"}
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
