"""Temporary folders for the cases that work on files, removed at exit."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch_dir() -> Path:
    """A new temporary folder, removed when the process exits (the cases' files
    must outlive the function that builds them)."""
    path = Path(tempfile.mkdtemp(prefix="posembed-bench-"))
    atexit.register(shutil.rmtree, path, True)
    return path
