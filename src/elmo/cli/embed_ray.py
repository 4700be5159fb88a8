"""`elmo embed MODEL INPUT OUTPUT_DIR --ray`: embed files across a Ray cluster into Parquet
blocks (`elmo.ray.embed_files`). `elmo embed` adds these options and hands such runs here."""

from __future__ import annotations

import argparse
import sys

from elmo.cli.common import settings_given
from elmo.device import PRECISIONS
from elmo.io.inputs import INPUT_KINDS


def add_options(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group(
        "embedding with Ray Data",
        "elmo embed MODEL INPUT OUTPUT_DIR --ray [--address ADDR] [--workers N] [--threads N]: "
        "INPUT a file, a glob or a directory (text or FASTA, see --format); OUTPUT_DIR a "
        "directory of Parquet files, one per block of lines or records (`elmo merge OUT.hdf5 "
        "OUTPUT_DIR` makes the HDF5 file). The same "
        "command resumes a killed run; --threads is per worker (default 1). Needs the [ray] "
        "extra; docs/scaling.md",
    )
    group.add_argument("--ray", action="store_true", help="embed with a pool of Ray actors")
    group.add_argument("--address", help="the Ray cluster to join, e.g. ray://head:10001 or "
                       "head:6379 (default: $RAY_ADDRESS, else a Ray on this machine)")
    group.add_argument("--workers", type=int, metavar="N",
                       help="actors, each with its own model (default: the cluster's CPUs "
                       "divided by --threads; with --device cuda, its GPUs, one each)")
    group.add_argument("--block-lines", type=int, metavar="N",
                       help="lines (FASTA: records) per Parquet file (default: 4 x --batch-size, "
                       "1024)")


def asked(args: argparse.Namespace) -> bool:
    """Whether the command line names --ray or one of its options."""
    return args.ray or any(v is not None for v in (args.address, args.workers, args.block_lines))


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if not args.ray:
        parser.error("--address, --workers and --block-lines go with --ray")
    if args.options is not None or args.weights is not None:
        parser.error("--ray takes MODEL, not --options/--weights (a directory holding the "
                     "options .json and weights .hdf5 is a MODEL)")
    unused = [flag for flag, given in (
        ("--stateful", args.stateful), ("--num-shards", args.num_shards != 1),
        ("--shard-index", args.shard_index is not None),
        ("--forget-sentences", args.forget_sentences),
        ("--use-sentence-keys", args.use_sentence_keys)) if given]
    if unused:
        parser.error(f"{', '.join(unused)}: not with --ray (Ray cuts the input into blocks "
                     "itself, and its output keeps each line's file, number and text)")
    if args.pool is not None:
        parser.error("--pool: not with --ray, whose output keeps every token's vectors; take "
                     "their mean from the Parquet `embedding` column, or run `elmo embed` "
                     "without --ray")
    if len(args.paths) != 3:
        parser.error(f"embed --ray takes MODEL INPUT OUTPUT_DIR; got {len(args.paths)} paths: "
                     f"{args.paths}")
    if any(n is not None and n < 1 for n in (args.batch_size, args.workers, args.block_lines)):
        parser.error("--batch-size, --workers and --block-lines must be at least 1")
    if args.precision is not None and not PRECISIONS[args.precision].plain:
        others = "/".join(p.name for p in PRECISIONS.values() if not p.plain)
        parser.error(f"--precision {others} is not available with --ray yet; drop --ray, "
                     "or --precision")
    from elmo.ray import embed_files  # needs the [ray] extra

    model, inputs, output = args.paths
    done = embed_files(
        model, inputs, output, settings_given(args), encoding_errors=args.encoding_errors,
        format=args.format, workers=args.workers,
        threads=args.threads or args.threads_before or 1,
        block_lines=args.block_lines, address=args.address,
        overwrite=args.overwrite, progress=not args.quiet)
    if done.blocks and not args.quiet:
        entries = INPUT_KINDS[done.input_format].entries
        lines, tokens = f"{entries.noun}s", f"{entries.token}s"
        blocks = f"{done.blocks:,} block{'s' * (done.blocks != 1)}"
        workers = f"{done.workers} worker{'s' * (done.workers != 1)}"
        print(f"elmo: {done.lines:,} {lines} ({done.tokens:,} {tokens}) in {blocks}, {workers}: "
              f"{done.tokens / max(done.job_seconds, 1e-9):,.0f} {tokens}/s; output in {output}",
              file=sys.stderr)
    return 0
