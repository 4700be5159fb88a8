"""`elmo train`: pretrain a biLM on a corpus, or continue training one (resumable, torchrun)."""

from __future__ import annotations

import argparse
import dataclasses

from elmo.cli.common import (
    add_corpus_tokenizer,
    add_exclude_titles,
    add_input_format,
    add_vocab_options,
)
from elmo.config import PRESETS
from elmo.device import PRECISIONS, precisions_described
from elmo.modules.language_model import FULL_SOFTMAX_MAX_VOCAB, SOFTMAX_MODES
from elmo.training.config import (
    DEFAULT_LR,
    DEFAULT_PREFETCH,
    DEFAULT_PRESET,
    OPTIMIZERS,
    SCHEDULES,
    TrainConfig,
)
from elmo.training.trainer import train


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="pretrain a biLM on a corpus, or continue training one",
        description="Train a biLM on a corpus, streamed: text files (one sentence per line, "
        "plain, .gz or .bz2, globs allowed), JSON lines, WikiExtractor's output (see "
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
    data = p.add_argument_group("data")
    data.add_argument("--train", nargs="+", required=True, metavar="PATH",
                      help="training files or glob patterns (quote globs), a folder of "
                      "WikiExtractor's wiki_NN files, or a prepared corpus folder; required")
    data.add_argument("--valid", metavar="PATH",
                      help="validation text: perplexity every --eval-every steps, best model "
                      "(default: none, the last model is kept)")
    data.add_argument("--out", required=True, metavar="DIR",
                      help="run directory, created when training starts; required")
    add_input_format(data)
    add_exclude_titles(data)
    add_corpus_tokenizer(data)
    add_vocab_options(data)
    data.add_argument("--shuffle-window", type=int, default=0, metavar="N",
                      help="shuffle sentences within windows of N (default 0: file order)")

    model = p.add_argument_group("model")
    model.add_argument("--preset", choices=sorted(PRESETS),
                       help=f"architecture of a new model (default {DEFAULT_PRESET})")
    model.add_argument("--init-from", metavar="MODEL",
                       help="continue training MODEL: a directory from `elmo train`, a "
                       "directory with one official options/weights pair, an ELMoForManyLangs "
                       "directory, or a released name "
                       "(default: none, a new --preset model)")
    model.add_argument("--dropout", type=float, default=0.1, metavar="P",
                       help="dropout probability (default 0.1)")
    model.add_argument("--no-lstm-clip", dest="lstm_clip", action="store_false",
                       help="a new model's LSTM clips neither its cell nor its projection "
                       "(cell_clip and proj_clip null, which bilm-tf and AllenNLP read as no "
                       "clipping): it trains through torch's own LSTM kernel, cuDNN on a GPU "
                       "(default: clip at the preset's 3.0, as bilm-tf)")
    model.add_argument("--softmax", choices=SOFTMAX_MODES, default="auto",
                       help=f"auto: full up to {FULL_SOFTMAX_MAX_VOCAB:,} words, else sampled "
                       "(default auto)")
    model.add_argument("--num-samples", type=int, default=8192, metavar="N",
                       help="sampled softmax candidates per batch (default 8192)")

    opt = p.add_argument_group("optimisation")
    opt.add_argument("--batch-size", type=int, default=128, metavar="N",
                     help="rows per process (default 128)")
    opt.add_argument("--unroll-steps", type=int, default=20, metavar="N",
                     help="BPTT window (default 20)")
    opt.add_argument("--max-steps", type=int, metavar="N",
                     help="train N steps (default: as many as --epochs needs)")
    opt.add_argument("--epochs", type=float, default=10.0, metavar="E",
                     help="passes over the counted training tokens, unless --max-steps "
                     "(default 10)")
    opt.add_argument("--max-minutes", type=float, metavar="M",
                     help="time budget: stop after the first step that ends M minutes after "
                     "this process's first step, writing the checkpoint and model as at the "
                     "end. Running the same command again resumes and trains for another M "
                     "minutes (a resumed run counts only its own time). The lr schedule "
                     "still spans --max-steps / --epochs (default: no budget)")
    opt.add_argument("--optimizer", choices=OPTIMIZERS, default="adagrad",
                     help="(default adagrad with initial accumulator 1.0, as bilm-tf)")
    opt.add_argument("--lr", type=float, help="peak learning rate (default: "
                     + ", ".join(f"{k} {v}" for k, v in DEFAULT_LR.items()) + ")")
    opt.add_argument("--clip-norm", type=float, default=10.0, metavar="NORM",
                     help="clip gradients to this global norm (default 10)")
    opt.add_argument("--seed", type=int, default=0,
                     help="initial weights, dropout, sampled softmax, shuffle (default 0)")
    opt.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    opt.add_argument("--precision", choices=PRECISIONS,
                     help=f"{precisions_described('train')}. The softmax, loss, weights and "
                     "optimizer stay fp32; validation computes in fp32. May change on resume")
    opt.add_argument("--prefetch", type=int, metavar="N",
                     help="batches prepared ahead by a background thread (pinned memory on "
                     "CUDA); 0: none. Results do not depend on it "
                     f"(default: {DEFAULT_PREFETCH} on CUDA, 0 elsewhere)")
    opt.add_argument("--no-cuda-graphs", dest="cuda_graphs", action="store_false",
                     help="on CUDA, run every training step eagerly instead of replaying it "
                     "from a CUDA graph (default: graphs; steps with padding, at the end of "
                     "an epoch, run eagerly anyway). May change on resume")
    opt.add_argument("--deterministic", action="store_true",
                     help="use only deterministic torch kernels "
                     "(torch.use_deterministic_algorithms, CUBLAS_WORKSPACE_CONFIG=:4096:8), "
                     "for bit-identical runs on CUDA, where it costs speed; on CPU training "
                     "is deterministic without it (default: off)")

    tune = p.add_argument_group("fine-tuning (ULMFiT)")
    tune.add_argument("--discriminative-lr", type=float, default=1.0, metavar="FACTOR",
                      help="divide each lower layer group's lr by FACTOR, e.g. 2.6 (groups: "
                      "token encoder, LSTM layers, softmax) (default 1: the same lr)")
    tune.add_argument("--schedule", choices=SCHEDULES, default="constant",
                      help="learning-rate schedule (default constant)")
    tune.add_argument("--warmup-frac", type=float, default=0.1, metavar="F",
                      help="slanted-triangular: fraction of steps increasing (default 0.1)")
    tune.add_argument("--gradual-unfreeze", action="store_true",
                      help="train the softmax first, unfreeze one group downwards every "
                      "--unfreeze-every steps (default: off, all groups train)")
    tune.add_argument("--unfreeze-every", type=int, metavar="N",
                      help="steps between unfreezings (default: one epoch)")

    book = p.add_argument_group("bookkeeping")
    book.add_argument("--checkpoint-every", type=int, default=1000, metavar="N",
                      help="steps between checkpoints (default 1000)")
    book.add_argument("--checkpoint-minutes", type=float, metavar="M",
                      help="also write a checkpoint after the first step that ends M minutes "
                      "after the last one (or after this process's first step), so that a "
                      "crash loses at most about M minutes (default: off)")
    book.add_argument("--eval-every", type=int, default=1000, metavar="N",
                      help="steps between validations on --valid (default 1000)")
    book.add_argument("--log-every", type=int, default=100, metavar="N",
                      help="steps between metrics.jsonl lines (default 100)")
    book.add_argument("--early-stopping-patience", type=int, metavar="N",
                      help="stop after N evaluations without a better validation perplexity "
                      "(default: never)")
    book.add_argument("--weights-copy", metavar="DIR",
                      help="whenever the model is saved, also write it into DIR in fp16: "
                      "safetensors shards (model-00001-of-0000N.safetensors + "
                      "model.safetensors.index.json) with config.json, vocab.txt and run.json; "
                      "DIR is replaced whole each time, and loads as a MODEL "
                      "(default: none)")
    book.add_argument("--weights-copy-shard-mib", type=float, default=15.0, metavar="MIB",
                      help="the largest shard of --weights-copy, in MiB (a tensor larger than "
                      "that gets a shard of its own) (default 15)")
    book.add_argument("--quiet", action="store_true",
                      help="no progress bar or messages (default: shown)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    config = TrainConfig(**{k: v for k, v in vars(args).items() if k in fields})
    train(config, args.out, progress=not args.quiet)
    return 0
