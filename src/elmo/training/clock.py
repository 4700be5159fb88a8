"""The clocks of a training run: its time budget (`max_minutes`), the interval of timed
checkpoints (`checkpoint_minutes`) and the minutes the metrics record, all counted from this
process's first step (a resumed run counts only its own time)."""

from __future__ import annotations

import time

import torch

from elmo.training.config import TrainConfig
from elmo.training.distributed import World


def _now() -> float:
    """The clock of the time budget (seconds; a function so that tests can replace it)."""
    return time.monotonic()


class RunClock:
    """Started at this process's first step (`start`); `checkpointed` after each checkpoint."""

    def start(self) -> None:
        self.started = self.saved_at = self.last = _now()  # `last`: at the last step that asked
        self.wall_start = time.monotonic()  # for the metrics' minutes, apart from the budget

    def due(self, config: TrainConfig, world: World, end: bool) -> tuple[bool, bool]:
        """After a step: whether this process's training time reached `max_minutes` (not
        asked at the end), and whether `checkpoint_minutes` passed since the last checkpoint.
        True on any rank means True on all, so that all ranks act at the same step."""
        if config.max_minutes is None and config.checkpoint_minutes is None:
            return False, False
        self.last = _now()
        flags = torch.tensor([
            not end and config.max_minutes is not None
            and self.last - self.started >= 60.0 * config.max_minutes,
            config.checkpoint_minutes is not None
            and self.last - self.saved_at >= 60.0 * config.checkpoint_minutes,
        ], dtype=torch.float32)  # on the host: alone, no device is waited for
        if world.distributed:
            flags = world.sum(flags.to(world.device))
        out_of_time, checkpoint_due = (flags > 0).tolist()
        return out_of_time, checkpoint_due

    def checkpointed(self) -> None:
        self.saved_at = self.last

    def minutes(self) -> float:
        """Wall-clock minutes since this process's first step (a resumed run starts at 0)."""
        return round((time.monotonic() - self.wall_start) / 60.0, 3)
