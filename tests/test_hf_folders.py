"""`posembed resize` and resize_checkpoint on a Hugging Face model folder.

The folder tests build folders with the safetensors package's NumPy writer (no
PyTorch): the index rewritten, the other files copied, config.json updated,
and bad folders refused with one line and exit status 2. The model tests build
tiny random models with transformers (no download), save them whole and
sharded, resize them and load the result with ``from_pretrained``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import posembed
import posembed.io._safetensors as sft
from posembed import cli, resize_checkpoint

from .conftest import assert_same, normal_table, torch_or_skip

D = 8
MAX = "max_position_embeddings"


def write_folder(
    path: Path,
    config: dict[str, Any],
    tensors: dict[str, np.ndarray],
    shards: int = 1,
    extra: dict[str, bytes] | None = None,
) -> Path:
    """A model folder as save_pretrained writes it: config.json, the weights
    (model.safetensors, or ``shards`` files and the index), other files."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config, indent=2))
    if shards == 1:
        save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    else:
        weight_map = {}
        for i, group in enumerate(np.array_split(np.array(list(tensors)), shards)):
            name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            save_file({n: tensors[n] for n in group}, str(path / name), metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(group.tolist(), name))
        index = {
            "metadata": {
                "total_parameters": sum(a.size for a in tensors.values()),
                "total_size": sum(a.nbytes for a in tensors.values()),
            },
            "weight_map": weight_map,
        }
        (path / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    for name, data in (extra or {}).items():
        (path / name).write_bytes(data)
    return path


def gpt2_folder(tmp_path: Path, rng: np.random.Generator, shards: int = 3, **kw: Any) -> Path:
    config = {"model_type": "gpt2", "n_positions": 16, "n_ctx": 16, "n_embd": D, "n_layer": 1}
    tensors = {
        "transformer.wte.weight": normal_table(rng, 20, D, np.float32),
        "transformer.wpe.weight": normal_table(rng, 16, D, np.float32),
        "transformer.h.0.mlp.c_fc.weight": normal_table(rng, D, 4 * D, np.float32),
        "transformer.h.0.mlp.c_fc.bias": normal_table(rng, 1, 4 * D, np.float16)[0],
        "transformer.ln_f.weight": np.ones(D, np.float32),
    }
    return write_folder(tmp_path / "gpt2", config, tensors, shards, **kw)


def resize_cli(*args: object) -> int:
    return cli.main(["resize", *map(str, args)])


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def all_tensors(folder: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for path in folder.glob("*.safetensors"):
        out.update(load_file(str(path)))
    return out


def index_of(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "model.safetensors.index.json").read_text())


# -- folders, without PyTorch -------------------------------------------------------------


def test_a_sharded_folder_resized_by_the_command(tmp_path, rng, capsys):
    extra = {
        "tokenizer.json": b'{"model": {}}',
        "generation_config.json": b'{"bos_token_id": 1}',
        "README.md": b"# tiny\n",
        ".gitattributes": b"*.safetensors filter=lfs\n",
        "pytorch_model.bin": b"old weights",
    }
    src = gpt2_folder(tmp_path, rng, shards=3, extra=extra)
    (src / "onnx").mkdir()
    (src / "onnx" / "model.onnx").write_bytes(b"old graph")
    before = files_of(src)
    dst = tmp_path / "gpt2-24"
    assert resize_cli(src, "--length", 24, "-o", dst) == 0
    printed = capsys.readouterr().out
    assert printed == (
        "resized transformer.wpe.weight (F32) in model-00001-of-00003.safetensors: "
        "(16, 8) -> (24, 8) by interpolate (align=scale); config.json: n_positions 16 -> 24, "
        f"n_ctx 16 -> 24; not copied: onnx/, pytorch_model.bin; wrote {dst}\n"
    )
    assert files_of(src) == before  # the input is never modified
    after = files_of(dst)
    kept = set(before) - {"pytorch_model.bin"}
    assert set(after) == kept  # the marker is in .cache/huggingface, not beside the model
    assert not (dst / "onnx").exists()
    for name in ("tokenizer.json", "generation_config.json", "README.md", ".gitattributes"):
        assert after[name] == before[name]
    for shard in ("model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"):
        assert after[shard] == before[shard]  # byte for byte, header included

    old, new = all_tensors(src), all_tensors(dst)
    assert set(new) == set(old)
    table = "transformer.wpe.weight"
    assert_same(new[table], posembed.interpolate(old[table], 24))
    for name in old.keys() - {table}:
        assert_same(new[name], old[name])
    with safe_open(str(dst / "model-00001-of-00003.safetensors"), "np") as f:
        assert f.metadata() == {"format": "pt"}

    index, old_index = index_of(dst), index_of(src)
    assert index["weight_map"] == old_index["weight_map"]
    assert index["metadata"]["total_size"] == sum(a.nbytes for a in new.values())
    assert index["metadata"]["total_parameters"] == sum(a.size for a in new.values())
    config = json.loads((dst / "config.json").read_text())
    old_config = json.loads((src / "config.json").read_text())
    assert config == {**old_config, "n_positions": 24, "n_ctx": 24}
    assert list(config) == list(old_config)  # the fields keep their order


def test_a_single_file_folder_by_the_function(tmp_path, rng):
    config = {"model_type": "bert", "max_position_embeddings": 12, "hidden_size": D}
    tensors = {
        "embeddings.position_embeddings.weight": normal_table(rng, 12, D, np.float32),
        "embeddings.word_embeddings.weight": normal_table(rng, 30, D, np.float32),
    }
    src = write_folder(tmp_path / "bert", config, tensors)
    dst = tmp_path / "out"
    result = resize_checkpoint(src, dst, length=20, init="tile")
    assert result.key == "embeddings.position_embeddings.weight"
    assert result.shard == "model.safetensors"
    assert result.config == {"max_position_embeddings": (12, 20)}
    assert result.new_shape == (20, D)
    assert result.output == dst
    assert sorted(p.name for p in dst.iterdir()) == [
        ".cache",
        "config.json",
        "model.safetensors",
    ]
    new = load_file(str(dst / "model.safetensors"))
    table = tensors["embeddings.position_embeddings.weight"]
    assert_same(new["embeddings.position_embeddings.weight"][:12], table)  # trained rows kept
    assert_same(
        new["embeddings.position_embeddings.weight"], posembed.extend(table, 20, init="tile")
    )
    assert json.loads((dst / "config.json").read_text())["max_position_embeddings"] == 20


@pytest.mark.parametrize(
    ("model_type", "name", "pad", "field_value"),
    [
        ("roberta", "roberta.embeddings.position_embeddings.weight", None, 2 + 30),
        ("xlm-roberta", "roberta.embeddings.position_embeddings.weight", 1, 2 + 30),
        ("camembert", "roberta.embeddings.position_embeddings.weight", 1, 2 + 30),
        ("roberta", "embeddings.position_embeddings.weight", 0, 1 + 30),
        ("opt", "model.decoder.embed_positions.weight", 1, 30),
    ],
)
def test_offset_rows_are_kept_and_counted_as_the_family_counts_them(
    tmp_path, rng, model_type, name, pad, field_value
):
    rows = 2 if pad is None else pad + 1
    if model_type == "opt":
        rows = 2  # OPT's offset does not follow pad_token_id
    config: dict[str, Any] = {"model_type": model_type, "max_position_embeddings": 20}
    if pad is not None:
        config["pad_token_id"] = pad
    table = normal_table(rng, rows + 20, D, np.float32)
    src = write_folder(tmp_path / "m", config, {name: table, "other": np.zeros(3, np.int64)})
    result = resize_checkpoint(src, tmp_path / "out", length=30)
    assert result.prefix == rows
    new = load_file(str(tmp_path / "out" / "model.safetensors"))[name]
    assert new.shape == (rows + 30, D)
    assert_same(new[:rows], table[:rows])
    assert_same(new[rows:], posembed.interpolate(table[rows:], 30))
    config_out = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config_out["max_position_embeddings"] == field_value
    # a prefix that contradicts the family's is refused
    with pytest.raises(ValueError, match=f"prefix 0 does not fit: {model_type}'s"):
        resize_checkpoint(src, tmp_path / "out2", length=30, prefix=0)
    assert not (tmp_path / "out2").exists()


@pytest.mark.parametrize(
    ("model_type", "name", "field"),
    [
        ("gpt_neo", "transformer.wpe.weight", MAX),
        (
            "distilbert",
            "distilbert.embeddings.position_embeddings.weight",
            "max_position_embeddings",
        ),
        ("electra", "electra.embeddings.position_embeddings.weight", "max_position_embeddings"),
        ("whisper", "model.decoder.embed_positions.weight", "max_target_positions"),
    ],
)
def test_more_text_families_are_known(tmp_path, rng, capsys, model_type, name, field):
    config = {"model_type": model_type, field: 20}
    table = normal_table(rng, 20, D, np.float32)
    tensors = {name: table, "model.encoder.embed_positions.weight": table[:12] + 1}
    generation = {"max_length": 20, "num_beams": 1}
    extra = {"generation_config.json": json.dumps(generation).encode()}
    src = write_folder(tmp_path / "m", config, tensors, extra=extra)
    assert resize_cli(src, "--length", 32, "-o", tmp_path / "out") == 0
    printed = capsys.readouterr().out
    assert f"config.json: {field} 20 -> 32" in printed
    # the longest generation was the positions: it follows them
    assert "generation_config.json max_length 20 -> 32" in printed
    new = load_file(str(tmp_path / "out" / "model.safetensors"))
    assert_same(new[name], posembed.interpolate(table, 32))
    assert_same(new["model.encoder.embed_positions.weight"], table[:12] + 1)  # not this one
    assert json.loads((tmp_path / "out" / "config.json").read_text())[field] == 32
    got = json.loads((tmp_path / "out" / "generation_config.json").read_text())
    assert got == {"max_length": 32, "num_beams": 1}


@pytest.mark.parametrize("model_type", ["bart", "mbart"])
def test_bart_s_encoder_and_decoder_tables_are_resized_alike(tmp_path, rng, capsys, model_type):
    config = {"model_type": model_type, "max_position_embeddings": 20}
    enc, dec = "model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"
    tensors = {
        enc: normal_table(rng, 22, D, np.float32),
        "model.shared.weight": normal_table(rng, 30, D, np.float32),
        dec: normal_table(rng, 22, D, np.float32),
    }
    src = write_folder(tmp_path / "m", config, tensors, shards=3)  # each table its own shard
    assert resize_cli(src, "--length", 32, "-o", tmp_path / "out") == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"resized {enc} (F32) in model-00001-of-00003.safetensors: ")
    assert (
        f"(22, 8) -> (34, 8) by interpolate (align=scale), 2 prefix rows kept; {dec} the same"
        in printed
    )
    assert "config.json: max_position_embeddings 20 -> 32" in printed
    new = all_tensors(tmp_path / "out")
    for name in (enc, dec):
        want = np.concatenate([tensors[name][:2], posembed.interpolate(tensors[name][2:], 32)])
        assert_same(new[name], want)
    assert_same(new["model.shared.weight"], tensors["model.shared.weight"])
    index = index_of(tmp_path / "out")
    assert index["metadata"]["total_size"] == sum(a.nbytes for a in new.values())
    assert index["metadata"]["total_parameters"] == sum(a.size for a in new.values())
    # naming either table resizes both; the result names the one asked for first
    result = resize_checkpoint(src, tmp_path / "o2", dec, 24)
    assert (result.key, result.others) == (enc, (dec,))
    assert all_tensors(tmp_path / "o2")[dec].shape == (26, D)
    # one table in one shard with the other: the file holds both, resized
    single = write_folder(tmp_path / "one", config, tensors)
    resize_checkpoint(single, tmp_path / "o3", length=24, init="edge")
    both = load_file(str(tmp_path / "o3" / "model.safetensors"))
    assert both[enc].shape == both[dec].shape == (26, D)
    assert_same(both[dec][:22], tensors[dec])
    assert_same(both["model.shared.weight"], tensors["model.shared.weight"])


@pytest.mark.parametrize(
    ("model_type", "prefix", "processor", "want"),
    [
        # CLIP: the shortest edge resized to 32, then cropped to 32: both follow
        (
            "clip",
            1,
            {"size": {"shortest_edge": 32}, "crop_size": {"height": 32, "width": 32}},
            {"size": {"shortest_edge": 48}, "crop_size": {"height": 48, "width": 48}},
        ),
        ("siglip", 0, {"size": {"height": 32, "width": 32}}, {"size": {"height": 48, "width": 48}}),
        ("clip_vision_model", 1, None, None),
        ("siglip_vision_model", 0, None, None),
    ],
)
def test_a_vision_tower_takes_its_grid_from_vision_config(
    tmp_path, rng, capsys, model_type, prefix, processor, want
):
    tower = model_type.endswith("_vision_model")  # saved alone, its names unprefixed
    name = "embeddings.position_embedding.weight"
    name = name if tower else f"vision_model.{name}"
    table = normal_table(rng, prefix + 16, D, np.float32)
    vision = {"image_size": 32, "patch_size": 8}
    config = {"model_type": model_type, **vision} if tower else {"model_type": model_type}
    if not tower:
        config |= {"vision_config": vision, "text_config": {"max_position_embeddings": 20}}
    other = "encoder.layers.0.bias" if tower else "text_model.embeddings.position_embedding.weight"
    text = {other: normal_table(rng, 20, D, np.float32)}
    extra = (
        {} if processor is None else {"preprocessor_config.json": json.dumps(processor).encode()}
    )
    src = write_folder(tmp_path / "m", config, {name: table, **text}, extra=extra)
    dst = tmp_path / "out"
    assert resize_cli(src, "--new-grid", "6x6", "-o", dst) == 0
    field = "image_size" if tower else "vision_config.image_size"
    assert f"config.json: {field} 32 -> 48" in capsys.readouterr().out
    new = load_file(str(dst / "model.safetensors"))
    assert_same(new[name], posembed.resample_grid(table, (4, 4), (6, 6), prefix=prefix))
    assert_same(new[other], text[other])  # the text positions are not the vision tower's
    written = json.loads((dst / "config.json").read_text())
    assert (written if tower else written["vision_config"])["image_size"] == 48
    if not tower:
        assert written["text_config"] == {"max_position_embeddings": 20}
    if want is not None:
        assert json.loads((dst / "preprocessor_config.json").read_text()) == want
    # these models take square images only: a list image_size would not load
    assert resize_cli(src, "--new-grid", "6x5", "-o", tmp_path / "o2") == 2
    assert "takes square images only; give a square new_grid" in capsys.readouterr().err
    # a vision_config that is no object is named
    if not tower:
        (src / "config.json").write_text(json.dumps({"model_type": model_type, "vision_config": 3}))
        with pytest.raises(ValueError, match="vision_config must be an object; got 3"):
            resize_checkpoint(src, tmp_path / "o3", new_grid=(6, 6))
    assert not (tmp_path / "o2").exists()
    assert not (tmp_path / "o3").exists()


@pytest.mark.parametrize(
    ("model_type", "prefix", "image_size", "patch", "new_grid", "want_size"),
    [
        ("vit", 1, 32, 8, (6, 6), 48),
        ("deit", 2, 32, 8, (3, 5), [24, 40]),
        ("vit", 1, [32, 24], [8, 4], (2, 3), [16, 12]),
    ],
)
def test_a_vit_grid_comes_from_the_config(
    tmp_path, rng, model_type, prefix, image_size, patch, new_grid, want_size
):
    sizes = [image_size] * 2 if isinstance(image_size, int) else image_size
    patches = [patch] * 2 if isinstance(patch, int) else patch
    grid = (sizes[0] // patches[0], sizes[1] // patches[1])
    name = f"{model_type}.embeddings.position_embeddings"
    table = normal_table(rng, prefix + grid[0] * grid[1], D, np.float32)[None]
    config = {"model_type": model_type, "image_size": image_size, "patch_size": patch}
    src = write_folder(tmp_path / "m", config, {name: table})
    dst = tmp_path / "out"
    assert resize_cli(src, "--new-grid", f"{new_grid[0]}x{new_grid[1]}", "-o", dst) == 0
    new = load_file(str(dst / "model.safetensors"))[name]
    want = posembed.resample_grid(table[0], grid, new_grid, prefix=prefix)[None]
    assert_same(new, want)
    assert json.loads((dst / "config.json").read_text())["image_size"] == want_size


def test_the_tokenizer_truncates_at_the_new_length(tmp_path, rng, capsys):
    # a tokenizer whose longest input was the model's positions follows them;
    # its other fields, and a length someone chose, are kept
    config = {"model_type": "gpt2", "n_positions": 16, "n_embd": D}
    tensors = {"wpe.weight": normal_table(rng, 16, D, np.float32)}
    tokenizer = {"model_max_length": 16, "padding_side": "left"}
    extra = {"tokenizer_config.json": json.dumps(tokenizer).encode()}
    src = write_folder(tmp_path / "m", config, tensors, extra=extra)
    assert resize_cli(src, "--length", 40, "-o", tmp_path / "out") == 0
    assert "tokenizer_config.json model_max_length 16 -> 40" in capsys.readouterr().out
    got = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert got == {"model_max_length": 40, "padding_side": "left"}

    chosen = {"model_max_length": 8}
    (src / "tokenizer_config.json").write_text(json.dumps(chosen))
    assert resize_cli(src, "--length", 40, "-o", tmp_path / "out2") == 0
    assert "tokenizer_config.json" not in capsys.readouterr().out
    assert json.loads((tmp_path / "out2" / "tokenizer_config.json").read_text()) == chosen


@pytest.mark.parametrize(
    ("model_type", "prefix", "processor", "want"),
    [
        # ViT: resized to the model's input size
        ("vit", 1, {"size": {"height": 32, "width": 32}}, {"size": {"height": 48, "width": 48}}),
        ("vit", 1, {"size": 32, "do_resize": True}, {"size": 48, "do_resize": True}),
        # DeiT: resized to 36, then cropped to the model's 32: the crop follows
        # the model, the resize keeps its ratio to the crop
        (
            "deit",
            2,
            {"size": {"height": 36, "width": 36}, "crop_size": {"height": 32, "width": 32}},
            {"size": {"height": 54, "width": 54}, "crop_size": {"height": 48, "width": 48}},
        ),
        # a shortest edge is someone's choice: kept
        ("vit", 1, {"size": {"shortest_edge": 40}}, {"size": {"shortest_edge": 40}}),
    ],
)
def test_the_image_processor_follows_the_new_image_size(
    tmp_path, rng, model_type, prefix, processor, want
):
    name = f"{model_type}.embeddings.position_embeddings"
    table = normal_table(rng, prefix + 16, D, np.float32)[None]
    config = {"model_type": model_type, "image_size": 32, "patch_size": 8}
    extra = {"preprocessor_config.json": json.dumps(processor).encode()}
    src = write_folder(tmp_path / "m", config, {name: table}, extra=extra)
    assert resize_cli(src, "--new-grid", "6x6", "-o", tmp_path / "out") == 0
    assert json.loads((tmp_path / "out" / "preprocessor_config.json").read_text()) == want


def test_a_link_to_a_folder_outside_is_skipped_as_folders_are(tmp_path, rng, capsys):
    # nothing under a folder is read, so where its link points does not matter
    src = gpt2_folder(tmp_path, rng, shards=1)
    (tmp_path / "elsewhere").mkdir()
    (src / "cache").symlink_to(tmp_path / "elsewhere")
    assert resize_cli(src, "--length", 24, "-o", tmp_path / "out") == 0
    assert "not copied: cache/" in capsys.readouterr().out
    assert not (tmp_path / "out" / "cache").exists()


def test_set_config_for_another_model(tmp_path, rng, capsys):
    config = {"model_type": "mystery", "text_config": {"max_len": 10}, "name": "x"}
    table = normal_table(rng, 10, D, np.float32)
    src = write_folder(tmp_path / "m", config, {"pos.weight": table})
    dst = tmp_path / "out"
    argv = [src, "--key", "pos.weight", "--length", 16, "-o", dst]
    sets = ["--set-config", "text_config.max_len=16", "--set-config", "name=long"]
    assert resize_cli(*argv, *sets, "--set-config", "sizes=[1, 2]") == 0
    assert "config.json: text_config.max_len 10 -> 16" in capsys.readouterr().out
    written = json.loads((dst / "config.json").read_text())
    assert written == {
        "model_type": "mystery",
        "text_config": {"max_len": 16},
        "name": "long",
        "sizes": [1, 2],
    }
    # without --set-config the table would not load: refused
    assert resize_cli(*argv[:-2], "-o", tmp_path / "o2") == 2
    err = capsys.readouterr().err
    assert "model_type 'mystery' is not one posembed knows" in err
    assert err.count("\n") == 1
    # a set_config overrides a known family's field, and says what it was
    gpt2 = gpt2_folder(tmp_path, rng, shards=1)
    result = resize_checkpoint(gpt2, tmp_path / "o3", length=24, set_config={"n_ctx": 2048})
    assert result.config == {"n_positions": (16, 24), "n_ctx": (16, 2048)}
    # another table of a known model: its size field must be named
    wte = "transformer.wte.weight"
    with pytest.raises(ValueError, match="is not the position table of a gpt2 model"):
        resize_checkpoint(gpt2, tmp_path / "o4", wte, 24)
    result = resize_checkpoint(gpt2, tmp_path / "o5", wte, 24, set_config={"vocab_size": 24})
    assert result.config == {"vocab_size": (None, 24)}
    assert json.loads((tmp_path / "o5" / "config.json").read_text())["n_positions"] == 16
    with pytest.raises(ValueError, match="a value is NaN or infinite"):
        resize_checkpoint(gpt2, tmp_path / "o4", length=24, set_config={"x": float("nan")})
    with pytest.raises(TypeError, match="cannot be written as JSON"):
        resize_checkpoint(gpt2, tmp_path / "o4", length=24, set_config={"x": object()})
    with pytest.raises(ValueError, match=r"config\.json has no object 'nope'"):
        resize_checkpoint(gpt2, tmp_path / "o4", length=24, set_config={"nope.x": 1})
    with pytest.raises(TypeError, match="set_config must be a mapping"):
        resize_checkpoint(gpt2, tmp_path / "o4", length=24, set_config=["x=1"])  # type: ignore[arg-type]
    assert not (tmp_path / "o4").exists()


def test_set_config_values_are_json_literals(tmp_path, rng, capsys):
    src = gpt2_folder(tmp_path, rng, shards=1)
    values = {
        "use_cache": ("True", True),
        "a": ("true", True),
        "b": ("False", False),
        "c": ("None", None),
        "d": ("null", None),
        "e": ("1", 1),
        "f": ("2.5", 2.5),
        "g": ('"text"', "text"),
        "h": ('"True"', "True"),  # quoted: the text itself
        "i": ("gelu_new", "gelu_new"),  # a plain word stays text
        "j": ("NaN", "NaN"),  # no JSON number: text
        "k": ("", ""),
        "l": ("x=y", "x=y"),
    }
    sets = [f"--set-config={name}={raw}" for name, (raw, _) in values.items()]
    assert resize_cli(src, "--length", 20, *sets, "-o", tmp_path / "out") == 0
    printed = capsys.readouterr().out
    assert "use_cache null -> true" in printed  # as config.json spells them
    assert 'h null -> "True"' in printed
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert {name: config[name] for name in values} == {n: v for n, (_, v) in values.items()}
    text = (tmp_path / "out" / "config.json").read_text()
    assert '"use_cache": true' in text
    assert '"c": null' in text


def test_force_replaces_only_a_model_folder_posembed_wrote(tmp_path, rng, capsys):
    src = gpt2_folder(tmp_path, rng)
    dst = tmp_path / "out"
    assert resize_cli(src, "--length", 20, "-o", dst) == 0
    assert resize_cli(src, "--length", 24, "-o", dst) == 2
    assert f"{dst} exists; pass --force to replace it" in capsys.readouterr().err
    assert resize_cli(src, "--length", 24, "--force", "-o", dst) == 0
    assert json.loads((dst / "config.json").read_text())["n_positions"] == 24
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        resize_checkpoint(src, dst, length=24)
    # a model folder posembed did not write (the source itself, a copy of it) is never replaced
    (tmp_path / "x").mkdir()
    other = gpt2_folder(tmp_path / "x", rng)
    assert resize_cli(src, "--length", 24, "--force", "-o", other) == 2
    err = capsys.readouterr().err
    assert "a folder posembed did not write (no .cache/huggingface/posembed.json" in err
    assert resize_cli(src, "--length", 24, "--force", "-o", src) == 2
    assert "would replace the input" in capsys.readouterr().err
    # a file is never replaced by a folder, whatever --force
    (tmp_path / "file").write_bytes(b"precious")
    for force in ((), ("--force",)):
        assert resize_cli(src, "--length", 24, *force, "-o", tmp_path / "file") == 2
        assert "is a file, not a folder posembed wrote" in capsys.readouterr().err
    assert (tmp_path / "file").read_bytes() == b"precious"
    # chunk's markers do not make a folder posembed's model folder
    (other / "meta.json").write_text("{}")
    assert resize_cli(src, "--length", 24, "--force", "-o", other) == 2
    capsys.readouterr()


def test_an_upload_to_the_hub_leaves_the_marker_out(tmp_path, rng, capsys):
    from huggingface_hub import CommitOperationAdd
    from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects

    src = gpt2_folder(tmp_path, rng, shards=1, extra={"README.md": b"# tiny\n"})
    dst = tmp_path / "out"
    assert resize_cli(src, "--length", 20, "-o", dst) == 0
    written = sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file())
    assert written == [
        ".cache/huggingface/.gitignore",
        ".cache/huggingface/posembed.json",
        "README.md",
        "config.json",
        "model.safetensors",
    ]
    # what upload_folder (and `hf upload`) lists from a folder: its patterns
    listed = list(filter_repo_objects(written, ignore_patterns=DEFAULT_IGNORE_PATTERNS))
    assert listed == ["README.md", "config.json", "model.safetensors"]
    # and the Hub client refuses a commit under .cache, named or not
    with pytest.raises(ValueError, match=r"cannot update files under a '\.cache/' folder"):
        CommitOperationAdd(".cache/huggingface/posembed.json", str(dst / written[1]))
    assert (dst / ".cache" / "huggingface" / ".gitignore").read_text() == "*\n"

    # the marker still lets --force replace the folder; resizing the output
    # again copies neither it nor the Hub client's folder, and says nothing of them
    assert resize_cli(src, "--length", 24, "--force", "-o", dst) == 0
    assert resize_cli(dst, "--length", 28, "-o", tmp_path / "again") == 0
    assert "not copied" not in capsys.readouterr().out
    assert json.loads((tmp_path / "again" / "config.json").read_text())["n_positions"] == 28


def test_force_recognises_the_marker_only_inside_the_folder(tmp_path, rng, capsys):
    src = gpt2_folder(tmp_path, rng, shards=1)
    # the marker the first versions wrote, at the top: still posembed's folder,
    # and never copied into a new one
    old = tmp_path / "old"
    old.mkdir()
    (old / ".posembed.json").write_text('{"written_by": "posembed resize"}')
    assert resize_cli(src, "--length", 20, "--force", "-o", old) == 0
    assert not (old / ".posembed.json").exists()
    assert (old / ".cache" / "huggingface" / "posembed.json").is_file()
    shutil.copy(src / "config.json", old / ".posembed.json")  # as if an old resize wrote it
    assert resize_cli(old, "--length", 24, "-o", tmp_path / "from-old") == 0
    assert not (tmp_path / "from-old" / ".posembed.json").exists()
    capsys.readouterr()
    # a .cache (or .cache/huggingface) that links elsewhere is not followed to a marker
    theirs = tmp_path / "marked"
    (theirs / "huggingface").mkdir(parents=True)
    (theirs / "huggingface" / "posembed.json").write_text("{}")
    for link_at in (".cache", ".cache/huggingface"):
        victim = tmp_path / f"victim-{link_at.count('/')}"
        (victim / link_at).parent.mkdir(parents=True, exist_ok=True)
        (victim / link_at).symlink_to(theirs if link_at == ".cache" else theirs / "huggingface")
        (victim / "precious.txt").write_text("keep")
        assert resize_cli(src, "--length", 24, "--force", "-o", victim) == 2
        assert "a folder posembed did not write" in capsys.readouterr().err
        assert (victim / "precious.txt").read_text() == "keep"
    # a .cache file in the source is no model file: not copied
    (src / ".cache").write_text("x")
    assert resize_cli(src, "--length", 24, "-o", tmp_path / "o2") == 0
    assert "not copied: .cache" in capsys.readouterr().out
    assert (tmp_path / "o2" / ".cache").is_dir()


def test_a_failure_while_writing_leaves_no_output(tmp_path, rng, monkeypatch):
    src = gpt2_folder(tmp_path, rng, extra={"tokenizer.json": b"{}"})
    calls = []

    def broken(*args: Any) -> None:
        calls.append(args)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sft, "copy_file", broken)
    with pytest.raises(OSError, match="No space left"):
        resize_checkpoint(src, tmp_path / "out", length=24)
    assert calls
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpt2"]  # no temporary folder either


def test_links_inside_the_folder_and_into_the_hf_cache_are_followed(tmp_path, rng):
    # the Hugging Face cache: snapshots/<revision>/<name> -> ../../blobs/<hash>
    built = gpt2_folder(tmp_path, rng, extra={"tokenizer.json": b"{}"})
    repo = tmp_path / "models--tiny"
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for path in built.iterdir():
        blob = repo / "blobs" / f"hash-{path.name}"
        blob.write_bytes(path.read_bytes())
        (snapshot / path.name).symlink_to(Path("..", "..", "blobs", blob.name))
    (snapshot / "vocab.txt").symlink_to("tokenizer.json")  # a link within the folder
    dst = tmp_path / "out"
    resize_checkpoint(snapshot, dst, length=24)
    assert not any(p.is_symlink() for p in dst.iterdir())  # the files, not links, are written
    assert (dst / "vocab.txt").read_bytes() == b"{}"
    assert_same(
        all_tensors(dst)["transformer.wpe.weight"],
        posembed.interpolate(all_tensors(built)["transformer.wpe.weight"], 24),
    )


def bad_index(text: str) -> Any:
    return lambda src: (src / "model.safetensors.index.json").write_text(text)


def edit_index(change: Any) -> Any:
    def edit(src: Path) -> None:
        index = index_of(src)
        change(index)
        (src / "model.safetensors.index.json").write_text(json.dumps(index))

    return edit


def link_out(src: Path) -> None:
    secret = src.parent / "secret.txt"
    secret.write_text("key")
    (src / "tokenizer.json").symlink_to(secret)


def add_fifo(src: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no os.mkfifo on this system")  # Windows; every POSIX host runs it
    os.mkfifo(src / "tokenizer.json")


def remove(name: str) -> Any:
    return lambda src: (src / name).unlink()


def both_weights(src: Path) -> None:
    save_file({"a": np.zeros(2, np.float32)}, str(src / "model.safetensors"))


MODEL_00001 = "model-00001-of-00003.safetensors"


@pytest.mark.parametrize(
    ("spoil", "args", "text"),
    [
        (remove("config.json"), (), "a model folder holds config.json; there is none"),
        (
            lambda src: [p.unlink() for p in src.glob("model*")],
            (),
            "holds model.safetensors or model.safetensors.index.json; neither is there",
        ),
        (both_weights, (), "holds both model.safetensors and model.safetensors.index.json"),
        (
            edit_index(lambda i: i["weight_map"].update({"transformer.wpe.weight": "../x"})),
            (),
            "weight_map['transformer.wpe.weight'] is '../x'; a shard is a file name",
        ),
        (
            edit_index(lambda i: i["weight_map"].update({"transformer.wpe.weight": "/etc/x"})),
            (),
            "a shard is a file name in the folder, without a path",
        ),
        (
            edit_index(lambda i: i["weight_map"].update({"transformer.wpe.weight": "gone"})),
            (),
            "names 'gone', which is not a file of the folder",
        ),
        (
            edit_index(lambda i: i["weight_map"].pop("transformer.wpe.weight")),
            (),
            f"{MODEL_00001} holds 'transformer.wpe.weight', which the index does not map to it",
        ),
        (
            edit_index(lambda i: i["weight_map"].update({"ghost": MODEL_00001})),
            (),
            f"{MODEL_00001} has no 'ghost', which the index maps to it",
        ),
        (bad_index('{"weight_map": {}, "weight_map": {}}'), (), "duplicate key 'weight_map'"),
        (bad_index("[" * 5000 + "]" * 5000), (), "nests 5000 levels deep"),
        (bad_index('{"metadata": {"total_size": NaN}}'), (), "NaN is not JSON"),
        (bad_index("[]"), (), "must be a JSON object; got list"),
        (bad_index('{"weight_map": []}'), (), "weight_map must be an object"),
        (bad_index('{"weight_map": {"a": 3}}'), (), "weight_map['a'] must be a file name"),
        (
            lambda src: (src / "config.json").write_text('{"model_type": "gpt2", "a": Infinity}'),
            (),
            "Infinity is not JSON",
        ),
        (link_out, (), "is a symbolic link to"),
        (add_fifo, (), "tokenizer.json is a FIFO, not a regular file"),
        (
            lambda src: None,
            ("--key", "transformer.wpe"),
            "no tensor named 'transformer.wpe' in the checkpoint; close names: 'transformer.wpe.",
        ),
        (
            lambda src: (src / "config.json").write_text('{"model_type": "bert"}'),
            (),
            "no tensor 'embeddings.position_embeddings.weight' (or ending in",
        ),
        (lambda src: None, ("--prefix", "1"), "prefix 1 does not fit: gpt2's table"),
        (lambda src: None, ("--new-grid", "4x4"), "give length (--length T), not new_grid"),
    ],
)
def test_a_bad_folder_is_one_line_and_exit_2(tmp_path, rng, capsys, spoil, args, text):
    src = gpt2_folder(tmp_path, rng)
    spoil(src)
    before = sorted(os.listdir(tmp_path))
    length = () if "--new-grid" in args else ("--length", 24)
    assert resize_cli(src, *length, *args, "-o", tmp_path / "out") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("posembed resize: error: ")
    assert captured.err.count("\n") == 1  # one line, no traceback
    assert text in captured.err, captured.err
    assert sorted(os.listdir(tmp_path)) == before  # no output, no temporary folder


def test_a_vit_given_length_and_a_contradicting_grid(tmp_path, rng):
    config = {"model_type": "vit", "image_size": 16, "patch_size": 4}
    table = normal_table(rng, 17, D, np.float32)[None]
    src = write_folder(tmp_path / "vit", config, {"vit.embeddings.position_embeddings": table})
    with pytest.raises(ValueError, match="patch grid: give new_grid"):
        resize_checkpoint(src, tmp_path / "out", length=30)
    with pytest.raises(ValueError, match="grid 2x8 does not fit"):
        resize_checkpoint(src, tmp_path / "out", new_grid=(8, 8), grid=(2, 8))
    with pytest.raises(ValueError, match="set_config applies to a model folder"):
        resize_checkpoint(src / "model.safetensors", tmp_path / "o.st", "x", 3, set_config={})
    with pytest.raises(TypeError, match="key must be a str naming the table"):
        resize_checkpoint(src / "model.safetensors", tmp_path / "o.st", length=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vit"]


# -- real models, loaded by transformers ------------------------------------------------------


def tiny_model(family: str) -> tuple[Any, dict[str, Any]]:
    """A tiny random model of ``family`` and the resize that lengthens it."""
    import transformers as tf

    text = {"num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 32}
    text |= {"intermediate_size": 37, "vocab_size": 99}
    if family == "gpt2":
        config = tf.GPT2Config(n_layer=1, n_head=2, n_embd=32, n_positions=64, vocab_size=99)
        config.bos_token_id = config.eos_token_id = 0
        return tf.GPT2LMHeadModel(config), {"length": 96, "init": "edge"}
    if family == "bert":
        return tf.BertModel(tf.BertConfig(max_position_embeddings=64, **text)), {"length": 96}
    if family == "gpt_neo":
        config = tf.GPTNeoConfig(
            num_layers=1, num_heads=2, hidden_size=32, attention_types=[[["global"], 1]],
            max_position_embeddings=64, vocab_size=99, bos_token_id=0, eos_token_id=0,
        )  # fmt: skip
        return tf.GPTNeoForCausalLM(config), {"length": 96, "init": "edge"}
    if family == "distilbert":
        config = tf.DistilBertConfig(
            n_layers=1, n_heads=2, dim=32, hidden_dim=37, vocab_size=99,
            max_position_embeddings=64,
        )  # fmt: skip
        return tf.DistilBertForMaskedLM(config), {"length": 96}
    if family == "electra":
        config = tf.ElectraConfig(max_position_embeddings=64, embedding_size=16, **text)
        return tf.ElectraForPreTraining(config), {"length": 96, "init": "tile"}
    if family == "camembert":
        config = tf.CamembertConfig(max_position_embeddings=66, pad_token_id=1, **text)
        return tf.CamembertForMaskedLM(config), {"length": 96}
    if family == "xlm-roberta":
        config = tf.XLMRobertaConfig(max_position_embeddings=66, pad_token_id=1, **text)
        return tf.XLMRobertaForMaskedLM(config), {"length": 96, "init": "interpolate"}
    if family in ("bart", "mbart"):
        make = tf.BartConfig if family == "bart" else tf.MBartConfig
        config = make(
            vocab_size=99, d_model=32, encoder_layers=1, decoder_layers=1,
            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=37,
            decoder_ffn_dim=37, max_position_embeddings=64, pad_token_id=1, bos_token_id=0,
            eos_token_id=2, decoder_start_token_id=2,
        )  # fmt: skip
        model = (tf.BartForConditionalGeneration if family == "bart" else tf.MBartModel)(config)
        return model, {"length": 96, "init": "tile"}
    if family == "whisper":
        config = tf.WhisperConfig(
            vocab_size=99, num_mel_bins=8, d_model=32, encoder_layers=1, decoder_layers=1,
            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=37,
            decoder_ffn_dim=37, max_source_positions=16, max_target_positions=64,
            pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=0,
        )  # fmt: skip
        return tf.WhisperForConditionalGeneration(config), {"length": 96}
    if family == "roberta":
        config = tf.RobertaConfig(max_position_embeddings=66, **text)
        return tf.RobertaForMaskedLM(config), {"length": 96, "init": "tile"}
    if family == "opt":
        config = tf.OPTConfig(
            num_hidden_layers=1, num_attention_heads=2, hidden_size=32, ffn_dim=37,
            max_position_embeddings=64, vocab_size=99, word_embed_proj_dim=32,
        )  # fmt: skip
        return tf.OPTForCausalLM(config), {"length": 96, "init": "interpolate"}
    vision = {k: v for k, v in text.items() if k != "vocab_size"}
    vision |= {"image_size": 32, "patch_size": 8}
    if family == "vit":
        return tf.ViTModel(tf.ViTConfig(**vision)), {"new_grid": (6, 5)}
    if family == "clip":
        config = tf.CLIPConfig(
            text_config={**text, "max_position_embeddings": 20, "bos_token_id": 0,
                         "eos_token_id": 2, "pad_token_id": 1},
            vision_config=vision, projection_dim=16,
        )  # fmt: skip
        return tf.CLIPModel(config), {"new_grid": (6, 6)}
    if family == "clip_vision_model":
        return tf.CLIPVisionModel(tf.CLIPVisionConfig(**vision)), {"new_grid": (5, 5)}
    if family == "siglip":
        config = tf.SiglipConfig(
            text_config={**text, "max_position_embeddings": 20}, vision_config=vision
        )
        return tf.SiglipModel(config), {"new_grid": (6, 6)}
    if family == "deit":
        config = tf.DeiTConfig(**vision)
        return tf.DeiTForImageClassificationWithTeacher(config), {"new_grid": (3, 3)}
    assert family == "siglip_vision_model"
    return tf.SiglipVisionModel(tf.SiglipVisionConfig(**vision)), {"new_grid": (5, 5)}


@pytest.mark.parametrize(
    ("family", "sharded", "by_command"),
    [
        ("gpt2", True, True),
        ("bert", False, False),
        ("roberta", True, False),
        ("opt", True, True),
        ("vit", True, True),
        ("deit", False, False),
        ("gpt_neo", False, True),
        ("distilbert", False, False),
        ("electra", True, False),
        ("camembert", False, True),
        ("xlm-roberta", True, False),
        ("whisper", True, True),
        ("bart", True, True),
        ("mbart", False, False),
        ("clip", True, True),
        ("clip_vision_model", False, True),
        ("siglip", True, False),
        ("siglip_vision_model", False, False),
    ],
)
def test_from_pretrained_loads_the_resized_folder(
    tmp_path, monkeypatch, family, sharded, by_command
):
    torch = torch_or_skip()  # CI reruns this file with PyTorch required
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    torch.manual_seed(0)
    model, resize = tiny_model(family)
    src, dst = tmp_path / "src", tmp_path / "dst"
    model.save_pretrained(src, max_shard_size="20KB" if sharded else "1GB")
    assert (src / "model.safetensors.index.json").exists() == sharded
    import transformers as tf

    if family == "vit":  # an image processor saved beside it, sized for the model
        tf.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(src)
    if family == "clip":  # CLIP's resizes the shortest edge, then crops
        crop = {"height": 32, "width": 32}
        tf.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size=crop).save_pretrained(src)
    if by_command:
        options = [f"--{k.replace('_', '-')}={v}" for k, v in resize.items() if k != "new_grid"]
        if "new_grid" in resize:
            options.append("--new-grid={}x{}".format(*resize["new_grid"]))
        assert resize_cli(src, *options, "-o", dst) == 0
    else:
        resize_checkpoint(src, dst, **resize)
    loaded, info = type(model).from_pretrained(dst, output_loading_info=True)
    assert not info["missing_keys"]
    assert not info["unexpected_keys"]
    assert not info["mismatched_keys"]
    assert not info.get("error_msgs")

    old = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    new = {k: v.detach().numpy() for k, v in loaded.state_dict().items()}
    tables = [k for k in old if old[k].shape != new[k].shape]
    # BART's encoder and decoder each have a table, resized alike
    assert len(tables) == (2 if family in ("bart", "mbart") else 1)
    for key in old.keys() - set(tables):
        assert_same(new[key], old[key])
    for key in tables[1:]:  # the other table: its 2 offset rows, then its positions extended
        assert new[key].shape == new[tables[0]].shape
        want = np.concatenate([old[key][:2], posembed.extend(old[key][2:], 96, init="tile")])
        assert_same(new[key], want)
    name = tables[0]
    table, grown = old[name], new[name]
    if "new_grid" in resize:
        prefix = 1 if family in ("vit", "clip", "clip_vision_model") else 0
        prefix = 2 if family == "deit" else prefix
        rows = table.reshape(-1, table.shape[-1])
        grid = posembed.resample_grid(rows, (4, 4), resize["new_grid"], prefix=prefix)
        assert_same(grown, grid.reshape(*table.shape[:-2], -1, table.shape[-1]))
    else:
        rows = table.shape[0]
        assert grown.shape[0] == rows + 96 - 64
        if "init" in resize:
            assert_same(grown[:rows], table)  # every trained row kept bit for bit

    with torch.no_grad():
        pair = family in ("clip", "siglip")  # a text and a vision tower
        text = {"input_ids": torch.randint(3, 99, (1, 20))} if pair else {}
        if family in ("vit", "clip"):  # the folder's own processor makes the model's input size
            processor = tf.AutoImageProcessor.from_pretrained(dst)
            image = np.zeros((40, 50, 3), np.uint8)
            pixels = processor(images=image, return_tensors="pt").pixel_values
            assert pixels.shape[-2:] == tuple(8 * n for n in resize["new_grid"])
            loaded(pixel_values=pixels, **text)
        if "new_grid" in resize:
            h, w = resize["new_grid"]
            loaded(pixel_values=torch.randn(1, 3, 8 * h, 8 * w), **text)
        elif family == "whisper":  # the decoder takes all its new positions
            features = torch.randn(1, 8, 32)
            loaded(input_features=features, decoder_input_ids=torch.randint(3, 99, (1, 96)))
        else:
            loaded(input_ids=torch.randint(3, 99, (1, 96)))
