"""The task recipe: read the data, train a task model with (or without) ELMo, early stopping
on dev, resumable; evaluate and predict with a finished run.

A run directory holds config.json (the TaskConfig, the model's config and the labels),
vocab.txt, model.safetensors (the best epoch on dev), layer_weights.json (softmax(s) of each
mix), metrics.jsonl (one line per epoch), checkpoint.safetensors (the last epoch: running the
same command again resumes there) and result.json.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from elmo.atomic import atomic_output, atomic_write_text, output_lock
from elmo.device import resolve_device
from elmo.embed import Embedder
from elmo.errors import ElmoError, InputFileError
from elmo.features import LayerStore, cached_layers, layer_rms
from elmo.finetune import FineTuneConfig, GradualUnfreezer
from elmo.formats.native import is_native_dir
from elmo.modules.bilm import BiLM
from elmo.modules.elmo import Elmo
from elmo.modules.scalar_mix import MIX_LR, parameter_groups, parse_mode
from elmo.pretrained import find_official_pair, is_task_run, load_bilm, recorded_tokenizer
from elmo.tasks.classifier import Classifier, ClassifierConfig
from elmo.tasks.data import (
    Batch,
    Encoded,
    build_labels,
    build_vocab,
    flat_sentences,
    held_out_split,
    nested_sample,
    require_targets,
    warn_label_like_text,
    warn_unseen,
)
from elmo.tasks.metrics import METRICS, accuracy, span_f1
from elmo.tasks.model import ELMO_AT, TaskModel
from elmo.tasks.pair import PairClassifier, PairConfig
from elmo.tasks.readers import FORMATS, SCHEMES, read_dataset, write_predictions
from elmo.tasks.tagger import Tagger, TaggerConfig
from elmo.training.checkpoint import (
    CHECKPOINT_NAME,
    Checkpoint,
    RankState,
    capture_rng,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from elmo.training.prepare import check_out_dir

TASKS = {
    "tagging": (Tagger, TaggerConfig),
    "classification": (Classifier, ClassifierConfig),
    "pair": (PairClassifier, PairConfig),
}
TASK_FORMATS = {"tagging": ("conll", "conllu"), "classification": ("label-text", "tsv"),
                "pair": ("tsv",)}
# the files of a run directory
RUN_FILES = ("config.json", "vocab.txt", "model.safetensors", "layer_weights.json",
             "metrics.jsonl", CHECKPOINT_NAME, "result.json")
# options that may change when a run is resumed
RESUMABLE_CHANGES = ("epochs", "patience", "test", "device", "progress", "cache_dir")


@dataclass
class TaskConfig:
    """Everything `elmo task train` takes; `train_task(TaskConfig(...))` from Python."""

    task: str  # tagging | classification | pair
    train: str
    dev: str | None  # None: hold out dev_fraction of the training file
    out: str
    format: str  # conll | conllu | label-text | tsv
    test: str | None = None
    dev_fraction: float = 0.0
    # format options
    token_column: int = 0  # conll
    tag_column: int = -1  # conll
    scheme: str | None = None  # conll tags: iob1 | iob2 | bioes (spans), None: plain labels
    tag: str = "upos"  # conllu: upos | xpos
    text_columns: list[str] | None = None  # tsv
    label_column: str | None = None  # tsv
    tokenizer: str | None = None  # label-text, tsv (None: the one --elmo records, else
    # whitespace)
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
    metric: str | None = None  # span-f1 | accuracy (default: span-f1 with a scheme)
    seed: int = 0
    epochs: int = 10
    patience: int = 3  # stop after this many epochs without a better dev score
    train_fraction: float = 1.0
    batch_size: int = 32
    lr: float = 0.001
    embedding_dim: int = 100
    hidden_dim: int = 128
    dropout: float = 0.3
    device: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.elmo in ("none", ""):
            self.elmo = None
        elif self.elmo is not None and Path(self.elmo).is_dir():  # found from any directory
            self.elmo = str(Path(self.elmo).resolve())
        if self.metric is None:
            self.metric = "span-f1" if self.scheme else "accuracy"
        if self.tokenizer is None:  # as `elmo embed`: the tokenizer the biLM was trained with
            recorded = recorded_tokenizer(self.elmo) if self.elmo and \
                self.format in ("label-text", "tsv") else None
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
        self._check_numbers()
        if self.format not in TASK_FORMATS[self.task]:
            raise ElmoError(f"--task {self.task} reads --format "
                            f"{' or '.join(TASK_FORMATS[self.task])}, not {self.format}")
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
        ]
        errors = [message for ok, message in checks if not ok]
        if errors:
            raise ElmoError("; ".join(errors))

    def reader_options(self, labeled: bool = True) -> dict[str, Any]:
        """The reader's keyword options for `format` (no tag check when not `labeled`)."""
        options: dict[str, Any] = {
            "conll": {"token_column": self.token_column, "tag_column": self.tag_column,
                      "scheme": self.scheme if labeled else None},
            "conllu": {"tag": self.tag},
            "label-text": {"tokenizer": self.tokenizer},
            "tsv": {"text_columns": self.text_columns, "label_column": self.label_column,
                    "tokenizer": self.tokenizer},
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
    """A task model with its vocabulary, labels and biLM, built from a TaskConfig."""

    def __init__(self, config: TaskConfig, vocab: list[str], labels: list[str]) -> None:
        self.config, self.vocab, self.labels = config, vocab, labels
        self.device = resolve_device(config.device)
        self.bilm = load_bilm(config.elmo, progress=config.progress) if config.elmo else None
        elmo_dim = self.bilm.config.output_dim if self.bilm is not None else 0
        task_class, config_class = TASKS[config.task]
        self.model_config = config_class(
            vocab_size=len(vocab), num_labels=len(labels), embedding_dim=config.embedding_dim,
            hidden_dim=config.hidden_dim, dropout=config.dropout,
            elmo_input_dim=elmo_dim if config.elmo_at in ("input", "both") else 0,
            elmo_output_dim=elmo_dim if config.elmo_at in ("output", "both") else 0,
        )
        torch.manual_seed(config.seed)
        elmo = None
        if self.bilm is not None:
            elmo = Elmo(None, None, 2 if config.elmo_at == "both" else 1, bilm=self.bilm,
                        requires_grad=config.fine_tune, do_layer_norm=config.layer_norm,
                        dropout=config.elmo_dropout, mode=config.elmo_mix)
        self.model = TaskModel(task_class(self.model_config), elmo, config.elmo_at).to(self.device)

    @classmethod
    def load(cls, run_dir: str | Path, **overrides: Any) -> Run:
        """The best model of a finished (or running) run directory."""
        run_dir = Path(run_dir)
        config, labels = run_config(run_dir, **overrides)
        vocab = (run_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
        run = cls(config, vocab, labels)
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

    def scores(self, encoded: Encoded, indices: list[int], store: Any
               ) -> tuple[Batch, torch.Tensor]:
        """The batch of examples `indices` (on the device) and the model's scores for it."""
        batch = encoded.batch(indices)
        layers = None
        if store is not None:
            layers = store.batch(batch.sentence_ids)[0].to(self.device)
        batch.word_ids, batch.mask = batch.word_ids.to(self.device), batch.mask.to(self.device)
        batch.targets = batch.targets.to(self.device)
        return batch, self.model(batch, layers)

    @torch.no_grad()
    def predict(self, examples: list) -> list:
        """Tags (lists) or labels of `examples`, in order."""
        self.model.eval()
        encoded = Encoded(examples, self.vocab, self.labels, with_targets=False)
        predictions: list = [None] * len(examples)
        store = self.layers(examples)
        with store if store is not None else nullcontext():
            for indices in encoded.batches(64):
                batch, scores = self.scores(encoded, indices, store)
                for i, p in zip(indices, self.model.task.predict(scores, batch.mask),
                                strict=True):
                    predictions[i] = ([self.labels[t] for t in p] if encoded.tagging
                                      else self.labels[p])
        return predictions

    def score(self, examples: list) -> float:
        """The config's metric (0..100) of the model on `examples`."""
        gold = [e.tags if hasattr(e, "tags") else e.label for e in examples]
        predicted = self.predict(examples)
        if self.config.metric == "span-f1":
            return span_f1(gold, predicted, self.config.scheme)
        return accuracy(gold, predicted)


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
        require_targets(examples, path)
    return examples


def read_splits(config: TaskConfig) -> tuple[list, list, list | None, list[str]]:
    """A run's training examples (without the held-out dev part), dev and test examples
    (None without --test), checked; and the labels of the whole training file."""
    train_all = read_split(config, config.train)
    labels = build_labels(train_all)
    if config.task != "tagging":
        warn_label_like_text(train_all, labels, config.train, config.format)
    if config.dev:
        dev = read_split(config, config.dev)
        warn_unseen(dev, labels, config.dev, config.train, config.scheme)
    else:  # the same held-out part for every seed and fraction
        kept, held = held_out_split(len(train_all), config.dev_fraction)
        train_all, dev = [train_all[i] for i in kept], [train_all[i] for i in held]
    test = None
    if config.test:
        test = read_split(config, config.test)
        warn_unseen(test, labels, config.test, config.train, config.scheme)
    return train_all, dev, test, labels


def compute_features(config: TaskConfig) -> None:
    """Fill the feature cache with every split a run of `config` reads (nothing to do without
    ELMo or with a fine-tuned biLM), so that runs in parallel processes only read it."""
    if config.elmo is None or config.fine_tune:
        return
    train_all, dev, test, _ = read_splits(config)
    bilm = load_bilm(config.elmo, progress=config.progress)
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
    train = [train_all[i] for i in sample]
    vocab = build_vocab(train)
    checkpoint_path = out / CHECKPOINT_NAME
    run = Run(config, vocab, labels)
    if not checkpoint_path.exists():
        out.mkdir(parents=True, exist_ok=True)
        saved = {"task": asdict(config), "model": asdict(run.model_config), "labels": labels}
        atomic_write_text(out / "config.json", json.dumps(saved, indent=2) + "\n")
        atomic_write_text(out / "vocab.txt", "\n".join(vocab))
    return _train(run, train, sample, train_all, dev)


def _same_run(out: Path, config: TaskConfig) -> bool:
    try:
        saved = json.loads((out / "config.json").read_text(encoding="utf-8"))["task"]
    except (OSError, ValueError, KeyError):
        return False
    mine = asdict(config)
    return all(saved.get(k) == v for k, v in mine.items() if k not in RESUMABLE_CHANGES)


def _train(run: Run, train: list, sample: list[int], train_all: list, dev: list) -> dict:
    config, model, out = run.config, run.model, Path(run.config.out)
    encoded = Encoded(train, run.vocab, run.labels, positions=sample)  # cache: the whole file
    tuner = None
    if config.fine_tune:
        steps_per_epoch = len(encoded.batches(config.batch_size))
        tuner = GradualUnfreezer(model, model.elmo, config.epochs * steps_per_epoch,
                                 FineTuneConfig(lr=config.lr, mix_lr=config.mix_lr))
        optimizer = torch.optim.Adam(tuner.param_groups)
    else:
        optimizer = torch.optim.Adam(parameter_groups(model, config.lr, config.mix_lr))
    if model.elmo is not None and config.scale_layers:  # a checkpoint has them too
        model.set_layer_scales([1 / r for r in run.layer_rms(train_all)])
    state = {"epoch": 0, "best_score": None, "best_epoch": 0, "seconds": 0.0}
    bad_epochs = 0
    checkpoint_path = out / CHECKPOINT_NAME
    if checkpoint_path.exists():
        ckpt = load_checkpoint(checkpoint_path)
        model.load_saved_state(ckpt.model)
        optimizer.load_state_dict(ckpt.optimizer)
        restore_rng(ckpt.ranks[0].rng)
        state, bad_epochs = ckpt.ranks[0].stream, ckpt.bad_evals
        _keep_metrics_until(out / "metrics.jsonl", state["epoch"])
        if config.progress:
            print(f"elmo: resuming {out} after epoch {state['epoch']} of {config.epochs}",
                  file=sys.stderr)
    store = run.layers(train_all)
    while state["epoch"] < config.epochs and bad_epochs < config.patience:
        start = time.perf_counter()
        train_loss = _train_epoch(run, encoded, store, optimizer, tuner, state["epoch"])
        dev_score = run.score(dev)
        state["epoch"] += 1
        state["seconds"] += time.perf_counter() - start
        line = {"epoch": state["epoch"], "train_loss": train_loss,
                f"dev_{config.metric}": dev_score, "layer_weights": model.layer_weights()}
        if state["best_score"] is None or dev_score > state["best_score"]:
            state.update(best_score=dev_score, best_epoch=state["epoch"])
            bad_epochs = 0
            _save_model(out, model)
        else:
            bad_epochs += 1
        # the epoch's line first: a kill before the checkpoint is saved leaves a line that
        # the resumed run drops, never an epoch without its line
        _keep_metrics_until(out / "metrics.jsonl", state["epoch"] - 1, json.dumps(line))
        save_checkpoint(checkpoint_path, Checkpoint(
            step=state["epoch"], model=model.saved_state(), optimizer=optimizer.state_dict(),
            ranks=[RankState(dict(state), None, capture_rng())], bad_evals=bad_epochs))
        if config.progress:
            tqdm.write(f"epoch {state['epoch']}: loss {line['train_loss']:.4f}, dev "
                       f"{config.metric} {dev_score:.2f} (best {state['best_score']:.2f})")
    if store is not None:
        store.close()
    result = {"metric": config.metric, "dev": state["best_score"],
              "best_epoch": state["best_epoch"], "epochs": state["epoch"],
              "early_stopped": bad_epochs >= config.patience, "n_train": len(train),
              "seconds": round(state["seconds"], 1),
              "layer_weights": json.loads((out / "layer_weights.json").read_text())}
    if config.test:
        result.update(_test_result(config))
    atomic_write_text(out / "result.json", json.dumps(result, indent=2) + "\n")
    return result


def _train_epoch(run: Run, encoded: Encoded, store: LayerStore | None,
                 optimizer: torch.optim.Optimizer, tuner: GradualUnfreezer | None,
                 epoch: int) -> float:
    """One pass over the training examples in a seeded order; returns the mean loss."""
    config, model = run.config, run.model
    model.train()
    batches = encoded.batches(config.batch_size, shuffle_seed=config.seed * 1000 + epoch)
    if tuner is not None:
        tuner.on_epoch_start(epoch)
    total = 0.0
    bar = tqdm(batches, desc=f"epoch {epoch + 1}/{config.epochs}", unit="batch",
               disable=not config.progress, leave=False)
    for step, indices in enumerate(bar, start=epoch * len(batches)):
        if tuner is not None:
            tuner.set_learning_rates(optimizer, step)
        batch, scores = run.scores(encoded, indices, store)
        loss = model.task.loss(scores, batch.targets, batch.mask) + model.mix_penalty(config.l2)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        total += loss.item()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    return total / len(batches)


def _test_result(config: TaskConfig) -> dict[str, Any]:
    run = Run.load(config.out, progress=config.progress, cache_dir=config.cache_dir,
                   device=config.device)
    test = read_split(run.config, config.test)
    return {"test": run.score(test), "test_file": config.test, "n_test": len(test)}


def _save_model(out: Path, model: TaskModel) -> None:
    state = {k: v.detach().cpu().contiguous() for k, v in model.saved_state().items()}
    with atomic_output(out / "model.safetensors") as tmp:
        save_file(state, str(tmp))
    atomic_write_text(out / "layer_weights.json", json.dumps(model.layer_weights(), indent=2))


def _keep_metrics_until(path: Path, epoch: int, *new_lines: str) -> None:
    """Rewrite metrics.jsonl (atomically) with its lines of epochs up to `epoch` (those after
    the checkpoint's are of a run killed in between), then `new_lines`."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    kept = [line for line in lines if json.loads(line)["epoch"] <= epoch]
    atomic_write_text(path, "".join(line + "\n" for line in [*kept, *new_lines]))


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
    warn_unseen(examples, labels, test, config.train, config.scheme)
    run = Run.load(run_dir, **overrides)
    return {"metric": run.config.metric, "score": run.score(examples), "n": len(examples),
            "file": str(test), "run": str(run_dir)}


def predict_file(run_dir: str | Path, input_path: str, output_path: str, **overrides: Any) -> int:
    """Write the run's predictions for `input_path` to `output_path` in the input's format
    (tags or labels replaced, or added where it has none); returns the number of examples."""
    config, labels = run_config(run_dir, **overrides)
    _warn_unfinished(Path(run_dir), config)
    examples = read_split(config, input_path, labeled=False)
    if config.format == "label-text":
        _warn_missing_placeholders(examples, labels, input_path)
    run = Run.load(run_dir, **overrides)
    write_predictions(output_path, run.config.format, examples, run.predict(examples),
                      **run.config.reader_options())
    return len(examples)


def export_text(input_path: str, output_path: str, format: str, **options: Any) -> int:
    """Write the sentences of a task file, tokens joined by spaces, one per line (the text
    `elmo train` reads); returns their number."""
    sentences = flat_sentences(read_dataset(input_path, format, **options))
    atomic_write_text(output_path, "".join(" ".join(s) + "\n" for s in sentences))
    return len(sentences)
