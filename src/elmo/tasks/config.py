"""TaskConfig: every option of `elmo task train`, checked; it reads no files.

What the files decide (the tokenizer the biLM records, the word vectors' dimension) is left
None here and filled in when the run is built (`elmo.tasks.run.resolve_config`); a run saves
the filled-in options.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from elmo.errors import ElmoError, raise_failed
from elmo.modules.scalar_mix import MIX_LR, parse_mode
from elmo.tasks.metrics import METRICS
from elmo.tasks.model import ELMO_AT
from elmo.tasks.readers import FORMATS, SCHEMES, format_of_name
from elmo.tasks.registry import TASKS

# options that may change when a run is resumed
RESUMABLE_CHANGES = ("epochs", "patience", "test", "device", "progress", "cache_dir",
                     "quantize")


@dataclass
class TaskConfig:
    """Everything `elmo task train` takes; `train_task(TaskConfig(...))` from Python."""

    task: str  # tagging | classification | pair | span | srl | coref
    train: str
    dev: str | None  # None: hold out dev_fraction of the training file
    out: str
    format: str | None = None  # a key of readers.FORMATS; None: told by train's name
    test: str | None = None
    dev_fraction: float = 0.0  # span: whole articles (or passages) are held out
    # format options
    token_column: int = 0  # conll
    tag_column: int = -1  # conll
    scheme: str | None = None  # conll tags: iob1 | iob2 | bioes (spans), None: plain labels
    tag: str = "upos"  # conllu: upos | xpos
    text_columns: list[str] | None = None  # tsv
    label_column: str | None = None  # tsv
    tokenizer: str | None = None  # label-text, tsv, squad (None: the one --elmo records,
    # else whitespace)
    segment_words: int = 512  # conll2012 coreference: documents cut into segments of at most
    # this many words (whole sentences where they fit)
    encoding_errors: str = "strict"
    # ELMo
    elmo: str | None = None  # a model `elmo embed` takes; None: the task model alone
    elmo_mix: str = "learned"  # learned | average | top | layer:K
    elmo_at: str = "input"  # input | output | both
    l2: float = 0.001  # lambda * sum_j s_j^2 per learned mix
    mix_lr: float = MIX_LR  # Adam's lr for the mixes' s and gamma
    scale_layers: bool = True  # divide each layer by its RMS over the training file
    layer_norm: bool = False  # normalise each layer, per batch, before mixing
    elmo_dropout: float = 0.5
    fine_tune: bool = False  # train the biLM too (ULMFiT: discriminative lrs, slanted
    # triangular schedule, gradual unfreezing); its layers are then computed per batch
    cache_dir: str | None = None  # feature cache (default: $ELMO_CACHE/features)
    # training
    metric: str | None = None  # span-f1 | accuracy | squad-f1 | cmrc | srl-f1 | coref-f1
    # (default: the task type's)
    seed: int = 0
    epochs: int = 10
    patience: int = 3  # stop after this many epochs without a better dev score
    min_updates: int = 0  # an epoch is as many passes as make epochs * passes >= this
    train_fraction: float = 1.0
    batch_size: int = 32
    lr: float = 0.001
    embedding_dim: int | None = None  # None: the --word-vectors' dimension, else 100
    word_vectors: str | None = None  # word2vec/GloVe text file: the first word embeddings
    freeze_word_vectors: bool = False
    max_answer_tokens: int = 30  # span: the longest answer predicted
    max_span_width: int = 10  # coref: the longest mention predicted, in words
    top_span_ratio: float = 0.4  # coref: spans kept per word of a segment
    max_antecedents: int = 50  # coref: earlier kept spans each kept span is scored against
    hidden_dim: int = 128
    dropout: float = 0.3
    device: str | None = None
    quantize: str | None = None  # "int8": the frozen biLM's features in int8 (CPU inference)
    progress: bool = True

    def __post_init__(self) -> None:
        if self.elmo in ("none", ""):
            self.elmo = None
        if self.format is None:
            self.format = format_of_name(self.train)
            if self.format is None:
                raise ElmoError(f"--format: the name of {self.train} does not tell its format; "
                                f"give --format {' or '.join(FORMATS)}")
        if self.task in TASKS and self.metric is None:
            self.metric = TASKS[self.task].default_metric(self)
        choices = {"task": TASKS, "format": FORMATS, "elmo_at": ELMO_AT, "metric": METRICS,
                   "scheme": (*SCHEMES, None), "tag": ("upos", "xpos")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ElmoError(f"--{name.replace('_', '-')} must be one of "
                                f"{', '.join(map(str, allowed))}; got {getattr(self, name)!r}")
        parse_mode(self.elmo_mix, mixture_size=None)  # a ValueError naming a bad mode (K's
        # bound is checked when the biLM loads)
        kind, dataset = TASKS[self.task], FORMATS[self.format]
        if kind.example not in dataset.examples:
            readable = [f.name for f in FORMATS.values() if kind.example in f.examples]
            raise ElmoError(f"--task {self.task} reads --format {' or '.join(readable)}, "
                            f"not {self.format}")
        if self.metric not in kind.metrics:
            raise ElmoError(f"--task {self.task} is scored by --metric "
                            f"{' or '.join(kind.metrics)}, not {self.metric}")
        if self.freeze_word_vectors and not self.word_vectors:
            raise ElmoError("--freeze-word-vectors needs --word-vectors FILE")
        self._check_numbers()
        problem = dataset.problem(vars(self), kind)
        if problem:
            raise ElmoError(problem)
        if bool(self.dev) == (self.dev_fraction > 0):
            raise ElmoError("give either --dev FILE or --dev-fraction F (a held-out part of "
                            "--train), not both or neither")
        if self.fine_tune and self.elmo is None:
            raise ElmoError("--fine-tune trains the biLM of --elmo; give a model, not none")
        if self.fine_tune and self.quantize:
            raise ElmoError(f"--quantize {self.quantize} is for a frozen biLM: it cannot be "
                            "combined with --fine-tune")
        if self.metric == "span-f1" and (self.task != "tagging" or not self.scheme):
            raise ElmoError("--metric span-f1 scores tags as spans: it needs --task tagging "
                            "and --scheme iob1, iob2 or bioes")

    def _check_numbers(self) -> None:
        """ElmoError naming every option whose number is out of range."""
        checks = [
            (self.epochs >= 1, "--epochs must be >= 1"),
            (self.patience >= 1, "--patience must be >= 1"),
            (self.batch_size >= 1, "--batch-size must be >= 1"),
            (self.lr > 0, "--lr must be > 0"),
            (self.mix_lr > 0, "--mix-lr must be > 0"),
            (self.l2 >= 0, "--l2 must be >= 0"),
            (0 <= self.elmo_dropout < 1, "--elmo-dropout must be in [0, 1)"),
            (0 <= self.dropout < 1, "--dropout must be in [0, 1)"),
            (self.embedding_dim is None or self.embedding_dim >= 1,
             "--embedding-dim must be >= 1"),
            (self.hidden_dim >= 1, "--hidden-dim must be >= 1"),
            (self.min_updates >= 0, "--min-updates must be >= 0"),
            (self.max_answer_tokens >= 1, "--max-answer-tokens must be >= 1"),
            (self.segment_words >= 1, "--segment-words must be >= 1"),
            (self.max_span_width >= 1, "--max-span-width must be >= 1"),
            (0 < self.top_span_ratio <= 1, "--top-span-ratio must be in (0, 1]"),
            (self.max_antecedents >= 1, "--max-antecedents must be >= 1"),
        ]
        raise_failed(checks)

    def reader_options(self, labeled: bool = True) -> dict[str, Any]:
        """The reader's keyword options for `format` (no tag check when not `labeled`)."""
        return FORMATS[self.format].reader_options(vars(self), labeled)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
