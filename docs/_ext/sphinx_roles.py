"""A griffe extension for the API reference: the Sphinx roles of posembed's
docstrings (``:func:`gather```, ``:class:`~posembed.Windows```) shown as the
code they name, since MkDocs does not read reStructuredText roles, and the
code quotes in the types of their numpy-style sections left out (a type is
shown as plain text).

mkdocs.yml loads it (``extensions:`` of the python handler); it is not a page.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

# :func:`name`, :meth:`~a.b.name`, :class:`text <target>`
ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|attr|data|exc|obj|const):`([^`]+)`")


def _code(match: re.Match[str]) -> str:
    text = match.group(1)
    shown = re.match(r"(.*?)\s*<[^>]+>$", text)
    if shown:
        text = shown.group(1)
    elif text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    return f"`{text}`"


def rewrite(text: str) -> str:
    """The docstring's roles as Markdown code spans."""
    return ROLE.sub(_code, text)


SECTIONS = {"Parameters", "Other Parameters", "Returns", "Yields", "Receives", "Attributes"}


def plain_types(text: str) -> str:
    """The item lines of a numpy-style section (``name : type``, or a type
    alone under Returns) without code quotes: MkDocs shows a type as plain
    text, where ``shape ``(L, d)```` would keep its backticks."""
    lines = text.split("\n")
    in_section = False
    for i, line in enumerate(lines):
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if following.strip() and set(following.strip()) == {"-"} and not line.startswith(" "):
            in_section = line.strip() in SECTIONS
        elif in_section and line.strip() and not line.startswith(" ") and set(line) != {"-"}:
            lines[i] = line.replace("`", "")
    return "\n".join(lines)


def _walk(obj: Any, seen: set[int]) -> None:
    if obj.is_alias or id(obj) in seen:
        return
    seen.add(id(obj))
    if obj.docstring is not None:
        obj.docstring.value = plain_types(rewrite(obj.docstring.value))
    for member in obj.members.values():
        _walk(member, seen)


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring of a package once it is loaded."""

    def on_package(self, *, pkg: Any, **kwargs: Any) -> None:  # griffe >= 1.14
        _walk(pkg, set())

    def on_package_loaded(self, *, pkg: Any, **kwargs: Any) -> None:  # older griffe
        _walk(pkg, set())
