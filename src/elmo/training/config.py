"""TrainConfig: every option of a pretraining or continued-training run.

Defaults follow bilm-tf: BPTT windows of 20, 128 rows, dropout 0.1, Adagrad with learning rate
0.2 and initial accumulator 1.0, gradients clipped to global norm 10, 10 epochs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from elmo.config import PRESETS, check_fields
from elmo.device import PRECISIONS, precisions_described
from elmo.errors import raise_failed
from elmo.io.inputs import INPUT_FORMATS
from elmo.modules.language_model import FULL_SOFTMAX_MAX_VOCAB, SOFTMAX_MODES
from elmo.options import option
from elmo.tokenize import DEFAULT_TOKENIZER, TOKENIZERS

OPTIMIZERS = ("adagrad", "adam")
SCHEDULES = ("constant", "slanted-triangular")
DEFAULT_LR = {"adagrad": 0.2, "adam": 1e-3}
DEFAULT_PRESET = "small"
DEFAULT_PREFETCH = 4  # batches prepared ahead by a thread on CUDA

# Options that may change when a run is resumed (they do not decide the data or the model).
# An option that decides the batches or the schedule is also one of `SAME_RUN`
# (`elmo.training.continuation`): a weights copy continues its run only where it is the same.
RESUMABLE_CHANGES = frozenset({
    "device", "lr", "clip_norm", "checkpoint_every", "eval_every", "log_every",
    "early_stopping_patience", "max_steps", "epochs", "max_minutes", "checkpoint_minutes",
    "deterministic", "precision", "prefetch", "cuda_graphs", "weights_copy",
    "weights_copy_shard_mib",
})


@dataclass
class TrainConfig:
    """Options of `elmo train`; `None` means "derive it" (see each field). A field's flag is
    in its metadata (`elmo.options.option`), which `elmo train` makes its options from; the
    data options that other commands share (input format, title lists, vocabulary,
    tokenizer) are theirs (`elmo.cli.common`)."""

    # Data. The input kind of the text files (elmo.io.inputs): "auto" (each file's own) or a
    # name. Title lists (elmo.io.titles): the documents of the text files with these titles
    # are left out (a prepared corpus left them out when it was prepared).
    train: list[str] = option(
        help="training files or glob patterns (quote globs), a folder of WikiExtractor's "
        "wiki_NN files, or a prepared corpus folder; required", default_factory=list,
        nargs="+", required=True, metavar="PATH")
    valid: str | None = option(
        None, "validation text: perplexity every --eval-every steps, best model (default: "
        "none, the last model is kept)", metavar="PATH")
    input_format: str = "auto"
    exclude_titles: list[str] = field(default_factory=list)
    # Model.
    preset: str | None = option(
        None, f"architecture of a new model (default {DEFAULT_PRESET})",
        choices=tuple(sorted(PRESETS)))
    init_from: str | None = option(
        None, "continue training MODEL: a directory from `elmo train`, a directory with one "
        "official options/weights pair, an ELMoForManyLangs directory, or a released name. "
        "The --weights-copy DIR of a run whose data, batch, schedule and optimizer options "
        "are this command's continues that run from the step it was written at: the same lr "
        "schedule and data position, a fresh optimizer state; otherwise, or with another "
        "MODEL, training starts at step 0 (default: none, a new --preset model)",
        metavar="MODEL")
    dropout: float = option(0.1, "dropout probability (default 0.1)", parse=float, metavar="P")
    lstm_clip: bool = option(
        True, "a new model's LSTM clips neither its cell nor its projection (cell_clip and "
        "proj_clip null, which bilm-tf and AllenNLP read as no clipping): it trains through "
        "torch's own LSTM kernel, cuDNN on a GPU (default: clip at the preset's 3.0, as "
        "bilm-tf)")
    # Vocabulary and tokens.
    vocab: str | None = None  # bilm-tf vocabulary file (None: built from the training data)
    min_count: int = 1
    max_vocab: int | None = None
    tokenizer: str = DEFAULT_TOKENIZER
    # Batches.
    batch_size: int = option(128, "rows per process (default 128)", parse=int, metavar="N")
    unroll_steps: int = option(20, "BPTT window (default 20)", parse=int, metavar="N")
    shuffle_window: int = option(
        0, "shuffle sentences within windows of N (default 0: file order)", parse=int,
        metavar="N")
    # Length of the run: max_steps if given, else epochs over the counted training tokens.
    max_steps: int | None = option(
        None, "train N steps (default: as many as --epochs needs)", parse=int, metavar="N")
    epochs: float = option(
        10.0, "passes over the counted training tokens, unless --max-steps (default 10)",
        parse=float, metavar="E")
    max_minutes: float | None = option(
        None, "time budget: stop after the first step that ends M minutes after this "
        "process's first step, writing the checkpoint and model as at the end. Running the "
        "same command again resumes and trains for another M minutes (a resumed run counts "
        "only its own time). The lr schedule still spans --max-steps / --epochs (default: no "
        "budget)", parse=float, metavar="M")
    # Optimisation.
    optimizer: str = option(
        "adagrad", "(default adagrad with initial accumulator 1.0, as bilm-tf)",
        choices=OPTIMIZERS)
    lr: float | None = option(
        None, "peak learning rate (default: " + ", ".join(
            f"{k} {v}" for k, v in DEFAULT_LR.items()) + ")", parse=float)
    clip_norm: float = option(
        10.0, "clip gradients to this global norm (default 10)", parse=float, metavar="NORM")
    softmax: str = option(
        "auto", f"auto: full up to {FULL_SOFTMAX_MAX_VOCAB:,} words, else sampled (default "
        "auto)", choices=SOFTMAX_MODES)
    num_samples: int = option(
        8192, "sampled softmax candidates per batch (default 8192)", parse=int, metavar="N")
    seed: int = option(
        0, "initial weights, dropout, sampled softmax, shuffle (default 0)", parse=int)
    device: str | None = option(None, "cpu, cuda, cuda:1 ... (default: cuda if available)")
    deterministic: bool = option(
        False, "use only deterministic torch kernels (torch.use_deterministic_algorithms, "
        "CUBLAS_WORKSPACE_CONFIG=:4096:8), for bit-identical runs on CUDA, where it costs "
        "speed; on CPU training is deterministic without it (default: off)")
    # None: the device's default (elmo.device.PRECISIONS).
    precision: str | None = option(
        None, f"{precisions_described('train')}. The softmax, loss, weights and optimizer "
        "stay fp32; validation computes in fp32. May change on resume", choices=PRECISIONS)
    prefetch: int | None = option(
        None, "batches prepared ahead by a background thread (pinned memory on CUDA); 0: "
        f"none. Results do not depend on it (default: {DEFAULT_PREFETCH} on CUDA, 0 "
        "elsewhere)", parse=int, metavar="N")
    cuda_graphs: bool = option(
        True, "on CUDA, run every training step eagerly instead of replaying it from a CUDA "
        "graph (default: graphs; steps with padding, at the end of an epoch, run eagerly "
        "anyway). May change on resume")
    # ULMFiT-style fine-tuning (Howard and Ruder 2018).
    discriminative_lr: float = option(
        1.0, "divide each lower layer group's lr by FACTOR, e.g. 2.6 (groups: token encoder, "
        "LSTM layers, softmax) (default 1: the same lr)", parse=float, metavar="FACTOR")
    schedule: str = option("constant", "learning-rate schedule (default constant)",
                           choices=SCHEDULES)
    warmup_frac: float = option(
        0.1, "slanted-triangular: fraction of steps increasing (default 0.1)", parse=float,
        metavar="F")
    gradual_unfreeze: bool = option(
        False, "train the softmax first, unfreeze one group downwards every --unfreeze-every "
        "steps (default: off, all groups train)")
    unfreeze_every: int | None = option(
        None, "steps between unfreezings (default: one epoch)", parse=int, metavar="N")
    # Bookkeeping.
    checkpoint_every: int = option(
        1000, "steps between checkpoints (default 1000)", parse=int, metavar="N")
    checkpoint_minutes: float | None = option(
        None, "also write a checkpoint after the first step that ends M minutes after the "
        "last one (or after this process's first step), so that a crash loses at most about "
        "M minutes (default: off)", parse=float, metavar="M")
    eval_every: int = option(
        1000, "steps between validations on --valid (default 1000)", parse=int, metavar="N")
    log_every: int = option(
        100, "steps between metrics.jsonl lines (default 100)", parse=int, metavar="N")
    early_stopping_patience: int | None = option(
        None, "stop after N evaluations without a better validation perplexity (default: "
        "never)", parse=int, metavar="N")
    weights_copy: str | None = option(
        None, "whenever the model is saved, also write it into DIR in fp16: safetensors "
        "shards (model-00001-of-0000N.safetensors + model.safetensors.index.json) with "
        "config.json, vocab.txt, run.json and progress.json (the step and data position); "
        "DIR is replaced whole each time, and loads as a MODEL: --init-from DIR continues "
        "the run (default: none)", metavar="DIR")
    weights_copy_shard_mib: float = option(
        15.0, "the largest shard of --weights-copy, in MiB (a tensor larger than that gets a "
        "shard of its own) (default 15)", parse=float, metavar="MIB")

    def __post_init__(self) -> None:
        self.train = [str(p) for p in self.train]
        self.exclude_titles = [str(p) for p in self.exclude_titles or ()]
        checks = [
            (bool(self.train), "at least one training file is needed"),
            (self.preset is None or self.init_from is None,
             "give a preset or a model to continue from (--init-from), not both"),
            (self.lstm_clip or self.init_from is None,
             "--no-lstm-clip concerns a new model: a continued one keeps its own clipping"),
            (self.tokenizer in TOKENIZERS, f"tokenizer must be one of {tuple(TOKENIZERS)}"),
            (self.input_format in INPUT_FORMATS, f"input format must be one of {INPUT_FORMATS}"),
            (self.optimizer in OPTIMIZERS, f"optimizer must be one of {OPTIMIZERS}"),
            (self.precision is None or self.precision in PRECISIONS,
             f"precision must be one of {tuple(PRECISIONS)}"),
            (self.prefetch is None or self.prefetch >= 0, "prefetch must be >= 0"),
            (self.weights_copy_shard_mib > 0, "weights copy shard MiB must be > 0"),
            (self.schedule in SCHEDULES, f"schedule must be one of {SCHEDULES}"),
            (self.softmax in SOFTMAX_MODES, f"softmax must be one of {SOFTMAX_MODES}"),
            (0.0 <= self.dropout < 1.0, "dropout must be in [0, 1)"),
            (self.min_count >= 1, "min count must be >= 1"),
            (self.max_vocab is None or self.max_vocab >= 4, "max vocab must be >= 4"),
            (min(self.batch_size, self.unroll_steps, self.num_samples) >= 1,
             "batch size, unroll steps and samples must be >= 1"),
            (self.shuffle_window >= 0, "shuffle window must be >= 0"),
            (self.max_steps is None or self.max_steps >= 1, "max steps must be >= 1"),
            (self.epochs > 0, "epochs must be > 0"),
            (self.max_minutes is None or self.max_minutes > 0, "max minutes must be > 0"),
            (self.lr is None or self.lr > 0, "learning rate must be > 0"),
            (self.clip_norm > 0, "clip norm must be > 0"),
            (self.discriminative_lr >= 1.0, "discriminative lr factor must be >= 1"),
            (0.0 < self.warmup_frac < 1.0, "warmup fraction must be in (0, 1)"),
            (self.unfreeze_every is None or self.unfreeze_every >= 1,
             "unfreeze every must be >= 1"),
            (min(self.checkpoint_every, self.eval_every, self.log_every) >= 1,
             "checkpoint, eval and log intervals must be >= 1"),
            (self.checkpoint_minutes is None or self.checkpoint_minutes > 0,
             "checkpoint minutes must be > 0"),
            (self.early_stopping_patience is None or self.early_stopping_patience >= 1,
             "early stopping patience must be >= 1"),
            (self.early_stopping_patience is None or self.valid is not None,
             "early stopping needs validation data (--valid)"),
        ]
        raise_failed(checks, ValueError)

    @property
    def learning_rate(self) -> float:
        """The top group's peak learning rate."""
        return self.lr if self.lr is not None else DEFAULT_LR[self.optimizer]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        check_fields(cls, data, "training options")
        return cls(**data)
