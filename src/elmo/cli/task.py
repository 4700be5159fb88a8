"""`elmo task`: train a task model with ELMo (tagging, classification, pairs, answer spans),
evaluate it, predict with it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass

from elmo.cli.common import (
    DefaultsHelpFormatter,
    add_option,
    add_overwrite,
    add_quantize,
    options_given,
)
from elmo.io.atomic import claim_output
from elmo.options import is_option, option, option_as
from elmo.tasks.config import TaskConfig
from elmo.tasks.readers import FORMATS, format_of_name
from elmo.tasks.recipe import evaluate_run, export_text, predict_file, train_task

_CONFIG = {f.name: f for f in dataclasses.fields(TaskConfig)}


@dataclass(frozen=True)
class TaskCommand:
    """What the actions of `elmo task` take beside a TaskConfig's fields."""

    run_dir: str = option(help=None, positional=True, metavar="DIR")
    input: str = option(help=None, positional=True, metavar="INPUT")
    output: str = option(help=None, positional=True, metavar="OUTPUT")
    test: str = option_as(_CONFIG["test"], help=None, required=True)
    json: bool = option(False, "print one JSON object: metric, score (0..100), n, file, run "
                        "(span: also exact_match; srl: also precision, recall, propositions; "
                        "coref: also the F1 of muc, bcub and ceafe)")
    overwrite: bool = option(False, "replace a run of other options in --out, or write into a "
                             "directory that holds other files (a biLM directory is never "
                             "replaced)")
    quiet: bool = option(False, "no progress bars or messages")


Entry = str | Callable[[argparse._ActionsContainer], None]
# the format options, in order: --format and the `options` of the records of FORMATS
FORMAT_OPTIONS = ("format", "token_column", "tag_column", "scheme", "tag", "text_columns",
                  "label_column", "tokenizer", "segment_words", "encoding_errors")
RUNTIME_OPTIONS = ("cache_dir", "device", "quiet")  # of every action but text (`elmo` adds
# --threads)


@dataclass(frozen=True)
class Action:
    """An action of `elmo task`: its `help` and `description`, its option groups {title (None:
    the parser's own): entries, each a field's name (of `records`, the first that has it) or
    an adder of options that other commands share}, how it `run`s, and its `formatter`."""

    help: str
    description: str
    groups: dict[str | None, tuple[Entry, ...]]
    run: Callable[[argparse.Namespace, argparse.ArgumentParser], int]
    records: tuple[type, ...] = (TaskConfig, TaskCommand)
    formatter: type[argparse.HelpFormatter] = argparse.HelpFormatter

    def option(self, name: str) -> dataclasses.Field:
        """The field `name` of the first of `records` that has it as an option."""
        return next(f for record in self.records for f in dataclasses.fields(record)
                    if f.name == name and is_option(f))


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(name, help="train, evaluate and use task models with ELMo",
                       description="Task models that use ELMo: a BiLSTM-CRF tagger, a sentence "
                       "classifier, an ESIM-style sentence-pair model, a BiDAF-style "
                       "question-answering (answer span) model, a semantic role labeller "
                       "and a span-ranking coreference model.")
    commands = p.add_subparsers(dest="task_command", required=True, metavar="ACTION")
    for action_name, action in ACTIONS.items():
        parser = commands.add_parser(action_name, help=action.help,
                                     description=action.description,
                                     formatter_class=action.formatter)
        for title, entries in action.groups.items():
            group = parser if title is None else parser.add_argument_group(title)
            for entry in entries:
                if callable(entry):  # options that other commands share
                    entry(group)
                else:
                    add_option(group, action.option(entry))
        parser.set_defaults(run=action.run)


def _overrides(args: argparse.Namespace) -> dict:
    return {"cache_dir": args.cache_dir, "device": args.device, "progress": not args.quiet,
            "quantize": args.quantize}


def run_train(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    result = train_task(options_given(args, TaskConfig, progress=not args.quiet),
                        args.overwrite)
    if not args.quiet:
        test = f", test {result['test']:.2f}" if result.get("test") is not None else ""
        print(f"{result['metric']}: dev {result['dev']:.2f} (epoch {result['best_epoch']})"
              f"{test}; model in {args.out}", file=sys.stderr)
    return 0


def run_evaluate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    result = evaluate_run(args.run_dir, args.test, **_overrides(args))
    if args.json:
        print(json.dumps(result))
    else:
        others = "".join(f", {k.replace('_', ' ')} {_number(v)}" for k, v in result.items()
                         if k not in ("metric", "score", "n", "file", "run"))
        print(f"{result['metric']} {result['score']:.2f}{others} on {result['file']} "
              f"({result['n']} examples)")
    return 0


def _number(value: float | int) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def run_predict(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    with claim_output(args.output, inputs=[args.input], overwrite=args.overwrite):
        n = predict_file(args.run_dir, args.input, args.output, **_overrides(args))
    if not args.quiet:
        print(f"{n} examples predicted into {args.output}", file=sys.stderr)
    return 0


def run_text(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name = args.format or format_of_name(args.input)
    if name is None:
        parser.error(f"the name of {args.input} does not tell its format: give --format")
    dataset = FORMATS[name]
    problem = dataset.problem(vars(args), None)
    if problem:
        parser.error(problem)
    with claim_output(args.output, inputs=[args.input], overwrite=args.overwrite):
        args.tokenizer = args.tokenizer or "whitespace"  # no biLM here to record one
        n = export_text(args.input, args.output, name,
                        **dataset.reader_options(vars(args), labeled=False))
    print(f"{n} sentences written to {args.output}", file=sys.stderr)
    return 0


ACTIONS: dict[str, Action] = {
    "train": Action(
        "train a task model (resumable)",
        "Train a task model on --train, keep the epoch best on --dev (early stopping), score "
        "--test with it. OUT receives elmo-run.json (it marks a task run), config.json, "
        "vocab.txt, model.safetensors, layer_weights.json, metrics.jsonl, "
        "checkpoint.safetensors and result.json. Run the same command again to resume after "
        "an interruption (--epochs may grow, unless the run stopped early).",
        {"data": ("task", "train", "dev", "dev_fraction", "test", "out", *FORMAT_OPTIONS,
                  "train_fraction"),
         "ELMo": ("elmo", "elmo_mix", "elmo_at", "l2", "mix_lr", "scale_layers", "layer_norm",
                  "elmo_dropout", "fine_tune"),
         "training": ("metric", "seed", "epochs", "patience", "min_updates", "batch_size",
                      "lr", "embedding_dim", "word_vectors", "freeze_word_vectors",
                      "max_answer_tokens", "max_span_width", "top_span_ratio",
                      "max_antecedents", "hidden_dim", "dropout"),
         None: ("overwrite", *RUNTIME_OPTIONS)},
        run_train, formatter=DefaultsHelpFormatter),
    "evaluate": Action(
        "score a trained task model on a file",
        "Score the best model of run DIR on --test (in the run's format and options) with "
        "the run's metric.",
        {None: ("run_dir", "test", "json", *RUNTIME_OPTIONS, add_quantize)},
        run_evaluate, records=(TaskCommand, TaskConfig)),
    "predict": Action(
        "tag, label or answer a file with a trained task model",
        "Write OUTPUT: INPUT (in the run's format) with its tags or labels replaced by the "
        "model's, or added where it has none (conll, tsv, nli: every line, those without a "
        "gold label too); for --format squad, SQuAD's prediction file {question id: answer "
        "text}; for --task srl, the CoNLL-2005 props layout that its srl-eval.pl reads; for "
        "--task coref, the documents with the predicted clusters in the last column.",
        {None: ("run_dir", "input", "output", add_overwrite, *RUNTIME_OPTIONS, add_quantize)},
        run_predict),
    "text": Action(
        "write a task file's sentences one per line (for `elmo train --init-from`)",
        "Write the sentences of INPUT (both sentences of a pair), tokens separated by "
        "spaces, one per line, into OUTPUT: the task's own text, to continue training a biLM "
        "on it (domain adaptation: `elmo train --init-from MODEL --train OUTPUT ...`).",
        {None: ("input", "output", add_overwrite), "format": FORMAT_OPTIONS},
        run_text, formatter=DefaultsHelpFormatter),
}
