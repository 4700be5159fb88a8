"""What a pretraining checkpoint holds: everything that resumes a run exactly.

The model, the optimizer state, the step, the early-stopping counts and, per rank, its data
position, carried LSTM states and RNG states. It is saved as plain state in the run folder's
checkpoint file (`elmo.runs.checkpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from elmo.modules.lstm import LSTMState
from elmo.runs import load_checkpoint, save_checkpoint


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

    def save(self, path: str | Path) -> None:
        """Write the checkpoint to `path` atomically."""
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        state["ranks"] = [{f.name: getattr(r, f.name) for f in fields(r)} for r in self.ranks]
        save_checkpoint(path, state)

    @classmethod
    def load(cls, path: str | Path) -> Checkpoint:
        """The checkpoint saved at `path` (tensors on CPU)."""
        state = load_checkpoint(path)
        return cls(**{**state, "ranks": [RankState(**r) for r in state["ranks"]]})
