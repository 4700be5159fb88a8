"""The log window: the steps since the last metrics line, their losses and this process's
throughput."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from elmo.training.step import StatsReading, StepStats


class LogWindow:
    """The steps since the last log line: their losses, summed on the device (`StepStats`)
    and read back (`reading`) before a log line, a validation or a checkpoint; this process's
    throughput. The losses resume from a checkpoint's `state()` (held by rank 0: they are the
    sums over every rank); the clock and token count start anew."""

    def __init__(self, stats: StepStats, main: bool, sum_f: float = 0.0, sum_b: float = 0.0,
                 steps: int = 0) -> None:
        if main:
            stats.start_window(sum_f, sum_b)
        else:
            stats.start_window()
        self.start = time.perf_counter()
        self.steps = steps
        self.tokens = 0  # predicted by this rank
        self.reading = StatsReading(sum_f, sum_b, 0)  # the last read back

    def state(self) -> dict[str, float]:
        """What a checkpoint keeps (right after a reading)."""
        return {"sum_f": self.reading.sum_forward, "sum_b": self.reading.sum_backward,
                "steps": self.steps}

    def add(self, n_tokens: int) -> None:
        self.steps += 1
        self.tokens += n_tokens

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The time spent inside is left out of the throughput."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.start += time.perf_counter() - start

    def summary(self) -> tuple[float, float, float]:
        """Mean forward loss, mean backward loss, tokens per second (of every rank), as of
        the last reading."""
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        reading = self.reading
        return (reading.sum_forward / self.steps, reading.sum_backward / self.steps,
                reading.tokens / elapsed)
