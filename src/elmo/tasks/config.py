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
from elmo.io.textfile import ENCODING_ERRORS
from elmo.modules.scalar_mix import MIX_LR, MIX_MODES, parse_mode
from elmo.options import option
from elmo.tasks.metrics import METRICS
from elmo.tasks.model import ELMO_AT
from elmo.tasks.readers import CONLLU_TAGS, FORMATS, SCHEMES, format_of_name, formats_help
from elmo.tasks.registry import TASKS
from elmo.tasks.span import ANSWER_METRICS
from elmo.tokenize import TOKENIZERS

# options that may change when a run is resumed
RESUMABLE_CHANGES = ("epochs", "patience", "test", "device", "progress", "cache_dir",
                     "quantize")


@dataclass
class TaskConfig:
    """Everything `elmo task train` takes; `train_task(TaskConfig(...))` from Python. Each
    field made by `option` is a flag of `elmo task` (`elmo.cli.task`), its help the field's."""

    task: str = option(help=None, choices=TASKS, required=True)
    train: str = option(help=None, required=True, metavar="FILE")
    dev: str | None = option(help="development data: early stopping and the best epoch",
                             metavar="FILE")  # None: hold out dev_fraction of train
    out: str = option(help="run directory: new, empty, or this run's (resumed)",
                      required=True, metavar="DIR")
    format: str | None = option(
        None, f"{formats_help()}. Files may be .gz or .xz (default: the format whose suffix "
        "the file's name has)", choices=FORMATS)
    test: str | None = option(None, "scored with the best model at the end", metavar="FILE")
    dev_fraction: float = option(
        0.0, "instead of --dev: hold out this fraction of --train (the same part in every "
        "run; --task span holds out whole articles, or passages)", parse=float, metavar="F")
    # format options (the `options` of the records of readers.FORMATS)
    token_column: int = option(0, "conll", parse=int)
    tag_column: int = option(-1, "conll (negative: from the end)", parse=int)
    scheme: str | None = option(None, "conll: span tags in this scheme, scored by span F1 "
                                "(default: tags are plain labels, scored by accuracy)",
                                choices=SCHEMES)
    tag: str = option("upos", "conllu", choices=CONLLU_TAGS, flag="--conllu-tag")
    text_columns: list[str] | None = option(
        None, "tsv: one column (classification) or two (pair)",
        parse=lambda s: s.split(","), metavar="A[,B]")
    label_column: str | None = option(None, "tsv", metavar="C")
    tokenizer: str | None = option(
        None, "label-text, tsv and nli sentences, squad passages and questions (default: the "
        "tokenizer --elmo records, as `elmo embed`; else whitespace; Chinese: chars)",
        choices=TOKENIZERS)
    segment_words: int = option(
        512, "conll2012 coreference: documents cut into segments of at most N words (whole "
        "sentences where they fit), which bounds the memory; mentions are linked within a "
        "segment", parse=int, metavar="N")
    encoding_errors: str = option("strict", "strict: stop at a line that is not UTF-8; "
                                  "replace: U+FFFD", choices=ENCODING_ERRORS)
    # ELMo
    elmo: str | None = option(None, "a biLM `elmo embed` takes (frozen; its layers are "
                              "cached), or none for the task model alone", required=True,
                              metavar="MODEL|none")
    elmo_mix: str = option("learned", "learned: softmax-weighted layers, trained; average; "
                           "top; layer:K (0: the context-free token layer)",
                           metavar="|".join(MIX_MODES))
    elmo_at: str | None = option(
        None, "the task RNN's input, its output, or both (two mixes) (default, by --task: "
        + ", ".join(f"{name} {kind.elmo_at}" for name, kind in TASKS.items()) + ")",
        choices=ELMO_AT)
    l2: float = option(0.001, "lambda * sum_j s_j^2 added to the loss, per learned mix",
                       parse=float, metavar="LAMBDA")
    mix_lr: float = option(MIX_LR, "Adam learning rate of the mixes' s and gamma", parse=float)
    scale_layers: bool = option(
        True, "divide each layer by its RMS over the training file before mixing, so that the "
        "learned weights compare layers on equal terms", negatable=True)
    layer_norm: bool = option(False, "normalise each layer over the batch before mixing (as "
                              "the original; a sentence's output then depends on its batch)")
    elmo_dropout: float = option(0.5, "on each mix's output", parse=float)
    fine_tune: bool = option(
        False, "train the biLM too, ULMFiT-style: learning rates divided by 2.6 per layer "
        "group downwards, slanted triangular schedule, one more group unfrozen each epoch "
        "from the top (no feature cache: slower)")
    cache_dir: str | None = option(
        None, "feature cache of the frozen biLM's layers (default: features/ in $ELMO_CACHE, "
        "else $XDG_CACHE_HOME/elmo, else ~/.cache/elmo)", metavar="DIR")
    # training
    metric: str | None = option(
        None, "default: span-f1 with --scheme, squad-f1 for --task span, srl-f1 (the "
        "CoNLL-2005 evaluation's F1) for --task srl, coref-f1 (the CoNLL F1) for --task "
        "coref, else accuracy. --task span: " + "; ".join(
            f"{m.name}: {m.help}" for m in ANSWER_METRICS.values()), choices=METRICS)
    seed: int = option(0, "initialisation, batch order and --train-fraction sample", parse=int)
    epochs: int = option(10, "at most this many (the best dev epoch is kept)", parse=int)
    patience: int = option(3, "stop after this many epochs without a better dev score",
                           parse=int)
    min_updates: int = option(
        0, "make at least N updates in --epochs epochs: an epoch (one dev score) is then "
        "several passes over a small training set", parse=int, metavar="N")
    train_fraction: float = option(
        1.0, "train on this fraction of --train, sampled with --seed (the samples of smaller "
        "fractions are inside those of larger ones)", parse=float, metavar="F")
    batch_size: int = option(32, "examples", parse=int)
    lr: float = option(0.001, "Adam learning rate", parse=float)
    embedding_dim: int | None = option(
        None, "word embeddings (default: the --word-vectors' dimension, else 100)", parse=int)
    word_vectors: str | None = option(
        None, "start the word embeddings from these static vectors (word2vec / GloVe text "
        "format, header line optional, may be .gz); words the file lacks start random; the "
        "vocabulary's coverage is printed and kept in config.json", metavar="FILE")
    freeze_word_vectors: bool = option(False, "keep the word embeddings fixed during training")
    max_answer_tokens: int = option(30, "--task span: the longest answer predicted",
                                    parse=int, metavar="N")
    max_span_width: int = option(10, "--task coref: the longest mention considered, in "
                                 "words", parse=int, metavar="N")
    top_span_ratio: float = option(0.4, "--task coref: the R * words best-scoring spans of a "
                                   "segment are kept as mentions", parse=float, metavar="R")
    max_antecedents: int = option(50, "--task coref: each kept span is scored against the K "
                                  "nearest earlier ones (and no antecedent)", parse=int,
                                  metavar="K")
    hidden_dim: int = option(128, "BiLSTM size per direction", parse=int)
    dropout: float = option(0.3, "in the task model", parse=float)
    device: str | None = option(None, "cpu, cuda, cuda:1 ... (default: cuda if available)")
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
        if self.task in TASKS and self.elmo_at is None:
            self.elmo_at = TASKS[self.task].elmo_at
        choices = {"task": TASKS, "format": FORMATS, "elmo_at": ELMO_AT, "metric": METRICS,
                   "scheme": (*SCHEMES, None), "tag": CONLLU_TAGS}
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
        if self.metric == "span-f1" and not self.scheme:  # a kind that scores spans
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
