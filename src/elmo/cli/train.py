"""`elmo train`: pretrain a biLM on a corpus, or continue training one (resumable, torchrun)."""

from __future__ import annotations

import argparse
import dataclasses

from elmo.config import PRESETS
from elmo.modules.language_model import FULL_SOFTMAX_MAX_VOCAB, SOFTMAX_MODES
from elmo.tokenize import TOKENIZER_NAMES
from elmo.training.config import DEFAULT_LR, DEFAULT_PRESET, OPTIMIZERS, SCHEDULES, TrainConfig
from elmo.training.trainer import train


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="pretrain a biLM on a corpus, or continue training one",
        description="Train a biLM on text files (one sentence per line, plain or .gz, globs "
        "allowed), streamed. OUT receives vocab.txt, run.json, checkpoint.safetensors, "
        "metrics.jsonl and the model (config.json + model.safetensors, softmax included: the "
        "best on --valid, else the last), which `elmo embed OUT ...` loads. Run the same "
        "command again to resume after an interruption. For several processes or GPUs, "
        "launch with `torchrun --nproc-per-node N -m elmo train ...`.",
    )
    data = p.add_argument_group("data")
    data.add_argument("--train", nargs="+", required=True, metavar="PATH",
                      help="training files or glob patterns (quote globs)")
    data.add_argument("--valid", metavar="PATH",
                      help="validation text: perplexity every --eval-every steps, best model")
    data.add_argument("--out", required=True, metavar="DIR", help="run directory")
    data.add_argument("--tokenizer", choices=TOKENIZER_NAMES, default="whitespace",
                      help="how lines become tokens (default whitespace)")
    data.add_argument("--vocab", metavar="FILE",
                      help="bilm-tf vocabulary file (default: built from the training files)")
    data.add_argument("--min-count", type=int, default=1,
                      help="building the vocabulary: keep words seen this often (default 1)")
    data.add_argument("--max-vocab", type=int, metavar="N",
                      help="building the vocabulary: keep the N most frequent words")
    data.add_argument("--shuffle-window", type=int, default=0, metavar="N",
                      help="shuffle sentences within windows of N (default 0: file order)")

    model = p.add_argument_group("model")
    model.add_argument("--preset", choices=sorted(PRESETS),
                       help=f"architecture of a new model (default {DEFAULT_PRESET})")
    model.add_argument("--init-from", metavar="MODEL",
                       help="continue training MODEL: a directory from `elmo train`, a "
                       "directory with an official options/weights pair, or a released name")
    model.add_argument("--dropout", type=float, default=0.1, help="default 0.1")
    model.add_argument("--softmax", choices=SOFTMAX_MODES, default="auto",
                       help=f"auto: full up to {FULL_SOFTMAX_MAX_VOCAB:,} words, else sampled")
    model.add_argument("--num-samples", type=int, default=8192,
                       help="sampled softmax candidates per batch (default 8192)")

    opt = p.add_argument_group("optimisation")
    opt.add_argument("--batch-size", type=int, default=128, help="rows per process (128)")
    opt.add_argument("--unroll-steps", type=int, default=20, help="BPTT window (default 20)")
    opt.add_argument("--max-steps", type=int, metavar="N", help="train N steps (overrides "
                     "--epochs)")
    opt.add_argument("--epochs", type=float, default=10.0,
                     help="passes over the counted training tokens (default 10)")
    opt.add_argument("--max-minutes", type=float, metavar="M",
                     help="time budget: stop after the first step that ends M minutes after "
                     "this process's first step, writing the checkpoint and model as at the "
                     "end. Running the same command again resumes and trains for another M "
                     "minutes (a resumed run counts only its own time). The lr schedule "
                     "still spans --max-steps / --epochs")
    opt.add_argument("--optimizer", choices=OPTIMIZERS, default="adagrad")
    opt.add_argument("--lr", type=float, help="peak learning rate (default: "
                     + ", ".join(f"{k} {v}" for k, v in DEFAULT_LR.items()) + ")")
    opt.add_argument("--clip-norm", type=float, default=10.0,
                     help="clip gradients to this global norm (default 10)")
    opt.add_argument("--seed", type=int, default=0)
    opt.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)")

    tune = p.add_argument_group("fine-tuning (ULMFiT)")
    tune.add_argument("--discriminative-lr", type=float, default=1.0, metavar="FACTOR",
                      help="divide each lower layer group's lr by FACTOR, e.g. 2.6 (groups: "
                      "token encoder, LSTM layers, softmax)")
    tune.add_argument("--schedule", choices=SCHEDULES, default="constant")
    tune.add_argument("--warmup-frac", type=float, default=0.1,
                      help="slanted-triangular: fraction of steps increasing (default 0.1)")
    tune.add_argument("--gradual-unfreeze", action="store_true",
                      help="train the softmax first, unfreeze one group downwards every "
                      "--unfreeze-every steps")
    tune.add_argument("--unfreeze-every", type=int, metavar="N",
                      help="steps between unfreezings (default: one epoch)")

    book = p.add_argument_group("bookkeeping")
    book.add_argument("--checkpoint-every", type=int, default=1000, metavar="N")
    book.add_argument("--eval-every", type=int, default=1000, metavar="N")
    book.add_argument("--log-every", type=int, default=100, metavar="N",
                     help="steps between metrics.jsonl lines (default 100)")
    book.add_argument("--early-stopping-patience", type=int, metavar="N",
                     help="stop after N evaluations without a better validation perplexity")
    book.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    config = TrainConfig(**{k: v for k, v in vars(args).items() if k in fields})
    train(config, args.out, progress=not args.quiet)
    return 0
