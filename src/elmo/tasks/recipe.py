"""The task recipe: read the data, train a task model with (or without) ELMo, early stopping
on dev, resumable; evaluate and predict with a finished run. Every task type (tagging,
classification, pair, span) goes through it; what differs lives in its `TaskType`
(`elmo.tasks.registry.TASKS`).

A run directory holds config.json (the TaskConfig, the model's config and the labels),
vocab.txt, model.safetensors (the best epoch on dev), layer_weights.json (softmax(s) of each
mix), metrics.jsonl (one line per epoch), checkpoint.safetensors (the last epoch: running the
same command again resumes there) and result.json.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from tqdm import tqdm

from elmo.device import resolve_device
from elmo.embed import Embedder
from elmo.errors import ElmoError, InputFileError, raise_failed
from elmo.io.atomic import atomic_write_text, output_lock
from elmo.loading.formats.native import is_native_dir
from elmo.loading.load import load_model
from elmo.loading.resolve import find_official_pair, is_task_run, resolve_model
from elmo.modules.bilm import BiLM
from elmo.modules.elmo import Elmo
from elmo.modules.scalar_mix import MIX_LR, parse_mode
from elmo.tasks.data import (
    Batch,
    Encoded,
    build_vocab,
    flat_sentences,
    held_out_split,
    nested_sample,
)
from elmo.tasks.features import LayerStore, cached_layers, layer_rms
from elmo.tasks.loop import fit
from elmo.tasks.metrics import METRICS
from elmo.tasks.model import ELMO_AT, TaskModel
from elmo.tasks.readers import FORMATS, SCHEMES, read_dataset
from elmo.tasks.registry import TASKS
from elmo.tasks.word_vectors import load_word_vectors, vector_dim
from elmo.training.checkpoint import (
    CHECKPOINT_NAME,
)
from elmo.training.prepare import check_out_dir

# the files of a run directory
RUN_FILES = ("config.json", "vocab.txt", "model.safetensors", "layer_weights.json",
             "metrics.jsonl", CHECKPOINT_NAME, "result.json")
# options that may change when a run is resumed
RESUMABLE_CHANGES = ("epochs", "patience", "test", "device", "progress", "cache_dir",
                     "quantize")


@dataclass
class TaskConfig:
    """Everything `elmo task train` takes; `train_task(TaskConfig(...))` from Python."""

    task: str  # tagging | classification | pair | span
    train: str
    dev: str | None  # None: hold out dev_fraction of the training file
    out: str
    format: str  # conll | conllu | label-text | tsv | squad
    test: str | None = None
    dev_fraction: float = 0.0
    # format options
    token_column: int = 0  # conll
    tag_column: int = -1  # conll
    scheme: str | None = None  # conll tags: iob1 | iob2 | bioes (spans), None: plain labels
    tag: str = "upos"  # conllu: upos | xpos
    text_columns: list[str] | None = None  # tsv
    label_column: str | None = None  # tsv
    tokenizer: str | None = None  # label-text, tsv, squad (None: the one --elmo records,
    # else whitespace)
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
    metric: str | None = None  # span-f1 | accuracy | squad-f1 (default: the task type's)
    seed: int = 0
    epochs: int = 10
    patience: int = 3  # stop after this many epochs without a better dev score
    min_updates: int = 0  # an epoch is as many passes as make epochs * passes >= this
    train_fraction: float = 1.0
    batch_size: int = 32
    lr: float = 0.001
    embedding_dim: int | None = None  # None: the --word-vectors' dimension, else 100 (set here)
    word_vectors: str | None = None  # word2vec/GloVe text file: the first word embeddings
    freeze_word_vectors: bool = False
    max_answer_tokens: int = 30  # span: the longest answer predicted
    hidden_dim: int = 128
    dropout: float = 0.3
    device: str | None = None
    quantize: str | None = None  # "int8": the frozen biLM's features in int8 (CPU inference)
    progress: bool = True

    def __post_init__(self) -> None:
        if self.elmo in ("none", ""):
            self.elmo = None
        elif self.elmo is not None and Path(self.elmo).is_dir():  # found from any directory
            self.elmo = str(Path(self.elmo).resolve())
        if self.task in TASKS and self.metric is None:
            self.metric = TASKS[self.task].default_metric(self)
        if self.tokenizer is None:  # as `elmo embed`: the tokenizer the biLM was trained with
            recorded = resolve_model(self.elmo).recorded_tokenizer() if self.elmo and \
                self.format in ("label-text", "tsv", "squad") else None
            self.tokenizer = recorded or "whitespace"
        choices = {"task": TASKS, "format": FORMATS, "elmo_at": ELMO_AT, "metric": METRICS,
                   "scheme": (*SCHEMES, None), "tag": ("upos", "xpos")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ElmoError(f"--{name.replace('_', '-')} must be one of "
                                f"{', '.join(map(str, allowed))}; got {getattr(self, name)!r}")
        if self.elmo_mix.startswith("layer:"):  # K's bound is checked when the biLM loads
            if not self.elmo_mix.removeprefix("layer:").isdigit():
                raise ElmoError(f"--elmo-mix {self.elmo_mix}: layer:K needs a whole number "
                                "K >= 0 (0: the context-free token layer)")
        else:
            parse_mode(self.elmo_mix, mixture_size=1)  # a ValueError naming a bad mode
        kind = TASKS[self.task]
        if self.format not in kind.formats:
            raise ElmoError(f"--task {self.task} reads --format {' or '.join(kind.formats)}, "
                            f"not {self.format}")
        if self.metric not in kind.metrics:
            raise ElmoError(f"--task {self.task} is scored by --metric "
                            f"{' or '.join(kind.metrics)}, not {self.metric}")
        if self.freeze_word_vectors and not self.word_vectors:
            raise ElmoError("--freeze-word-vectors needs --word-vectors FILE")
        if self.embedding_dim is None:
            self.embedding_dim = vector_dim(self.word_vectors) if self.word_vectors else 100
        self._check_numbers()
        if self.format == "tsv":
            wanted = 2 if self.task == "pair" else 1
            if not self.text_columns or len(self.text_columns) != wanted or not self.label_column:
                raise ElmoError(f"--format tsv for --task {self.task} needs --text-columns with "
                                f"{wanted} column name(s) and --label-column")
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
            (self.embedding_dim >= 1, "--embedding-dim must be >= 1"),
            (self.hidden_dim >= 1, "--hidden-dim must be >= 1"),
            (self.min_updates >= 0, "--min-updates must be >= 0"),
            (self.max_answer_tokens >= 1, "--max-answer-tokens must be >= 1"),
        ]
        raise_failed(checks)

    def reader_options(self, labeled: bool = True) -> dict[str, Any]:
        """The reader's keyword options for `format` (no tag check when not `labeled`)."""
        options: dict[str, Any] = {
            "conll": {"token_column": self.token_column, "tag_column": self.tag_column,
                      "scheme": self.scheme if labeled else None},
            "conllu": {"tag": self.tag},
            "label-text": {"tokenizer": self.tokenizer},
            "tsv": {"text_columns": self.text_columns, "label_column": self.label_column,
                    "tokenizer": self.tokenizer},
            "squad": {"tokenizer": self.tokenizer},
        }[self.format]
        return {**options, "encoding_errors": self.encoding_errors}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def run_config(run_dir: str | Path, **overrides: Any) -> tuple[TaskConfig, list[str]]:
    """The TaskConfig (with `overrides`) and labels of a run directory with a model."""
    run_dir = Path(run_dir)
    if is_native_dir(run_dir) and not is_task_run(run_dir):
        raise ElmoError(f"{run_dir} is a biLM, not a task run (made by elmo task train): give "
                        "the --out directory of `elmo task train`")
    if not (run_dir / "model.safetensors").is_file():
        raise ElmoError(f"{run_dir} holds no trained task model (model.safetensors); "
                        "train one with `elmo task train --out DIR`")
    saved = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    return TaskConfig.from_dict({**saved["task"], **overrides}), saved["labels"]


class Run:
    """A task model with its vocabulary, labels and biLM, built from a TaskConfig (and the
    saved model config of an existing run, so that later changes of the models' defaults do
    not change it)."""

    def __init__(self, config: TaskConfig, vocab: list[str], labels: list[str],
                 model_config: dict[str, Any] | None = None) -> None:
        self.config, self.vocab, self.labels = config, vocab, labels
        self.kind = TASKS[config.task]
        self.label_index = {label: i for i, label in enumerate(labels)}
        self.device = resolve_device(config.device)
        self.bilm = load_model(config.elmo, progress=config.progress,
                               quantize=config.quantize).bilm if config.elmo else None
        elmo_dim = self.bilm.config.output_dim if self.bilm is not None else 0
        self.model_config = self.kind.model_config(**model_config or dict(
            vocab_size=len(vocab), embedding_dim=config.embedding_dim,
            hidden_dim=config.hidden_dim, dropout=config.dropout,
            elmo_input_dim=elmo_dim if config.elmo_at in ("input", "both") else 0,
            elmo_output_dim=elmo_dim if config.elmo_at in ("output", "both") else 0,
            **self.kind.model_options(config, labels),
        ))
        torch.manual_seed(config.seed)
        elmo = None
        if self.bilm is not None:
            # Layer-norm statistics over the words only, as the cached layers (which have no
            # boundaries) give them: the same whether the biLM is frozen or fine-tuned.
            elmo = Elmo(None, None, 2 if config.elmo_at == "both" else 1, module=self.bilm,
                        requires_grad=config.fine_tune, do_layer_norm=config.layer_norm,
                        dropout=config.elmo_dropout, mode=config.elmo_mix,
                        layer_norm_boundaries=False)
        self.model = TaskModel(self.kind.model(self.model_config), elmo, config.elmo_at)
        self.model.task.encoder.embed.weight.requires_grad_(not config.freeze_word_vectors)
        self.model.to(self.device)

    @classmethod
    def load(cls, run_dir: str | Path, **overrides: Any) -> Run:
        """The best model of a finished (or running) run directory."""
        run_dir = Path(run_dir)
        config, labels = run_config(run_dir, **overrides)
        vocab = (run_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
        saved = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        run = cls(config, vocab, labels, saved.get("model"))
        run.model.load_saved_state(load_file(str(run_dir / "model.safetensors")))
        return run

    def feature_store(self, examples: list) -> LayerStore:
        """The feature cache of `examples`' sentences (the biLM as loaded)."""
        return feature_store(self.bilm, examples, self.config)

    def layer_rms(self, examples: list) -> list[float]:
        """Each biLM layer's RMS over `examples`' sentences: from the feature cache, or, when
        the biLM is fine-tuned (no cache), computed as they are embedded."""
        if not self.config.fine_tune:
            with self.feature_store(examples) as store:
                return store.layer_rms
        embedder = Embedder(self.bilm, device=self.device)
        sentences = flat_sentences(examples)
        layers = tqdm(embedder.iter_embeddings(sentences), total=len(sentences),
                      unit="sentence", desc="layer scales", disable=not self.config.progress)
        return layer_rms((a for _, a in layers), self.bilm.num_layers)

    def layers(self, examples: list) -> LayerStore | None:
        """The layers the model reads for `examples`: None without ELMo or when the biLM is
        fine-tuned (the model then runs it on each batch)."""
        if self.bilm is None or self.config.fine_tune:
            return None
        return self.feature_store(examples)

    def targets(self, examples: list) -> list[torch.Tensor | None]:
        """Each example's training target (None: not trained on, e.g. an unmapped answer)."""
        return [self.kind.target(e, self.label_index) for e in examples]

    def scores(self, encoded: Encoded, indices: list[int], store: Any
               ) -> tuple[Batch, torch.Tensor]:
        """The batch of examples `indices` (on the device) and the model's scores for it."""
        batch = encoded.batch(indices)
        layers = None
        if store is not None:
            layers = store.batch(batch.sentence_ids)[0].to(self.device)
        batch.word_ids, batch.mask = batch.word_ids.to(self.device), batch.mask.to(self.device)
        if batch.targets is not None:
            batch.targets = batch.targets.to(self.device)
        return batch, self.model(batch, layers)

    @torch.no_grad()
    def predict(self, examples: list) -> list:
        """The predictions for `examples` (tags, labels, answer texts), in order."""
        self.model.eval()
        encoded = Encoded(examples, self.vocab)
        predictions: list = [None] * len(examples)
        store = self.layers(examples)
        with store if store is not None else nullcontext():
            for indices in encoded.batches(64):
                batch, scores = self.scores(encoded, indices, store)
                for i, p in zip(indices, self.model.task.predict(scores, batch.mask),
                                strict=True):
                    predictions[i] = self.kind.decode(examples[i], p, self.labels)
        return predictions

    def evaluate(self, examples: list) -> dict[str, float]:
        """{"score": the config's metric (0..100) on `examples`, and the task's other
        scores (span: exact_match)}."""
        return self.kind.evaluate(examples, self.predict(examples), self.config)

    def score(self, examples: list) -> float:
        """The config's metric (0..100) of the model on `examples`."""
        return self.evaluate(examples)["score"]


def feature_store(bilm: BiLM, examples: list, config: TaskConfig) -> LayerStore:
    """The feature cache entry of `examples`' sentences under `bilm`, computed if absent:
    the one entry a run of `config` reads for them."""
    return cached_layers(bilm, flat_sentences(examples), config.cache_dir,
                         resolve_device(config.device), progress=config.progress)


def read_split(config: TaskConfig, path: str, labeled: bool = True) -> list:
    """`path` read in the run's format; `labeled`: tags or labels checked and required."""
    examples = read_dataset(path, config.format, **config.reader_options(labeled))
    if labeled and config.format == "tsv" and config.label_column not in examples[0].header:
        raise InputFileError(f"{path}: no column {config.label_column!r} in the header; it "
                             f"has {', '.join(examples[0].header)}. Check --label-column")
    if labeled:
        TASKS[config.task].require_targets(examples, path)
    return examples


def read_splits(config: TaskConfig) -> tuple[list, list, list | None, list[str]]:
    """A run's training examples (without the held-out dev part), dev and test examples
    (None without --test), checked; and the labels of the whole training file."""
    kind = TASKS[config.task]
    train_all = read_split(config, config.train)
    labels = kind.labels(train_all)
    kind.check_training(train_all, labels, config)
    if config.dev:
        dev = read_split(config, config.dev)
        kind.warn_unseen(dev, labels, config.dev, config)
    else:  # the same held-out part for every seed and fraction
        kept, held = held_out_split(len(train_all), config.dev_fraction)
        train_all, dev = [train_all[i] for i in kept], [train_all[i] for i in held]
    test = None
    if config.test:
        test = read_split(config, config.test)
        kind.warn_unseen(test, labels, config.test, config)
    return train_all, dev, test, labels


def compute_features(config: TaskConfig) -> None:
    """Fill the feature cache with every split a run of `config` reads (nothing to do without
    ELMo or with a fine-tuned biLM), so that runs in parallel processes only read it."""
    if config.elmo is None or config.fine_tune:
        return
    train_all, dev, test, _ = read_splits(config)
    bilm = load_model(config.elmo, progress=config.progress, quantize=config.quantize).bilm
    for examples in (train_all, dev, test or []):
        if examples:
            feature_store(bilm, examples, config).close()


def train_task(config: TaskConfig, overwrite: bool = False) -> dict[str, Any]:
    """Train (or resume, or return the result of) the run `config.out`; returns the result:
    metric, best dev score, test score (with a test file), best epoch, layer weights.

    `config.out` must be new, empty, or this run's (resumed); a run of other options is
    replaced, and other files kept beside the run, only with `overwrite`; a biLM never. One
    process at a time writes it ("another process is writing OUT")."""
    out = Path(config.out)
    check_out_dir(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(out):
        _claim_run_dir(out, config, overwrite)
        return _train_or_resume(config, out)


def _claim_run_dir(out: Path, config: TaskConfig, overwrite: bool) -> None:
    """Refuse `out` unless it is new, empty or this run's; with `overwrite`, delete another
    run's files (or ours among foreign files) so that the run starts anew."""
    if not out.is_dir():
        return
    for stale in out.glob(".*.tmp"):  # left by a writer that was killed
        stale.unlink()
    if not any(out.iterdir()) or _same_run(out, config):
        return
    if _holds_bilm(out):
        raise ElmoError(f"{out} holds a biLM: a task run never replaces a model; choose "
                        "another --out")
    if not overwrite:
        if is_task_run(out):
            raise ElmoError(f"{out} holds a run with other options (see its config.json); give "
                            "another --out, the same options to resume it, or --overwrite to "
                            "replace it")
        raise ElmoError(f"{out} is not empty and holds no task run: choose a new or empty "
                        "--out, or pass --overwrite to write the run into it (files of the "
                        "run's names are replaced)")
    for name in RUN_FILES:
        (out / name).unlink(missing_ok=True)


def _holds_bilm(directory: Path) -> bool:
    """A biLM in our format (not a task run) or one official options/weights pair."""
    if is_native_dir(directory):
        return not is_task_run(directory)
    try:
        find_official_pair(directory)
    except ElmoError:
        return False
    return True


def _train_or_resume(config: TaskConfig, out: Path) -> dict[str, Any]:
    """`train_task` once `out` is claimed."""
    if (out / "result.json").is_file() and _same_run(out, config):
        result = json.loads((out / "result.json").read_text(encoding="utf-8"))
        if result["epochs"] >= config.epochs or result["early_stopped"]:
            if config.test and result.get("test_file") != config.test:
                result.update(_test_result(config))
            return result
    train_all, dev, _, labels = read_splits(config)
    sample = nested_sample(len(train_all), config.train_fraction, config.seed)
    vocab = build_vocab([train_all[i] for i in sample])
    checkpoint_path = out / CHECKPOINT_NAME
    resumed = checkpoint_path.exists()
    saved_model = json.loads((out / "config.json").read_text(encoding="utf-8"))["model"] \
        if resumed else None
    run = Run(config, vocab, labels, saved_model)
    if not resumed:
        out.mkdir(parents=True, exist_ok=True)
        kind = run.kind
        saved = {"task": asdict(config), "model": asdict(run.model_config), "labels": labels,
                 "data": {"train": kind.data_notes(train_all), "dev": kind.data_notes(dev)}}
        if config.word_vectors:
            saved["word_vectors"] = load_word_vectors(run.model.task.encoder.embed, vocab,
                                                      config.word_vectors, progress=config.progress)
        for what, notes in (*saved["data"].items(), ("word vectors", saved.get("word_vectors"))):
            if notes and config.progress:
                tqdm.write(f"{what}: " + ", ".join(f"{k.replace('_', ' ')} {_fmt(v)}"
                                                   for k, v in notes.items()))
        atomic_write_text(out / "config.json", json.dumps(saved, indent=2) + "\n")
        atomic_write_text(out / "vocab.txt", "\n".join(vocab))
    targets = run.targets(train_all)
    trained = [i for i in sample if targets[i] is not None]
    if not trained:
        raise ElmoError(f"{config.train}: no training example has a usable target (see the "
                        "data notes above)")
    # the feature cache holds the whole training file; the sample is a subset of it
    result = fit(run, Encoded(train_all, vocab, targets, subset=trained), train_all, dev)
    saved = json.loads((out / "config.json").read_text(encoding="utf-8"))
    result.update(n_train=len(trained), **{k: saved[k] for k in ("data", "word_vectors")
                                           if saved.get(k)})
    if config.test:
        result.update(_test_result(config))
    atomic_write_text(out / "result.json", json.dumps(result, indent=2) + "\n")
    return result


def _fmt(value: Any) -> str:
    return f"{value:.1f}%" if isinstance(value, float) else str(value)


def _same_run(out: Path, config: TaskConfig) -> bool:
    try:
        saved = json.loads((out / "config.json").read_text(encoding="utf-8"))["task"]
    except (OSError, ValueError, KeyError):
        return False
    defaults = {f.name: f.default for f in dataclasses.fields(TaskConfig)}  # older runs lack
    return all(saved.get(k, defaults[k]) == v for k, v in asdict(config).items()  # new options
               if k not in RESUMABLE_CHANGES)


def _test_result(config: TaskConfig) -> dict[str, Any]:
    run = Run.load(config.out, progress=config.progress, cache_dir=config.cache_dir,
                   device=config.device)
    test = read_split(run.config, config.test)
    scores = run.evaluate(test)
    return {"test": scores.pop("score"), **{f"test_{k}": v for k, v in scores.items()},
            "test_file": config.test, "n_test": len(test)}


def _warn_unfinished(run_dir: Path, config: TaskConfig) -> None:
    """Warn when the run has not finished training (it has no result.json)."""
    if not (run_dir / "result.json").is_file():
        metrics = run_dir / "metrics.jsonl"
        done = len(metrics.read_text(encoding="utf-8").splitlines()) if metrics.exists() else 0
        warnings.warn(f"{run_dir}: training is incomplete ({done} of {config.epochs} epochs): "
                      "the best model so far is used; run the same `elmo task train` command "
                      "to finish it", stacklevel=3)


def _warn_missing_placeholders(examples: list, labels: list[str], path: str) -> None:
    """label-text lines start with a label: warn when their first words look like text (more
    than one distinct word that is not a label), since that word is not predicted on."""
    unknown = [e.label for e in examples if e.label not in labels]
    if len(set(unknown)) > 1:
        warnings.warn(f"{path}: {len(unknown)} lines start with a word that is not one of the "
                      f"run's labels ({', '.join(labels)}); label-text lines are 'LABEL "
                      "sentence', so each first word was read as the label, not as text. Put "
                      "a placeholder label (such as _) before each sentence", stacklevel=3)


def evaluate_run(run_dir: str | Path, test: str, **overrides: Any) -> dict[str, Any]:
    """The run's metric on `test` (read in the run's format): {metric, score, n, file, run}."""
    config, labels = run_config(run_dir, **overrides)  # the file is read before the model
    _warn_unfinished(Path(run_dir), config)
    examples = read_split(config, test)
    TASKS[config.task].warn_unseen(examples, labels, test, config)
    run = Run.load(run_dir, **overrides)
    return {"metric": run.config.metric, **run.evaluate(examples), "n": len(examples),
            "file": str(test), "run": str(run_dir)}


def predict_file(run_dir: str | Path, input_path: str, output_path: str, **overrides: Any) -> int:
    """Write the run's predictions for `input_path` to `output_path`: in the input's format
    with tags or labels replaced (or added where it has none); SQuAD's {question id: answer
    text} for spans. Returns the number of examples."""
    config, labels = run_config(run_dir, **overrides)
    _warn_unfinished(Path(run_dir), config)
    examples = read_split(config, input_path, labeled=False)
    if config.format == "label-text":
        _warn_missing_placeholders(examples, labels, input_path)
    run = Run.load(run_dir, **overrides)
    run.kind.write_predictions(output_path, examples, run.predict(examples), run.config)
    return len(examples)


def export_text(input_path: str, output_path: str, format: str, **options: Any) -> int:
    """Write the sentences of a task file, tokens joined by spaces, one per line (the text
    `elmo train` reads); returns their number."""
    sentences = flat_sentences(read_dataset(input_path, format, **options))
    atomic_write_text(output_path, "".join(" ".join(s) + "\n" for s in sentences))
    return len(sentences)
