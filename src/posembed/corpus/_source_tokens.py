"""Token files as ``posembed chunk`` input: a 1-D integer ``.npy`` file or a
raw file of ``--dtype`` tokens, with ``--offsets`` (a ``.npy`` file of CSR
document offsets) or as one document. Read by range (:class:`TokenFile`), all
document offsets known up front."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from posembed.corpus._source import RangeInput, SourceOptions, token_layout
from posembed.io import _npy
from posembed.io._tokens import ChunkError, TokenFile, _open_regular, _stamp
from posembed.kernels._windows import _offsets


def _open_tokens(path: Path, dtype: Any) -> TokenFile:
    fd, info = _open_regular(path, str(path))
    with os.fdopen(fd, "rb") as f:
        header = None
        if path.suffix == ".npy":
            if dtype is not None:
                raise ChunkError("--dtype applies to raw token files; a .npy file names its own")
            if info.st_size == 0:
                raise ChunkError(
                    f"{path}: not a readable .npy file (it is empty); the input must be a 1-D "
                    "integer .npy file, header included (numpy.save writes one even for no "
                    "tokens)"
                )
            try:
                header = _npy.read_header(f, str(path), info.st_size)
            except ValueError as exc:
                raise ChunkError(str(exc)) from None
            except OSError as exc:
                raise ChunkError(f"{path}: cannot be read ({exc.strerror})") from None
        dt, offset, count = token_layout(path, header, dtype, info.st_size)
        return TokenFile(
            path,
            dt.newbyteorder("="),
            offset,
            count,
            swap=not dt.isnative,
            stamp=_stamp(info),
        )


def _load_offsets(path: str | os.PathLike[str], n_tokens: int) -> np.ndarray:
    what = f"--offsets {path}"
    fd, info = _open_regular(Path(path), what)
    with os.fdopen(fd, "rb") as f:
        if info.st_size == 0:
            raise ChunkError(
                f"{what}: not a readable .npy file (it is empty); offsets must be a 1-D integer "
                ".npy file, from 0 to the token count"
            )
        try:
            given = _npy.load_open(f, what)
        except ValueError as exc:
            raise ChunkError(str(exc)) from None
        except OSError as exc:
            raise ChunkError(f"{what}: cannot be read ({exc.strerror})") from None
    try:
        return _offsets(given, n_tokens)
    except (TypeError, ValueError) as exc:
        raise ChunkError(f"{what}: {exc}") from None


def matches(path: Path) -> bool:
    """Any input no other source claims is a token file."""
    return True


def check(path: Path, options: SourceOptions) -> None:
    if options.column is not None:
        raise ChunkError(f"--column applies to Arrow and Parquet input; {path} is a token file")
    if options.documents is not None:
        raise ChunkError(
            f"--documents applies to indexed datasets (PREFIX.bin and PREFIX.idx); {path} is a "
            "token file"
        )


def inputs(path: Path, options: SourceOptions) -> tuple[Any, ...]:
    return (path, options.offsets)


def open_input(path: Path, options: SourceOptions) -> RangeInput:
    tokens = _open_tokens(path, options.dtype)
    if options.offsets is None:
        offsets = np.array([0, tokens.shape[0]], dtype=np.int64)
    else:
        offsets = _load_offsets(options.offsets, tokens.count)
    return RangeInput(tokens, offsets, {})
