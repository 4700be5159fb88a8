"""The training step on the device: nothing read back to the host, and on CUDA the whole step
(forward, backward, gradient averaging, clipping, optimizer) replayed from a CUDA graph.

`TrainStep` computes what one step of `elmo.training.Trainer` does: the mean loss of both
directions (`BiLanguageModel`), backpropagated scaled by the window length, gradients averaged
over the ranks and clipped to a global norm, an optimizer step. Its inputs are fixed-shape
tensors prepared by the batch thread (`elmo.training.stream.BatchEncoder`: the distinct
tokens' char ids, the sampled softmax's candidates), its losses and gradient norm are summed
on the device (`StepStats`), so a step issues its kernels and returns without waiting for
the device. The trainer reads the sums back every `log_every` steps and before it saves or
validates anything: a loss or gradient norm that is NaN or infinite is found then, named by
the step it first happened at, and nothing is saved after the last checkpoint.

`GraphedStep` captures a `TrainStep` in a CUDA graph over static input buffers and replays
it: one launch a step instead of thousands. What a graph holds is fixed: rows, unroll steps
and a capacity of distinct tokens (a batch with more grows it, and the step is captured
again), the trainable parameters (gradual unfreezing captures again), the learning rates
(device tensors, written before each replay). A batch with padding (the end of an epoch),
the first steps of every new shape and everything after a failed capture run eagerly: the
same `TrainStep`, the reference the graph is tested against.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from torch.nn.utils import clip_grad_norm_

from elmo.device import Precision
from elmo.modules.bilm import DistinctTokens
from elmo.modules.cuda_graphs import bucket
from elmo.modules.language_model import BiLanguageModel
from elmo.modules.lstm import LSTMState
from elmo.modules.softmax import SampledCandidates
from elmo.training.distributed import World
from elmo.training.stream import BatchTensors

log = logging.getLogger(__name__)


@dataclass
class StatsReading:
    """What `StepStats.read` brings back: the window's loss sums and tokens (over the ranks),
    and the first step whose losses or gradient norm were not finite (None: none was)."""

    sum_forward: float
    sum_backward: float
    tokens: int
    bad_step: int | None = None
    bad_values: tuple[float, float, float] | None = None  # forward, backward, norm


class StepStats:
    """The sums, on the device, of the forward and backward losses (each divided by the number
    of ranks) since the window began, in float64 as the host's running sums of earlier
    versions; the count of steps taken; the first step whose losses or gradient norm were not
    finite, and those values."""

    def __init__(self, device: torch.device, step: int = 0) -> None:
        # float64 where the device has it (MPS has none).
        dtype = torch.float32 if device.type == "mps" else torch.float64
        self.sums = torch.zeros(2, dtype=dtype, device=device)
        self.steps = torch.tensor(step, dtype=torch.int64, device=device)
        self.bad_step = torch.tensor(-1, dtype=torch.int64, device=device)
        self.bad_values = torch.zeros(3, dtype=dtype, device=device)

    def add(self, loss_f: torch.Tensor, loss_b: torch.Tensor, norm: torch.Tensor,
            world_size: int) -> None:
        """Count one step (fixed-shape device ops; nothing is read back)."""
        values = torch.stack([loss_f.detach().float(), loss_b.detach().float(),
                              norm.detach().float()]).to(self.sums.dtype)  # (3,)
        self.steps.add_(1)
        self.sums.add_(values[:2] / world_size)
        first = (self.bad_step < 0) & ~torch.isfinite(values).all()
        self.bad_step.copy_(torch.where(first, self.steps, self.bad_step))
        self.bad_values.copy_(torch.where(first, values, self.bad_values))

    def start_window(self, sum_f: float = 0.0, sum_b: float = 0.0) -> None:
        """Begin a window at these sums (a resumed one: on rank 0 only, as they are the sums
        over every rank)."""
        self.sums.copy_(torch.tensor([sum_f, sum_b], dtype=self.sums.dtype))

    def read(self, world: World, tokens: int) -> StatsReading:
        """The window so far, over every rank (this rank predicted `tokens`): one read back."""
        local = torch.cat([self.sums, torch.tensor(
            [float(tokens), float(self.bad_step >= 0)], dtype=self.sums.dtype,
            device=self.sums.device)])
        sum_f, sum_b, total_tokens, bad_ranks = world.sum(local).tolist()
        reading = StatsReading(sum_f, sum_b, int(total_tokens))
        if bad_ranks:
            mine = (int(self.bad_step), tuple(self.bad_values.tolist()))
            bad = [(step, values) for step, values in world.gather(mine) if step >= 0]
            reading.bad_step, reading.bad_values = min(bad)
        return reading


class TrainStep:
    """One optimizer step on the device (a batch on the host is copied there first); nothing
    is read back."""

    def __init__(
        self, lm: BiLanguageModel, optimizer: torch.optim.Optimizer, world: World,
        stats: StepStats, clip_norm: float, unroll_steps: int, precision: Precision,
    ) -> None:
        self.lm, self.optimizer, self.world, self.stats = lm, optimizer, world, stats
        self.clip_norm, self.unroll_steps, self.precision = clip_norm, unroll_steps, precision

    def __call__(self, batch: BatchTensors) -> None:
        lm, device = self.lm, self.world.device
        batch = batch.to(device)  # no copy where it is there already
        with self.precision.autocast_on(device):
            losses = lm(batch.tokens, batch.targets, batch.mask, batch.candidates)
        self.optimizer.zero_grad(set_to_none=True)
        (losses.total * self.unroll_steps).backward()
        params = [p for p in lm.parameters() if p.grad is not None]
        self.world.average_gradients(params)
        norm = clip_grad_norm_(params, self.clip_norm)
        self.stats.add(losses.forward, losses.backward, norm, self.world.world_size)
        self.optimizer.step()


def static_inputs(batch: BatchTensors, capacity: int, device: torch.device) -> BatchTensors:
    """Device buffers shaped like `batch` (no padding: mask None), with room for `capacity`
    distinct tokens; `fill_static` writes a batch into them."""
    def like(t: torch.Tensor) -> torch.Tensor:
        return torch.zeros(t.shape, dtype=t.dtype, device=device)

    chars = batch.tokens.chars
    candidates = batch.candidates
    return BatchTensors(
        DistinctTokens(torch.zeros(capacity, chars.shape[1], dtype=chars.dtype, device=device),
                       like(batch.tokens.index)),
        like(batch.targets), None,
        None if candidates is None else SampledCandidates(*map(like, candidates.tensors())),
        batch.n_tokens)


def fill_static(static: BatchTensors, batch: BatchTensors) -> None:
    """Copy `batch` (host or device) into the buffers of `static_inputs`: its distinct tokens
    into the first rows (the rows after them are never indexed)."""
    chars = batch.tokens.chars
    pairs = [(static.tokens.chars[: len(chars)], chars),
             (static.tokens.index, batch.tokens.index), (static.targets, batch.targets)]
    if batch.candidates is not None:
        pairs += zip(static.candidates.tensors(), batch.candidates.tensors(), strict=True)
    for buffer, value in pairs:
        buffer.copy_(value, non_blocking=True)


def _copy_states(into: list[LSTMState], states: list[LSTMState]) -> None:
    """Copy each layer's (h, c) of `states` into the tensors of `into`, in place."""
    for (h, c), (new_h, new_c) in zip(into, states, strict=True):
        h.copy_(new_h)
        c.copy_(new_c)


class CUDAGraphs:
    """How `GraphedStep` runs on CUDA: warm-up steps on a side stream (what torch asks before
    a capture), and work captured in a CUDA graph, of which it returns the replay."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.side = torch.cuda.Stream(device)

    def warm_up(self, work: Callable[[], None]) -> None:
        self.side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.side):
            work()
        torch.cuda.current_stream(self.device).wait_stream(self.side)

    def capture(self, work: Callable[[], None]) -> Callable[[], None]:
        """`work` captured (not run); its replay keeps the graph."""
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            work()
        return graph.replay


class GraphedStep:
    """`step` replayed from a CUDA graph where it can be (see the module's docstring).

    `quiet` is a context in which no other thread calls CUDA (the batch thread pins memory):
    held while a step is captured. `graphs` captures and replays (`CUDAGraphs` on the step's
    device; a test gives a stand-in that records the work and replays it by running it)."""

    def __init__(
        self, step: TrainStep,
        quiet: Callable[[], AbstractContextManager[object]] = nullcontext,
        graphs: CUDAGraphs | None = None,
    ) -> None:
        self.step, self.quiet = step, quiet
        self.device = step.world.device
        self.graphs = graphs or CUDAGraphs(self.device)
        self.capacity = 0  # distinct tokens the captured graph has room for
        self.key: tuple | None = None  # what the captured graph was captured for
        self.warmed: tuple | None = None  # the key of the last eager warm-up step
        self.replay: Callable[[], None] | None = None  # the captured graph's
        self.static: BatchTensors | None = None
        self.states: list[LSTMState] = []  # the carried LSTM states the graph reads
        self.lrs: list[torch.Tensor] = []  # each parameter group's learning rate, on device
        self.lr_values: list[float] = []  # what `lrs` hold
        self.failed: str | None = None  # why capture failed, once it has
        self.replays = 0

    def __call__(self, batch: BatchTensors) -> None:
        """One step on `batch` (on the host, pinned)."""
        if batch.mask is not None or self.failed is not None:
            return self.step(batch)
        trainable = tuple(p.requires_grad for p in self.step.lm.parameters())
        capacity = max(self.capacity, bucket(len(batch.tokens.chars) * 5 // 4))
        key = (capacity, trainable)
        if key != self.key:
            if key != self.warmed:  # a new shape: one eager step first
                self.warmed = key
                return self.graphs.warm_up(lambda: self.step(batch))
            if not self._capture(key, batch):
                return self.step(batch)
        fill_static(self.static, batch)
        values = [group["lr"] for group in self.step.optimizer.param_groups]
        for lr, value, held in zip(self.lrs, values, self.lr_values, strict=True):
            if value != held:  # the schedule moved it
                lr.fill_(value)
        self.lr_values = values
        bilm = self.step.lm.bilm
        if self.states and bilm.carried_states is not self.states:  # an eager step between
            _copy_states(self.states, bilm.carried_states)
            bilm.carried_states = self.states
        self.replay()
        self.replays += 1

    def captured_step(self) -> None:
        """What the graph holds: the step on the static inputs and LSTM states, its final
        states copied into the static ones, which the next replay starts from."""
        bilm = self.step.lm.bilm
        bilm.carried_states = self.states or None
        self.step(self.static)
        _copy_states(self.states, bilm.carried_states or [])

    def _capture(self, key: tuple, batch: BatchTensors) -> bool:
        """Capture the step for `key` (dropping the previous graph); False if it failed, and
        from then on every step runs eagerly (the reason logged once)."""
        bilm, groups = self.step.lm.bilm, self.step.optimizer.param_groups
        self.replay = self.static = self.key = None  # frees the old graph and its buffers
        self.static = static_inputs(batch, key[0], self.device)
        carried = bilm.carried_states  # there since the warm-up step (training is stateful)
        self.states = [(h.clone(), c.clone()) for h, c in carried or []]
        floats = [g["lr"] for g in groups]
        self.lrs = [torch.tensor(lr, dtype=torch.float32, device=self.device) for lr in floats]
        self.lr_values = floats
        try:
            with self.quiet():
                for group, lr in zip(groups, self.lrs, strict=True):
                    group["lr"] = lr  # the graph reads the learning rates where they lie
                replay = self.graphs.capture(self.captured_step)
        except Exception as err:  # any failure means: run eagerly
            self.failed = f"{type(err).__name__}: {err}"
            self.static = None
            log.warning("CUDA graph capture of the training step failed (%s); training "
                        "eagerly", self.failed)
            bilm.carried_states = carried
            return False
        finally:
            for group, lr in zip(groups, floats, strict=True):
                group["lr"] = lr
        bilm.carried_states = self.states or None
        self.replay, self.key, self.capacity = replay, key, key[0]
        return True
