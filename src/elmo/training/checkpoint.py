"""Training checkpoints: one safetensors file, written atomically, that resumes a run exactly.

Tensors (model, optimizer state, each rank's carried LSTM states and torch RNG states) are
stored as safetensors; everything else (step, best validation perplexity, optimizer
hyper-parameters, each rank's data position and numpy / Python RNG states) is JSON in the
file's metadata. One file renamed into place means a reader (or a killed writer) never sees a
half-written checkpoint.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from elmo.errors import ElmoError
from elmo.io.atomic import atomic_output
from elmo.modules.lstm import LSTMState

CHECKPOINT_NAME = "checkpoint.safetensors"
_META_KEY = "elmo_training_checkpoint"
_VERSION = 1


@dataclass
class RankState:
    """What differs between the ranks: data position, carried LSTM states, RNG states."""

    stream: dict[str, Any]  # TrainStream.state_dict()
    lstm_states: list[LSTMState] | None  # per layer (h (2, B, P), c (2, B, C)), CPU
    rng: dict[str, Any]  # capture_rng()


@dataclass
class Checkpoint:
    step: int  # optimizer steps taken
    model: dict[str, torch.Tensor]  # BiLanguageModel.state_dict()
    optimizer: dict[str, Any]  # torch optimizer state_dict()
    ranks: list[RankState]
    best_valid_ppl: float | None = None
    bad_evals: int = 0  # evaluations since the best one (early stopping)
    finished: bool = False
    model_config: dict[str, Any] = field(default_factory=dict)  # BiLMConfig.to_dict()
    # Training losses since the last metrics line (summed over the ranks), so that the first
    # line a resumed run logs equals the uninterrupted run's.
    log_window: dict[str, float] = field(default_factory=dict)
    threads: int | None = None  # torch threads of the process that wrote it (bitwise resume)


# ---- random number generators ---------------------------------------------------------


def capture_rng() -> dict[str, Any]:
    """The torch (CPU and CUDA), numpy and Python global RNG states."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, py_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [name, keys.tolist(), pos, has_gauss, gauss],
        "python": [version, list(internal), py_gauss],
    }


def restore_rng(state: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng`."""
    torch.set_rng_state(state["torch"])
    if state["cuda"]:
        torch.cuda.set_rng_state_all(state["cuda"])
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, internal, py_gauss = state["python"]
    random.setstate((version, tuple(internal), py_gauss))


# ---- file -----------------------------------------------------------------------------


def save_checkpoint(path: str | Path, ckpt: Checkpoint) -> None:
    """Write `ckpt` to `path` atomically."""
    tensors = {f"model.{k}": v for k, v in ckpt.model.items()}
    for index, slots in ckpt.optimizer["state"].items():
        for key, value in slots.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer.{index}.{key}"] = value
    ranks_meta = []
    for r, rank in enumerate(ckpt.ranks):
        for k, (h, c) in enumerate(rank.lstm_states or []):
            tensors[f"rank{r}.lstm.{k}.h"], tensors[f"rank{r}.lstm.{k}.c"] = h, c
        tensors[f"rank{r}.rng.torch"] = rank.rng["torch"]
        for i, cuda_state in enumerate(rank.rng["cuda"]):
            tensors[f"rank{r}.rng.cuda.{i}"] = cuda_state
        ranks_meta.append({
            "stream": rank.stream,
            "n_lstm_layers": len(rank.lstm_states or []),
            "n_cuda": len(rank.rng["cuda"]),
            "numpy_rng": rank.rng["numpy"],
            "python_rng": rank.rng["python"],
        })
    meta = {
        "version": _VERSION,
        "step": ckpt.step,
        "best_valid_ppl": ckpt.best_valid_ppl,
        "bad_evals": ckpt.bad_evals,
        "finished": ckpt.finished,
        "model_config": ckpt.model_config,
        "log_window": ckpt.log_window,
        "threads": ckpt.threads,
        "optimizer_param_groups": ckpt.optimizer["param_groups"],
        "optimizer_scalars": {
            str(i): {k: v for k, v in slots.items() if not isinstance(v, torch.Tensor)}
            for i, slots in ckpt.optimizer["state"].items()
        },
        "ranks": ranks_meta,
    }
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    with atomic_output(path) as tmp:
        save_file(tensors, str(tmp), metadata={_META_KEY: json.dumps(meta)})


def read_checkpoint_meta(path: str | Path) -> dict[str, Any]:
    """The JSON part of a checkpoint (step, best perplexity, ...), without loading tensors."""
    try:
        with safe_open(str(path), "pt") as f:
            meta = (f.metadata() or {}).get(_META_KEY)
    except (SafetensorError, OSError) as err:
        raise ElmoError(f"{path} is not a readable training checkpoint: {err}") from err
    if meta is None:
        raise ElmoError(f"{path} is a safetensors file but not an elmo training checkpoint")
    data = json.loads(meta)
    if data.get("version") != _VERSION:
        raise ElmoError(f"{path}: unsupported checkpoint version {data.get('version')!r}")
    return data


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint` (tensors on CPU)."""
    meta = read_checkpoint_meta(path)
    tensors = load_file(str(path))
    model = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    state: dict[int, dict[str, Any]] = {
        int(i): dict(scalars) for i, scalars in meta["optimizer_scalars"].items()
    }
    for name, value in tensors.items():
        if name.startswith("optimizer."):
            _, index, key = name.split(".", 2)
            state.setdefault(int(index), {})[key] = value
    ranks = []
    for r, rank in enumerate(meta["ranks"]):
        lstm = [
            (tensors[f"rank{r}.lstm.{k}.h"], tensors[f"rank{r}.lstm.{k}.c"])
            for k in range(rank["n_lstm_layers"])
        ]
        rng = {
            "torch": tensors[f"rank{r}.rng.torch"],
            "cuda": [tensors[f"rank{r}.rng.cuda.{i}"] for i in range(rank["n_cuda"])],
            "numpy": rank["numpy_rng"],
            "python": rank["python_rng"],
        }
        ranks.append(RankState(rank["stream"], lstm or None, rng))
    return Checkpoint(
        step=meta["step"],
        model=model,
        optimizer={"state": state, "param_groups": meta["optimizer_param_groups"]},
        ranks=ranks,
        best_valid_ppl=meta["best_valid_ppl"],
        bad_evals=meta["bad_evals"],
        finished=meta["finished"],
        model_config=meta["model_config"],
        log_window=meta.get("log_window", {}),
        threads=meta.get("threads"),
    )
