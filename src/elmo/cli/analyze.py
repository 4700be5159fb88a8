"""`elmo analyze`: what each biLM layer knows (the paper's section 5), one analysis per
subcommand; each prints a table (or one JSON object with --json)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from elmo.analysis.report import format_table
from elmo.analysis.settings import (
    LayerWeightsSettings,
    ModelOptions,
    NeighboursSettings,
    ProbeSettings,
    SampleEfficiencySettings,
    WsdSettings,
)
from elmo.cli.common import add_options, options_given
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
    for analysis_name, analysis in ANALYSES.items():
        parser = analyses.add_parser(analysis_name, help=analysis.help, usage=analysis.usage,
                                     description=analysis.description)
        for settings in analysis.settings:
            add_options(parser, settings)
        parser.set_defaults(run=analysis.run)


@dataclass(frozen=True)
class Analysis:
    """An analysis of `elmo analyze`: its `help` and `description`, the settings records
    whose fields are its options (in order), how it `run`s (args, parser) -> exit status, and
    its `usage` where argparse's would mislead."""

    help: str
    description: str
    settings: tuple[type, ...]
    run: Callable[[argparse.Namespace, argparse.ArgumentParser], int]
    usage: str | None = None


def _embedder(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Embedder:
    if args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    return Embedder.from_pretrained(args.model, device=args.device, batch_size=args.batch_size,
                                    quantize=args.quantize)


# ---- wsd -----------------------------------------------------------------------------------

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

def _run_probe(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from elmo.analysis.probe import (
        TAGGED_FORMATS,
        majority_accuracy,
        probe_layers,
        token_features,
    )

    settings = options_given(args, ProbeSettings)
    tagged = TAGGED_FORMATS[settings.format]
    splits = {name: tagged.read(settings.format, getattr(settings, name), settings)
              for name in ("train", "test")}
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


ANALYSES = {
    "wsd": Analysis(
        "1-nearest-neighbour word sense disambiguation per layer (Table 5)",
        "Sense vectors are the mean of a layer's vectors of each sense's occurrences in --train "
        "(SemCor); each test word takes the nearest (cosine) sense of its lemma and part of "
        "speech seen there, else WordNet's first sense. F1 per evaluation set (the WSD "
        "evaluation framework's scorer rules) per layer, beside the WordNet first-sense "
        "baseline.", (WsdSettings, ModelOptions), _run_wsd),
    "neighbours": Analysis(
        "nearest contextual occurrences of a word in a corpus (Table 4)",
        "For WORD in SENTENCE: the k corpus tokens nearest by cosine at --layer (the sentences "
        "shown, the word marked), beside WORD's nearest corpus words in the static layer 0. "
        "The corpus is indexed once (in --index-dir, named by the model's weights, the corpus "
        "content, the layer and --dtype) and searched exactly.",
        (NeighboursSettings, ModelOptions), _run_neighbours),
    "probe": Analysis(
        "linear probes of each layer for token tags, e.g. POS (Table 6)",
        "Softmax regression (scikit-learn, standardised features) on the frozen vectors of "
        "each layer 0..L alone and of the layer average, trained on --train and scored by "
        "token accuracy on --test; each sentence is embedded once for all layers. Defaults: "
        "UPOS tags of CoNLL-U files (Universal Dependencies).",
        (ProbeSettings, ModelOptions), _run_probe),
    "layer-weights": Analysis(
        "learned mix weights of trained task runs (Figure 2)",
        "Read layer_weights.json (softmax(s) of each mix) of each run directory of `elmo task "
        "train --elmo MODEL`; print a table (or JSON) and draw a heat map, one row per run and "
        "placement (input/output), one column per layer. Runs are named by the shortest end "
        "of their path that tells them apart.", (LayerWeightsSettings,), _run_layer_weights),
    "sample-efficiency": Analysis(
        "a task trained on growing fractions of its data, with and without ELMo (Figure 1)",
        "Train one task of `elmo task train` on nested fractions of its training data (for a "
        "seed, each sample lies inside the larger ones), the task model alone and +ELMo "
        "(--model), with each seed. TASK_TRAIN_OPTIONS, after --, are those of `elmo task "
        "train` (--task, --train, --dev, --test, --format ...) except --out, --elmo, --seed "
        "and --train-fraction. Runs go to OUT/NAME and resume when the command is run again; "
        "OUT/sample_efficiency.json holds every run's score and the summary. Scores are on "
        "--test when given, else on dev. Give --min-updates N after -- so that the smallest "
        "fractions get N updates too (their epochs then pass over the data several times).",
        (SampleEfficiencySettings,), _run_sample_efficiency,
        usage="elmo analyze sample-efficiency --out DIR [options] -- TASK_TRAIN_OPTIONS"),
}
