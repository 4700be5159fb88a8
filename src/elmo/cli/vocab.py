"""`elmo vocab`: build a bilm-tf vocabulary file from a corpus."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from elmo.cli.common import (
    add_corpus_tokenizer,
    add_exclude_titles,
    add_input_format,
    add_overwrite,
    check_vocab_options,
)
from elmo.data.corpus import Selection, expand_paths
from elmo.errors import InputFileError
from elmo.io.atomic import claim_output
from elmo.io.textfile import STDIN, is_stdin
from elmo.training.prepare import CorpusStats, scan_corpus
from elmo.vocab import Vocabulary


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="build a vocabulary file from a corpus",
        description="Count the words of the training files (one sentence per line, plain or "
        ".gz, globs allowed, '-' for stdin; JSON lines and WikiExtractor's output, see "
        "--input-format) and write a bilm-tf vocabulary: <S>, </S>, <UNK>, "
        "then the words by descending frequency. Also reports the token count.",
    )
    p.add_argument("--train", nargs="+", required=True, metavar="PATH")
    p.add_argument("--out", required=True, metavar="FILE",
                   help=f"vocabulary file to write ('{STDIN}': stdout)")
    add_corpus_tokenizer(p)
    add_input_format(p)
    add_exclude_titles(p)
    add_overwrite(p)
    p.add_argument("--min-count", type=int, default=1, help="keep words seen this often")
    p.add_argument("--max-vocab", type=int, metavar="N", help="keep at most N words in all")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    check_vocab_options(args, parser)
    paths = expand_paths(args.train, allow_stdin=True)
    if is_stdin(args.out):
        stats, vocab = _scan(args, paths)
        sys.stdout.write("".join(word + "\n" for word in vocab))
    else:
        with claim_output(args.out, inputs=paths, overwrite=args.overwrite):
            stats, vocab = _scan(args, paths)
            vocab.save(args.out)
    if not args.quiet:
        left_out = f"; {stats.left_out:,} documents left out by title" \
            if args.exclude_titles else ""
        print(f"{len(vocab):,} words from {stats.n_sentences:,} sentences "
              f"({stats.n_tokens:,} tokens{left_out}) -> {args.out}", file=sys.stderr)
    return 0


def _scan(args: argparse.Namespace, paths: list[Path]) -> tuple[CorpusStats, Vocabulary]:
    stats, vocab = scan_corpus(paths, args.tokenizer, input_format=args.input_format,
                               selection=Selection.leaving_out(args.exclude_titles or ()),
                               min_count=args.min_count, max_vocab=args.max_vocab,
                               progress=not args.quiet)
    if stats.n_sentences == 0:
        raise InputFileError(f"the training files {args.train} have no sentences (empty or "
                             "blank): a vocabulary needs words")
    return stats, vocab
