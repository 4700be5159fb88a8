"""The epoch loop of a task run: passes over the training examples, a dev score after each
epoch, the best epoch's model kept (model.safetensors, layer_weights.json), early stopping, one
line per epoch in metrics.jsonl and a checkpoint per epoch, from which a killed run resumes.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from elmo.io.atomic import atomic_output, atomic_write_text
from elmo.modules.scalar_mix import parameter_groups
from elmo.tasks.data import Encoded
from elmo.tasks.features import LayerStore
from elmo.tasks.finetune import FineTuneConfig, GradualUnfreezer
from elmo.tasks.model import TaskModel
from elmo.training.checkpoint import (
    CHECKPOINT_NAME,
    Checkpoint,
    RankState,
    capture_rng,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)

if TYPE_CHECKING:
    from elmo.tasks.recipe import Run


def fit(run: Run, encoded: Encoded, train_all: list, dev: list) -> dict[str, Any]:
    """Train `run.model` on `encoded` (a subset of `train_all`, the feature cache's list) for
    at most `config.epochs` epochs, resuming from the run's checkpoint; returns the metric,
    the best dev score and its epoch, the epochs and updates made, whether it stopped early,
    the seconds and the best epoch's layer weights."""
    config, model, out = run.config, run.model, Path(run.config.out)
    per_pass = len(encoded.batches(config.batch_size))
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
        train_loss = _train_epoch(run, encoded, store, optimizer, tuner, state["epoch"], passes)
        dev_score = run.score(dev)
        state["epoch"] += 1
        state["updates"] = state.get("updates", 0) + passes * per_pass
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
    return {"metric": config.metric, "dev": state["best_score"],
            "best_epoch": state["best_epoch"], "epochs": state["epoch"],
            "early_stopped": bad_epochs >= config.patience, "updates": state.get("updates"),
            "passes_per_epoch": passes, "seconds": round(state["seconds"], 1),
            "layer_weights": json.loads((out / "layer_weights.json").read_text())}


def _train_epoch(run: Run, encoded: Encoded, store: LayerStore | None,
                 optimizer: torch.optim.Optimizer, tuner: GradualUnfreezer | None,
                 epoch: int, passes: int = 1) -> float:
    """`passes` passes over the training examples, each in a seeded order; returns the mean
    loss."""
    config, model = run.config, run.model
    model.train()
    batches = [b for p in range(epoch * passes, (epoch + 1) * passes)
               for b in encoded.batches(config.batch_size, shuffle_seed=config.seed * 1000 + p)]
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


def _keep_metrics_until(path: Path, epoch: int, *new_lines: str) -> None:
    """Rewrite metrics.jsonl (atomically) with its lines of epochs up to `epoch` (those after
    the checkpoint's are of a run killed in between), then `new_lines`."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    kept = [line for line in lines if json.loads(line)["epoch"] <= epoch]
    atomic_write_text(path, "".join(line + "\n" for line in [*kept, *new_lines]))
