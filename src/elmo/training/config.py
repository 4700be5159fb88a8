"""TrainConfig: every option of a pretraining or continued-training run.

Defaults follow bilm-tf: BPTT windows of 20, 128 rows, dropout 0.1, Adagrad with learning rate
0.2 and initial accumulator 1.0, gradients clipped to global norm 10, 10 epochs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from elmo.config import check_fields
from elmo.device import PRECISIONS
from elmo.errors import raise_failed
from elmo.io.inputs import INPUT_FORMATS
from elmo.modules.language_model import SOFTMAX_MODES
from elmo.tokenize import TOKENIZERS

OPTIMIZERS = ("adagrad", "adam")
SCHEDULES = ("constant", "slanted-triangular")
DEFAULT_LR = {"adagrad": 0.2, "adam": 1e-3}
DEFAULT_PRESET = "small"
DEFAULT_PREFETCH = 4  # batches prepared ahead by a thread on CUDA

# Options that may change when a run is resumed (they do not decide the data or the model).
RESUMABLE_CHANGES = frozenset({
    "device", "lr", "clip_norm", "checkpoint_every", "eval_every", "log_every",
    "early_stopping_patience", "max_steps", "epochs", "max_minutes", "checkpoint_minutes",
    "deterministic", "precision", "prefetch", "cuda_graphs", "weights_copy",
    "weights_copy_shard_mib",
})


@dataclass
class TrainConfig:
    """Options of `elmo train`; `None` means "derive it" (see each field)."""

    # Files, glob patterns, a WikiExtractor folder (plain, .gz or .bz2), or a prepared corpus.
    train: list[str] = field(default_factory=list)
    valid: str | None = None  # held-out text for perplexity and best-model selection
    # The input kind of the text files (elmo.io.inputs): "auto" (each file's own) or a name.
    input_format: str = "auto"
    # Title lists (elmo.io.titles): the documents of the text files with these titles are
    # left out (a prepared corpus left them out when it was prepared).
    exclude_titles: list[str] = field(default_factory=list)
    # Model.
    preset: str | None = None  # architecture for a new model (None: DEFAULT_PRESET)
    init_from: str | None = None  # continue training this model (architecture from it)
    dropout: float = 0.1
    # A new model's LSTM clips its cell and projection at the preset's values (3, as bilm-tf);
    # False: no clipping, which trains through torch's LSTM kernel (cuDNN on a GPU).
    lstm_clip: bool = True
    # Vocabulary and tokens.
    vocab: str | None = None  # bilm-tf vocabulary file (None: built from the training data)
    min_count: int = 1
    max_vocab: int | None = None
    tokenizer: str = "whitespace"
    # Batches.
    batch_size: int = 128  # rows per rank
    unroll_steps: int = 20
    shuffle_window: int = 0  # shuffle sentences within windows of this many (0: file order)
    # Length of the run: max_steps if given, else epochs over the counted training tokens.
    max_steps: int | None = None
    epochs: float = 10.0
    # Time budget: stop after the first step that ends max_minutes after this process's
    # first step (a resumed run counts only its own time); the schedule still spans the run.
    max_minutes: float | None = None
    # Optimisation.
    optimizer: str = "adagrad"
    lr: float | None = None  # None: DEFAULT_LR of the optimizer
    clip_norm: float = 10.0
    softmax: str = "auto"
    num_samples: int = 8192
    seed: int = 0
    device: str | None = None  # None: cuda if available, else cpu
    # torch.use_deterministic_algorithms for the run (bitwise reproducible on CUDA too).
    deterministic: bool = False
    # fp32, tf32 (CUDA matmuls in TF32; fp32 elsewhere) or bf16 (autocast; softmax and loss
    # in fp32). None: bf16 on CUDA, fp32 elsewhere.
    precision: str | None = None
    # Batches prepared ahead by a background thread (None: DEFAULT_PREFETCH on CUDA, 0 (none)
    # elsewhere).
    prefetch: int | None = None
    # On CUDA, replay the whole training step from a CUDA graph (False: every step eagerly).
    cuda_graphs: bool = True
    # ULMFiT-style fine-tuning (Howard and Ruder 2018).
    discriminative_lr: float = 1.0  # each lower layer group's lr is divided by this
    schedule: str = "constant"
    warmup_frac: float = 0.1  # slanted-triangular: fraction of steps spent increasing
    gradual_unfreeze: bool = False
    unfreeze_every: int | None = None  # steps between unfreezing groups (None: one epoch)
    # Bookkeeping.
    checkpoint_every: int = 1000
    checkpoint_minutes: float | None = None  # also checkpoint this long after the last one
    eval_every: int = 1000
    log_every: int = 100
    early_stopping_patience: int | None = None  # evaluations without improvement
    # Whenever the model is saved, also write it in fp16 into this directory, in safetensors
    # shards of at most this many MiB each (with config.json, vocab.txt and run.json).
    weights_copy: str | None = None
    weights_copy_shard_mib: float = 15.0

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
