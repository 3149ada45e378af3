"""Strict JSON for the headers and indexes posembed reads from files.

Python's ``json`` accepts ``NaN`` and ``Infinity`` (which JSON has not), keeps
the last of two equal keys, and recurses once per nesting level, so a header
of a few thousand ``[`` ends in RecursionError. A file may be crafted, so
:func:`loads` refuses all three with ValueError, as the reference safetensors
reader does, and refuses deep nesting before the parser sees it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

# Far beyond any header or index posembed reads or writes (they nest 3 deep).
MAX_DEPTH = 64

# A JSON string: what lies inside one never counts as nesting.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (only finite numbers are)")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in the JSON text ``data``."""
    bare = np.frombuffer(_STRING.sub(b'""', data), np.uint8)
    if bare.size == 0:
        return 0
    step = np.isin(bare, (ord("["), ord("{"))).astype(np.int64)
    step -= np.isin(bare, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def loads(data: bytes | str, what: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` as strict JSON; ``what`` names it in errors.

    Raises
    ------
    ValueError
        ``"<what>: <problem>"`` for text that is not UTF-8, not JSON, holds
        NaN or (-)Infinity, repeats a key within an object, or nests arrays
        and objects more than ``max_depth`` deep.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what}: not UTF-8 ({exc})") from None
    deepest = depth(raw)
    if deepest > max_depth:
        raise ValueError(f"{what}: nests {deepest} levels deep; at most {max_depth} are allowed")
    try:
        return json.loads(text, parse_constant=_constant, object_pairs_hook=_object)
    except RecursionError:  # a miscount above (it cannot tell invalid strings) still ends here
        message = f"{what}: nests too deep; at most {max_depth} levels are allowed"
        raise ValueError(message) from None
    except ValueError as exc:  # json.JSONDecodeError, and the refusals above
        raise ValueError(f"{what}: not valid JSON ({exc})") from None
