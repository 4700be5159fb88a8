"""`elmo task`: train a task model with ELMo (tagging, classification, pairs, answer spans),
evaluate it, predict with it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from types import SimpleNamespace

from elmo.cli.common import DefaultsHelpFormatter, add_overwrite, add_quantize
from elmo.io.atomic import claim_output
from elmo.io.textfile import ENCODING_ERRORS
from elmo.modules.scalar_mix import MIX_MODES
from elmo.tasks.config import TaskConfig
from elmo.tasks.metrics import METRICS
from elmo.tasks.model import ELMO_AT
from elmo.tasks.readers import FORMATS, SCHEMES, format_of_name, formats_help
from elmo.tasks.recipe import evaluate_run, export_text, predict_file, train_task
from elmo.tasks.registry import TASKS
from elmo.tasks.span import ANSWER_METRICS
from elmo.tokenize import TOKENIZERS

# the defaults of TaskConfig's optional fields, for the options and their help
DEFAULTS = SimpleNamespace(**{f.name: f.default for f in dataclasses.fields(TaskConfig)})


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(name, help="train, evaluate and use task models with ELMo",
                       description="Task models that use ELMo: a BiLSTM-CRF tagger, a sentence "
                       "classifier, an ESIM-style sentence-pair model, a BiDAF-style "
                       "question-answering (answer span) model, a semantic role labeller "
                       "and a span-ranking coreference model.")
    commands = p.add_subparsers(dest="task_command", required=True, metavar="ACTION")
    _add_train(commands)
    _add_evaluate(commands)
    _add_predict(commands)
    _add_text(commands)


def _runtime_options(p: argparse.ArgumentParser) -> None:
    """Options of every action: cache, device, progress (`elmo` adds --threads)."""
    p.add_argument("--cache-dir", metavar="DIR",
                   help="feature cache of the frozen biLM's layers (default: features/ in "
                   "$ELMO_CACHE, else $XDG_CACHE_HOME/elmo, else ~/.cache/elmo)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    p.add_argument("--quiet", action="store_true", help="no progress bars or messages")


def _format_options(group: argparse._ArgumentGroup) -> None:
    """--format and the readers' options."""
    d = DEFAULTS
    group.add_argument("--format", choices=FORMATS,
                       help=f"{formats_help()}. Files may be .gz or .xz (default: the format "
                       "whose suffix the file's name has)")
    group.add_argument("--token-column", type=int, default=d.token_column, help="conll")
    group.add_argument("--tag-column", type=int, default=d.tag_column,
                      help="conll (negative: from the end)")
    group.add_argument("--scheme", choices=SCHEMES,
                      help="conll: span tags in this scheme, scored by span F1 (default: "
                      "tags are plain labels, scored by accuracy)")
    group.add_argument("--conllu-tag", dest="tag", choices=("upos", "xpos"), default=d.tag,
                       help="conllu")
    group.add_argument("--text-columns", type=lambda s: s.split(","), metavar="A[,B]",
                      help="tsv: one column (classification) or two (pair)")
    group.add_argument("--label-column", metavar="C", help="tsv")
    group.add_argument("--tokenizer", choices=TOKENIZERS, default=d.tokenizer,
                       help="label-text, tsv and nli sentences, squad passages and questions "
                       "(default: the tokenizer --elmo records, as `elmo embed`; else "
                       "whitespace; Chinese: chars)")
    group.add_argument("--segment-words", type=int, default=d.segment_words, metavar="N",
                       help="conll2012 coreference: documents cut into segments of at most N "
                       "words (whole sentences where they fit), which bounds the memory; "
                       "mentions are linked within a segment")
    group.add_argument("--encoding-errors", choices=ENCODING_ERRORS, default=d.encoding_errors,
                      help="strict: stop at a line that is not UTF-8; replace: U+FFFD")


def _add_train(commands: argparse._SubParsersAction) -> None:
    d = DEFAULTS
    p = commands.add_parser(
        "train", formatter_class=DefaultsHelpFormatter,
        help="train a task model (resumable)",
        description="Train a task model on --train, keep the epoch best on --dev (early "
        "stopping), score --test with it. OUT receives elmo-run.json (it marks a task run), "
        "config.json, vocab.txt, "
        "model.safetensors, layer_weights.json, metrics.jsonl, checkpoint.safetensors and "
        "result.json. Run the same command again to resume after an interruption (--epochs "
        "may grow, unless the run stopped early).")
    data = p.add_argument_group("data")
    data.add_argument("--task", required=True, choices=TASKS)
    data.add_argument("--train", required=True, metavar="FILE")
    data.add_argument("--dev", metavar="FILE", help="development data: early stopping and "
                      "the best epoch")
    data.add_argument("--dev-fraction", type=float, default=0.0, metavar="F",
                      help="instead of --dev: hold out this fraction of --train (the same part "
                      "in every run; --task span holds out whole articles, or passages)")
    data.add_argument("--test", metavar="FILE", help="scored with the best model at the end")
    data.add_argument("--out", required=True, metavar="DIR", help="run directory: new, empty, "
                      "or this run's (resumed)")
    _format_options(data)
    data.add_argument("--train-fraction", type=float, default=d.train_fraction, metavar="F",
                      help="train on this fraction of --train, sampled with --seed (the "
                      "samples of smaller fractions are inside those of larger ones)")

    elmo = p.add_argument_group("ELMo")
    elmo.add_argument("--elmo", required=True, metavar="MODEL|none",
                      help="a biLM `elmo embed` takes (frozen; its layers are cached), or "
                      "none for the task model alone")
    elmo.add_argument("--elmo-mix", default=d.elmo_mix, metavar="|".join(MIX_MODES),
                      help="learned: softmax-weighted layers, trained; average; top; layer:K "
                      "(0: the context-free token layer)")
    elmo.add_argument("--elmo-at", choices=ELMO_AT, default=d.elmo_at,
                      help="the task RNN's input, its output, or both (two mixes)")
    elmo.add_argument("--l2", type=float, default=d.l2, metavar="LAMBDA",
                      help="lambda * sum_j s_j^2 added to the loss, per learned mix")
    elmo.add_argument("--mix-lr", type=float, default=d.mix_lr,
                      help="Adam learning rate of the mixes' s and gamma")
    elmo.add_argument("--scale-layers", action=argparse.BooleanOptionalAction,
                      default=d.scale_layers,
                      help="divide each layer by its RMS over the training file before mixing, "
                      "so that the learned weights compare layers on equal terms")
    elmo.add_argument("--layer-norm", action="store_true",
                      help="normalise each layer over the batch before mixing (as the "
                      "original; a sentence's output then depends on its batch)")
    elmo.add_argument("--elmo-dropout", type=float, default=d.elmo_dropout,
                      help="on each mix's output")
    elmo.add_argument("--fine-tune", action="store_true",
                      help="train the biLM too, ULMFiT-style: learning rates divided by 2.6 "
                      "per layer group downwards, slanted triangular schedule, one more group "
                      "unfrozen each epoch from the top (no feature cache: slower)")

    train = p.add_argument_group("training")
    train.add_argument("--metric", choices=METRICS,
                       help="default: span-f1 with --scheme, squad-f1 for --task span, "
                       "srl-f1 (the CoNLL-2005 evaluation's F1) for --task srl, coref-f1 "
                       "(the CoNLL F1) for --task coref, else accuracy. --task span: " + "; ".join(
                           f"{m.name}: {m.help}" for m in ANSWER_METRICS.values()))
    train.add_argument("--seed", type=int, default=d.seed,
                       help="initialisation, batch order and --train-fraction sample")
    train.add_argument("--epochs", type=int, default=d.epochs,
                       help="at most this many (the best dev epoch is kept)")
    train.add_argument("--patience", type=int, default=d.patience,
                       help="stop after this many epochs without a better dev score")
    train.add_argument("--min-updates", type=int, default=d.min_updates, metavar="N",
                       help="make at least N updates in --epochs epochs: an epoch (one dev "
                       "score) is then several passes over a small training set")
    train.add_argument("--batch-size", type=int, default=d.batch_size, help="examples")
    train.add_argument("--lr", type=float, default=d.lr, help="Adam learning rate")
    train.add_argument("--embedding-dim", type=int, default=d.embedding_dim,
                       help="word embeddings (default: the --word-vectors' dimension, else "
                       "100)")
    train.add_argument("--word-vectors", metavar="FILE",
                       help="start the word embeddings from these static vectors (word2vec / "
                       "GloVe text format, header line optional, may be .gz); words the file "
                       "lacks start random; the vocabulary's coverage is printed and kept in "
                       "config.json")
    train.add_argument("--freeze-word-vectors", action="store_true",
                       help="keep the word embeddings fixed during training")
    train.add_argument("--max-answer-tokens", type=int, default=d.max_answer_tokens,
                       metavar="N", help="--task span: the longest answer predicted")
    train.add_argument("--max-span-width", type=int, default=d.max_span_width, metavar="N",
                       help="--task coref: the longest mention considered, in words")
    train.add_argument("--top-span-ratio", type=float, default=d.top_span_ratio,
                       metavar="R", help="--task coref: the R * words best-scoring spans of "
                       "a segment are kept as mentions")
    train.add_argument("--max-antecedents", type=int, default=d.max_antecedents,
                       metavar="K", help="--task coref: each kept span is scored against "
                       "the K nearest earlier ones (and no antecedent)")
    train.add_argument("--hidden-dim", type=int, default=d.hidden_dim,
                       help="BiLSTM size per direction")
    train.add_argument("--dropout", type=float, default=d.dropout, help="in the task model")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a run of other options in --out, or write into a directory "
                   "that holds other files (a biLM directory is never replaced)")
    _runtime_options(p)
    p.set_defaults(run=run_train)


def _add_evaluate(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("evaluate", help="score a trained task model on a file",
                            description="Score the best model of run DIR on --test (in the "
                            "run's format and options) with the run's metric.")
    p.add_argument("run_dir", metavar="DIR")
    p.add_argument("--test", required=True, metavar="FILE")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: metric, score (0..100), n, file, run (span: "
                   "also exact_match; srl: also precision, recall, propositions; coref: "
                   "also the F1 of muc, bcub and ceafe)")
    _runtime_options(p)
    add_quantize(p)
    p.set_defaults(run=run_evaluate)


def _add_predict(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("predict", help="tag, label or answer a file with a trained "
                            "task model",
                            description="Write OUTPUT: INPUT (in the run's format) with its "
                            "tags or labels replaced by the model's, or added where it has "
                            "none (conll, tsv, nli: every line, those without a gold label "
                            "too); for --format squad, SQuAD's prediction file {question id: "
                            "answer text}; for --task srl, the CoNLL-2005 props layout that its "
                            "srl-eval.pl reads; for --task coref, the documents with the "
                            "predicted clusters in the last column.")
    p.add_argument("run_dir", metavar="DIR")
    p.add_argument("input", metavar="INPUT")
    p.add_argument("output", metavar="OUTPUT")
    add_overwrite(p)
    _runtime_options(p)
    add_quantize(p)
    p.set_defaults(run=run_predict)


def _add_text(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "text", formatter_class=DefaultsHelpFormatter,
        help="write a task file's sentences one per line (for `elmo train --init-from`)",
        description="Write the sentences of INPUT (both sentences of a pair), tokens "
        "separated by spaces, one per line, into OUTPUT: the task's own text, to continue "
        "training a biLM on it (domain adaptation: `elmo train --init-from MODEL --train "
        "OUTPUT ...`).")
    p.add_argument("input", metavar="INPUT")
    p.add_argument("output", metavar="OUTPUT")
    add_overwrite(p)
    group = p.add_argument_group("format")
    _format_options(group)
    p.set_defaults(run=run_text)


def _overrides(args: argparse.Namespace) -> dict:
    return {"cache_dir": args.cache_dir, "device": args.device, "progress": not args.quiet,
            "quantize": args.quantize}


def run_train(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    options = {k: v for k, v in vars(args).items() if k in TaskConfig.__dataclass_fields__}
    result = train_task(TaskConfig(**options, progress=not args.quiet), args.overwrite)
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
