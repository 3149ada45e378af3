"""A Hugging Face model folder written anew with its position table resized.

The folder holds config.json and model.safetensors, or shards that
model.safetensors.index.json lists. The output folder is one that
``from_pretrained`` loads at the new size: the file that holds the table is
rewritten by the single-file resize, the other shards and every other file are
copied byte for byte (in the kernel where it can), the index's ``total_size``
and config.json's size fields are set. Files are read only inside the folder:
each opened without following a link and never waited on (a FIFO is refused),
a link followed only when it stays in the folder or, for a folder of the Hugging
Face cache (``.../snapshots/<revision>``), in that cache's ``blobs``. The
output appears only when complete (``posembed.io._outdir``), marked by a small
``.cache/huggingface/posembed.json`` so that ``overwrite`` replaces only a
folder posembed wrote: ``from_pretrained`` ignores it, and the Hub client
neither uploads a folder's ``.cache/huggingface`` nor commits under ``.cache``
(its ``.gitignore`` keeps it out of git too).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posembed.checkpoint._table import NewTable, Plan, ResizeResult, no_table, resize_table, write
from posembed.io import _json, _outdir
from posembed.io import _safetensors as sft

CONFIG = "config.json"
SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
# The marker sits where the Hugging Face Hub client keeps a local folder's
# own bookkeeping, which an upload leaves out; the first versions wrote it at
# the top of the folder, where it is still recognised (and never copied).
CACHE = ".cache"
MARKER_FOLDER = ".cache/huggingface"
MARKER = MARKER_FOLDER + "/posembed.json"
OLD_MARKER = ".posembed.json"
MARKERS = (MARKER, OLD_MARKER)
# Files beside config.json that hold the same size: the image processor's
# input size (a ViT), the tokenizer's longest input (a text model).
PROCESSOR = "preprocessor_config.json"
TOKENIZER = "tokenizer_config.json"
# The longest generation a decoder's defaults ask for (Whisper's 448).
GENERATION = "generation_config.json"

# A config.json or an index larger than this is no file a model ships (an
# index names each tensor once: a few MB for the largest models).
JSON_BYTES = 64 << 20

# Other weight files: other formats, variants and stale shards hold the table
# at its old size, so a copy would disagree with the new one.
WEIGHT_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".h5",
    ".msgpack",
    ".onnx",
    ".gguf",
    ".index.json",
)

_OPEN = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Family:
    """Where a model type keeps its position table and its size."""

    table: str  # the table's name, without the model's own prefix ("transformer.")
    fields: tuple[str, ...]  # config fields set to the new size
    optional: tuple[str, ...]  # the same, set only where config.json has them
    prefix: int  # leading rows that are not positions
    counts_prefix: bool  # whether the fields count those rows too
    grid: bool  # a ViT's patch grid: the field is image_size
    # the config.json object that holds the fields (and, for a grid,
    # patch_size): "" for config.json itself, "vision_config" for a vision tower
    section: str = ""
    square: bool = False  # the model takes square images only (one int image_size)
    # other tables of the same size and field, resized alike (BART's decoder's)
    more: tuple[str, ...] = ()

    def field(self, name: str) -> str:
        """config.json's (dotted) name of the family's field ``name``."""
        return f"{self.section}.{name}" if self.section else name


_TEXT_TABLE = "embeddings.position_embeddings.weight"
_MAX = ("max_position_embeddings",)
# A CLIP or SigLIP vision tower: one row per patch (after CLIP's class row),
# its size in vision_config for the whole model, in config.json for the tower alone.
_TOWER_TABLE = "vision_model.embeddings.position_embedding.weight"
_ALONE_TABLE = "embeddings.position_embedding.weight"  # a tower saved alone
_BART = Family(
    "encoder.embed_positions.weight",
    _MAX,
    (),
    2,
    False,
    False,
    more=("decoder.embed_positions.weight",),
)
FAMILIES = {
    "gpt2": Family("wpe.weight", ("n_positions",), ("n_ctx",), 0, False, False),
    "gpt_neo": Family("wpe.weight", _MAX, (), 0, False, False),
    "bert": Family(_TEXT_TABLE, _MAX, (), 0, False, False),
    "distilbert": Family(_TEXT_TABLE, _MAX, (), 0, False, False),
    "electra": Family(_TEXT_TABLE, _MAX, (), 0, False, False),
    # positions start after padding_idx (pad_token_id): prefix = pad_token_id + 1
    "roberta": Family(_TEXT_TABLE, _MAX, (), 2, True, False),
    "xlm-roberta": Family(_TEXT_TABLE, _MAX, (), 2, True, False),
    "camembert": Family(_TEXT_TABLE, _MAX, (), 2, True, False),
    # OPTLearnedPositionalEmbedding adds 2 rows to max_position_embeddings
    "opt": Family("decoder.embed_positions.weight", _MAX, (), 2, False, False),
    # as OPT's, one table for the encoder and one for the decoder, both resized
    "bart": _BART,
    "mbart": _BART,
    # the decoder's learned table (the encoder's is fixed sinusoids, kept)
    "whisper": Family(
        "decoder.embed_positions.weight", ("max_target_positions",), (), 0, False, False
    ),
    "vit": Family("embeddings.position_embeddings", ("image_size",), (), 1, False, True),
    "deit": Family("embeddings.position_embeddings", ("image_size",), (), 2, False, True),
    "clip": Family(_TOWER_TABLE, ("image_size",), (), 1, False, True, "vision_config", True),
    "clip_vision_model": Family(_ALONE_TABLE, ("image_size",), (), 1, False, True, "", True),
    "siglip": Family(_TOWER_TABLE, ("image_size",), (), 0, False, True, "vision_config", True),
    "siglip_vision_model": Family(_ALONE_TABLE, ("image_size",), (), 0, False, True, "", True),
}
# Families whose first position row follows pad_token_id.
_PADDED = ("roberta", "xlm-roberta", "camembert")


@dataclass(frozen=True)
class _File:
    """A file of the source folder: its name there and, for a link, where it leads."""

    name: str
    target: Path | None


class _Folder:
    """The source folder, listed once; files opened inside it only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.real = Path(os.path.realpath(path))
        snapshots = self.real.parent
        # the Hugging Face cache links snapshots/<revision>/<name> to ../../blobs/<hash>
        self.blobs = snapshots.parent / "blobs" if snapshots.name == "snapshots" else None
        self.fd = os.open(path, _DIR)
        self.files: dict[str, _File] = {}
        self.folders: list[str] = []
        try:
            self._list()
        except BaseException:
            os.close(self.fd)
            raise

    def close(self) -> None:
        os.close(self.fd)

    def _list(self) -> None:
        with os.scandir(self.fd if os.scandir in os.supports_fd else self.path) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                name = entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    if os.path.isdir(self.path / name):  # a folder, never read: skipped
                        self.folders.append(name)
                    else:
                        self.files[name] = _File(name, self._link(name))
                elif stat.S_ISDIR(mode):
                    self.folders.append(name)
                elif stat.S_ISREG(mode):
                    self.files[name] = _File(name, None)
                else:
                    raise ValueError(
                        f"{self.path / name} is {_outdir.kind_of(mode)}, not a regular file; "
                        "a model folder holds files and folders only"
                    )

    def _link(self, name: str) -> Path:
        target = Path(os.path.realpath(self.path / name))
        inside = target.is_relative_to(self.real)
        cached = self.blobs is not None and target.is_relative_to(self.blobs)
        if not (inside or cached):
            raise ValueError(
                f"{self.path / name} is a symbolic link to {target}, outside the folder; "
                "posembed reads only files inside a model folder (or the Hugging Face "
                "cache's blobs, for a folder of its snapshots)"
            )
        return target

    def open(self, name: str) -> int:
        """A descriptor of the regular file ``name`` of the folder (ValueError if it is not one)."""
        file = self.files.get(name)
        where = self.path / name
        if file is None:
            raise ValueError(f"{where} is not a file of the folder")
        try:
            if file.target is not None:
                fd = os.open(file.target, _OPEN)
            elif os.open in os.supports_dir_fd:
                fd = os.open(name, _OPEN, dir_fd=self.fd)
            else:
                fd = os.open(where, _OPEN)
        except OSError as exc:
            raise ValueError(f"{where}: cannot be opened ({exc.strerror})") from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):  # it changed since the listing
                raise ValueError(f"{where} is {_outdir.kind_of(mode)}, not a regular file")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_json(self, name: str) -> Any:
        fd = self.open(name)
        with os.fdopen(fd, "rb") as f:
            if os.fstat(fd).st_size > JSON_BYTES:
                raise ValueError(f"{self.path / name} is larger than {JSON_BYTES} bytes")
            return _json.loads(f.read(JSON_BYTES + 1), str(self.path / name))


def resize_folder(
    src: Path,
    dst: Path,
    key: str | None,
    plan: Plan,
    prefix: int | None,
    set_config: Mapping[str, Any] | None,
    overwrite: bool,
) -> ResizeResult:
    """:func:`posembed.resize_checkpoint` of a model folder (arguments checked there)."""
    updates = _updates(set_config)
    _check_output(src, dst, overwrite)
    folder = _Folder(src)
    # every shard's header, read and closed (a model may have more shards than
    # a process may hold files open); only the table's stays open
    shards: dict[str, sft.Header] = {}
    table_fds: dict[str, int] = {}  # the tables' shards, open until written
    try:
        if CONFIG not in folder.files:
            raise FileNotFoundError(
                f"{src}: a model folder holds {CONFIG}; there is none (for a single "
                "safetensors file, give the file)"
            )
        config = folder.read_json(CONFIG)
        if not isinstance(config, dict):
            raise ValueError(f"{src / CONFIG} must be a JSON object; got {type(config).__name__}")
        index, weight_map = _weight_map(folder)
        for name in dict.fromkeys(weight_map.values()):
            fd = folder.open(name)
            with os.fdopen(fd, "rb") as f:
                shards[name] = sft.read_header(f, src / name)
        if index is None:
            weight_map = dict.fromkeys(shards[SINGLE].entries, SINGLE)
        else:
            _check_shards(src, weight_map, shards)
        if key is not None and key not in weight_map:
            raise no_table(key, list(weight_map))
        model_type = config.get("model_type")
        family = FAMILIES.get(model_type) if isinstance(model_type, str) else None
        if family is not None and key is not None and not _is_table(key, family):
            # another table of a known model: its size is in no field posembed knows
            if not updates:
                raise ValueError(
                    f"{key!r} is not the position table of a {model_type} model "
                    f"(named {family.table!r}); give set_config (--set-config FIELD=VALUE) "
                    "for the config.json field that holds its size"
                )
            family = None
        keys: list[str] = []
        if family is None or not isinstance(model_type, str):
            _unknown_family(src, model_type, key, updates)
        else:
            prefix = _family_prefix(src, model_type, family, config, prefix)
            plan = _family_plan(src, model_type, family, config, plan)
            # the family's tables (BART's encoder's and decoder's), the one named first
            keys = [
                key
                if key is not None and _is_table(key, family, name)
                else _find_table(src, model_type, family, weight_map, name)
                for name in (family.table, *family.more)
            ]
            key = keys[0]
        assert key is not None
        keys = [key] if family is None else keys
        tables: list[NewTable] = []
        for name in keys:
            shard = weight_map[name]
            if shard not in table_fds:
                table_fds[shard] = folder.open(shard)
            with os.fdopen(os.dup(table_fds[shard]), "rb") as f:
                header = sft.read_header(f, src / shard)
                if header.entries != shards[shard].entries:
                    raise ValueError(f"{src / shard}: the file changed while reading")
                shards[shard] = header
                tables.append(resize_table(f, header, name, prefix or 0, plan))
        table, shard = tables[0], weight_map[key]
        changes = _config_changes(config, family, table, plan)
        for name, value in updates.items():
            old = _set(config, name, value)
            changes[name] = (changes[name][0] if name in changes else old, value)
        config_text = _json_text(config, f"{src / CONFIG} with the new fields")
        companions, also = _companions(folder, family, changes, table)
        index_text = None if index is None else _json_text(_new_index(index, shards, tables), INDEX)
        # the Hub client's bookkeeping (and posembed's marker) is no model file
        skipped = [f"{name}/" for name in folder.folders if name != CACHE]
        others = []
        for name in folder.files:
            if name in shards or name in (CONFIG, INDEX, OLD_MARKER) or name in companions:
                continue
            if name.endswith(WEIGHT_SUFFIXES) or name == CACHE:
                skipped.append(name)
            else:
                others.append(name)
        marker = {
            "written_by": "posembed resize",
            "table": key,
            "old_shape": list(table.entry.shape),
            "new_shape": list(table.new_shape),
        }
        tmp = _outdir.new_temp(dst)
        try:
            for name, header in shards.items():
                if name in table_fds:
                    mine = [t for t in tables if weight_map[t.entry.name] == name]
                    write(table_fds[name], header, mine, tmp / name)
                else:
                    _copy(folder, name, tmp, header.file_size)
            for name in others:
                _copy(folder, name, tmp)
            (tmp / CONFIG).write_text(config_text, encoding="utf-8")
            for name, text in companions.items():
                (tmp / name).write_text(text, encoding="utf-8")
            if index_text is not None:
                (tmp / INDEX).write_text(index_text, encoding="utf-8")
            (tmp / MARKER_FOLDER).mkdir(parents=True)
            (tmp / MARKER_FOLDER / ".gitignore").write_text("*\n", encoding="utf-8")
            (tmp / MARKER).write_text(_json_text(marker, MARKER), encoding="utf-8")
            _outdir.commit(tmp, dst, overwrite, MARKERS)
        except BaseException as exc:
            _outdir.discard(tmp, exc)
            raise
    finally:
        for fd in table_fds.values():
            os.close(fd)
        folder.close()
    entry = table.entry
    return ResizeResult(
        key,
        entry.dtype,
        entry.shape,
        table.new_shape,
        table.prefix,
        table.mode,
        dst,
        shard=shard,
        config=changes,
        skipped=tuple(skipped),
        also=also,
        others=tuple(keys[1:]),
    )


def written_by_posembed(folder: Path) -> bool:
    """Whether ``folder`` is a model folder that posembed wrote."""
    return _outdir.ours(folder, MARKERS)


def _updates(set_config: Mapping[str, Any] | None) -> dict[str, Any]:
    if set_config is None:
        return {}
    if not isinstance(set_config, Mapping):
        raise TypeError(
            f"set_config must be a mapping of config.json field names to values; "
            f"got {type(set_config).__name__}"
        )
    for name in set_config:
        if not isinstance(name, str) or not all(name.split(".")):
            raise ValueError(
                f"set_config names must be field names, dotted for a nested object "
                f"(text_config.max_position_embeddings); got {name!r}"
            )
    return dict(set_config)


def _check_output(src: Path, dst: Path, overwrite: bool) -> None:
    if not dst.parent.is_dir():
        raise FileNotFoundError(f"output folder {dst.parent} does not exist")
    problem = _outdir.problem(dst, [src], True, MARKERS)
    if problem is not None:
        if "would replace the input" in problem:
            raise ValueError(problem)
        raise FileExistsError(problem)
    if os.path.lexists(dst) and not overwrite:
        raise FileExistsError(f"{dst} exists; pass overwrite=True to replace it")


def _weight_map(folder: _Folder) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The index (None for a single file) and its weight map, checked: every
    shard a file of the folder, named without a path."""
    src = folder.path
    has_single, has_index = SINGLE in folder.files, INDEX in folder.files
    if has_single and has_index:
        raise ValueError(
            f"{src} holds both {SINGLE} and {INDEX}; which one is the model is unclear, "
            "remove the other"
        )
    if not has_single and not has_index:
        raise FileNotFoundError(
            f"{src}: a model folder holds {SINGLE} or {INDEX}; neither is there"
        )
    if has_single:  # the names come from its header, once opened
        return None, {"": SINGLE}
    what = str(src / INDEX)
    index = folder.read_json(INDEX)
    if not isinstance(index, dict):
        raise ValueError(f"{what} must be a JSON object; got {type(index).__name__}")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{what}: weight_map must be an object of tensor names to files")
    metadata = index.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ValueError(f"{what}: metadata must be an object; got {type(metadata).__name__}")
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str):
            raise ValueError(f"{what}: weight_map[{tensor!r}] must be a file name; got {shard!r}")
        plain = shard not in ("", ".", "..") and not any(c in shard for c in "/\\\0")
        if not plain:
            raise ValueError(
                f"{what}: weight_map[{tensor!r}] is {shard!r}; a shard is a file name "
                "in the folder, without a path"
            )
        if shard not in folder.files:
            raise ValueError(
                f"{what}: weight_map[{tensor!r}] names {shard!r}, which is not a file of the folder"
            )
        if shard in (CONFIG, INDEX):
            raise ValueError(f"{what}: weight_map[{tensor!r}] names {shard!r}, not a shard")
    return index, weight_map


def _check_shards(src: Path, weight_map: dict[str, str], shards: dict[str, sft.Header]) -> None:
    """Each shard holds exactly the tensors the index maps to it."""
    for name, shard in shards.items():
        named = {t for t, s in weight_map.items() if s == name}
        held = set(shard.entries)
        if named != held:
            missing, extra = sorted(named - held), sorted(held - named)
            problem = (
                f"{name} has no {missing[0]!r}, which the index maps to it"
                if missing
                else f"{name} holds {extra[0]!r}, which the index does not map to it"
            )
            raise ValueError(f"{src / INDEX}: {problem}")


def _unknown_family(src: Path, model_type: Any, key: str | None, updates: dict[str, Any]) -> None:
    if key is not None and updates:
        return
    known = ", ".join(FAMILIES)
    raise ValueError(
        f"{src / CONFIG}: model_type {model_type!r} is not one posembed knows ({known}); "
        "give key (--key) for the table and set_config (--set-config FIELD=VALUE) for "
        "the config.json field that holds its size"
    )


def _family_prefix(
    src: Path, model_type: str, family: Family, config: dict[str, Any], prefix: int | None
) -> int:
    rows = family.prefix
    why = f"{model_type}'s table starts with {rows} rows that are not positions"
    if model_type in _PADDED:
        pad = config.get("pad_token_id", 1)
        if type(pad) is not int or pad < 0:
            raise ValueError(f"{src / CONFIG}: pad_token_id must be an integer >= 0; got {pad!r}")
        rows = pad + 1
        why = f"{model_type}'s positions start after pad_token_id {pad}, at row {rows}"
    if prefix is not None and prefix != rows:
        raise ValueError(f"prefix {prefix} does not fit: {why}; leave prefix unset")
    return rows


def _section(src: Path, config: dict[str, Any], family: Family) -> dict[str, Any]:
    """The config.json object that holds ``family``'s fields."""
    if not family.section:
        return config
    value = config.get(family.section)
    if not isinstance(value, dict):
        raise ValueError(f"{src / CONFIG}: {family.section} must be an object; got {value!r}")
    return value


def _image_grid(
    src: Path, config: dict[str, Any], family: Family
) -> tuple[tuple[int, int], tuple[int, int]]:
    """((H, W) patch grid, (patch height, patch width)) from image_size and patch_size."""
    sizes = []
    part = _section(src, config, family)
    for name in ("image_size", "patch_size"):
        value = part.get(name)
        pair = [value, value] if type(value) is int else value
        where = family.field(name)
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(x) is int for x in pair)):
            raise ValueError(f"{src / CONFIG}: {where} must be an integer or [height, width]")
        if not all(x > 0 for x in pair):
            raise ValueError(f"{src / CONFIG}: {where} must be positive; got {value!r}")
        sizes.append(pair)
    (h, w), (ph, pw) = sizes
    return (h // ph, w // pw), (ph, pw)


def _family_plan(
    src: Path, model_type: str, family: Family, config: dict[str, Any], plan: Plan
) -> Plan:
    if family.grid:
        if plan.new_grid is None:
            raise ValueError(
                f"a {model_type} model's table is a patch grid: give new_grid "
                "(--new-grid HxW), not length"
            )
        if family.square and plan.new_grid[0] != plan.new_grid[1]:
            h, w = plan.new_grid
            raise ValueError(
                f"a {model_type} model takes square images only; give a square new_grid "
                f"(--new-grid {max(h, w)}x{max(h, w)}), not {h}x{w}"
            )
        grid, _ = _image_grid(src, config, family)
        if plan.grid is not None and plan.grid != grid:
            raise ValueError(
                f"grid {plan.grid[0]}x{plan.grid[1]} does not fit {src / CONFIG}, whose "
                f"{family.field('image_size')} and {family.field('patch_size')} make a "
                f"{grid[0]}x{grid[1]} grid; leave grid unset"
            )
        return dataclasses.replace(plan, grid=grid)
    if plan.new_grid is not None:
        raise ValueError(
            f"a {model_type} model's table is a sequence of positions: give length "
            "(--length T), not new_grid"
        )
    return plan


def _is_table(name: str, family: Family, table: str | None = None) -> bool:
    """Whether ``name`` is ``table`` (default: any of the family's tables)."""
    tables = (family.table, *family.more) if table is None else (table,)
    return any(name == t or name.endswith("." + t) for t in tables)


def _find_table(
    src: Path, model_type: str, family: Family, weight_map: dict[str, str], table: str
) -> str:
    found = [n for n in weight_map if _is_table(n, family, table)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise ValueError(
            f"{src}: no tensor {table!r} (or ending in '.{table}') as a "
            f"{model_type} model has; give key (--key) for the table"
        )
    raise ValueError(
        f"{src}: several tensors end in {table!r} ({', '.join(map(repr, found[:5]))}); "
        "give key (--key) for the table"
    )


def _config_changes(
    config: dict[str, Any], family: Family | None, table: NewTable, plan: Plan
) -> dict[str, tuple[Any, Any]]:
    """config.json's size fields set for ``table`` (in place); name: (old, new)."""
    changes: dict[str, tuple[Any, Any]] = {}
    if family is None:
        return changes
    positions = table.new_shape[-2] - table.prefix
    part = _section(Path(), config, family)
    if family.grid:
        assert plan.new_grid is not None
        old = part["image_size"]
        _, (ph, pw) = _image_grid(Path(), config, family)
        h, w = plan.new_grid[0] * ph, plan.new_grid[1] * pw
        value: Any = h if type(old) is int and h == w else [h, w]
    else:
        value = positions + table.prefix if family.counts_prefix else positions
    for name in family.fields + tuple(n for n in family.optional if n in part):
        dotted = family.field(name)
        changes[dotted] = (_set(config, dotted, value), value)
    return changes


def _companions(
    folder: _Folder,
    family: Family | None,
    changes: Mapping[str, tuple[Any, Any]],
    table: NewTable,
) -> tuple[dict[str, str], dict[str, tuple[Any, Any]]]:
    """The files beside config.json that hold the size just changed, with it
    changed where they hold the old one (their new text by name), and what
    changed ("file field": (old, new)). A ViT's image processor resizes and
    crops to ``image_size``; a text model's tokenizer truncates at its
    positions. A value that is not the old size is someone's choice: kept."""
    texts: dict[str, str] = {}
    also: dict[str, tuple[Any, Any]] = {}
    if family is None:
        return texts, also
    if family.grid:
        name = PROCESSOR
        image_size = family.field("image_size")
        if name not in folder.files or image_size not in changes:
            return texts, also
        old, new = (_pair(v) for v in changes[image_size])
        data = folder.read_json(name)
        if not isinstance(data, dict):
            return texts, also
        crop = _resized(data.get("crop_size"), old, new)
        size = _resized(data.get("size"), old, new)
        if crop is not None and size is None:
            # resized, then cropped to the model's size (DeiT's 256 then 224,
            # CLIP's shortest edge 224 then 224): the resize keeps its ratio to the crop
            size = _scaled(data.get("size"), old, new)
        for field, value in (("crop_size", crop), ("size", size)):
            if value is not None:
                also[f"{name} {field}"] = (data[field], value)
                data[field] = value
        if also:
            texts[name] = _json_text(data, f"{folder.path / name} with the new size")
        return texts, also
    # the tokenizer's longest input, the decoder's longest generation: where
    # they were the model's positions, they follow them
    old_positions = table.entry.shape[-2] - table.prefix
    new_positions = table.new_shape[-2] - table.prefix
    for name, field in ((TOKENIZER, "model_max_length"), (GENERATION, "max_length")):
        if name not in folder.files:
            continue
        data = folder.read_json(name)
        if not isinstance(data, dict) or type(data.get(field)) is not int:
            continue
        if data[field] != old_positions:
            continue
        also[f"{name} {field}"] = (old_positions, new_positions)
        data[field] = new_positions
        texts[name] = _json_text(data, f"{folder.path / name} with the new size")
    return texts, also


def _pair(value: Any) -> tuple[int, int]:
    """An image size as (height, width): config.json's int or [h, w]."""
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _resized(value: Any, old: tuple[int, int], new: tuple[int, int]) -> Any:
    """An image processor's size field set to ``new`` if it is ``old``
    (an int, or a height and width), in the form it had; None otherwise."""
    if type(value) is int and (value, value) == old:
        return new[0] if new[0] == new[1] else {"height": new[0], "width": new[1]}
    if isinstance(value, dict) and (value.get("height"), value.get("width")) == old:
        return {**value, "height": new[0], "width": new[1]}
    return None


def _scaled(value: Any, old: tuple[int, int], new: tuple[int, int]) -> Any:
    """A size field scaled by new / old (rounded), in the form it had; None
    for a form it cannot scale. A shortest edge grows by the larger of the
    two ratios, so that the crop still fits in the resized image."""
    if type(value) is int and old[0] == old[1] and new[0] == new[1]:
        return round(value * new[0] / old[0])
    if isinstance(value, dict) and set(value) == {"shortest_edge"}:
        edge = value["shortest_edge"]
        if type(edge) is int:
            return {"shortest_edge": round(edge * max(new[0] / old[0], new[1] / old[1]))}
        return None
    if isinstance(value, dict) and all(type(value.get(k)) is int for k in ("height", "width")):
        height = round(value["height"] * new[0] / old[0])
        return {**value, "height": height, "width": round(value["width"] * new[1] / old[1])}
    return None


def _set(config: dict[str, Any], name: str, value: Any) -> Any:
    """Set the (dotted) field ``name``; return its old value (None if it had none)."""
    *path, last = name.split(".")
    node = config
    for i, part in enumerate(path):
        child = node.get(part)
        if not isinstance(child, dict):
            where = ".".join(path[: i + 1])
            raise ValueError(f"set_config {name!r}: config.json has no object {where!r}")
        node = child
    old = node.get(last)
    node[last] = value
    return old


def _new_index(
    index: dict[str, Any], shards: dict[str, sft.Header], tables: list[NewTable]
) -> dict[str, Any]:
    """The index with its weight map as it was and the sizes of the new tensors."""
    total = sum(header.data_bytes for header in shards.values())
    total += sum(table.nbytes - table.entry.nbytes for table in tables)
    metadata = dict(index.get("metadata", {}))
    metadata["total_size"] = total
    count = metadata.get("total_parameters")
    if type(count) is int:
        for table in tables:
            count += math.prod(table.new_shape) - math.prod(table.entry.shape)
        metadata["total_parameters"] = count
    return {**index, "metadata": metadata}


def _json_text(value: Any, what: str) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except TypeError as exc:  # a value JSON has no form for
        raise TypeError(f"{what} cannot be written as JSON: {exc}") from None
    except ValueError:  # json's message names no value
        raise ValueError(f"{what} cannot be written: a value is NaN or infinite") from None


def _copy(folder: _Folder, name: str, tmp: Path, size: int | None = None) -> None:
    """File ``name`` of the folder copied into ``tmp``; ``size``: the size it must have."""
    fd = folder.open(name)
    try:
        now = os.fstat(fd).st_size
        if size is not None and now != size:
            raise ValueError(f"{folder.path / name}: the file changed while reading")
        with open(tmp / name, "xb", buffering=0) as out:
            sft.copy_file(fd, out, folder.path / name, now)
    finally:
        os.close(fd)
