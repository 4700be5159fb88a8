"""A task run: its model built from a TaskConfig (with the biLM and its feature cache), and the
epoch loop that trains it.

A run directory holds elmo-run.json (the marker of a task run), config.json (the options, the
model's config, the labels and notes on the data), vocab.txt, model.safetensors (the best epoch
on dev), layer_weights.json (softmax(s) of each mix), metrics.jsonl (one line per epoch),
checkpoint.safetensors (the last epoch: running the same command again resumes there) and
result.json (written by the recipe, `elmo.tasks.recipe`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from elmo.device import resolve_device
from elmo.embedding import Embedder
from elmo.errors import ElmoError
from elmo.io.atomic import atomic_output, atomic_write_text
from elmo.loading.formats.native import is_native_dir
from elmo.loading.load import load_model
from elmo.loading.resolve import resolve_model
from elmo.modules.bilm import BiLM
from elmo.modules.elmo import MixedBiLM
from elmo.modules.scalar_mix import parameter_groups
from elmo.runs import (
    CHECKPOINT_NAME,
    METRICS_NAME,
    TASK,
    MetricsLog,
    capture_rng,
    load_checkpoint,
    mark_run_folder,
    restore_rng,
    run_kind,
    save_checkpoint,
)
from elmo.tasks.config import TaskConfig
from elmo.tasks.data import Batch, Encoded, flat_sentences
from elmo.tasks.features import LayerStore, cached_layers, layer_rms
from elmo.tasks.finetune import FineTuneConfig, GradualUnfreezer
from elmo.tasks.model import TaskModel
from elmo.tasks.readers import FORMATS
from elmo.tasks.registry import TASKS
from elmo.tasks.word_vectors import load_word_vectors, vector_dim

# the files of a run directory (but its marker): what `--overwrite` replaces
RUN_FILES = ("config.json", "vocab.txt", "model.safetensors", "layer_weights.json",
             METRICS_NAME, CHECKPOINT_NAME, "result.json")


def resolve_config(config: TaskConfig) -> TaskConfig:
    """`config` with what its files decide filled in, as a run saves it: --elmo made absolute
    when it is a directory (found from any directory), the tokenizer the biLM records when
    none is given (as `elmo embed`; else whitespace), the word vectors' dimension when no
    --embedding-dim is given (else 100)."""
    elmo, tokenizer, embedding_dim = config.elmo, config.tokenizer, config.embedding_dim
    if elmo is not None and Path(elmo).is_dir():
        elmo = str(Path(elmo).resolve())
    if tokenizer is None:
        recorded = resolve_model(elmo).recorded_tokenizer() if elmo and \
            FORMATS[config.format].tokenizes else None
        tokenizer = recorded or "whitespace"
    if embedding_dim is None:
        embedding_dim = vector_dim(config.word_vectors) if config.word_vectors else 100
    return dataclasses.replace(config, elmo=elmo, tokenizer=tokenizer,
                               embedding_dim=embedding_dim)


def saved_run(run_dir: Path) -> dict[str, Any]:
    """A run directory's config.json: {"task": its options, "model": the model's config,
    "labels", "data": notes on the splits, "word_vectors": notes, when given}."""
    return json.loads((run_dir / "config.json").read_text(encoding="utf-8"))


def run_config(run_dir: str | Path, **overrides: Any) -> tuple[TaskConfig, list[str]]:
    """The TaskConfig (with `overrides`) and labels of a run directory with a model."""
    run_dir = Path(run_dir)
    if run_kind(run_dir) != TASK and is_native_dir(run_dir):
        raise ElmoError(f"{run_dir} is a biLM, not a task run (made by elmo task train): give "
                        "the --out directory of `elmo task train`")
    if not (run_dir / "model.safetensors").is_file():
        raise ElmoError(f"{run_dir} holds no trained task model (model.safetensors); "
                        "train one with `elmo task train --out DIR`")
    saved = saved_run(run_dir)
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
            elmo = MixedBiLM(self.bilm, 2 if config.elmo_at == "both" else 1,
                             requires_grad=config.fine_tune, do_layer_norm=config.layer_norm,
                             dropout=config.elmo_dropout, mode=config.elmo_mix,
                             layer_norm_boundaries=False)
        self.model = TaskModel(self.kind.model(self.model_config), elmo, config.elmo_at)
        self.model.task.encoder.embed.weight.requires_grad_(not config.freeze_word_vectors)
        self.model.to(self.device)

    @classmethod
    def start(cls, config: TaskConfig, vocab: list[str], labels: list[str],
              data_notes: dict[str, Any]) -> Run:
        """The run of `config.out` (a claimed directory): the one its checkpoint resumes, or
        a new one, whose config.json and vocab.txt are written (with the word vectors read
        into the model)."""
        out = Path(config.out)
        if (out / CHECKPOINT_NAME).exists():
            return cls(config, vocab, labels, saved_run(out)["model"])
        run = cls(config, vocab, labels)
        saved = {"task": asdict(config), "model": asdict(run.model_config), "labels": labels,
                 "data": data_notes}
        if config.word_vectors:
            saved["word_vectors"] = load_word_vectors(run.model.task.encoder.embed, vocab,
                                                      config.word_vectors, progress=config.progress)
        for what, notes in (*saved["data"].items(), ("word vectors", saved.get("word_vectors"))):
            if notes and config.progress:
                tqdm.write(f"{what}: " + ", ".join(f"{k.replace('_', ' ')} {_fmt(v)}"
                                                   for k, v in notes.items()))
        mark_run_folder(out, TASK)
        atomic_write_text(out / "config.json", json.dumps(saved, indent=2) + "\n")
        atomic_write_text(out / "vocab.txt", "\n".join(vocab))
        return run

    @classmethod
    def load(cls, run_dir: str | Path, **overrides: Any) -> Run:
        """The best model of a finished (or running) run directory."""
        run_dir = Path(run_dir)
        config, labels = run_config(run_dir, **overrides)
        vocab = (run_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
        run = cls(config, vocab, labels, saved_run(run_dir).get("model"))
        run.model.load_saved_state(load_file(str(run_dir / "model.safetensors")))
        return run

    @property
    def batch_size(self) -> int:
        """Examples per training batch: the task type's when it fixes one, else the
        config's."""
        return self.kind.examples_per_batch or self.config.batch_size

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

    def encode(self, examples: list, targets: list[torch.Tensor | None] | None = None,
               subset: list[int] | None = None) -> Encoded:
        """`examples` (the feature cache's list) with word ids, their task type's model
        inputs and `targets`, to batch (`subset`: the ones batched; default all)."""
        return Encoded(examples, self.vocab, targets, subset,
                       [self.kind.model_inputs(e) for e in examples])

    def scores(self, encoded: Encoded, indices: list[int], store: Any
               ) -> tuple[Batch, torch.Tensor]:
        """The batch of examples `indices` (on the device) and the model's scores for it."""
        batch = encoded.batch(indices)
        layers = None
        if store is not None:
            layers = store.batch(batch.sentence_ids)[0].to(self.device)
        batch.word_ids, batch.mask = batch.word_ids.to(self.device), batch.mask.to(self.device)
        batch.inputs = {k: v.to(self.device) for k, v in batch.inputs.items()}
        if batch.targets is not None:
            batch.targets = batch.targets.to(self.device)
        return batch, self.model(batch, layers)

    @torch.no_grad()
    def predict(self, examples: list) -> list:
        """The predictions for `examples` (tags, labels, answer texts), in order."""
        self.model.eval()
        encoded = self.encode(examples)
        predictions: list = [None] * len(examples)
        store = self.layers(examples)
        with store if store is not None else nullcontext():
            for indices in encoded.batches(self.kind.examples_per_batch or 64):
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


def _fmt(value: Any) -> str:
    return f"{value:.1f}%" if isinstance(value, float) else str(value)


def feature_store(bilm: BiLM, examples: list, config: TaskConfig) -> LayerStore:
    """The feature cache entry of `examples`' sentences under `bilm`, computed if absent:
    the one entry a run of `config` reads for them."""
    return cached_layers(bilm, flat_sentences(examples), config.cache_dir,
                         resolve_device(config.device), progress=config.progress)


# ---- the epoch loop ---------------------------------------------------------------------


@dataclass
class FitProgress:
    """Where training stands after the last epoch: the checkpoint's "progress"."""

    epoch: int = 0
    updates: int = 0  # optimizer steps
    best_score: float | None = None  # on dev
    best_epoch: int = 0
    bad_epochs: int = 0  # since the best one
    seconds: float = 0.0  # spent in epochs, a resumed run's added to its first's


def fit(run: Run, encoded: Encoded, train_all: list, dev: list) -> dict[str, Any]:
    """Train `run.model` on `encoded` (a subset of `train_all`, the feature cache's list) for
    at most `config.epochs` epochs, resuming from the run's checkpoint; returns the metric,
    the best dev score and its epoch, the epochs and updates made, whether it stopped early,
    the seconds and the best epoch's layer weights.

    After each epoch: the dev score, the model if it is the best so far (model.safetensors,
    layer_weights.json), a line in metrics.jsonl and a checkpoint. Training stops early after
    `config.patience` epochs without a better dev score."""
    config, model, out = run.config, run.model, Path(run.config.out)
    per_pass = len(encoded.batches(run.batch_size))
    passes = max(1, math.ceil(config.min_updates / (config.epochs * per_pass)))
    tuner = None
    if config.fine_tune:
        tuner = GradualUnfreezer(model, model.elmo, config.epochs * passes * per_pass,
                                 FineTuneConfig(lr=config.lr, mix_lr=config.mix_lr))
        optimizer = torch.optim.Adam(tuner.param_groups)
    else:
        optimizer = torch.optim.Adam(parameter_groups(model, config.lr, config.mix_lr))
    if model.elmo is not None and config.scale_layers:  # a checkpoint has them too
        model.set_layer_scales([1 / r for r in run.layer_rms(train_all)])
    progress = FitProgress()
    checkpoint_path, metrics = out / CHECKPOINT_NAME, MetricsLog(out / METRICS_NAME, "epoch")
    if checkpoint_path.exists():
        saved = load_checkpoint(checkpoint_path)
        model.load_saved_state(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        restore_rng(saved["rng"])
        progress = FitProgress(**saved["progress"])
        if config.progress:
            print(f"elmo: resuming {out} after epoch {progress.epoch} of {config.epochs}",
                  file=sys.stderr)
    metrics.truncate_after(progress.epoch)  # lines of a run killed before its checkpoint
    store = run.layers(train_all)
    while progress.epoch < config.epochs and progress.bad_epochs < config.patience:
        start = time.perf_counter()
        train_loss = _train_epoch(run, encoded, store, optimizer, tuner, progress.epoch, passes)
        dev_score = run.score(dev)
        progress.epoch += 1
        progress.updates += passes * per_pass
        progress.seconds += time.perf_counter() - start
        line = {"epoch": progress.epoch, "train_loss": train_loss,
                f"dev_{config.metric}": dev_score, "layer_weights": model.layer_weights()}
        if progress.best_score is None or dev_score > progress.best_score:
            progress.best_score, progress.best_epoch = dev_score, progress.epoch
            progress.bad_epochs = 0
            _save_model(out, model)
        else:
            progress.bad_epochs += 1
        # the epoch's line first: a kill before the checkpoint is saved leaves a line that
        # the resumed run drops, never an epoch without its line
        metrics.append(line)
        save_checkpoint(checkpoint_path, {
            "model": model.saved_state(), "optimizer": optimizer.state_dict(),
            "rng": capture_rng(), "progress": asdict(progress)})
        if config.progress:
            tqdm.write(f"epoch {progress.epoch}: loss {train_loss:.4f}, dev "
                       f"{config.metric} {dev_score:.2f} (best {progress.best_score:.2f})")
    if store is not None:
        store.close()
    return {"metric": config.metric, "dev": progress.best_score,
            "best_epoch": progress.best_epoch, "epochs": progress.epoch,
            "early_stopped": progress.bad_epochs >= config.patience,
            "updates": progress.updates, "passes_per_epoch": passes,
            "seconds": round(progress.seconds, 1),
            "layer_weights": json.loads((out / "layer_weights.json").read_text())}


def _train_epoch(run: Run, encoded: Encoded, store: LayerStore | None,
                 optimizer: torch.optim.Optimizer, tuner: GradualUnfreezer | None,
                 epoch: int, passes: int = 1) -> float:
    """`passes` passes over the training examples, each in a seeded order; returns the mean
    loss."""
    config, model = run.config, run.model
    model.train()
    batches = [b for p in range(epoch * passes, (epoch + 1) * passes)
               for b in encoded.batches(run.batch_size, shuffle_seed=config.seed * 1000 + p)]
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


def _save_model(out: Path, model: TaskModel) -> None:
    state = {k: v.detach().cpu().contiguous() for k, v in model.saved_state().items()}
    with atomic_output(out / "model.safetensors") as tmp:
        save_file(state, str(tmp))
    atomic_write_text(out / "layer_weights.json", json.dumps(model.layer_weights(), indent=2))
