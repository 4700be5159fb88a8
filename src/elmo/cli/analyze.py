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
    _add_neighbours(analyses)
    _add_probe(analyses)


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


# ---- neighbours ----------------------------------------------------------------------------

def _add_neighbours(analyses: argparse._SubParsersAction) -> None:
    p = analyses.add_parser(
        "neighbours", help="nearest contextual occurrences of a word in a corpus (Table 4)",
        description="For WORD in SENTENCE: the k corpus tokens nearest by cosine at --layer "
        "(the sentences shown, the word marked), beside WORD's nearest corpus words in the "
        "static layer 0. The corpus is indexed once (in --index-dir, named by the model's "
        "weights, the corpus content, the layer and --dtype) and searched exactly.",
    )
    p.add_argument("--corpus", required=True,
                   help="UTF-8 text, one tokenized sentence per line (as `elmo embed` reads)")
    p.add_argument("--sentence", required=True, help="the context, tokens separated by spaces")
    p.add_argument("--word", required=True, help="a token of --sentence")
    p.add_argument("--occurrence", type=int, default=1,
                   help="which occurrence of --word in --sentence (1-based, default 1)")
    p.add_argument("--layer", type=int, default=None,
                   help="layer for contextual neighbours (default: the top layer)")
    p.add_argument("-k", type=int, default=5, help="neighbours to show (default 5)")
    p.add_argument("--context", type=int, default=12,
                   help="tokens shown on each side of a neighbour in the table (default 12)")
    p.add_argument("--index-dir", default=None,
                   help="where corpus indexes are kept (default: $ELMO_CACHE/neighbours, "
                   "else ~/.cache/elmo/neighbours)")
    p.add_argument("--dtype", choices=("float16", "float32"), default="float16",
                   help="storage of the index's unit vectors (default float16: half the disk; "
                   "cosines then differ by ~1e-3 from float32)")
    _model_options(p)
    p.set_defaults(run=_run_neighbours)


def _run_neighbours(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from elmo.analysis.neighbours import NeighbourIndex, static_vectors
    from elmo.errors import ElmoError

    if args.k < 1:
        parser.error("-k must be at least 1")
    tokens = args.sentence.split()
    found = [i for i, t in enumerate(tokens) if t == args.word]
    if len(found) < args.occurrence or args.occurrence < 1:
        raise ElmoError(f"--word {args.word!r} occurs {len(found)} time(s) in --sentence "
                        f"{tokens}; give one of its tokens (and --occurrence up to that count)")
    position = found[args.occurrence - 1]
    embedder = _embedder(args, parser)
    layer = embedder.model.num_layers - 1 if args.layer is None else args.layer
    index = NeighbourIndex.open_or_build(embedder, args.corpus, layer, args.index_dir,
                                         args.dtype, progress=not args.quiet)
    query = embedder.embed_sentence(tokens)[layer, position]
    occurrences = index.nearest_occurrences(query, args.k)
    words = index.nearest_words(static_vectors(embedder.model, [args.word])[0], args.k,
                                args.word)
    index.close()
    if args.json:
        print(json.dumps({
            "word": args.word, "sentence": tokens, "position": position, "layer": layer,
            "static": [{"word": w, "cosine": c} for w, c in words],
            "contextual": [{"line": o.line, "position": o.position, "cosine": o.cosine,
                            "sentence": o.tokens} for o in occurrences],
        }, ensure_ascii=False))
        return 0
    print(f"{args.word!r} in: {_marked(tokens, position)}\n")
    print("static (layer 0), nearest corpus words:")
    print(format_table(["word", "cosine"], [[w, c] for w, c in words], digits=3))
    print(f"\ncontextual (layer {layer}), nearest occurrences in {args.corpus}:")
    print(format_table(["cosine", "line", "sentence"],
                       [[o.cosine, o.line + 1, _marked(o.tokens, o.position, args.context)]
                        for o in occurrences], digits=3))
    return 0


def _marked(tokens: list[str], position: int, context: int | None = None) -> str:
    """The sentence with the token at `position` in [brackets], cut to `context` tokens on
    each side."""
    start, end = 0, len(tokens)
    if context is not None:
        start, end = max(0, position - context), min(len(tokens), position + context + 1)
    words = [f"[{t}]" if i == position else t for i, t in enumerate(tokens)][start:end]
    return " ".join(["..."] * (start > 0) + words + ["..."] * (end < len(tokens)))


# ---- probe ---------------------------------------------------------------------------------

def _add_probe(analyses: argparse._SubParsersAction) -> None:
    p = analyses.add_parser(
        "probe", help="linear probes of each layer for token tags, e.g. POS (Table 6)",
        description="Softmax regression (scikit-learn, standardised features) on the frozen "
        "vectors of each layer 0..L alone and of the layer average, trained on --train and "
        "scored by token accuracy on --test; each sentence is embedded once for all layers. "
        "Defaults: UPOS tags of CoNLL-U files (Universal Dependencies).",
    )
    p.add_argument("--train", required=True, metavar="FILE", help="tagged training data "
                   "(plain or .gz)")
    p.add_argument("--test", required=True, metavar="FILE", help="tagged test data")
    p.add_argument("--format", choices=("conllu", "conll"), default="conllu",
                   help="conllu (default) or conll (white-space columns)")
    p.add_argument("--conllu-tag", choices=("upos", "xpos"), default="upos",
                   help="conllu: the tag to probe (default upos)")
    p.add_argument("--token-column", type=int, default=0, help="conll: 0-based (default 0)")
    p.add_argument("--tag-column", type=int, default=-1,
                   help="conll: 0-based, negative from the end (default -1, the last)")
    p.add_argument("--encoding-errors", choices=("strict", "replace"), default="strict",
                   help="strict: stop at a line that is not UTF-8 (default); replace")
    p.add_argument("--c", type=float, default=1.0,
                   help="inverse L2 regularisation strength (default 1.0)")
    p.add_argument("--max-iter", type=int, default=300, help="L-BFGS iterations (default 300)")
    _model_options(p)
    p.set_defaults(run=_run_probe)


def _run_probe(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from elmo.analysis.probe import (
        check_tagged,
        majority_accuracy,
        probe_layers,
        token_features,
    )
    from elmo.tasks.readers import read_conll, read_conllu

    if args.format == "conllu":
        fix = "CoNLL-U files have their tags in UPOS or XPOS (--conllu-tag)"
        options = {"tag": args.conllu_tag, "encoding_errors": args.encoding_errors}
        read = read_conllu
    else:
        fix = (f"--tag-column {args.tag_column} is not a tag column of this file; "
               f"give the right --tag-column (0-based, negative counts from the end)")
        options = {"token_column": args.token_column, "tag_column": args.tag_column,
                   "encoding_errors": args.encoding_errors}
        read = read_conll
    splits = {}
    for name in ("train", "test"):
        path = getattr(args, name)
        splits[name] = read(path, **options)
        check_tagged(splits[name], path, fix)
    embedder = _embedder(args, parser)
    train, test = (token_features(embedder, sentences, f"embedding {name}", not args.quiet)
                   for name, sentences in splits.items())
    accuracy = probe_layers(train, test, args.c, args.max_iter)
    majority = majority_accuracy(train.tags, test.tags)
    if args.json:
        print(json.dumps({"accuracy": accuracy, "majority": majority,
                          "train_tokens": len(train.tags), "test_tokens": len(test.tags),
                          "tags": len(set(train.tags.tolist()))}))
        return 0
    print(f"probe accuracy on {args.test} ({len(test.tags):,} tokens; trained on "
          f"{len(train.tags):,})")
    rows = [["majority tag", majority]]
    rows += [["layer average" if k == "average" else f"layer {k}", a]
             for k, a in accuracy.items()]
    print(format_table(["representation", "accuracy"], rows))
    return 0
