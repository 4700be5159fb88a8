"""`elmo prepare-corpus`: a corpus as token ids in a run's vocabulary, compressed and sharded,
for `elmo train --train DIR`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from elmo.cli.common import (
    add_corpus_tokenizer,
    add_exclude_titles,
    add_input_format,
    add_overwrite,
    add_vocab_options,
    check_vocab_options,
)
from elmo.data.prepared import (
    HELD_OUT_NAME,
    MANIFEST_NAME,
    SHARD_TOKENS,
    VOCAB_NAME,
    prepare_corpus,
)
from elmo.io.overlap import UNITS
from elmo.tasks.test_text import TEST_TEXTS, read_test_texts
from elmo.tokenize import TOKENIZERS
from elmo.vocab import Vocabulary


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="prepare a corpus for elmo train: token ids, compressed, in shards",
        description="Read the training files as `elmo train` reads them (--input-format, "
        "--tokenizer, --exclude-titles), build the vocabulary as it does (or take --vocab), "
        "and write OUT: "
        f"{MANIFEST_NAME} (tokenizer, vocabulary sha256, counts, each shard's sha256), "
        f"{VOCAB_NAME} and shard-NNNNN.xz files of token ids (xz-compressed uint32, sentence "
        f"boundaries kept), and with --hold-out-every {HELD_OUT_NAME}. `elmo train --train "
        "OUT` reads it instead of the text and gets the "
        "same batches; a run needs only the shards it reaches. OUT is written beside itself "
        "and renamed into place when complete; run the same command again after an "
        "interruption, and it resumes after the last shard it wrote.",
    )
    p.add_argument("--train", nargs="+", required=True, metavar="PATH",
                   help="training files or glob patterns (quote globs), or a folder of "
                   "WikiExtractor's wiki_NN files; required")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write; required")
    add_corpus_tokenizer(p, note=": train with the same")
    add_input_format(p)
    add_exclude_titles(p)
    p.add_argument("--exclude-overlap", nargs="+", metavar="FILE", help=_overlap_help())
    p.add_argument("--hold-out-every", type=int, default=0, metavar="N",
                   help="hold out every N-th document (of those not left out; a "
                   "text line and a FASTA record are documents too): its sentences go to "
                   f"OUT/{HELD_OUT_NAME}, a sentence per line, for `elmo train --valid`, and "
                   "neither to the shards nor to the vocabulary (default 0: none)")
    add_vocab_options(p)
    p.add_argument("--shard-tokens", type=int, default=SHARD_TOKENS, metavar="N",
                   help=f"tokens per shard, about (default {SHARD_TOKENS:,})")
    add_overwrite(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(run=run)


def _overlap_help() -> str:
    """--exclude-overlap's help: the run lengths of each unit, the formats of TEST_TEXTS."""
    chars = " or ".join(k.name for k in TOKENIZERS.values() if k.characters)
    formats = "; ".join(f"{k.name}: {k.description}" for k in TEST_TEXTS.values())
    return (f"leave out the documents that share a run of {UNITS['characters'].n} characters "
            f"(with --tokenizer {chars}; white space ignored) or {UNITS['words'].n} words "
            f"(other tokenizers) with the text of these test files: {formats}. A document is "
            "a file of Markdown, an object of a JSON file, a JSON line, a WikiExtractor "
            f"document, a line of text. Counted in the summary and in {MANIFEST_NAME} "
            "(default: none)")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    check_vocab_options(args, parser)
    if args.shard_tokens < 1:
        parser.error("--shard-tokens must be at least 1")
    if args.hold_out_every < 0:
        parser.error("--hold-out-every must be at least 0 (0: none held out)")
    if args.vocab is not None and (args.min_count != 1 or args.max_vocab is not None):
        parser.error("--min-count and --max-vocab build a vocabulary: not with --vocab")
    vocab = Vocabulary.from_file(args.vocab) if args.vocab is not None else None
    overlap = None if not args.exclude_overlap else read_test_texts(
        args.exclude_overlap, TOKENIZERS[args.tokenizer].characters)
    manifest = prepare_corpus(
        args.train, args.out, args.tokenizer, input_format=args.input_format, vocab=vocab,
        min_count=args.min_count, max_vocab=args.max_vocab,
        exclude_titles=args.exclude_titles or (), exclude_overlap=overlap,
        hold_out_every=args.hold_out_every,
        shard_tokens=args.shard_tokens, overwrite=args.overwrite, progress=not args.quiet)
    if not args.quiet:
        size = sum(s.bytes for s in manifest.shards)
        words = manifest.n_tokens - manifest.n_sentences
        print(f"{manifest.n_sentences:,} sentences, {words:,} words in "
              f"{len(manifest.shards)} shard(s), {size / 2**20:.2f} MiB "
              f"({size / max(words, 1):.3f} bytes a word); vocabulary of "
              f"{manifest.vocab_size:,} -> {args.out}", file=sys.stderr)
        if args.exclude_titles:
            print(f"{manifest.left_out:,} documents left out by title", file=sys.stderr)
        if manifest.overlap is not None:
            _print_overlap(manifest.overlap)
        if args.hold_out_every:
            print(f"{manifest.held_out:,} documents held out: "
                  f"{manifest.held_out_sentences:,} sentences in {HELD_OUT_NAME}",
                  file=sys.stderr)
    return 0


def _print_overlap(overlap: dict) -> None:
    """How many documents were left out for sharing text with each test file, and from which
    input files (the five with the most)."""
    left_out = overlap["left_out"]
    each = ", ".join(f"{Path(f).name} {left_out.get(f, 0):,}" for f in overlap["sources"])
    inputs = sorted(overlap["inputs"].items(), key=lambda item: -item[1])
    most = ", ".join(f"{f} {n:,}" for f, n in inputs[:5])
    print(f"{sum(left_out.values()):,} documents left out for sharing {overlap['n']} "
          f"{overlap['unit']} with a test file ({each}; {overlap['ngrams']:,} n-grams)"
          + (f"; from {len(inputs):,} input files: {most}" if inputs else ""), file=sys.stderr)
