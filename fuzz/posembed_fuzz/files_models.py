"""A Hugging Face model folder (config.json, model.safetensors or shards and
model.safetensors.index.json, a tokenizer file) for resize_checkpoint and
`posembed resize SRC_DIR`, of a known model_type, written with the
safetensors package's NumPy writer, then given defects (now and then kept as
the Hugging Face cache keeps it: links into its blobs). A valid folder must
be accepted, and its output load with safetensors, with the table at the new
shape, config.json's size field set, the index's total_size right and every
other tensor equal; a crafted one refused with a documented exception (exit
2 and one line from the command), never read through a link out of the
folder or blocked on a FIFO.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import posembed

from .common import INF, NAN, Reader, _run, _short
from .files_common import (
    Crafted,
    Obj,
    Raw,
    _blocked,
    _clear,
    _cli,
    _files_failure,
    _json,
    _json_text_defect,
    _judge,
    _judge_cli,
    _left_behind,
    _strict_header,
    _watched,
)

safetensors_numpy: Any
try:
    import safetensors.numpy as safetensors_numpy
except ImportError:  # the files mode then leaves model folders out
    safetensors_numpy = None

HF_TYPES = ["gpt2", "bert", "roberta", "opt", "vit", "bart", "clip"]
MF_DEFECTS = ["config text", "config field", "model_type", "index text", "weight_map"]
MF_DEFECTS += ["metadata", "symlink out", "fifo", "missing shard", "shard mismatch", "both"]
MF_DEFECTS += ["shard bytes", "set_config", "key", "escape"]
MF_ESCAPES = ["../outside.safetensors", "ABSOLUTE", "sub/x.safetensors", "", ".", "..", "a\\b"]
MF_ESCAPES += ["config.json", "model.safetensors.index.json", "nope.safetensors"]


@dataclass
class ModelFolder:
    """A crafted model folder and what a resize of it must give."""

    crafted: Crafted
    key: str  # the table's full name
    tensors: dict[str, np.ndarray]
    table_shape: tuple[int, ...]  # expected after the resize
    fields: dict[str, Any]  # config.json fields expected after the resize
    sharded: bool
    length: int | None
    new_grid: tuple[int, int] | None
    give_key: bool
    set_config: dict[str, Any] | None
    cli_set_config: list[str]
    more: tuple[str, ...] = ()  # other tables resized alike (BART's decoder's)


def _model_folder(r: Reader, root: Path) -> ModelFolder:
    rng = r.rng()
    model_type = r.pick(HF_TYPES)
    d = r.int(1, 4)
    dtype = r.pick([np.float32, np.float16, np.float64])
    tensors: dict[str, np.ndarray] = {}
    config = Obj([("model_type", model_type)])
    n = r.int(1, 9)
    length: int | None = n
    new_grid: tuple[int, int] | None = None
    fields: dict[str, Any] = {}
    more: tuple[str, ...] = ()
    if model_type == "gpt2":
        p = r.int(1, 8)
        key = r.pick(["wpe.weight", "transformer.wpe.weight"])
        shape: tuple[int, ...] = (p, d)
        config.pairs += [("n_positions", p), ("n_embd", d)]
        if r.chance(2):
            config.pairs.append(("n_ctx", p))
            fields["n_ctx"] = n
        fields["n_positions"] = n
        table_shape: tuple[int, ...] = (n, d)
    elif model_type in ("bert", "roberta"):
        key = r.pick(["", "bert.", "roberta."]) + "embeddings.position_embeddings.weight"
        pre = 2 if model_type == "roberta" else 0
        p = r.int(1, 8)
        shape = (pre + p, d)
        config.pairs.append(("max_position_embeddings", pre + p))
        if model_type == "roberta":
            config.pairs.append(("pad_token_id", 1))
        fields["max_position_embeddings"] = pre + n
        table_shape = (pre + n, d)
    elif model_type == "opt":
        key = r.pick(["", "model."]) + "decoder.embed_positions.weight"
        p = r.int(1, 8)
        shape = (2 + p, d)
        config.pairs.append(("max_position_embeddings", p))
        fields["max_position_embeddings"] = n
        table_shape = (2 + n, d)
    elif model_type == "bart":  # two tables, the encoder's and the decoder's
        model = r.pick(["", "model."])
        key = model + "encoder.embed_positions.weight"
        more = (model + "decoder.embed_positions.weight",)
        p = r.int(1, 8)
        shape = (2 + p, d)
        config.pairs.append(("max_position_embeddings", p))
        fields["max_position_embeddings"] = n
        table_shape = (2 + n, d)
    elif model_type == "clip":  # the vision tower's grid, its size in vision_config
        key = "vision_model.embeddings.position_embedding.weight"
        g, ps = r.int(1, 4), r.int(1, 4)
        shape = (1 + g * g, d)
        config.pairs.append(("vision_config", Obj([("image_size", g * ps), ("patch_size", ps)])))
        k = r.int(1, 5)
        length, new_grid = None, (k, k)  # CLIP takes square images only
        fields["vision_config"] = {"image_size": k * ps, "patch_size": ps}
        table_shape = (1 + k * k, d)
    else:
        key = r.pick(["", "vit."]) + "embeddings.position_embeddings"
        g, ps = r.int(1, 4), r.int(1, 4)
        shape = (1, 1 + g * g, d)
        config.pairs += [("image_size", g * ps), ("patch_size", ps)]
        length, new_grid = None, (r.int(1, 5), r.int(1, 5))
        h, w = new_grid[0] * ps, new_grid[1] * ps
        fields["image_size"] = h if h == w else [h, w]
        table_shape = (1, 1 + new_grid[0] * new_grid[1], d)
    config.pairs.append(("hidden_size", d))
    tensors[key] = rng.standard_normal(shape).astype(dtype)
    for name in more:
        tensors[name] = rng.standard_normal(shape).astype(dtype)
    for i in range(r.int(0, 4)):
        kind = r.pick(["<f4", "<i8", "<f2", "|u1"])
        rows = r.int(0, 5)
        tensors[f"layer.{i}.w"] = (rng.standard_normal((rows, d)) * 9).astype(kind)
    folder = root / "model"
    folder.mkdir()
    crafted = Crafted("model folder", folder, [])
    names = list(tensors)
    rng.shuffle(names)
    sharded = r.chance(2)
    shard_of: dict[str, str] = {}
    if sharded:
        count = r.int(1, min(3, len(names)))
        cuts = sorted(rng.choice(range(1, len(names)), count - 1, replace=False).tolist())
        groups = np.split(np.array(names, dtype=object), cuts)
        for k, group in enumerate(groups):
            shard = f"model-{k + 1:05d}-of-{count:05d}.safetensors"
            for name in group:
                shard_of[str(name)] = shard
    else:
        shard_of = dict.fromkeys(names, "model.safetensors")
    shard_names = list(dict.fromkeys(shard_of.values()))
    for shard in shard_names:
        part = {n: tensors[n] for n in names if shard_of[n] == shard}
        safetensors_numpy.save_file(part, str(folder / shard), metadata={"format": "pt"})
    total = sum(t.nbytes for t in tensors.values())
    metadata = Obj([("total_size", total)])
    index = Obj([("metadata", metadata), ("weight_map", Obj(list(shard_of.items())))])
    (folder / "tokenizer.json").write_text('{"version": "1.0"}')
    # the first shard as written: what copies of it hold, whatever the defects did to it
    first_shard = (folder / shard_names[0]).read_bytes()
    (root / "outside.safetensors").write_bytes(first_shard)
    give_key = r.chance(4)
    set_config: dict[str, Any] | None = None
    cli_set_config: list[str] = []
    config_text: str | None = None
    index_text: str | None = None
    for _ in range(r.pick([0, 0, 1, 1, 1, 2, 3])):
        defect = r.pick(MF_DEFECTS)
        where = ""
        if defect == "config text":
            config_text, where = _json_text_defect(r, config)
        elif defect == "config field":
            name = r.pick(["image_size", "patch_size", "pad_token_id", "n_positions", "n_ctx"])
            value = r.pick([None, "x", -1, 0, 2**64, 1.5, [1], [1, 2, 3], [0, 2], True])
            value = r.pick([value, Raw("1e999"), Obj([]), [Raw("NaN"), 1]])
            if value is None:
                config.drop(name)
            elif any(k == name for k, _ in config.pairs):
                config.set(name, value)
            else:
                config.pairs.append((name, value))
            where = f"{name} {'missing' if value is None else _short(_json(value), 20)}"
        elif defect == "model_type":
            value = r.pick([None, "llama", "", 5, Raw("null"), "GPT2", ["gpt2"], "gpt2 "])
            value = r.pick([value, r.pick([t for t in HF_TYPES if t != model_type])])
            if value is None:
                config.drop("model_type")
            else:
                config.set("model_type", value)
            where = "missing" if value is None else _json(value)
        elif defect == "index text" and sharded:
            index_text, where = _json_text_defect(r, index)
        elif defect == "weight_map" and sharded:
            weights: Any = next((v for k, v in index.pairs if k == "weight_map"), None)
            how = r.pick(["missing", "empty", "list", "null", "value", "extra", "drop"])
            if how in ("value", "extra", "drop") and not isinstance(weights, Obj):
                continue
            if how == "missing":
                index.drop("weight_map")
            elif how in ("empty", "list", "null"):
                index.set("weight_map", {"empty": Obj([]), "list": [], "null": None}[how])
            elif how == "value":
                victim = r.pick(names)
                weights.set(victim, r.pick([5, None, [shard_of[victim]], Obj([])]))
            elif how == "extra":
                weights.pairs.append(("ghost", shard_names[0]))
            else:
                weights.drop(r.pick(names))
            where = how
        elif defect == "escape" and sharded:
            weights = next((v for k, v in index.pairs if k == "weight_map"), None)
            if not isinstance(weights, Obj):
                continue
            value = r.pick(MF_ESCAPES)
            if value == "ABSOLUTE":
                value = str(root / "outside.safetensors")
            if value == "sub/x.safetensors":
                (folder / "sub").mkdir(exist_ok=True)
                (folder / "sub" / "x.safetensors").write_bytes(first_shard)
            weights.set(r.pick(names), value)
            crafted.escapes = True
            where = repr(value)
        elif defect == "metadata" and sharded:
            how = r.pick(["total_size lie", "not object", "total_parameters", "extra"])
            if how == "total_size lie":
                metadata.set("total_size", r.pick([0, -1, 2**70, "x", 1.5, total + 8]))
            elif how == "not object":
                index.set("metadata", r.pick([[], "x", 5]))
            elif how == "total_parameters":
                metadata.pairs.append(("total_parameters", r.pick([1, -5, "x", 2**70])))
            else:
                metadata.pairs.append(("format", "pt"))
            where = how
        elif defect == "symlink out":
            victim = folder / r.pick(shard_names)
            if not victim.is_symlink() and victim.is_file():
                shutil.copy(victim, root / "outside.safetensors")
                victim.unlink()
                victim.symlink_to(
                    r.pick([root / "outside.safetensors", Path("../outside.safetensors")])
                )
                crafted.escapes = True
        elif defect == "fifo":
            victim = folder / r.pick([*shard_names, "config.json", "tokenizer.json", "index"])
            if victim.name == "index":
                victim = folder / "model.safetensors.index.json"
                if not sharded:
                    continue
            where = victim.name
            _clear(victim)
            os.mkfifo(victim)
            crafted.fifos.append(victim)
        elif defect == "missing shard":
            victim = folder / r.pick(shard_names)
            where = victim.name
            _clear(victim)
        elif defect == "shard mismatch" and sharded and len(shard_names) > 1:
            victim = r.pick(shard_names)
            held = {n: tensors[n] for n in names if shard_of[n] == victim}
            how = r.pick(["extra", "missing", "renamed"])
            if how == "extra":
                held["ghost"] = np.zeros(2, np.float32)
            elif how == "missing":
                held.pop(next(iter(held)))
            else:
                first = next(iter(held))
                held["x" + first] = held.pop(first)
            if (folder / victim).is_file() and not (folder / victim).is_symlink():
                safetensors_numpy.save_file(held, str(folder / victim))
            where = f"{victim} {how}"
        elif defect == "both":
            if (folder / "model.safetensors").exists():
                index_text = _json(Obj([("weight_map", Obj([(key, "model.safetensors")]))]))
                sharded = True
            elif sharded:
                (folder / "model.safetensors").write_bytes(first_shard)
            else:
                index_text = _json(Obj([("weight_map", Obj([(key, "model.safetensors")]))]))
                sharded = True
        elif defect == "shard bytes":
            victim = folder / r.pick(shard_names)
            if victim.is_file() and not victim.is_symlink() and victim.stat().st_size:
                blob = bytearray(victim.read_bytes())
                how = r.pick(["cut", "flip", "garbage", "empty"])
                if how == "cut":
                    blob = blob[: r.int(0, len(blob) - 1)]
                elif how == "flip":
                    for _ in range(r.int(1, 3)):
                        blob[r.int(0, len(blob) - 1)] ^= 1 << r.int(0, 7)
                elif how == "garbage":
                    blob = bytearray(rng.bytes(r.int(0, 64)))
                else:
                    blob = bytearray()
                victim.write_bytes(bytes(blob))
                where = f"{victim.name} {how}"
        elif defect == "set_config":
            how = r.pick(["nan", "object", "not str", "dotted", "empty part", "not mapping"])
            how = r.pick([how, "big", "text", "nested ok", "1e999"])
            cli_value = {
                "nan": "x=NaN",
                "object": "x=1",
                "not str": "=1",
                "dotted": "hidden_size.x=1",
                "empty part": "a..b=1",
                "not mapping": "x",
                "big": "x=" + "9" * 5000,
                "text": "x=[1, ",
                "nested ok": "model_type=gpt2",
                "1e999": "x=1e999",
            }[how]
            cli_set_config.append(cli_value)
            api_value: Any = {
                "nan": {"x": NAN},
                "object": {"x": object()},
                "not str": {5: 1},
                "dotted": {"hidden_size.x": 1},
                "empty part": {"a..b": 1},
                "not mapping": [("x", 1)],
                "big": {"x": 10**5000},
                "text": {"x": "[1, "},
                "nested ok": {"model_type": "gpt2"},
                "1e999": {"x": INF},
            }[how]
            set_config = api_value
            where = how
        elif defect == "key":
            give_key = True
            key = r.pick(["nope", "", "layer.0.w", key + " ", key.upper()])
            where = repr(key)
        else:
            continue
        crafted.planted.append(f"folder:{defect}" + (f" ({where})" if where else ""))
    if not (folder / "config.json").is_fifo():
        text = config_text if config_text is not None else _json(config)
        (folder / "config.json").write_bytes(text.encode("utf-8", "surrogatepass"))
    index_path = folder / "model.safetensors.index.json"
    if sharded and not index_path.is_fifo():
        text = index_text if index_text is not None else _json(index)
        index_path.write_bytes(text.encode("utf-8", "surrogatepass"))
    if r.chance(4):  # as the Hugging Face cache keeps it: links to ../../blobs
        crafted.path = _as_cached(folder, root)
        crafted.fifos = [crafted.path / f.name for f in crafted.fifos]
        crafted.note = "cached "
    crafted.fifos = [f for f in crafted.fifos if f.is_fifo()]
    crafted.note += f"{model_type} {shape} {np.dtype(dtype).name} in {len(shard_names)} file(s)"
    return ModelFolder(
        crafted,
        key,
        tensors,
        table_shape,
        fields,
        sharded,
        length,
        new_grid,
        give_key,
        set_config,
        cli_set_config,
        more,
    )


def _as_cached(folder: Path, root: Path) -> Path:
    """The folder moved to models--m/snapshots/rev of a Hugging Face cache, each
    regular file a relative link to its blob (links and FIFOs kept as they are)."""
    repo = root / "models--m"
    snapshot = repo / "snapshots" / "rev"
    (repo / "blobs").mkdir(parents=True)
    snapshot.parent.mkdir()
    shutil.move(folder, snapshot)
    for path in sorted(snapshot.iterdir()):
        if path.is_file() and not path.is_symlink():
            blob = hashlib.sha1(path.name.encode()).hexdigest()
            shutil.move(path, repo / "blobs" / blob)
            path.symlink_to(Path("../../blobs") / blob)
    return snapshot


# What resize_checkpoint documents for a model folder: a bad folder is a
# ValueError, a missing config.json or weights FileNotFoundError, a bad
# argument TypeError.
MF_ALLOWED = (ValueError, TypeError, FileNotFoundError)


def _resized_folder_problem(m: ModelFolder, dst: Path) -> str | None:
    """Why the output folder of an accepted resize is wrong, or None."""
    loaded: dict[str, np.ndarray] = {}
    for path in sorted(dst.glob("*.safetensors")):
        problem = _strict_header(path)
        if problem is not None:
            return f"{path.name}: a header the format refuses: {problem}"
        loaded.update(safetensors_numpy.load_file(str(path)))
    if m.crafted.planted:
        return None  # what a crafted folder that was accepted gives is not known here
    for key in (m.key, *m.more):
        if key not in loaded:
            return f"the table {key!r} is not in the output"
        if loaded[key].shape != m.table_shape:
            return f"the table {key!r} has shape {loaded[key].shape}, expected {m.table_shape}"
    for name, tensor in m.tensors.items():
        if name in (m.key, *m.more):
            continue
        if name not in loaded or loaded[name].tobytes() != tensor.tobytes():
            return f"tensor {name!r} differs from the input's"
    config = json.loads((dst / "config.json").read_text())
    for name, value in m.fields.items():
        if config.get(name) != value:
            return f"config.json {name} is {config.get(name)!r}, expected {value!r}"
    if m.sharded:
        index = json.loads((dst / "model.safetensors.index.json").read_text())
        total = sum(t.nbytes for t in loaded.values())
        if index["metadata"]["total_size"] != total:
            return f"total_size {index['metadata']['total_size']}, the tensors hold {total}"
        for name, shard in index["weight_map"].items():
            if name not in safetensors_numpy.load_file(str(dst / shard)):
                return f"the index maps {name!r} to {shard}, which does not hold it"
    if (dst / "tokenizer.json").read_text() != '{"version": "1.0"}':
        return "tokenizer.json was not copied"
    return None


def _files_model_folder(r: Reader, root: Path) -> str:
    m = _model_folder(r, root)
    crafted = m.crafted
    dst = root / "out"
    key = m.key if m.give_key else None
    # a link that escapes must still be refused after the move into a cache
    if crafted.path.name == "rev":  # a link that escapes is still refused in a cache
        blobs = root / "models--m" / "blobs"
        crafted.escapes = crafted.escapes or any(
            p.is_symlink() and not p.resolve().is_relative_to(blobs) for p in crafted.path.iterdir()
        )
    if r.chance(2):
        reader = "resize_checkpoint"
        kw: dict[str, Any] = {"new_grid": m.new_grid}
        if m.set_config is not None:
            kw["set_config"] = m.set_config
        (_, exc), blocked = _watched(
            crafted,
            lambda: _run(
                lambda pos, k: posembed.resize_checkpoint(crafted.path, dst, key, m.length, **k),
                [],
                kw,
            ),
        )
        if blocked:
            return _blocked(crafted, "folder", reader)
        kind = _judge(crafted, reader, exc, MF_ALLOWED)
        accepted = exc is None
    else:
        reader = "posembed resize"
        argv = ["resize", str(crafted.path), "-o", str(dst)]
        argv += ["--length", str(m.length)] if m.new_grid is None else []
        argv += [] if m.new_grid is None else ["--new-grid", "{}x{}".format(*m.new_grid)]
        argv += [] if key is None else ["--key", key]
        for value in m.cli_set_config:
            argv += ["--set-config", value]
        how = "usage" if any(v.startswith("=") or "=" not in v for v in m.cli_set_config) else ""
        done, blocked = _watched(crafted, lambda: _cli(argv))
        if blocked:
            return _blocked(crafted, "folder", reader)
        kind = _judge_cli(crafted, argv, how or "one line", done=done)
        accepted = done[0] == 0 and done[2] is None
    if accepted:
        if crafted.escapes:
            kind = _files_failure(crafted, reader, "outside", f"{reader} read a shard outside")
        elif crafted.fifos:
            kind = _files_failure(crafted, reader, "fifo", f"{reader} accepted a FIFO")
        else:
            try:
                problem = _resized_folder_problem(m, dst)
            except Exception as raised:  # reading what it wrote must work
                problem = f"reading the output raised {type(raised).__name__}: {raised}"
            if problem is not None:
                kind = _files_failure(crafted, reader, "output", f"{reader}: {problem}")
    elif dst.exists():
        kind = _files_failure(crafted, reader, "partial", f"{reader} refused but wrote {dst}")
    kind = _left_behind(crafted, reader, root, kind)
    return f"files folder {reader}: {kind}"
