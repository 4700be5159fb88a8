"""`elmo vocab`: build a bilm-tf vocabulary file from a corpus."""

from __future__ import annotations

import argparse
import sys

from elmo.data.corpus import expand_paths
from elmo.tokenize import TOKENIZER_NAMES
from elmo.training.prepare import scan_corpus


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="build a vocabulary file from a corpus",
        description="Count the words of the training files (one sentence per line, plain or "
        ".gz, globs allowed) and write a bilm-tf vocabulary: <S>, </S>, <UNK>, then the words "
        "by descending frequency. Also reports the token count.",
    )
    p.add_argument("--train", nargs="+", required=True, metavar="PATH")
    p.add_argument("--out", required=True, metavar="FILE", help="vocabulary file to write")
    p.add_argument("--tokenizer", choices=TOKENIZER_NAMES, default="whitespace")
    p.add_argument("--min-count", type=int, default=1, help="keep words seen this often")
    p.add_argument("--max-vocab", type=int, metavar="N", help="keep at most N words in all")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.min_count < 1:
        parser.error("--min-count must be at least 1")
    stats, vocab = scan_corpus(expand_paths(args.train), args.tokenizer,
                               min_count=args.min_count, max_vocab=args.max_vocab,
                               progress=not args.quiet)
    vocab.save(args.out)
    if not args.quiet:
        print(f"{len(vocab):,} words from {stats.n_sentences:,} sentences "
              f"({stats.n_tokens:,} tokens) -> {args.out}", file=sys.stderr)
    return 0
