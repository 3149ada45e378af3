"""resize_checkpoint: a position table inside a safetensors file or a model
folder, resized into a copy."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from posembed.checkpoint._model_folder import resize_folder
from posembed.checkpoint._table import ResizeResult, _check_paths, _plan, resize_table, write
from posembed.io import _safetensors as sft
from posembed.kernels import _validate as v


def resize_checkpoint(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    key: str | None = None,
    length: int | None = None,
    *,
    init: str | None = None,
    align: str | None = None,
    prefix: int | None = None,
    seed: int | None = None,
    grid: tuple[int, int] | None = None,
    new_grid: tuple[int, int] | None = None,
    method: str | None = None,
    antialias: bool = False,
    set_config: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> ResizeResult:
    """Resize the position table ``key`` of a safetensors checkpoint; copy the rest.

    The fix for "size mismatch for position_embeddings" when a model is loaded
    at a longer context than it was trained for. Only the header and the one
    table are read into memory; every other tensor's bytes are streamed to the
    output a few megabytes at a time, so checkpoints larger than memory work.

    ``src`` is a safetensors file, or a Hugging Face model folder: config.json
    and model.safetensors, or shards listed by model.safetensors.index.json.
    A folder's output is a folder that ``from_pretrained`` loads at the new
    size: the file holding the table is resized, the other shards and files
    are copied, the index's ``total_size`` is updated, and so is config.json
    (see ``set_config``).

    Parameters
    ----------
    src : path
        The safetensors checkpoint, or the model folder, to read; it is never
        modified.
    dst : path
        The file (the folder, for a model folder) to write. The output is
        written to a temporary name in the same folder and renamed into place
        once complete, so after any error ``dst`` is as it was (absent, or
        untouched).
    key : str, optional
        Name of the table: a tensor of shape (rows, d), or (1, ..., 1, rows, d)
        as timm's ViT ``pos_embed`` (1, N, d), whose leading 1s are kept. Its
        dtype must be F16, BF16 (needs ``ml_dtypes``), F32 or F64. Required
        for a file; for a model folder of a known ``model_type`` (gpt2,
        gpt_neo, bert, distilbert, electra, roberta, xlm-roberta, camembert,
        opt, bart, mbart, whisper, vit, deit, clip, siglip and their vision
        towers alone) the table is found by its name in that family (BART's
        encoder's and decoder's both, resized alike).
    length : int, optional
        Position rows in the result, ``prefix`` rows not counted: the output
        table has ``prefix + length`` rows. For RoBERTa (514 rows = 2 + 512),
        ``prefix=2, length=1024`` gives 1026 rows. Give either ``length`` (a
        1-D sequence of positions) or ``new_grid`` (a ViT's 2-D patch grid). A length equal to the
        current ``rows - prefix`` copies the table unchanged (the output file
        is still written; all its tensors equal the input's).
    init : {"interpolate", "tile", "edge", "random", "zeros"}, optional
        Unset: the position rows are resampled by
        ``posembed.interpolate(rows, length, align=align or "scale")``, which
        grows or shrinks them. Set: ``posembed.extend(rows, length, init=init,
        align=align, seed=seed)``, which keeps the trained rows bit-identical
        and only grows (a shorter ``length`` is a ValueError).
    align : {"scale", "half_pixel", "corners"}, optional
        Interpolation convention (see :func:`posembed.interpolate`); default
        ``"scale"``. Applies when interpolating (``init`` unset or
        ``"interpolate"``).
    prefix : int, optional
        Leading rows that are not positions (RoBERTa's 2 padding-offset rows,
        a ViT's CLS row): copied bit-identically and not resized. The
        ``--offset`` option of ``posembed resize`` is this argument. Default
        0, or for a model folder of a known family that family's (RoBERTa
        and XLM-R: ``pad_token_id + 1``; OPT: 2; ViT: 1; DeiT: 2), which
        a given value must equal.
    seed : int, optional
        Seed of ``init="random"`` (only).
    grid : (H, W), optional
        With ``new_grid``: the patch grid the position rows form, row-major
        (``rows - prefix == H * W``). Default: the square grid, when ``rows -
        prefix`` is a square number.
    new_grid : (H', W'), optional
        Resample the position rows as an (H, W) image of d channels to (H', W')
        with :func:`posembed.resample_grid` (``prefix`` rows, such as a ViT's
        CLS row, kept); the output has ``prefix + H' * W'`` rows. Not with
        ``length`` or ``init``.
    method : {"bicubic", "bilinear"}, optional
        The grid's resampling (default ``"bicubic"``, PyTorch's); ``align``
        defaults to ``"half_pixel"`` there (PyTorch's ``align_corners=False``;
        ``"corners"`` is ``True``).
    antialias : bool
        Resample with PyTorch's antialiased filter (``F.interpolate(...,
        antialias=True)``), as timm's ``resample_abs_pos_embed`` does when it
        loads a checkpoint at another image size; for a 1-D resize, PyTorch's
        antialiased linear (:func:`posembed.interpolate` with
        ``antialias=True``). It needs ``align="half_pixel"`` (the default
        then) and applies to interpolation and grids, not to ``init``.
    set_config : mapping, optional
        A model folder's config.json fields to set, after those its family
        sets (GPT-2: ``n_positions``, and ``n_ctx`` where present; BERT:
        ``max_position_embeddings``; RoBERTa and XLM-R: the same, counting
        the prefix rows; OPT: the same, not counting them; ViT and DeiT:
        ``image_size``). A dotted name (``"text_config.max_position_embeddings"``)
        sets a field of a nested object. Required for another model type.
    overwrite : bool
        Replace ``dst`` if it is a regular file, or for a model folder a
        folder that posembed wrote (``--force`` on the command line):
        atomically, by renaming the new one onto it.

    Returns
    -------
    ResizeResult
        The key, dtype, old and new shapes, prefix, mode and output path (for
        a model folder also the shard, the config.json changes and the files
        not copied); ``str()`` of it is a one-line summary.

    Raises
    ------
    FileNotFoundError
        ``src`` or the folder of ``dst`` does not exist; a model folder has no
        config.json or no model.safetensors(.index.json).
    FileExistsError
        ``dst`` exists and ``overwrite`` is false; ``dst`` is a device, a
        FIFO, a socket or a symbolic link (only a regular file is replaced,
        or a folder posembed wrote, whatever ``overwrite``).
    IsADirectoryError
        ``dst`` is a folder and ``src`` a file.
    ValueError
        ``src`` is not a valid safetensors file (the message names the file and
        the problem), or not a valid model folder (a bad config.json or index,
        a shard outside the folder, a link out of it, a file that is no
        regular file); ``dst`` is ``src``; ``key`` is not in the file (the
        message lists the closest names); the table's shape is not (rows, d)
        with optional leading 1s; ``prefix`` leaves no position rows; a bad
        ``length``, ``init`` or ``align``; ``length`` shorter than the table
        with ``init`` set; ``align`` with an ``init`` other than
        ``"interpolate"``, ``seed`` without ``init="random"``.
    TypeError
        The table's dtype is not F16, BF16, F32 or F64; an argument of the
        wrong type (an ``overwrite`` that is not a bool included).
    ImportError
        The table is BF16 and ``ml_dtypes`` is not installed.

    Notes
    -----
    Every other tensor keeps its bytes, dtype (any, unknown ones such as
    F8_E4M3 included), shape and place in the data buffer; the header keeps
    its order and the ``__metadata__`` strings exactly; only the table's
    ``shape`` and the ``data_offsets`` of it and the tensors after it change.
    The header is padded with spaces so that the data starts 8-byte aligned,
    as the reference writer does.

    The position rows are resized as a 1-D sequence. A ViT's patch rows are a
    flattened 2-D grid: 1-D resizing does not keep their 2-D neighbourhoods, so
    resample those with :func:`posembed.resample_grid` instead.
    """
    paths: dict[str, Any] = {"src": src, "dst": dst}  # annotations are no check
    for name, path in paths.items():
        if not isinstance(path, (str, os.PathLike)):
            kind = type(path).__name__
            raise TypeError(f"{name} must be a path (str or os.PathLike); got {kind}")
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key must be a str; got {type(key).__name__} {key!r}")
    overwrite = v.flag(overwrite, "overwrite")
    prefix = None if prefix is None else v.non_negative_int(prefix, "prefix")
    plan = _plan(length, init, align, seed, grid, new_grid, method, antialias)
    src_path, dst_path = Path(src), Path(dst)
    if src_path.is_dir():
        return resize_folder(src_path, dst_path, key, plan, prefix, set_config, overwrite)
    if key is None:
        raise TypeError(
            "key must be a str naming the table of a safetensors file "
            "(only a model folder's config.json can name it); got None"
        )
    if set_config is not None:
        raise ValueError(f"set_config applies to a model folder (config.json); {src} is a file")
    _check_paths(src_path, dst_path, overwrite)

    with sft.open_file(src_path) as source:
        header = sft.read_header(source, src_path)
        table = resize_table(source, header, key, prefix or 0, plan)
        write(source.fileno(), header, table, dst_path)
    entry = table.entry
    return ResizeResult(
        key, entry.dtype, entry.shape, table.new_shape, table.prefix, table.mode, dst_path
    )
