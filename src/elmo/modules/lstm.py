"""Projected LSTMs with clipping, both directions computed together.

The tensors carry a leading direction axis D (forward = 0, backward = 1): the backward direction
receives its input already reversed, so both directions run the same recurrence side by side as
batched matmuls. Rows are sorted by length (longest first).

The recurrence is written once: the cell's equations (`lstm_cell`) inside a step loop. A back
end (`elmo.modules.lstm_backends`: the reference, one tuned for CPU inference or int8, or one
that compiles the cell's pointwise parts) supplies the products and elementwise ops both
compute with, chosen once per layer call; one, "cudnn", runs an unclipped layer whole through
torch's LSTM kernel instead. Two step loops compute the same function (`STEP_LOOPS`):

- "packed" (the CPU's): step t only computes the `batch_sizes[t]` rows still running, so padding
  never enters the recurrence; the batch shrinks step by step.
- "masked" (a GPU's): every step computes the whole batch, a mask keeps a finished row's state
  and zeroes its output. Every step has the same shapes and no step reads a length back to the
  host, so the loop can be captured in a CUDA graph (`elmo.modules.cuda_graphs`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from elmo.config import BiLMConfig
from elmo.modules.lstm_backends import (
    BACKENDS,
    INT8_PRODUCTS,
    REFERENCE_OPS,
    CellOps,
    LSTMBackend,
    choose_backend,
)
from elmo.modules.quantize import Int8Matrices

# (h, c): h (D, B, P) projected output, c (D, B, C) memory cell.
LSTMState = tuple[torch.Tensor, torch.Tensor]
# x (D, M, K) @ the layer's weight `name` (D, K, N) [+ add (D, M or 1, N)] [into out] -> (D, M, N)
Product = Callable[..., torch.Tensor]


def cell_update(
    gates: torch.Tensor, c_prev: torch.Tensor | None, cell_clip: float | None, ops: CellOps
) -> LSTMState:
    """The cell's pointwise part: gates (D, n, 4C), c_prev (D, n, C) or None (zeros) ->
    m = sigmoid(o) * tanh(c) (D, n, C), the projection's input, and c (D, n, C)."""
    if gates.dtype != torch.float32:  # autocast: the cell's arithmetic and c in fp32
        gates = gates.float()
    i, j, f, o = gates.chunk(4, dim=-1)  # each (D, n, C)
    i, j, f, o = ops.sigmoid(i), ops.tanh(j), ops.sigmoid(f), ops.sigmoid(o)
    c = torch.mul(i, j) if c_prev is None else torch.addcmul(ops.mul(f, c_prev), i, j)
    if cell_clip is not None:
        c = ops.clamp(c, -cell_clip, cell_clip)
    return ops.mul(o, ops.tanh(ops.scratch(c))), c  # c itself is kept


def clip(h: torch.Tensor, limit: float | None, ops: CellOps) -> torch.Tensor:
    """h clipped to [-limit, limit] (None: h as it is)."""
    return h if limit is None else ops.clamp(h, -limit, limit)


def lstm_cell(
    gates: torch.Tensor,
    c_prev: torch.Tensor | None,
    product: Product,
    cell_clip: float | None,
    proj_clip: float | None,
    ops: CellOps = REFERENCE_OPS,
) -> LSTMState:
    """One step: gates (D, n, 4C), the pre-activations with all biases, and c_prev (D, n, C)
    (None: zeros) -> h (D, n, P), c (D, n, C).

    Gates in TensorFlow's order i, j (candidate), f, o (the forget bias of 1 is in the biases):
        c = clip(sigmoid(f) * c_prev + sigmoid(i) * tanh(j), cell_clip)
        h = clip((sigmoid(o) * tanh(c)) @ W_proj, proj_clip)
    `ops` computes the elementwise functions, and `ops.fuse` runs the two pointwise parts
    (`cell_update`, the projection's `clip`) around the product; in-place ops overwrite
    `gates`. h and c never share memory with `gates` (a caller may reuse its buffer).
    """
    m, c = ops.fuse(cell_update)(gates, c_prev, cell_clip, ops)
    return ops.fuse(clip)(product("proj", m), proj_clip, ops), c  # h (D, n, P)


class ProjectedLSTM(nn.Module):
    """One LSTM layer with an output projection and clipping (`lstm_cell`), for D directions
    at once."""

    def __init__(
        self,
        input_dim: int,
        cell_dim: int,
        proj_dim: int,
        cell_clip: float | None = None,
        proj_clip: float | None = None,
        n_directions: int = 2,
    ) -> None:
        super().__init__()
        self.cell_dim, self.proj_dim = cell_dim, proj_dim
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        d = n_directions
        self.input_weight = nn.Parameter(torch.empty(d, input_dim, 4 * cell_dim))
        self.state_weight = nn.Parameter(torch.empty(d, proj_dim, 4 * cell_dim))
        self.bias = nn.Parameter(torch.zeros(d, 4 * cell_dim))
        self.proj_weight = nn.Parameter(torch.empty(d, cell_dim, proj_dim))
        # TensorFlow's constant forget bias, added to the learned bias of the f gates.
        forget_bias = torch.zeros(4 * cell_dim)
        forget_bias[2 * cell_dim : 3 * cell_dim] = 1.0
        self.register_buffer("forget_bias", forget_bias, persistent=False)
        self.int8: nn.ModuleDict | None = None  # int8 weights, once quantized
        self.reset_parameters()

    def quantize_int8_(self, products: Sequence[str] = INT8_PRODUCTS) -> None:
        """Replace the weights of `products` (of `WEIGHT_NAMES`; by default the input and
        state products, `INT8_PRODUCTS`) by int8 copies (inference only); the others stay."""
        self.int8 = nn.ModuleDict(
            {name: Int8Matrices(getattr(self, f"{name}_weight")) for name in products})
        for name in products:
            delattr(self, f"{name}_weight")

    def reset_parameters(self) -> None:
        for weight in (self.input_weight, self.state_weight, self.proj_weight):
            bound = math.sqrt(6.0 / (weight.shape[1] + weight.shape[2]))  # Glorot uniform
            nn.init.uniform_(weight, -bound, bound)
        nn.init.zeros_(self.bias)

    def zero_state(self, batch_size: int, like: torch.Tensor) -> LSTMState:
        d = self.bias.shape[0]
        h = like.new_zeros(d, batch_size, self.proj_dim)
        c = like.new_zeros(d, batch_size, self.cell_dim)
        return h, c

    def gate_bias(self) -> torch.Tensor:
        """(D, 1, 4C): the learned bias plus TensorFlow's forget bias."""
        return (self.bias + self.forget_bias).unsqueeze(1)

    @property
    def clipped(self) -> bool:
        """Whether the cell or the projection is clipped."""
        return self.cell_clip is not None or self.proj_clip is not None

    def forward(
        self,
        x: torch.Tensor,
        lengths: torch.Tensor | None,
        state: LSTMState | None = None,
        step_loop: str | None = None,
        backend: str | None = None,
    ) -> tuple[torch.Tensor, LSTMState]:
        """x (D, B, T, I), lengths (B,) sorted longest first (None: every row has all T
        positions) -> outputs (D, B, T, P), zero at padding, and each row's final state, taken
        at its own last position.

        Without a `state` every row starts from zeros. `step_loop` is a key of `STEP_LOOPS`
        (None: `default_step_loop`'s), `backend` one of `BACKENDS` (None: `choose_backend`'s).
        """
        loop = STEP_LOOPS[step_loop or default_step_loop(x.device)].run
        return BACKENDS[backend or choose_backend(self, x)](self).run(loop, x, lengths, state)


def packed_loop(
    layer: ProjectedLSTM,
    backend: LSTMBackend,
    x: torch.Tensor,
    lengths: torch.Tensor | None,
    state: LSTMState | None,
) -> tuple[torch.Tensor, LSTMState]:
    """Step t computes only the rows still running, `batch_sizes[t]` of them: padding never
    enters a product. Without a `state`, the first step skips the state-to-gate product."""
    d, b, t_max, _ = x.shape
    batch_sizes = [b] * t_max if lengths is None else lengths_to_batch_sizes(lengths)
    zero_start = state is None
    h, c = layer.zero_state(b, x) if zero_start else state
    product, ops, in_place = backend.product, backend.ops, backend.ops.in_place
    cell_clip, proj_clip = layer.cell_clip, layer.proj_clip
    x = x.transpose(1, 2)  # (D, T, B, I): time-major for the loop
    gates_width = layer.bias.shape[1]  # 4C
    time_chunk = max(1, backend.gate_chunk_bytes // (d * b * gates_width * x.element_size()))
    bias = layer.gate_bias()  # (D, 1, 4C)
    steps = len(batch_sizes)
    # An in-place cell's gates are scratch: one gate buffer serves every chunk (a fresh one
    # per chunk costs a page fault per 4 KiB) and the state product is added into it.
    buffer = x.new_empty(d * min(time_chunk, steps) * b * gates_width) if in_place else None
    # Per-step tensors are unbound and stacked once: slicing a step out of a large
    # tensor would make autograd zero-fill a tensor of that size for every step.
    outputs: list[torch.Tensor] = []  # per step (D, B, P)
    for start in range(0, steps, time_chunk):
        # Input-to-gate products of a chunk of time steps in one matmul, over the rows
        # still running at each step only: padding never enters a product.
        sizes = list(batch_sizes[start : start + time_chunk])
        x_chunk = x[:, start : start + len(sizes)]  # (D, chunk, B, I)
        if sizes[-1] == b:  # every row runs through the chunk
            x_rows = x_chunk.reshape(d, len(sizes) * b, -1)
        else:  # step after step, the first sizes[t] rows of step t
            x_rows = torch.cat([x_t[:, :n] for x_t, n in zip(x_chunk.unbind(1), sizes,
                                                              strict=True)], dim=1)
        rows = x_rows.shape[1]  # sum(sizes)
        out = buffer[: d * rows * gates_width].view(d, rows, -1) if in_place else None
        x_gates = product("input", x_rows, bias, out)  # (D, rows, 4C)
        for step, (x_t, n) in enumerate(zip(x_gates.split(sizes, dim=1), sizes,
                                            strict=True), start):  # x_t (D, n, 4C)
            if n < b:  # rows n.. have ended: step only the first n
                h_run, c_run = h[:, :n], c[:, :n]
            else:
                h_run, c_run = h, c
            if zero_start and step == 0:  # (D, n, 4C): h and c are zero
                h_t, c_t = lstm_cell(x_t, None, product, cell_clip, proj_clip, ops)
            else:
                gates = product("state", h_run, x_t, x_t if in_place else None)
                h_t, c_t = lstm_cell(gates, c_run, product, cell_clip, proj_clip, ops)
            if n < b:  # finished rows keep their final state; their output is zero
                h = torch.cat([h_t, h[:, n:]], dim=1)
                c = torch.cat([c_t, c[:, n:]], dim=1)
                h_t = F.pad(h_t, (0, 0, 0, b - n))
            else:
                h, c = h_t, c_t
            outputs.append(h_t)
    outputs.extend([x.new_zeros(d, b, layer.proj_dim)] * (t_max - steps))  # padding steps
    return torch.stack(outputs, dim=2), (h, c)  # (D, B, T, P)


def masked_loop(
    layer: ProjectedLSTM,
    backend: LSTMBackend,
    x: torch.Tensor,
    lengths: torch.Tensor | None,
    state: LSTMState | None,
) -> tuple[torch.Tensor, LSTMState]:
    """Every step computes all B rows; a row past its length keeps its state and outputs
    zero (no masking where `lengths` is None: every row runs through). Fixed shapes, lengths
    on x's device and nothing read back to the host: the loop can be captured in a CUDA
    graph."""
    d, b, t_max, _ = x.shape
    h, c = layer.zero_state(b, x) if state is None else state
    product, ops = backend.product, backend.ops
    cell_clip, proj_clip = layer.cell_clip, layer.proj_clip
    # All input-to-gate products in one matmul, read step by step as strided views.
    x_gates = product("input", x.reshape(d, b * t_max, -1), layer.gate_bias())
    x_gates = x_gates.view(d, b, t_max, -1)  # (D, B, T, 4C)
    if lengths is not None:
        running = torch.arange(t_max, device=x.device) < lengths.unsqueeze(1)  # (B, T)
    outputs: list[torch.Tensor] = []  # per step (D, B, P)
    for step in range(t_max):
        gates = product("state", h, x_gates[:, :, step])  # (D, B, 4C), a new tensor
        h_t, c_t = lstm_cell(gates, c, product, cell_clip, proj_clip, ops)
        if lengths is None:
            h, c = h_t, c_t
            outputs.append(h_t)
            continue
        keep = running[:, step].view(1, b, 1)
        h, c = torch.where(keep, h_t, h), torch.where(keep, c_t, c)
        outputs.append(torch.where(keep, h_t, 0.0))
    return torch.stack(outputs, dim=2), (h, c)  # (D, B, T, P)


def lengths_to_batch_sizes(sorted_lengths: torch.Tensor) -> list[int]:
    """Lengths sorted longest first -> number of rows still running at each time step."""
    longest = int(sorted_lengths[0]) if len(sorted_lengths) else 0
    steps = torch.arange(longest, device=sorted_lengths.device)
    return (sorted_lengths.unsqueeze(0) > steps.unsqueeze(1)).sum(1).tolist()


# A step loop runs one layer through time: (layer, its back end for this call,
# x (D, B, T, I), lengths (B,) sorted longest first or None (all T), initial state or None
# for zeros) -> (outputs (D, B, T, P), final state).
StepLoop = Callable[[ProjectedLSTM, LSTMBackend, torch.Tensor, "torch.Tensor | None",
                     "LSTMState | None"], tuple[torch.Tensor, LSTMState]]


@dataclass(frozen=True)
class StepLoopKind:
    """A step loop and the device types it is the default on (None: any)."""

    run: StepLoop
    default_on: tuple[str, ...] | None

    def is_default(self, device: torch.device) -> bool:
        return self.default_on is None or device.type in self.default_on


# In order of preference: a device's default is the first whose `is_default` is True.
STEP_LOOPS: dict[str, StepLoopKind] = {
    "packed": StepLoopKind(packed_loop, ("cpu",)),  # no padding computed: the CPU's
    "masked": StepLoopKind(masked_loop, None),  # fixed shapes, no host syncs: accelerators'
}


def default_step_loop(device: torch.device) -> str:
    """The first of `STEP_LOOPS` that is the default on `device`."""
    return next(name for name, kind in STEP_LOOPS.items() if kind.is_default(device))


class StackedLSTM(nn.Module):
    """L projected LSTM layers per direction; layer l+1 reads layer l of its own direction.

    With skip connections, every layer above the first outputs `h + its input`; the recurrent
    state stays the plain `h`. In training, dropout is applied to each layer's input.
    """

    def __init__(self, config: BiLMConfig, n_directions: int = 2) -> None:
        super().__init__()
        p = config.projection_dim
        self.layers = nn.ModuleList(
            ProjectedLSTM(p, config.lstm_dim, p, config.cell_clip, config.proj_clip, n_directions)
            for _ in range(config.n_layers)
        )
        self.use_skip_connections = config.use_skip_connections
        self.dropout = config.dropout
        self.step_loop: str | None = None  # a key of STEP_LOOPS; None: default_step_loop
        self.backend: str | None = None  # a key of BACKENDS; None: choose_backend's

    def forward(
        self,
        x: torch.Tensor,
        lengths: torch.Tensor | None,
        states: Sequence[LSTMState] | None = None,
        step_loop: str | None = None,
    ) -> tuple[list[torch.Tensor], list[LSTMState]]:
        """x (D, B, T, P), lengths (B,) sorted longest first (None: all T) -> the L layer
        outputs, each (D, B, T, P), and their final states. `step_loop` overrides
        `self.step_loop`."""
        loop = step_loop or self.step_loop or default_step_loop(x.device)
        outputs, final_states = [], []
        for k, layer in enumerate(self.layers):
            x = F.dropout(x, self.dropout, self.training)
            h, state = layer(x, lengths, states[k] if states is not None else None, loop,
                             self.backend)
            if self.use_skip_connections and k > 0:
                h = h + x
            outputs.append(h)
            final_states.append(state)
            x = h
        return outputs, final_states
