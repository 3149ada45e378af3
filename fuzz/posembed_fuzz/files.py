"""--mode files: each input builds a small file or folder and hands it to a
public reader or command, then judges the outcome:

* a safetensors checkpoint to resize_checkpoint and `posembed resize`, a .npy
  file to chunk_file and `posembed chunk` (as the tokens or as --offsets) and
  to `posembed plot similarity`, a folder posembed chunk wrote to chunk_file
  and `posembed chunk` (:mod:`.files_headers`);
* a parted output to posembed.dask.read_parts (:mod:`.files_parts`);
* a Hugging Face model folder to resize_checkpoint and `posembed resize`
  (:mod:`.files_models`);
* an Arrow or Parquet corpus to chunk_file and `posembed chunk`
  (:mod:`.files_arrow`);
* an output in an object store for `posembed chunk` and `convert`
  (:mod:`.files_store`).

Each is a valid file with 0 to 3 crafted defects ("planted"). The reader must
return (a valid input must be accepted) or raise one of its documented
exceptions; the command must exit 0, or 2 with one line on stderr, never with
a traceback; no reader may read outside its folder or block on a FIFO. What
the families share is in :mod:`.files_common`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .common import Reader, quiet
from .files_arrow import _files_arrow, pa
from .files_headers import _files_npy, _files_safetensors, _files_windows
from .files_models import _files_model_folder, safetensors_numpy
from .files_parts import _files_parts, read_parts
from .files_store import _files_store, _store_available

FILE_KINDS = ["safetensors", "npy", "windows"] + (["parts"] if read_parts is not None else [])
FILE_KINDS += ["folder"] if safetensors_numpy is not None else []
FILE_KINDS += ["arrow"] if pa is not None else []
FILE_READERS = {"safetensors": _files_safetensors, "npy": _files_npy, "parts": _files_parts}
FILE_READERS |= {"folder": _files_model_folder, "arrow": _files_arrow, "windows": _files_windows}
FILE_KINDS += ["store"] if _store_available() else []
FILE_READERS["store"] = _files_store


def files_input(data: bytes) -> str:
    """Run one crafted-file input; returns the reader and outcome for the statistics."""
    r = Reader(data)
    kind = r.pick(FILE_KINDS)
    root = Path(tempfile.mkdtemp(prefix="posembed-fuzz-files-"))
    try:
        with quiet():
            return FILE_READERS[kind](r, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
