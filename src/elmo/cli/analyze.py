"""`elmo analyze`: what each biLM layer knows (the paper's section 5), one analysis per
subcommand; each prints a table (or one JSON object with --json)."""

from __future__ import annotations

import argparse
import json

from elmo.analysis.report import format_table
from elmo.embed import Embedder


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="the paper's analyses: word senses, neighbours, layer probes, mix weights",
        description="What each layer of a biLM knows (Peters et al. 2018, section 5).",
    )
    analyses = p.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS")
    _add_wsd(analyses)


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="default",
                   help="a name `elmo embed` takes (default, small, ...) or a model directory "
                   "(default: default, the shipped model)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _embedder(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Embedder:
    if args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    return Embedder.from_pretrained(args.model, device=args.device, batch_size=args.batch_size)


# ---- wsd -----------------------------------------------------------------------------------

def _add_wsd(analyses: argparse._SubParsersAction) -> None:
    p = analyses.add_parser(
        "wsd", help="1-nearest-neighbour word sense disambiguation per layer (Table 5)",
        description="Sense vectors are the mean of a layer's vectors of each sense's "
        "occurrences in --train (SemCor); each test word takes the nearest (cosine) sense of "
        "its lemma and part of speech seen there, else WordNet's first sense. F1 per "
        "evaluation set (the WSD evaluation framework's scorer rules) per layer, beside the "
        "WordNet first-sense baseline.",
    )
    p.add_argument("--train", required=True,
                   help="sense-annotated text: SemCor in NAF (a tar archive such as "
                   "semcor3.0_naf.tar.xz, a directory or a .naf file) or the framework's "
                   "semcor.data.xml (its .gold.key.txt beside it)")
    p.add_argument("--eval", required=True, nargs="+", metavar="PATH",
                   help="evaluation sets: NAME.data.xml files (NAME.gold.key.txt beside each) "
                   "or directories holding them, e.g. the framework's Evaluation_Datasets")
    p.add_argument("--wordnet", default=None,
                   help="WordNet 3.0 dict directory (default: $WNSEARCHDIR, else $WNHOME/dict, "
                   "else /usr/share/wordnet, where Debian's wordnet-base puts it)")
    _model_options(p)
    p.set_defaults(run=_run_wsd)


def _run_wsd(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from elmo.analysis.wordnet import WordNet
    from elmo.analysis.wsd import FIRST_SENSE, evaluate_wsd
    from elmo.analysis.wsd_data import find_eval_sets, read_sense_corpus

    wordnet = WordNet(args.wordnet)
    eval_sets = find_eval_sets(args.eval)
    embedder = _embedder(args, parser)
    result = evaluate_wsd(embedder, read_sense_corpus(args.train), eval_sets, wordnet,
                          progress=not args.quiet)
    if args.json:
        print(json.dumps(result.to_dict()))
        return 0
    names = [s.name for s in eval_sets]
    rows = [[FIRST_SENSE, *(result.first_sense[n] for n in names)]]
    rows += [[f"layer {k}", *(by_set[n] for n in names)] for k, by_set in result.f1.items()]
    print(f"WSD F1 (1-NN over {result.senses:,} sense vectors; unseen lemmas back off to "
          f"WordNet's first sense)")
    print(format_table(["", *names], rows))
    print(format_table(["instances", *names],
                       [["count", *(result.instances[n] for n in names)],
                        ["backed off %", *(100 * result.backoff[n] for n in names)]]))
    return 0
