"""`elmo embed`: a text file -> HDF5 with the biLM layers of every line."""

from __future__ import annotations

import argparse
import os

from elmo.embed import ENCODING_ERRORS, LAYER_MODES, Embedder


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="embed a text file (one tokenized sentence per line) into HDF5",
        description="Embed INPUT (UTF-8, one sentence per line, tokens separated by white "
        "space) into OUTPUT (HDF5: one dataset per line, named by its 0-based number, and "
        "'sentence_to_index'). MODEL is a released name (small, medium, original, "
        "original-5.5B), 'default', a directory in our format, or a directory holding one "
        "official options/weights pair; or give --options and --weights instead.",
    )
    p.add_argument("paths", nargs="+", metavar="[MODEL] INPUT OUTPUT")
    p.add_argument("--options", help="official options.json (with --weights, instead of MODEL)")
    p.add_argument("--weights", help="official weights.hdf5 (with --options)")
    p.add_argument("--layers", choices=LAYER_MODES, default="all",
                   help="all: (L+1, n, 2P) per line; top or average: (n, 2P). Default: all")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    p.add_argument("--device", help="torch device, e.g. cpu or cuda:0 (default: cuda if "
                   "available, else cpu)")
    p.add_argument("--stateful", action="store_true",
                   help="the original's protocol: file order, batches of --batch-size, "
                   "LSTM state carried per batch row (reproduces its numbers)")
    p.add_argument("--encoding-errors", choices=ENCODING_ERRORS, default="strict",
                   help="strict: stop at a line that is not UTF-8 (default); replace: "
                   "replace invalid bytes with U+FFFD")
    p.add_argument("--num-shards", type=int, default=1,
                   help="split INPUT into this many contiguous blocks of lines (default 1)")
    p.add_argument("--shard-index", type=int, default=None,
                   help="which block to embed (default: $RANK, as set by torchrun, else 0); "
                   "'{shard}' in OUTPUT is replaced by it. Join the parts with `elmo merge`")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    official = args.options is not None or args.weights is not None
    expected = 2 if official else 3
    if len(args.paths) != expected:
        form = "--options F --weights F INPUT OUTPUT" if official else "MODEL INPUT OUTPUT"
        parser.error(f"embed takes {form}; got {len(args.paths)} paths: {args.paths}")
    if args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    model = None if official else args.paths[0]
    input_path, output_path = args.paths[-2:]
    shard_index = args.shard_index
    if shard_index is None:
        shard_index = int(os.environ.get("RANK", 0)) if args.num_shards > 1 else 0
    output_path = output_path.replace("{shard}", str(shard_index))
    embedder = Embedder.from_pretrained(
        model, options=args.options, weights=args.weights, device=args.device,
        batch_size=args.batch_size, stateful=args.stateful,
    )
    embedder.embed_file(input_path, output_path, layers=args.layers,
                        encoding_errors=args.encoding_errors, progress=not args.quiet,
                        num_shards=args.num_shards, shard_index=shard_index)
    return 0
