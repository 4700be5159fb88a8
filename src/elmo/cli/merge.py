"""`elmo merge`: join the shard files of `elmo embed --num-shards N` into one file, or turn
the Parquet directory of `elmo embed --ray` into that file."""

from __future__ import annotations

import argparse
from pathlib import Path

from elmo.cli.common import add_overwrite
from elmo.io.hdf5_output import merge_shards


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="join the shards of `elmo embed --num-shards N` (or the output of --ray) into "
        "one HDF5 file",
        description="Join SHARD files (all N of one run, any order) into OUTPUT: bit for "
        "bit the file a one-process `elmo embed` run with the same options writes. Shards of "
        "another input, model or option are refused. A single SHARD that is the output "
        "directory of `elmo embed --ray` becomes that file's layout (input files numbered as "
        "their concatenation).",
    )
    p.add_argument("output", metavar="OUTPUT")
    p.add_argument("shards", nargs="+", metavar="SHARD")
    add_overwrite(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if len(args.shards) == 1 and Path(args.shards[0]).is_dir():
        from elmo.io.parquet_output import parquet_to_hdf5  # needs the [ray] extra

        parquet_to_hdf5(args.shards[0], args.output, overwrite=args.overwrite)
    else:
        merge_shards(args.shards, args.output, overwrite=args.overwrite)
    return 0
