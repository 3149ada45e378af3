"""The ``posembed`` command: bench, chunk, convert, pack, samples, resize, plot and config."""

from __future__ import annotations

import argparse
import json
import sys
from typing import NoReturn


def _one_line(message: str) -> str:
    """``message`` with every control character (line breaks included) written
    as its escape: text from a file, such as a column name, stays on one line."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in message
    )


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its error line kept to one line (its subcommands' too)."""

    def error(self, message: str) -> NoReturn:
        super().error(_one_line(message))


def _fail(command: str, message: str) -> int:
    """A runtime error: one line on stderr, exit status 2."""
    print(f"posembed {command}: error: {_one_line(message)}", file=sys.stderr)
    return 2


def _unwritable(path: str, option: str) -> str | None:
    """Why ``path`` cannot be written (checked before a long run), or None."""
    from pathlib import Path

    target = Path(path)
    if target.is_dir():
        return f"{option} {path} is a folder; give a file path"
    if not target.parent.is_dir():
        return f"{option} {path}: folder {target.parent} does not exist"
    return None


def _bench(args: argparse.Namespace) -> int:
    from posembed import bench, set_num_threads

    counts: list[int] = args.threads or []
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            args.parser.error("--plot needs matplotlib: pip install 'posembed[plot]'")
    kernels = None
    if args.only is not None:
        kernels = [k.strip() for k in args.only.split(",") if k.strip()]
        unknown = [k for k in kernels if k not in bench.BUILDERS]
        if unknown or not kernels:
            what = f"unknown kernel {unknown[0]!r}" if unknown else f"no kernel in {args.only!r}"
            args.parser.error(f"--only: {what}; choose from {', '.join(bench.BUILDERS)}")
    for path, option in ((args.json, "--json"), (args.plot, "--plot")):
        problem = None if path is None else _unwritable(path, option)
        if problem:
            return _fail("bench", problem)
    if counts:
        # the main table runs at the largest count; --threads 1,2 adds the scaling table
        try:
            set_num_threads(max(counts))
        except ValueError as exc:
            return _fail("bench", f"--threads: {exc}")
    info = bench.machine(quick=args.quick)
    if args.quick:
        info["run"] = "quick (smaller problems, 3 rounds)"

    def progress(s: str) -> None:
        print(f"  measuring {s}", file=sys.stderr)

    results = bench.run(quick=args.quick, repeat=args.repeat, progress=progress, kernels=kernels)
    scaling: list[bench.ScalingResult] = []
    if len(counts) > 1:
        reps = args.repeat or (5 if args.quick else 15)
        scaling = bench.run_scaling(
            counts, reps, quick=args.quick, progress=progress, kernels=kernels
        )
    print(bench.format_results(results, info, markdown=args.markdown))
    if scaling:
        print()
        print("thread scaling (posembed alone; speed-up = time on the first count / time):")
        print(bench.format_scaling(scaling, markdown=args.markdown))
    data = bench.to_dict(results, info, scaling)
    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump(data, f, indent=2)
        except OSError as exc:
            return _fail("bench", f"--json: cannot write {args.json}: {exc}")
        print(f"\nraw figures written to {args.json}")
    if args.plot:
        from posembed.plot import save_bench_figure

        try:
            save_bench_figure(data, args.plot)
        except (OSError, ValueError) as exc:  # ValueError: an image format matplotlib lacks
            return _fail("bench", f"--plot: cannot write {args.plot}: {exc}")
        print(f"chart written to {args.plot}")
    return 0


def _config(args: argparse.Namespace) -> int:
    from posembed import show_config

    show_config()
    return 0


def _plot_similarity(args: argparse.Namespace) -> int:
    from posembed import _npy
    from posembed.plot import save_similarity_figure

    try:
        # every header field checked (a crafted one raises ValueError naming the
        # file); a FIFO or a folder is refused, never waited on
        table = _npy.load(args.table, args.table)
    except ValueError as exc:
        args.parser.error(str(exc))
    except OSError as exc:
        args.parser.error(f"cannot read {args.table}: {exc}")
    try:
        save_similarity_figure(table, args.output, args.length, align=args.align)
    except (TypeError, ValueError) as exc:
        args.parser.error(f"{args.table}: {exc}")
    except MemoryError as exc:
        args.parser.error(f"{args.table}: not enough memory for --length {args.length}: {exc}")
    except OSError as exc:
        args.parser.error(f"cannot write {args.output}: {exc}")
    print(f"wrote {args.output}")
    return 0


def _chunk(args: argparse.Namespace) -> int:
    from posembed import set_num_threads
    from posembed._chunk import chunk_file
    from posembed._source import ChunkError

    # chunk_file picks the kernel threads itself (one beside its reading and
    # writing threads); a Dask task cuts on one, beside its worker's others
    threads = args.threads
    try:
        if args.dask is not None:
            set_num_threads(1 if threads is None else threads)
        elif threads is not None:
            set_num_threads(threads)  # checked (and set) here, for the message below
    except ValueError as exc:
        return _fail("chunk", f"--threads: {exc}")
    if args.size >= MAX_WINDOW:
        return _fail(
            "chunk", f"--size {args.size} is too large: a window must stay below 2^59 tokens"
        )
    common = {
        "size": args.size,
        "step": args.step,
        "overlap": args.overlap,
        "tail": args.tail,
        "dtype": args.dtype,
        "offsets_path": args.offsets,
        "pad_value": args.pad_value,
        "force": args.force,
        "documents": args.documents,
    }
    if args.dask is not None and (args.format != "npy" or args.column is not None):
        return _fail(
            "chunk",
            "--dask writes .npy parts from a token file; --format and --column apply without it",
        )
    try:
        if args.dask is None:
            meta = chunk_file(
                args.input,
                args.output,
                quiet=args.quiet,
                column=args.column,
                format=args.format,
                threads=threads,
                **common,
            )
        else:
            try:
                from posembed.dask import chunk_parts
            except ImportError as exc:
                return _fail("chunk", f"--dask: {exc}")
            meta = chunk_parts(
                args.input,
                args.output,
                part_tokens=args.part_tokens,
                scheduler=args.dask,
                **common,
            )
    except (ChunkError, OSError) as exc:  # an empty input or --offsets file included
        return _fail("chunk", str(exc))
    except ImportError as exc:  # pyarrow, for Arrow input or --format parquet
        return _fail("chunk", str(exc))
    except MemoryError as exc:
        return _fail("chunk", f"not enough memory for windows of --size {args.size}: {exc}")
    if not args.quiet:
        parted = "" if args.dask is None else f" ({meta['parts']} parts, on {args.dask})"
        print(
            f"{meta['windows']} windows of {meta['size']} from {meta['tokens']} tokens in "
            f"{meta['documents']} documents -> {args.output}{parted}"
        )
    return 0


def _convert(args: argparse.Namespace) -> int:
    from posembed._convert import convert_file
    from posembed._source import ChunkError

    try:
        meta = convert_file(
            args.input,
            args.output,
            dtype=args.dtype,
            offsets_path=args.offsets,
            column=args.column,
            documents=args.documents,
            append_eod=args.append_eod,
            vocab_size=args.vocab_size,
            output_dtype=args.output_dtype,
            force=args.force,
            quiet=args.quiet,
        )
    except (ChunkError, OSError, ImportError) as exc:
        return _fail("convert", str(exc))
    except MemoryError as exc:
        return _fail("convert", f"not enough memory: {exc}")
    if not args.quiet:
        print(
            f"{meta['documents']} documents, {meta['sequences']} sequences, {meta['tokens']} "
            f"tokens of {meta['dtype']} -> {args.output}.bin, {args.output}.idx"
        )
    return 0


def _pack(args: argparse.Namespace) -> int:
    from posembed._pack_output import pack_file
    from posembed._source import ChunkError

    try:
        meta = pack_file(
            args.input,
            args.output,
            size=args.size,
            strategy=args.strategy,
            split=args.split,
            shard_tokens=args.shard_tokens,
            dtype=args.dtype,
            offsets_path=args.offsets,
            pad_value=args.pad_value,
            format=args.format,
            documents=args.documents,
            column=args.column,
            force=args.force,
            quiet=args.quiet,
        )
    except (ChunkError, OSError, ImportError) as exc:
        return _fail("pack", str(exc))
    except MemoryError as exc:
        return _fail("pack", f"not enough memory: {exc}")
    if not args.quiet:
        cost = (
            f", {meta['truncated_tokens']} tokens truncated"
            if meta["truncated_tokens"]
            else f", {meta['split_documents']} documents split"
        )
        print(
            f"{meta['documents']} documents, {meta['tokens']} tokens -> {meta['rows']} rows of "
            f"{meta['size']} ({meta['fill']:.2%} full{cost}) -> {args.output}"
        )
    return 0


def _samples(args: argparse.Namespace) -> int:
    from posembed._samples_output import write_samples

    try:
        meta = write_samples(
            args.input,
            args.output,  # a str: write_samples refuses a URL, which a Path would fold
            sequence_length=args.sequence_length,
            num_samples=args.num_samples,
            num_epochs=args.epochs,
            seed=args.seed,
            add_extra_token_to_sequence=not args.no_extra_token,
            separate_final_epoch={"auto": None, "yes": True, "no": False}[
                args.separate_final_epoch
            ],
            documents=args.documents,
            force=args.force,
        )
    except (ValueError, OSError) as exc:  # ChunkError (a ValueError) above all
        return _fail("samples", str(exc))
    except MemoryError as exc:
        return _fail("samples", f"not enough memory: {exc}")
    print(
        f"{meta['samples']} samples of {meta['sequence_length']} tokens over "
        f"{meta['num_epochs']} epochs of {meta['elements']} {meta['unit']} -> {args.output}"
    )
    return 0


# A window of --size tokens, 8 bytes each at most, must stay below 2^62 bytes
# (the sizes the kernels index with int64).
MAX_WINDOW = 2**59


def _resize(args: argparse.Namespace) -> int:
    from pathlib import Path

    from posembed._checkpoint import resize_checkpoint
    from posembed._model_folder import written_by_posembed

    def fail(message: str) -> int:
        return _fail("resize", message)

    if (args.length is None) == (args.new_grid is None):
        args.parser.error("give --length T (position rows) or --new-grid HxW (a ViT's patch grid)")
    folder = Path(args.src).is_dir()
    if not folder and args.key is None:
        args.parser.error("--key is required for a safetensors file (a model folder may omit it)")
    if not folder and args.set_config:
        args.parser.error("--set-config applies to a model folder (config.json) only")
    out = Path(args.output)
    # only a regular file, or a model folder posembed wrote, is ever replaced:
    # anything else is refused by name below
    ours = written_by_posembed(out) if folder else out.is_file()
    if not args.force and not out.is_symlink() and ours:
        return fail(f"{out} exists; pass --force to replace it")
    try:
        result = resize_checkpoint(
            args.src,
            out,
            args.key,
            args.length,
            init=args.init,
            align=args.align,
            prefix=args.prefix,
            seed=args.seed,
            grid=args.grid,
            new_grid=args.new_grid,
            method=args.method,
            antialias=args.antialias,
            set_config=dict(args.set_config) if folder and args.set_config else None,
            overwrite=args.force,
        )
    except (ImportError, MemoryError, OSError, TypeError, ValueError) as exc:
        return fail(str(exc))
    print(f"resized {result}")
    return 0


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {n}")
    return n


MAX_REPEAT = 1000


def _repeat(text: str) -> int:
    """A round count in 1..MAX_REPEAT: a larger one is a typo, not a benchmark."""
    n = _positive(text)
    if n > MAX_REPEAT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_REPEAT}; got {n}")
    return n


# Python's spellings of JSON's true, false and null, as config.json's
# fields print in Python (config.use_cache is True)
_PYTHON_LITERALS: dict[str, object] = {"True": True, "False": False, "None": None}


def _config_field(text: str) -> tuple[str, object]:
    """'FIELD=VALUE': VALUE as JSON (1024, true, [384, 384], "text") or one of
    Python's True, False and None, else the text itself."""
    from posembed import _json

    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"must be FIELD=VALUE such as n_positions=2048; got {text!r}"
        )
    if raw in _PYTHON_LITERALS:
        return name, _PYTHON_LITERALS[raw]
    try:
        value = _json.loads(raw, "VALUE")
    except ValueError:
        value = raw
    return name, value


def _non_negative(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0; got {n}")
    return n


def _grid(text: str) -> tuple[int, int]:
    """'24x24' or '24,24': a grid of positive height and width."""
    parts = text.lower().replace(",", "x").split("x")
    try:
        h, w = (int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be HEIGHTxWIDTH such as 24x24; got {text!r}"
        ) from None
    if h < 1 or w < 1:
        raise argparse.ArgumentTypeError(f"height and width must be at least 1; got {text!r}")
    return h, w


def _thread_counts(text: str) -> list[int]:
    """'2' or '1,2,4': distinct positive counts, ascending."""
    try:
        counts = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a count or a comma list of counts (1,2); got {text!r}"
        ) from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"counts must be at least 1; got {text!r}")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="posembed", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("bench", help="time every kernel against NumPy, PyTorch and the roofline")
    p.add_argument(
        "--quick", action="store_true", help="smaller problems, 3 rounds (under a minute)"
    )
    p.add_argument(
        "--repeat", type=_repeat, help=f"timed rounds per implementation (1..{MAX_REPEAT})"
    )
    p.add_argument(
        "--threads",
        type=_thread_counts,
        metavar="N[,M...]",
        help="threads for posembed and PyTorch (the largest); several add a thread-scaling table",
    )
    p.add_argument("--json", metavar="FILE", help="also write the raw figures as JSON")
    p.add_argument(
        "--plot", metavar="FILE.png", help="draw speed-ups and roofline fractions (matplotlib)"
    )
    p.add_argument("--markdown", action="store_true", help="print a Markdown table (README)")
    p.add_argument("--only", metavar="K1,K2", help="only these kernels (e.g. gather,interpolate)")
    p.set_defaults(func=_bench, parser=p)

    p = sub.add_parser(
        "chunk",
        help="cut a token file, Parquet or Arrow corpus or Megatron indexed dataset into "
        "overlapping windows on disk (bounded memory)",
        description="Cut a token file, a list column of Parquet, Arrow IPC or a saved "
        "Hugging Face dataset, or a Megatron-LM indexed dataset, into overlapping windows on "
        "disk. The run holds about "
        "64 MiB at a time, whatever --size, beyond a token file's document offsets (16 bytes "
        "per document; Arrow input is cut a batch of rows at a time, its offsets never all "
        "held). The input is read, never mapped: one that changes while it is read "
        "stops the run (exit 2) and no output is written.",
    )
    p.add_argument(
        "input",
        help="tokens: a 1-D .npy file, a raw binary stream with --dtype, a .parquet file or "
        "folder of them, an Arrow IPC .arrow file or stream, a datasets save_to_disk folder, "
        "a Megatron-LM indexed dataset (PREFIX, PREFIX.idx or PREFIX.bin), or a folder "
        "posembed chunk wrote (one document per window); a token file, indexed dataset "
        "(PREFIX.idx), Parquet or Arrow file may be a URL (s3://..., hf://..., through fsspec)",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        help="folder to write (windows.npy, ...), or PREFIX with --format megatron",
    )
    p.add_argument(
        "--column",
        help="Arrow and Parquet input: the list column of token ids, one document per row "
        "(default input_ids)",
    )
    p.add_argument(
        "--format",
        default="npy",
        choices=["npy", "parquet", "megatron"],
        help="npy: windows.npy, starts.npy, lengths.npy, documents.npy; parquet: "
        "windows.parquet (input_ids, attention_mask, document, start, length; "
        "datasets.load_dataset('parquet') loads it), both with meta.json; megatron: "
        "PREFIX.bin and PREFIX.idx, an indexed dataset of one sequence per window (its "
        "tokens, no padding), the windows of each input document one Megatron document",
    )
    p.add_argument(
        "--documents",
        choices=["documents", "sequences"],
        help="indexed dataset input: what a document is, Megatron's documents (one or more "
        "sequences each; the default) or its sequences",
    )
    p.add_argument("--size", type=int, required=True, help="window length")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--step", type=int, help="distance between window starts (1..size)")
    group.add_argument("--overlap", type=int, help="tokens shared by neighbours (size - step)")
    p.add_argument("--tail", default="pad", choices=["pad", "shift", "drop"])
    p.add_argument(
        "--dtype",
        help="integer token type of a raw input file (uint16 for nanoGPT .bin; >u2 for "
        "big-endian tokens, converted while reading)",
    )
    p.add_argument("--offsets", help="a .npy of int64 CSR document offsets")
    p.add_argument("--pad-value", type=int, default=0, help="fills the last window (tail=pad)")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.add_argument(
        "--threads",
        type=_positive,
        default=None,
        help="threads that cut (default: all CPUs for a token file or an indexed dataset "
        "to .npy, where they read and write too; 1 otherwise, beside a reading and a writing "
        "thread)",
    )
    p.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="run on the Dask cluster at ADDRESS (tcp://host:8786): one output part per "
        "partition plus index.json; read back with posembed.dask.read_parts (needs the dask "
        "extra and a file system the workers share)",
    )
    p.add_argument(
        "--part-tokens",
        type=_positive,
        default=1 << 26,
        help="tokens per partition with --dask (default 2^26)",
    )
    p.set_defaults(func=_chunk)

    p = sub.add_parser(
        "convert",
        help="write a token file, Parquet or Arrow corpus as a Megatron-LM indexed dataset "
        "(PREFIX.bin, PREFIX.idx)",
        description="Write a corpus as a Megatron-LM indexed dataset, PREFIX.bin and "
        "PREFIX.idx, which megatron.core's IndexedDataset and GPTDataset read: each input "
        "document one sequence and one document, as Megatron's preprocess_data.py writes "
        "them. The tokens are uint16 for a vocabulary of fewer than 65,500 ids, else int32 "
        "(Megatron's rule; without --vocab-size, from the largest id met), unless "
        "--output-dtype says. Streaming in bounded memory; the files appear only when "
        "complete, and --force replaces only an indexed dataset.",
    )
    p.add_argument(
        "input",
        help="a 1-D .npy file, a raw token file with --dtype, Parquet, Arrow IPC, a datasets "
        "save_to_disk folder, an indexed dataset, or a folder posembed chunk wrote",
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="PREFIX", help="writes PREFIX.bin and PREFIX.idx"
    )
    p.add_argument("--dtype", help="integer token type of a raw input file")
    p.add_argument("--offsets", help="a .npy of int64 CSR document offsets for a token file")
    p.add_argument("--column", help="Arrow and Parquet input: the list column (default input_ids)")
    p.add_argument(
        "--documents",
        choices=["documents", "sequences"],
        help="indexed dataset input: Megatron's documents (default) or its sequences",
    )
    p.add_argument(
        "--append-eod",
        type=int,
        metavar="ID",
        help="append this end-of-document id to each non-empty document",
    )
    p.add_argument(
        "--vocab-size",
        type=int,
        help="the tokenizer's vocabulary size: every id must be below it; it chooses the dtype",
    )
    p.add_argument(
        "--output-dtype",
        choices=["uint8", "int8", "int16", "uint16", "int32", "int64"],
        help="the tokens' type on disk, instead of Megatron's choice",
    )
    p.add_argument("--force", action="store_true", help="replace an existing indexed dataset")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=_convert)

    p = sub.add_parser(
        "pack",
        help="pack documents into rows of --size tokens, with position ids that restart at "
        "every document",
        description="Pack a corpus into rows of --size tokens so that no compute goes to "
        "padding: best-fit decreasing by default (the documents longest first, each into "
        "the fullest row it fits), first-fit decreasing, or wrapped (concatenate and cut). "
        "Each row comes with position ids that restart at 0 at every document and its "
        "sequences' lengths, for variable-length attention. Documents longer than --size "
        "are cut into pieces (or truncated, or refused: --split). Packed shard by shard "
        "of consecutive documents (--shard-tokens) in bounded memory; the output appears "
        "only when complete.",
    )
    p.add_argument(
        "input",
        help="a 1-D .npy file or a raw token file (--dtype) with --offsets, an indexed "
        "dataset (PREFIX, PREFIX.idx), Parquet, Arrow IPC, a datasets save_to_disk folder "
        "or a folder posembed chunk wrote",
    )
    p.add_argument("-o", "--output", required=True, help="folder (npy, parquet) or PREFIX")
    p.add_argument("--size", type=int, required=True, help="tokens per row")
    p.add_argument(
        "--strategy", choices=["bfd", "ffd", "wrapped"], default="bfd", help="(default bfd)"
    )
    p.add_argument(
        "--split",
        choices=["pieces", "truncate", "refuse"],
        default="pieces",
        help="a document longer than --size: cut into pieces (default), truncated, or refused",
    )
    p.add_argument(
        "--shard-tokens",
        type=int,
        help="tokens planned together, at least --size (default: what fits the 64 MiB "
        "budget, and at least 8 rows)",
    )
    p.add_argument(
        "--format",
        choices=["npy", "parquet", "megatron"],
        default="npy",
        help="npy folder (default), packed.parquet, or a Megatron indexed dataset "
        "(one document per row, one sequence per document in it)",
    )
    p.add_argument("--dtype", help="integer token type of a raw input file")
    p.add_argument("--offsets", help="a .npy of int64 CSR document offsets for a token file")
    p.add_argument(
        "--documents",
        choices=["documents", "sequences"],
        help="indexed dataset input: Megatron's documents (default) or its sequences",
    )
    p.add_argument("--column", help="Arrow and Parquet input: the list column (default input_ids)")
    p.add_argument("--pad-value", type=int, default=0, help="fills the end of a row (default 0)")
    p.add_argument("--force", action="store_true", help="replace an output posembed wrote")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=_pack)

    p = sub.add_parser(
        "samples",
        help="build Megatron-LM GPTDataset's document, sample and shuffle index of an "
        "indexed dataset",
        description="Build the three index arrays that Megatron-LM's GPTDataset builds "
        "for an indexed dataset (document_index.npy, sample_index.npy, shuffle_index.npy, "
        "equal element for element to its own for the same sequence length, sample or "
        "epoch count and seed), from its sequence lengths alone, and write them to a "
        "folder with meta.json. Samples cross document boundaries; read one with "
        "posembed.GPTSamples.sample.",
    )
    p.add_argument(
        "input",
        help="an indexed dataset: PREFIX, PREFIX.idx or PREFIX.bin, or a URL of one "
        "(s3://bucket/PREFIX, through fsspec)",
    )
    p.add_argument("-o", "--output", required=True, help="local folder to write")
    p.add_argument(
        "--sequence-length", type=int, required=True, help="tokens per sample (the extra aside)"
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--num-samples", type=int, help="samples wanted (default: one epoch's)")
    group.add_argument("--epochs", type=int, help="epochs instead of --num-samples")
    p.add_argument("--seed", type=int, default=1234, help="Megatron's random_seed (default 1234)")
    p.add_argument(
        "--no-extra-token",
        action="store_true",
        help="samples of --sequence-length tokens, not one more (add_extra_token_to_sequence)",
    )
    p.add_argument(
        "--separate-final-epoch",
        choices=["auto", "yes", "no"],
        default="auto",
        help="shuffle the last epoch apart (auto: as GPTDataset decides, under 80%% of an epoch)",
    )
    p.add_argument(
        "--documents",
        choices=["documents", "sequences"],
        help="what a sample index counts: Megatron's sequences (the default, as GPTDataset) "
        "or its documents (each one's sequences joined)",
    )
    p.add_argument("--force", action="store_true", help="replace an output posembed wrote")
    p.set_defaults(func=_samples)

    p = sub.add_parser(
        "resize",
        help="resize a position table inside a safetensors checkpoint (fixes 'size mismatch')",
        description=(
            "Resize the position table KEY of a safetensors checkpoint to --length "
            "position rows and write the whole checkpoint to -o: every other tensor "
            "and the metadata are copied unchanged, streaming (bounded memory). "
            "SRC may be a Hugging Face model folder (config.json and model.safetensors, "
            "or shards with model.safetensors.index.json): -o is then a folder that "
            "from_pretrained loads at the new size, config.json updated (gpt2, gpt_neo, "
            "bert, distilbert, electra, roberta, xlm-roberta, camembert, opt, bart, mbart, "
            "whisper, vit, "
            "deit, clip and siglip by their model_type, which also "
            "finds KEY and --prefix; --set-config for any other), the index's sizes "
            "updated, the other files copied. "
            "Without --init the position rows are interpolated (grow or shrink); with "
            "--init the trained rows are kept and new ones added (grow only). An "
            "unchanged length copies the table. --new-grid instead resamples a ViT's patch "
            "grid in 2-D (posembed.resample_grid; --prefix 1 keeps the CLS row). The output "
            "appears only when complete."
        ),
    )
    p.add_argument(
        "src", help="the checkpoint to read (.safetensors), or a Hugging Face model folder"
    )
    p.add_argument(
        "--key",
        help="name of the table: (rows, d) or (1, rows, d); a model folder of a known "
        "model_type may omit it",
    )
    p.add_argument(
        "--length",
        type=_positive,
        metavar="T",
        help="position rows in the output, prefix rows not counted (output: prefix + length rows)",
    )
    p.add_argument(
        "--new-grid",
        type=_grid,
        metavar="HxW",
        help="instead of --length: resample the position rows as a ViT patch grid to HxW",
    )
    p.add_argument(
        "--grid",
        type=_grid,
        metavar="HxW",
        help="the grid the position rows form now (default: square; for a ViT folder, "
        "from config.json)",
    )
    p.add_argument(
        "--method",
        choices=["bicubic", "bilinear"],
        help="grid resampling (default: bicubic, PyTorch's)",
    )
    p.add_argument(
        "--antialias",
        action="store_true",
        help="resample with PyTorch's antialiased filter, as timm's resample_abs_pos_embed "
        "(a grid, or a 1-D interpolation with --align half_pixel, the default then)",
    )
    p.add_argument(
        "--init",
        choices=["interpolate", "tile", "edge", "random", "zeros"],
        help="keep the trained rows and fill the new ones this way (posembed.extend; grow only); "
        "default: interpolate all position rows (posembed.interpolate)",
    )
    p.add_argument(
        "--align",
        choices=["scale", "half_pixel", "corners"],
        help="interpolation convention (default: scale; half_pixel for --new-grid)",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--prefix",
        type=_non_negative,
        metavar="N",
        help="leading rows kept as they are and not resized: RoBERTa's offset of 2, "
        "a ViT's CLS row (default 0; a known model folder's own)",
    )
    group.add_argument(
        "--offset", dest="prefix", type=_non_negative, metavar="N", help="the same as --prefix"
    )
    p.add_argument("--seed", type=int, metavar="S", help="seed of --init random")
    p.add_argument(
        "--set-config",
        type=_config_field,
        action="append",
        metavar="FIELD=VALUE",
        help="a model folder's config.json field to set (repeatable; VALUE read as JSON: "
        'true, 2048, 2.5, "text", [384, 384]; True, False and None as in Python; any other '
        "word as text; a.b sets field b of object a), after those a known model_type sets",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing output (a file, or a model folder posembed wrote)",
    )
    p.add_argument(
        "-o", "--output", required=True, help="the checkpoint (the folder, for a folder) to write"
    )
    p.set_defaults(func=_resize, parser=p)

    p = sub.add_parser("plot", help="draw pictures of a position table (needs matplotlib)")
    plots = p.add_subparsers(dest="plot", required=True)
    s = plots.add_parser(
        "similarity", help="similarity heatmaps before and after interpolation, side by side"
    )
    s.add_argument("table", help="an (L, d) float table saved with numpy.save (.npy)")
    s.add_argument("--length", type=_positive, help="interpolated length (default 2 L)")
    s.add_argument(
        "--align",
        default="scale",
        choices=["scale", "half_pixel", "corners"],
        help="interpolation convention (default: scale)",
    )
    s.add_argument("-o", "--output", required=True, help="image file to write (.png, .svg, .pdf)")
    s.set_defaults(func=_plot_similarity, parser=s)

    p = sub.add_parser("config", help="print version, compiler, OpenMP, SIMD level, threads")
    p.set_defaults(func=_config)

    args = parser.parse_args(argv)
    # bench and chunk set the thread count for their run; a caller that runs
    # the command in-process (a notebook, a test) gets its own setting back.
    from posembed._runtime import config, set_num_threads

    before = config()
    try:
        return int(args.func(args))
    finally:
        set_num_threads(before["num_threads"] if before["num_threads_set"] else None)


if __name__ == "__main__":
    sys.exit(main())
