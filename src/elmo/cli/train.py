"""`elmo train`: pretrain a biLM on a corpus, or continue training one (resumable, torchrun)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from elmo.cli.common import (
    add_corpus_tokenizer,
    add_exclude_titles,
    add_input_format,
    add_option,
    add_vocab_options,
)
from elmo.options import is_option, option
from elmo.training.config import TrainConfig
from elmo.training.trainer import train


@dataclass(frozen=True)
class TrainCommand:
    """What `elmo train` takes beside its TrainConfig."""

    out: str = option(None, "run directory, created when training starts; required",
                      required=True, metavar="DIR")
    quiet: bool = option(False, "no progress bar or messages (default: shown)")


# The option groups of `elmo train`, in order: fields of TrainConfig or TrainCommand by name,
# or the adders of options that other commands share.
GROUPS: dict[str, tuple[str | Callable[[argparse._ActionsContainer], None], ...]] = {
    "data": ("train", "valid", "out", add_input_format, add_exclude_titles,
             add_corpus_tokenizer, add_vocab_options, "shuffle_window"),
    "model": ("preset", "init_from", "dropout", "lstm_clip", "softmax", "num_samples"),
    "optimisation": ("batch_size", "unroll_steps", "max_steps", "epochs", "max_minutes",
                     "optimizer", "lr", "clip_norm", "seed", "device", "precision",
                     "prefetch", "cuda_graphs", "deterministic"),
    "fine-tuning (ULMFiT)": ("discriminative_lr", "schedule", "warmup_frac",
                             "gradual_unfreeze", "unfreeze_every"),
    "bookkeeping": ("checkpoint_every", "checkpoint_minutes", "eval_every", "log_every",
                    "early_stopping_patience", "weights_copy", "weights_copy_shard_mib",
                    "quiet"),
}
_OPTIONS = {f.name: f for record in (TrainConfig, TrainCommand)
            for f in dataclasses.fields(record) if is_option(f)}


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="pretrain a biLM on a corpus, or continue training one",
        description="Train a biLM on a corpus, streamed: text files (one sentence per line, "
        "plain or .gz .bz2 .xz, globs allowed), JSON lines, WikiExtractor's output (see "
        "--input-format), "
        "or a corpus prepared by `elmo prepare-corpus` (the same batches, from token ids). "
        "OUT, created once training starts, receives elmo-run.json (it marks a pretraining "
        "run), vocab.txt, run.json, "
        "checkpoint.safetensors, metrics.jsonl and the model (config.json + model.safetensors, "
        "softmax included: the best on --valid, else the last), which `elmo embed OUT ...` "
        "loads. Run the same command again to resume after an interruption: with the same "
        "number of torch threads (--threads) and device, the result is bit-identical to "
        "an uninterrupted run, as are two runs of the same command. For several processes or "
        "GPUs, launch with `torchrun --nproc-per-node N -m elmo train ...`.",
    )
    for title, entries in GROUPS.items():
        group = p.add_argument_group(title)
        for entry in entries:
            if callable(entry):  # options that other commands share
                entry(group)
            else:  # a field of TrainConfig or TrainCommand
                add_option(group, _OPTIONS[entry])
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    config = TrainConfig(**{k: v for k, v in vars(args).items() if k in fields})
    train(config, args.out, progress=not args.quiet)
    return 0
