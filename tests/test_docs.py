"""The README's quick start runs as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_quick_start_runs():
    # every python block, in order, in one namespace (later ones use the
    # quick start's arrays)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2, "README.md lost a python block"
    printed = io.StringIO()
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(printed):
        for block in blocks:
            exec(compile(block, "README.md", "exec"), namespace)
    assert "position 128 at positions[1]" in printed.getvalue()
    assert "0..127" in printed.getvalue()
