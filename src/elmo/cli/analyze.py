"""`elmo analyze`: what each biLM layer knows (the paper's section 5), one analysis per
subcommand; each prints a table (or one JSON object with --json)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from elmo.analysis.report import format_table
from elmo.cli.common import add_overwrite, add_quantize
from elmo.embedding import Embedder
from elmo.errors import ElmoError
from elmo.io.atomic import atomic_write_text, claim_output
from elmo.tasks.config import TaskConfig


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
    _add_layer_weights(analyses)
    _add_sample_efficiency(analyses)


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="default",
                   help="a name `elmo embed` takes (default, small, efml:zhs, ...) or a model "
                   "directory (ours, bilm-tf, ELMoForManyLangs) "
                   "(default: default, the shipped model)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default 64)")
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    add_quantize(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _embedder(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Embedder:
    if args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    return Embedder.from_pretrained(args.model, device=args.device, batch_size=args.batch_size,
                                    quantize=args.quantize)


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
                   help="where corpus indexes are kept (default: neighbours/ in "
                   "$ELMO_CACHE, else $XDG_CACHE_HOME/elmo, else ~/.cache/elmo)")
    p.add_argument("--dtype", choices=("float16", "float32"), default="float16",
                   help="storage of the index's unit vectors (default float16: half the disk; "
                   "cosines then differ by ~1e-3 from float32)")
    _model_options(p)
    p.set_defaults(run=_run_neighbours)


def _run_neighbours(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from elmo.analysis.neighbours import NeighbourIndex, static_vectors

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
    accuracy = probe_layers(train, test, args.c, args.max_iter, progress=not args.quiet)
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


# ---- layer-weights -------------------------------------------------------------------------

def _add_layer_weights(analyses: argparse._SubParsersAction) -> None:
    p = analyses.add_parser(
        "layer-weights", help="learned mix weights of trained task runs (Figure 2)",
        description="Read layer_weights.json (softmax(s) of each mix) of each run directory "
        "of `elmo task train --elmo MODEL`; print a table (or JSON) and draw a heat map, one "
        "row per run and placement (input/output), one column per layer. Runs are named by "
        "the shortest end of their path that tells them apart.",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--plot", metavar="PNG", help="write the heat map to this PNG file")
    add_overwrite(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(run=_run_layer_weights)


@contextmanager
def _claim_plot(args: argparse.Namespace) -> Iterator[None]:
    """--plot claimed (refused if it exists, without --overwrite) before the work starts."""
    if args.plot is None:
        yield
        return
    with claim_output(args.plot, overwrite=args.overwrite):
        yield


def _run_layer_weights(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from elmo.analysis.layer_weights import (
        plot_layer_weights,
        read_layer_weights,
        run_names,
        weights_matrix,
    )

    mixes = [mix for run_dir, name in zip(args.run_dirs, run_names(args.run_dirs), strict=True)
             for mix in read_layer_weights(run_dir, name)]
    values = weights_matrix(mixes)
    with _claim_plot(args):
        if args.plot:
            plot_layer_weights(mixes, args.plot)
    if args.json:
        print(json.dumps({"runs": [{"run": str(m.run), "placement": m.placement,
                                    "weights": m.weights} for m in mixes]}))
        return 0
    print(format_table(["run (placement)", *(f"layer {k}" for k in range(values.shape[1]))],
                       [[m.label, *m.weights] for m in mixes], digits=3))
    if args.plot:
        print(f"heat map: {args.plot}")
    return 0


# ---- sample-efficiency ---------------------------------------------------------------------

def _add_sample_efficiency(analyses: argparse._SubParsersAction) -> None:
    from elmo.analysis.sample_efficiency import DEFAULT_FRACTIONS, DEFAULT_SEEDS

    p = analyses.add_parser(
        "sample-efficiency", help="a task trained on growing fractions of its data, with "
        "and without ELMo (Figure 1)",
        usage="elmo analyze sample-efficiency --out DIR [options] -- TASK_TRAIN_OPTIONS",
        description="Train one task of `elmo task train` on nested fractions of its training "
        "data (for a seed, each sample lies inside the larger ones), the task model alone and "
        "+ELMo (--model), with each seed. TASK_TRAIN_OPTIONS, after --, are those of `elmo "
        "task train` (--task, --train, --dev, --test, --format ...) except --out, --elmo, "
        "--seed and --train-fraction. Runs go to OUT/NAME and resume when the command is run "
        "again; OUT/sample_efficiency.json holds every run's score and the summary. Scores "
        "are on --test when given, else on dev. Give --min-updates N after -- so that the "
        "smallest fractions get N updates too (their epochs then pass over the data several "
        "times).",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="directory of the runs")
    p.add_argument("--model", default="default",
                   help="the biLM for +ELMo (any name `elmo embed` takes; default: default)")
    p.add_argument("--fractions", type=_floats, default=list(DEFAULT_FRACTIONS),
                   metavar="F[,F...]", help="fractions of the training data (default "
                   f"{','.join(f'{f:g}' for f in DEFAULT_FRACTIONS)})")
    p.add_argument("--seeds", type=_ints, default=list(DEFAULT_SEEDS), metavar="S[,S...]",
                   help=f"seeds (default {','.join(map(str, DEFAULT_SEEDS))})")
    p.add_argument("--plot", metavar="PNG", help="write the plot (error bars: std over seeds)")
    add_overwrite(p)
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="runs at a time, each in its own process with its share of the torch "
                   "threads; N = the number of cores is fastest for small task models "
                   "(default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("task_options", nargs=argparse.REMAINDER, metavar="-- TASK_TRAIN_OPTIONS")
    p.set_defaults(run=_run_sample_efficiency)


def _numbers(kind: type) -> Callable[[str], list]:
    """An argparse type: comma-separated numbers of `kind`, with an error that says so."""
    def parse(text: str) -> list:
        try:
            return [kind(x) for x in text.split(",") if x]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a comma-separated list of {kind.__name__}s") from None
    return parse


_floats, _ints = _numbers(float), _numbers(int)


def _task_config(task_options: list[str], quiet: bool) -> TaskConfig:
    """A TaskConfig from `elmo task train` options, parsed by that command's own parser."""
    from elmo.cli import task

    options = task_options[1:] if task_options[:1] == ["--"] else task_options
    owned = {"--out", "--elmo", "--seed", "--train-fraction"} & {o.split("=")[0] for o in options}
    if owned:
        raise ElmoError(f"{', '.join(sorted(owned))}: set by sample-efficiency itself (--out "
                        f"DIR, --model, --seeds, --fractions); leave them out after --")
    parser = argparse.ArgumentParser(prog="elmo analyze sample-efficiency ... --")
    task.add_parser(parser.add_subparsers(), "task")
    args = parser.parse_args(["task", "train", *options, "--out", "-", "--elmo", "none"])
    fields = {k: v for k, v in vars(args).items() if k in TaskConfig.__dataclass_fields__}
    return TaskConfig(**{**fields, "progress": not quiet})


def _run_sample_efficiency(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from elmo.analysis.sample_efficiency import (
        plan_runs,
        plot_sample_efficiency,
        run_study,
        summarize,
    )

    base = _task_config(args.task_options, args.quiet)
    with _claim_plot(args):
        rows = run_study(base, plan_runs(args.fractions, args.seeds, args.model), args.out,
                         args.jobs)
        summary = summarize(rows)
        metric, split = rows[0]["metric"], rows[0]["split"]
        result = {"metric": metric, "split": split, "model": args.model, "summary": summary,
                  "runs": rows}
        atomic_write_text(Path(args.out) / "sample_efficiency.json",
                          json.dumps(result, indent=2))
        if args.plot:
            plot_sample_efficiency(summary, args.plot, metric, split)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{split} {metric} (mean ± std over {len(args.seeds)} seed(s)); runs in {args.out}")
    print(format_table(["system", "fraction", "train examples", "updates", "mean", "std"],
                       [[r["system"], f"{r['fraction']:g}", r["n_train"], r["updates"],
                         r["mean"], r["std"]] for r in summary], digits=2))
    return 0
