"""`elmo embed`: a text file -> HDF5 with the biLM layers of every line. The embedding flags
are the fields of `EmbedSettings` (`add_setting`); the file job's own are written here."""

from __future__ import annotations

import argparse
import os

from elmo.cli import embed_ray
from elmo.cli.common import (
    add_official_pair,
    add_overwrite,
    add_setting,
    add_settings,
    model_files,
    model_help,
    settings_given,
)
from elmo.embedding import Embedder, EmbedFileOptions
from elmo.io.fasta import FASTA_KEYS
from elmo.io.inputs import EMBED_FORMATS, INPUT_KINDS
from elmo.io.textfile import ENCODING_ERRORS

USAGE = """elmo embed [options] MODEL INPUT OUTPUT
       elmo embed [options] --options FILE --weights FILE INPUT OUTPUT
       elmo embed INPUT OUTPUT --all|--top|--average --options-file F --weight-file F [...]
                  (AllenNLP's `allennlp elmo` flags)"""
SHARD = "{shard}"


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        usage=USAGE,
        help="embed a text file (one tokenized sentence per line) or FASTA into HDF5",
        description="Embed INPUT (UTF-8, plain, gzip, bzip2 or xz, one sentence per line) into "
        "OUTPUT "
        "(HDF5: one dataset per line, named by its 0-based number, and 'sentence_to_index'); "
        "a FASTA INPUT gets one dataset per record, named by its id. "
        f"MODEL is {model_help()}; or give --options and --weights instead. Work is saved in "
        "the directory OUTPUT.partial and OUTPUT assembled from it; the same command resumes a "
        "killed run. An existing OUTPUT "
        "is replaced only with --overwrite; a missing directory is created. AllenNLP's "
        "`allennlp elmo` flags work too (--all/--top/--average, --options-file, --weight-file, "
        "--cuda-device, --forget-sentences, --use-sentence-keys); add --stateful for its "
        "numbers.",
    )
    p.add_argument("paths", nargs="+", metavar="MODEL INPUT OUTPUT", help=argparse.SUPPRESS)
    add_official_pair(p)
    layers = p.add_mutually_exclusive_group()
    add_setting(layers, "layers", "what each line's dataset keeps of its layers (D = 2P)")
    for mode in ("all", "top", "average"):
        layers.add_argument(f"--{mode}", dest="layers", action="store_const", const=mode,
                            help=f"--layers {mode}")
    add_settings(p, ("dtype", "pool"))
    p.add_argument("--format", choices=EMBED_FORMATS, default=None,
                   help="how INPUT is read: " + "; ".join(map(_described, EMBED_FORMATS))
                   + ". Default: as INPUT is detected (fasta by its name), else text")
    p.add_argument("--fasta-keys", choices=FASTA_KEYS, default="id",
                   help="FASTA datasets named by record id (default), or by biotrainer's hash "
                   "of the sequence (sha256 of 'SEQUENCE_LENGTH'), for training with biotrainer")
    add_settings(p, ("tokenizer", "batch_size", "max_tokens"))
    device = p.add_mutually_exclusive_group()
    add_setting(device, "device")
    device.add_argument("--cuda-device", type=int, metavar="N",
                        help="GPU N, or the cpu for -1 (AllenNLP's flag)")
    add_settings(p, ("quantize", "precision", "cuda_graphs", "stateful"))
    p.add_argument("--encoding-errors", choices=ENCODING_ERRORS, default="strict",
                   help="strict: stop at a line that is not UTF-8 (default); replace: "
                   "replace invalid bytes with U+FFFD")
    p.add_argument("--forget-sentences", action="store_true",
                   help="leave out the 'sentence_to_index' dataset")
    p.add_argument("--use-sentence-keys", action="store_true",
                   help="name each line's dataset by its text instead of its number (lines "
                   "must be distinct, not empty and without '/'; no 'sentence_to_index')")
    p.add_argument("--num-shards", type=int, default=1,
                   help="split INPUT into this many contiguous blocks of lines (default 1)")
    p.add_argument("--shard-index", type=int, default=None,
                   help="which block to embed (default: $RANK, as set by torchrun); "
                   f"'{SHARD}' in OUTPUT is replaced by it. Join the parts with `elmo merge`")
    add_overwrite(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    embed_ray.add_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.cuda_device is not None:  # AllenNLP's flag, as a torch device
        args.device = "cpu" if args.cuda_device < 0 else f"cuda:{args.cuda_device}"
    if embed_ray.asked(args):
        if args.fasta_keys != "id":
            parser.error("--fasta-keys biotrainer is not available with --ray")
        return embed_ray.run(args, parser)
    official = args.options is not None or args.weights is not None
    expected = 2 if official else 3
    if len(args.paths) != expected:
        form = "--options-file F --weight-file F INPUT OUTPUT" if official else \
            "MODEL INPUT OUTPUT (or --options-file F --weight-file F INPUT OUTPUT)"
        parser.error(f"embed takes {form}; got {len(args.paths)} paths: {args.paths}")
    if args.batch_size is not None and args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    if args.num_shards < 1:
        parser.error("--num-shards must be at least 1")
    model = None if official else args.paths[0]
    input_path, output_path = args.paths[-2:]
    shard_index = _shard_index(args, output_path, parser)
    output_path = output_path.replace(SHARD, str(shard_index))
    options = settings_given(
        args, EmbedFileOptions, format=args.format, encoding_errors=args.encoding_errors,
        num_shards=args.num_shards, shard_index=shard_index, overwrite=args.overwrite,
        forget_sentences=args.forget_sentences, use_sentence_keys=args.use_sentence_keys,
        fasta_keys=args.fasta_keys, progress=not args.quiet)
    embedder = Embedder.from_pretrained(model_files(model, args), **options.embedder_options())
    embedder.embed_file(input_path, output_path, options)
    return 0


def _described(name: str) -> str:
    """An input kind of --format, with how its entries become tokens and datasets."""
    kind = INPUT_KINDS[name]
    entries = kind.entries
    keyed = f", a {entries.token} per token, each {entries.noun}'s dataset named by its id"
    return f"{name}: {kind.description}{keyed * entries.keyed}"


def _shard_index(args: argparse.Namespace, output: str, parser: argparse.ArgumentParser) -> int:
    """--shard-index, else $RANK; with several shards one of them is required, and OUTPUT
    must name each shard's file when the index comes from $RANK."""
    if args.num_shards == 1:
        return args.shard_index or 0
    if args.shard_index is not None:
        return args.shard_index
    rank = os.environ.get("RANK")
    if rank is None:
        parser.error(f"--num-shards {args.num_shards} needs --shard-index I (or $RANK, which "
                     "torchrun sets): which block of lines should this process embed?")
    if not rank.isdigit():
        parser.error(f"the environment variable RANK={rank!r} is not a shard index (0, 1, ...)")
    if SHARD not in output:
        parser.error(f"with the shard index from $RANK, OUTPUT must contain '{SHARD}' so that "
                     f"each process writes its own file, e.g. out.{SHARD}.hdf5")
    return int(rank)
