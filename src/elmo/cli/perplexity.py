"""`elmo perplexity`: forward, backward and average perplexity of a trained biLM on a file."""

from __future__ import annotations

import argparse
import json

from tqdm import tqdm

from elmo.cli.common import add_input_format, add_tokenizer
from elmo.data.corpus import expand_paths, iter_sentences
from elmo.device import resolve_device
from elmo.errors import InputFileError
from elmo.loading.resolve import resolve_model
from elmo.tokenize import DEFAULT_TOKENIZER
from elmo.training.evaluate import evaluate_perplexity
from elmo.training.model_init import load_language_model


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="perplexity of a trained biLM on a text file",
        description="Score FILE (one sentence per line, plain or .gz .bz2 .xz, '-' reads stdin; "
        "JSON lines or WikiExtractor's output, see --input-format) "
        "with MODEL, a model with its softmax: a shipped name (default, default-zh), a "
        "directory written by `elmo train` or its --weights-copy. Exact softmax; "
        "every sentence is scored from a zero state, n + 1 predictions per direction; the "
        "average is exp of the mean of both directions' losses.",
    )
    p.add_argument("model", metavar="MODEL",
                   help="a shipped name or a run directory (released models have no softmax)")
    p.add_argument("file", metavar="FILE")
    add_tokenizer(p)
    add_input_format(p)
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (64)")
    p.add_argument("--device", help="torch device (default: cuda if available)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    files = resolve_model(args.model)
    lm, vocab = load_language_model(files)
    lm.to(resolve_device(args.device))
    tokenizer = args.tokenizer or files.recorded_tokenizer() or DEFAULT_TOKENIZER
    sentences = iter_sentences(expand_paths([args.file], allow_stdin=True), tokenizer,
                               input_format=args.input_format)
    sentences = tqdm(sentences, desc="scoring", unit=" sent", disable=args.quiet)
    totals = evaluate_perplexity(lm, sentences, vocab, args.batch_size)
    if totals.n_tokens == 0:
        raise InputFileError(f"{args.file} has no sentences to score (it is empty or blank)")
    if args.json:
        print(json.dumps(totals.to_dict()))
    else:
        print(f"forward perplexity   {totals.forward:.3f}\n"
              f"backward perplexity  {totals.backward:.3f}\n"
              f"average perplexity   {totals.average:.3f}\n"
              f"tokens               {totals.n_tokens:,} per direction")
    return 0
