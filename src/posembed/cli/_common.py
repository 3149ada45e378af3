"""What every ``posembed`` command shares: one-line errors, exit status 2, argument types."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


def _one_line(message: str) -> str:
    """``message`` with every control character (line breaks included) written
    as its escape: text from a file, such as a column name, stays on one line."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in message
    )


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its error line kept to one line (its subcommands' too)."""

    def error(self, message: str) -> NoReturn:
        super().error(_one_line(message))


def _fail(command: str, message: str) -> int:
    """A runtime error: one line on stderr, exit status 2."""
    print(f"posembed {command}: error: {_one_line(message)}", file=sys.stderr)
    return 2


def _unwritable(path: str, option: str) -> str | None:
    """Why ``path`` cannot be written (checked before a long run), or None."""
    from pathlib import Path

    target = Path(path)
    if target.is_dir():
        return f"{option} {path} is a folder; give a file path"
    if not target.parent.is_dir():
        return f"{option} {path}: folder {target.parent} does not exist"
    return None


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {n}")
    return n


MAX_REPEAT = 1000


def _repeat(text: str) -> int:
    """A round count in 1..MAX_REPEAT: a larger one is a typo, not a benchmark."""
    n = _positive(text)
    if n > MAX_REPEAT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_REPEAT}; got {n}")
    return n


# Python's spellings of JSON's true, false and null, as config.json's
# fields print in Python (config.use_cache is True)
_PYTHON_LITERALS: dict[str, object] = {"True": True, "False": False, "None": None}


def _config_field(text: str) -> tuple[str, object]:
    """'FIELD=VALUE': VALUE as JSON (1024, true, [384, 384], "text") or one of
    Python's True, False and None, else the text itself."""
    from posembed.io import _json

    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"must be FIELD=VALUE such as n_positions=2048; got {text!r}"
        )
    if raw in _PYTHON_LITERALS:
        return name, _PYTHON_LITERALS[raw]
    try:
        value = _json.loads(raw, "VALUE")
    except ValueError:
        value = raw
    return name, value


def _non_negative(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0; got {n}")
    return n


def _grid(text: str) -> tuple[int, int]:
    """'24x24' or '24,24': a grid of positive height and width."""
    parts = text.lower().replace(",", "x").split("x")
    try:
        h, w = (int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be HEIGHTxWIDTH such as 24x24; got {text!r}"
        ) from None
    if h < 1 or w < 1:
        raise argparse.ArgumentTypeError(f"height and width must be at least 1; got {text!r}")
    return h, w


def _thread_counts(text: str) -> list[int]:
    """'2' or '1,2,4': distinct positive counts, ascending."""
    try:
        counts = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a count or a comma list of counts (1,2); got {text!r}"
        ) from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"counts must be at least 1; got {text!r}")
    return counts
