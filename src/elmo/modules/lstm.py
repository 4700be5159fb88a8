"""Projected LSTMs with clipping, both directions computed together.

The tensors carry a leading direction axis D (forward = 0, backward = 1): the backward direction
receives its input already reversed, so both directions run the same recurrence side by side as
batched matmuls. Rows are sorted by length (longest first). Two step loops compute the same
function (`STEP_LOOPS`):

- "packed" (the CPU's): step t only computes the `batch_sizes[t]` rows still running, so padding
  never enters the recurrence; the batch shrinks step by step.
- "masked" (a GPU's): every step computes the whole batch, a mask keeps a finished row's state
  and zeroes its output. Every step has the same shapes and no step reads a length back to the
  host, so the loop can be captured in a CUDA graph (`elmo.modules.cuda_graphs`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from elmo.config import BiLMConfig
from elmo.modules import onednn
from elmo.modules.quantize import Int8Matrices, check_inference

# (h, c): h (D, B, P) projected output, c (D, B, C) memory cell.
LSTMState = tuple[torch.Tensor, torch.Tensor]
WEIGHT_NAMES = ("input", "state", "proj")  # ProjectedLSTM's `{name}_weight` matrices


class ProjectedLSTM(nn.Module):
    """One LSTM layer with an output projection and clipping, for D directions at once.

    Gates in TensorFlow's order i, j (candidate), f, o, with a constant forget bias of 1:
        c = sigmoid(f + 1) * c_prev + sigmoid(i) * tanh(j),  c = clip(c, cell_clip)
        h = clip((sigmoid(o) * tanh(c)) @ W_proj, proj_clip)
    """

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
        # Input-to-gate products are computed for as many time steps at once as fit this
        # buffer, small enough to stay in a CPU core's cache until the steps read it.
        self.gate_buffer_bytes = 4 * 2**20
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

    def quantize_int8_(self) -> None:
        """Replace the input, state and projection weights by int8 copies (inference only)."""
        self.int8 = nn.ModuleDict(
            {name: Int8Matrices(getattr(self, f"{name}_weight")) for name in WEIGHT_NAMES})
        for name in WEIGHT_NAMES:
            delattr(self, f"{name}_weight")

    def _product(
        self,
        name: str,
        x: torch.Tensor,
        add: torch.Tensor | None = None,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x (D, M, K) @ the weight `name` (D, K, N), plus `add` (D, M or 1, N) -> (D, M, N),
        written into `out` if given (which may be `add` itself)."""
        if self.int8 is not None:
            return self.int8[name](x, add, out)
        weight = getattr(self, f"{name}_weight")
        if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # CPU autocast leaves (b)addbmm alone: cast as CUDA's autocast does.
            dtype = torch.get_autocast_dtype("cpu")
            x, weight = x.to(dtype), weight.to(dtype)
            add = add if add is None else add.to(dtype)
        if onednn.enabled_for(x, weight):  # fp32 inference: one oneDNN product per direction
            if out is None:
                out = x.new_empty(*x.shape[:-1], weight.shape[-1])
            for k in range(x.shape[0]):
                product = onednn.packed_linear(x[k], self, f"{name}{k}", weight[k].t())
                if add is None:
                    out[k].copy_(product)
                else:
                    torch.add(add[k], product, out=out[k])
            return out
        if add is None:
            return torch.bmm(x, weight, out=out)
        return torch.baddbmm(add, x, weight, out=out)

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

    def forward(
        self, x: torch.Tensor, batch_sizes: Sequence[int], state: LSTMState | None = None
    ) -> tuple[torch.Tensor, LSTMState]:
        """x (D, B, T, I), rows sorted longest first -> outputs (D, B, T, P), final state.

        `batch_sizes[t]` is the number of rows whose length exceeds t (it may stop before T).
        Outputs at padded positions are zero; each row's final state is taken at its own last
        position. Without a `state`, the first step starts from zeros and skips the
        state-to-gate product.
        """
        if self.int8 is not None:
            check_inference()
        d, b, t_max, _ = x.shape
        zero_start = state is None
        inference = not torch.is_grad_enabled()
        h, c = self.zero_state(b, x) if zero_start else state
        x = x.transpose(1, 2)  # (D, T, B, I): time-major for the loop
        gates_width = self.bias.shape[1]  # 4C
        time_chunk = max(1, self.gate_buffer_bytes // (d * b * gates_width * x.element_size()))
        bias = (self.bias + self.forget_bias).unsqueeze(1)  # (D, 1, 4C)
        steps = len(batch_sizes)
        # Inference reuses one gate buffer for every chunk (a fresh one per chunk costs a
        # page fault per 4 KiB) and adds the state product to it in place.
        buffer = x.new_empty(d * min(time_chunk, steps) * b * gates_width) if inference else None
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
            out = buffer[: d * rows * gates_width].view(d, rows, -1) if inference else None
            x_gates = self._product("input", x_rows, bias, out)  # (D, rows, 4C)
            for step, (x_t, n) in enumerate(zip(x_gates.split(sizes, dim=1), sizes,
                                                strict=True), start):  # x_t (D, n, 4C)
                if n < b:  # rows n.. have ended: step only the first n
                    h_run, c_run = h[:, :n], c[:, :n]
                else:
                    h_run, c_run = h, c
                if zero_start and step == 0:  # (D, n, 4C): h and c are zero
                    h_t, c_t = self._cell(x_t, None)
                else:
                    gates = self._product("state", h_run, x_t, x_t if inference else None)
                    h_t, c_t = self._cell(gates, c_run)
                if n < b:  # finished rows keep their final state; their output is zero
                    h = torch.cat([h_t, h[:, n:]], dim=1)
                    c = torch.cat([c_t, c[:, n:]], dim=1)
                    h_t = F.pad(h_t, (0, 0, 0, b - n))
                else:
                    h, c = h_t, c_t
                outputs.append(h_t)
        outputs.extend([x.new_zeros(d, b, self.proj_dim)] * (t_max - steps))  # padding steps
        return torch.stack(outputs, dim=2), (h, c)  # (D, B, T, P)

    def forward_masked(
        self, x: torch.Tensor, lengths: torch.Tensor, state: LSTMState | None = None
    ) -> tuple[torch.Tensor, LSTMState]:
        """The same function as `forward` with fixed shapes: x (D, B, T, I), lengths (B,) on
        x's device -> outputs (D, B, T, P), zero at padding, and each row's final state.

        Every step runs all B rows; a row past its length keeps its state. Nothing is read back
        to the host, so the loop can be captured in a CUDA graph.
        """
        if self.int8 is not None:
            check_inference()
        d, b, t_max, _ = x.shape
        h, c = self.zero_state(b, x) if state is None else state
        bias = (self.bias + self.forget_bias).unsqueeze(1)  # (D, 1, 4C)
        # All input-to-gate products in one matmul, read step by step as strided views.
        x_gates = self._product("input", x.reshape(d, b * t_max, -1), bias)
        x_gates = x_gates.view(d, b, t_max, -1)  # (D, B, T, 4C)
        running = torch.arange(t_max, device=x.device) < lengths.unsqueeze(1)  # (B, T)
        outputs: list[torch.Tensor] = []  # per step (D, B, P)
        for step in range(t_max):
            gates = self._product("state", h, x_gates[:, :, step])  # (D, B, 4C)
            h_t, c_t = self._cell(gates, c)
            keep = running[:, step].view(1, b, 1)
            h, c = torch.where(keep, h_t, h), torch.where(keep, c_t, c)
            outputs.append(torch.where(keep, h_t, 0.0))
        return torch.stack(outputs, dim=2), (h, c)  # (D, B, T, P)

    def _cell(
        self, gates: torch.Tensor, c_prev: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """gates (D, n, 4C) with all biases, c_prev (D, n, C) or None for zeros -> (h, c).

        Without autograd (inference) the activations overwrite `gates` in place, saving the
        allocation and a pass over memory per gate; with autograd they are new tensors. The
        returned h and c never share memory with `gates` (its buffer is reused).
        """
        if gates.dtype != torch.float32:  # autocast: the cell's arithmetic and c in fp32
            gates = gates.float()
        i, j, f, o = gates.chunk(4, dim=-1)  # each (D, n, C)
        if torch.is_grad_enabled():
            i, j, f, o = torch.sigmoid(i), torch.tanh(j), torch.sigmoid(f), torch.sigmoid(o)
            c = i * j if c_prev is None else torch.addcmul(f * c_prev, i, j)
            if self.cell_clip is not None:
                c = c.clamp(-self.cell_clip, self.cell_clip)
            h = self._product("proj", o * torch.tanh(c))  # (D, n, P)
            if self.proj_clip is not None:
                h = h.clamp(-self.proj_clip, self.proj_clip)
            return h, c
        i, j, f, o = i.sigmoid_(), tanh_(j), f.sigmoid_(), o.sigmoid_()
        c = torch.mul(i, j) if c_prev is None else torch.addcmul(f.mul_(c_prev), i, j)
        if self.cell_clip is not None:
            c.clamp_(-self.cell_clip, self.cell_clip)
        h = self._product("proj", o.mul_(tanh_(c.clone())))  # (D, n, P)
        if self.proj_clip is not None:
            h.clamp_(-self.proj_clip, self.proj_clip)
        return h, c


def tanh_(x: torch.Tensor) -> torch.Tensor:
    """tanh in place, as 2 sigmoid(2x) - 1: within 2e-7 of `torch.tanh` and about 5x faster
    on the CPU (torch 2.13, AVX-512), where tanh takes 7x the time of sigmoid."""
    return x.mul_(2.0).sigmoid_().mul_(2.0).sub_(1.0)


def lengths_to_batch_sizes(sorted_lengths: torch.Tensor) -> list[int]:
    """Lengths sorted longest first -> number of rows still running at each time step."""
    longest = int(sorted_lengths[0]) if len(sorted_lengths) else 0
    steps = torch.arange(longest, device=sorted_lengths.device)
    return (sorted_lengths.unsqueeze(0) > steps.unsqueeze(1)).sum(1).tolist()


# A step loop runs one layer: (layer, x (D, B, T, I), lengths (B,) sorted longest first,
# initial state or None) -> (outputs (D, B, T, P), final state).
StepLoop = Callable[["ProjectedLSTM", torch.Tensor, torch.Tensor, "LSTMState | None"],
                    tuple[torch.Tensor, LSTMState]]
STEP_LOOPS: dict[str, StepLoop] = {
    "packed": lambda layer, x, lengths, state: layer(x, lengths_to_batch_sizes(lengths), state),
    "masked": lambda layer, x, lengths, state: layer.forward_masked(x, lengths, state),
}


def default_step_loop(device: torch.device) -> str:
    """"packed" on the CPU, "masked" on an accelerator (fixed shapes, no host syncs)."""
    return "packed" if device.type == "cpu" else "masked"


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

    def forward(
        self,
        x: torch.Tensor,
        lengths: torch.Tensor,
        states: Sequence[LSTMState] | None = None,
        step_loop: str | None = None,
    ) -> tuple[list[torch.Tensor], list[LSTMState]]:
        """x (D, B, T, P), lengths (B,) sorted longest first -> the L layer outputs, each
        (D, B, T, P), and their final states. `step_loop` overrides `self.step_loop`."""
        run = STEP_LOOPS[step_loop or self.step_loop or default_step_loop(x.device)]
        outputs, final_states = [], []
        for k, layer in enumerate(self.layers):
            x = F.dropout(x, self.dropout, self.training)
            h, state = run(layer, x, lengths, states[k] if states is not None else None)
            if self.use_skip_connections and k > 0:
                h = h + x
            outputs.append(h)
            final_states.append(state)
            x = h
        return outputs, final_states
