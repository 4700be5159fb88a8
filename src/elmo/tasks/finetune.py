"""Fine-tuning the whole biLM inside a task model (ULMFiT's third stage).

The groups, bottom to top: the biLM's token encoder, its LSTM layers 1 .. L, and the task
model's own parameters (its mixes, with `mix_lr`, beside them). With a discriminative factor F
the task model gets `lr`, LSTM layer L `lr / F`, ..., the token encoder `lr / F ** (L + 1)`,
all multiplied by the schedule (slanted triangular by default). Gradual unfreezing trains the
task model and the top LSTM layer in epoch 0 and one more biLM group, downwards, each epoch.
The groups, learning rates, schedule and unfreezing are those of `elmo train`
(`elmo.optim.groups`, `elmo.optim.schedules`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from elmo.errors import ElmoError
from elmo.modules.elmo import MixedBiLM
from elmo.modules.scalar_mix import MIX_LR, parameter_groups
from elmo.optim.groups import (
    bilm_layer_groups,
    discriminative_lrs,
    set_trainable,
    trainable_groups,
)
from elmo.optim.schedules import lr_multiplier


@dataclass
class FineTuneConfig:
    lr: float = 1e-3  # peak learning rate of the task model (the top group)
    discriminative_factor: float = 2.6  # ULMFiT's: each group down gets lr / 2.6
    schedule: str = "slanted-triangular"  # or "constant"
    warmup_frac: float = 0.1  # the schedule's rising part
    gradual_unfreeze: bool = True  # one more biLM group per epoch, top first
    mix_lr: float | None = MIX_LR  # the ScalarMixes' peak learning rate (None: lr)


class GradualUnfreezer:
    """Optimizer parameter groups and the per-epoch / per-step updates for fine-tuning.

        tuner = GradualUnfreezer(task_model, task_model.elmo, total_steps, FineTuneConfig())
        optimizer = torch.optim.Adam(tuner.param_groups)
        for epoch ...:
            tuner.on_epoch_start(epoch)
            for batch ...:
                tuner.set_learning_rates(optimizer, step); ...; optimizer.step(); step += 1

    `task_model` holds `elmo` (or not: its parameters are then only the task's); every
    parameter outside the biLM is the task model's, always trained.
    """

    def __init__(
        self, task_model: nn.Module, elmo: MixedBiLM, total_steps: int, config: FineTuneConfig
    ) -> None:
        if not elmo.requires_grad:
            raise ElmoError("fine-tuning the biLM needs Elmo(..., requires_grad=True)")
        if total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {total_steps}")
        self.config, self.total_steps = config, total_steps
        self.bilm_groups = bilm_layer_groups(elmo.bilm)  # bottom to top
        n = len(self.bilm_groups) + 1  # + the task model
        lrs = discriminative_lrs(config.lr, n, config.discriminative_factor)
        self.param_groups = [{"params": g.params, "lr": lr, "name": g.name}
                             for g, lr in zip(self.bilm_groups, lrs, strict=False)]
        self.param_groups += parameter_groups(task_model, config.lr, config.mix_lr,
                                              exclude=elmo.bilm.parameters())
        self.base_lrs = [g["lr"] for g in self.param_groups]

    def n_trainable_bilm_groups(self, epoch: int) -> int:
        """How many biLM groups (from the top) train in `epoch` (0-based)."""
        interval = 1 if self.config.gradual_unfreeze else None
        return trainable_groups(epoch, len(self.bilm_groups), interval)

    def on_epoch_start(self, epoch: int) -> None:
        """Unfreeze the biLM groups of `epoch`; the lower ones stay frozen (no gradient)."""
        set_trainable(self.bilm_groups, self.n_trainable_bilm_groups(epoch))

    def set_learning_rates(self, optimizer: torch.optim.Optimizer, step: int) -> None:
        """Each group's base learning rate times the schedule's multiplier at `step`."""
        c = self.config
        multiplier = lr_multiplier(c.schedule, step, self.total_steps, c.warmup_frac)
        for group, base_lr in zip(optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base_lr * multiplier

