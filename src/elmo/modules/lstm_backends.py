"""The LSTM's back ends: what its step loops and cell compute with.

`elmo.modules.lstm` writes the recurrence once: a step loop (packed or masked) and the cell's
equations (`lstm_cell`). A back end supplies their matrix products (x @ W, plus an addend, into
an output) and the cell's elementwise ops, each with its own tuning. `BACKENDS` names them in
order of preference, and each says itself whether it serves a layer call (`applies`):
`choose_backend` takes the first that does, once per layer call:

- "reference": torch's batched matmuls and elementwise functions, every result a new tensor
  that autograd can record; any device, with or without gradients. Every other back end is
  tested equal to it (`tests/test_lstm_backends.py`).
- "cpu": fp32 inference on the CPU. The cell overwrites the gate pre-activations in place (so
  the packed loop reuses one gate buffer and adds the state product into it), computes tanh
  as 2 sigmoid(2x) - 1, and products large enough run through oneDNN's prepacked kernel.
- "int8": "cpu" with a quantized layer's int8 matrices (`elmo.modules.quantize`) for the
  products it holds in int8 (`INT8_PRODUCTS`: the input and state products; the projection
  stays fp32), whose kernel is chosen once by what the CPU has (`quantize.INT8_KERNELS`).
- "cudnn": training a layer without clipping. torch's own LSTM (`torch.nn.LSTM` with
  `proj_size`: cuDNN on CUDA, ATen's loop on the CPU) runs each direction of the layer in one
  call instead of the step loop; it cannot clip the cell or the projection, which is why it
  serves unclipped layers only (`cell_clip` and `proj_clip` None, as bilm-tf's and AllenNLP's
  options allow).
- "fused": training a clipped layer where `ELMO_FUSED_CELL=1` (experimental, off by default):
  the reference's cell with its pointwise parts compiled into fused kernels
  (`elmo.modules.fused_cell`), the products as the reference computes them.

A back end runs the layer with `run`: the step loop, called with itself, for all but "cudnn".
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from elmo.modules import fused_cell, onednn
from elmo.modules.quantize import check_inference

WEIGHT_NAMES = ("input", "state", "proj")  # ProjectedLSTM's `{name}_weight` matrices
# The products a quantized layer computes in int8 (`ProjectedLSTM.quantize_int8_`). The
# projection stays fp32: its input o * tanh(c) has a few saturated cells per row, which set the
# row's int8 scale; on the shipped `default` it alone gave each LSTM layer 1.3-1.8% of mean
# relative error (benchmarks/int8_error.py, benchmarks/README.md).
INT8_PRODUCTS = ("input", "state")


def tanh_(x: Tensor) -> Tensor:
    """tanh in place, as 2 sigmoid(2x) - 1: within 2e-7 of `torch.tanh` and about 5x faster
    on the CPU (torch 2.13, AVX-512), where tanh takes 7x the time of sigmoid."""
    return x.mul_(2.0).sigmoid_().mul_(2.0).sub_(1.0)


def as_is(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn itself: the cell's pointwise parts run op by op."""
    return fn


@dataclass(frozen=True)
class CellOps:
    """The cell's elementwise functions. In-place ones overwrite their first argument: the
    cell passes them only gate slices or `scratch` copies. `fuse` gives what runs each of the
    cell's pointwise parts (a function of these ops): the part as it is, or compiled."""

    in_place: bool
    sigmoid: Callable[[Tensor], Tensor]
    tanh: Callable[[Tensor], Tensor]
    mul: Callable[[Tensor, Tensor], Tensor]
    clamp: Callable[[Tensor, float, float], Tensor]
    scratch: Callable[[Tensor], Tensor]  # x, or a copy of it where the next op overwrites
    fuse: Callable[[Callable[..., Any]], Callable[..., Any]] = as_is


# Every result a new tensor: what autograd records.
REFERENCE_OPS = CellOps(False, torch.sigmoid, torch.tanh, torch.mul, torch.clamp, lambda x: x)
# Inference: each result overwrites its input, saving an allocation and a pass over memory.
IN_PLACE_OPS = CellOps(True, Tensor.sigmoid_, tanh_, Tensor.mul_, Tensor.clamp_, Tensor.clone)
# The reference's ops, each pointwise part compiled into a kernel or two, its backward too.
FUSED_OPS = dataclasses.replace(REFERENCE_OPS, fuse=fused_cell.compiled)


class LSTMBackend:
    """The reference back end, and the base of the others; made for one layer call.

    Products are torch's `bmm` / `baddbmm` on any device; the cell's ops are `REFERENCE_OPS`.
    """

    ops = REFERENCE_OPS
    # The packed loop computes the input-to-gate products of as many time steps at once as fit
    # this many bytes: small enough to stay in a CPU core's cache until the steps read them.
    gate_chunk_bytes = 4 * 2**20

    @classmethod
    def applies(cls, layer: nn.Module, x: Tensor) -> bool:
        """Whether it serves a call of `layer` on x: the reference serves every one."""
        return True

    def __init__(self, layer: nn.Module) -> None:
        self.layer = layer
        self.weights = {name: getattr(layer, f"{name}_weight") for name in WEIGHT_NAMES}

    def run(
        self, loop: Callable[..., Any], x: Tensor, lengths: Tensor | None,
        state: tuple[Tensor, Tensor] | None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """The layer over x (D, B, T, I): `loop` (a step loop of `elmo.modules.lstm`), which
        computes with this back end's products and cell ops -> (outputs, final state)."""
        return loop(self.layer, self, x, lengths, state)

    def product(
        self, name: str, x: Tensor, add: Tensor | None = None, out: Tensor | None = None
    ) -> Tensor:
        """x (D, M, K) @ the weight `name` (D, K, N), plus `add` (D, M or 1, N) -> (D, M, N),
        written into `out` if given (which may be `add` itself)."""
        weight = self.weights[name]
        if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # CPU autocast leaves (b)addbmm alone: cast as CUDA's autocast does.
            dtype = torch.get_autocast_dtype("cpu")
            x, weight = x.to(dtype), weight.to(dtype)
            add = add if add is None else add.to(dtype)
        return self.matmul(name, x, weight, add, out)

    def matmul(
        self, name: str, x: Tensor, weight: Tensor, add: Tensor | None, out: Tensor | None
    ) -> Tensor:
        """`product` once x and weight have one dtype."""
        if add is None:
            return torch.bmm(x, weight, out=out)
        return torch.baddbmm(add, x, weight, out=out)


class CPUBackend(LSTMBackend):
    """fp32 inference on the CPU: the in-place cell, and oneDNN's prepacked products where
    `onednn.enabled_for` them (at least `onednn.MIN_MULTIPLY_ADDS`, fp32, no autograd)."""

    ops = IN_PLACE_OPS

    @classmethod
    def applies(cls, layer: nn.Module, x: Tensor) -> bool:
        return x.device.type == "cpu" and not torch.is_grad_enabled()

    def matmul(
        self, name: str, x: Tensor, weight: Tensor, add: Tensor | None, out: Tensor | None
    ) -> Tensor:
        if not onednn.enabled_for(x, weight):
            return super().matmul(name, x, weight, add, out)
        if out is None:
            out = x.new_empty(*x.shape[:-1], weight.shape[-1])
        for k in range(x.shape[0]):  # one product per direction
            product = onednn.packed_linear(x[k], self.layer, f"{name}{k}", weight[k].t())
            if add is None:
                out[k].copy_(product)
            else:
                torch.add(add[k], product, out=out[k])
        return out


class Int8Backend(CPUBackend):
    """int8 inference on the CPU: the in-place cell and the products of a quantized layer's
    `Int8Matrices` (activations quantized per row at every product; no autocast); the products
    it keeps in fp32 (the projection) as "cpu" computes them."""

    # The fewest activation bits each int8 product tolerates, where a kernel without VNNI pays
    # for 8 (`quantize.int8_matmul`): 7 for the input and state products; 8 for the projection
    # where it is quantized (benchmarks/int8_error.py measures it alone in int8).
    activation_bits = {"input": 7, "state": 7, "proj": 8}

    @classmethod
    def applies(cls, layer: nn.Module, x: Tensor) -> bool:
        return layer.int8 is not None

    def __init__(self, layer: nn.Module) -> None:
        check_inference()
        self.layer, self.matrices = layer, layer.int8
        self.weights = {name: getattr(layer, f"{name}_weight") for name in WEIGHT_NAMES
                        if name not in self.matrices}

    def product(
        self, name: str, x: Tensor, add: Tensor | None = None, out: Tensor | None = None
    ) -> Tensor:
        if name not in self.matrices:  # an fp32 product
            return super().product(name, x, add, out)
        return self.matrices[name](x, add, out, self.activation_bits[name])


# torch's gate order (i, f, g, o) from ours (i, j, f, o): j is the candidate, torch's g.
TORCH_GATE_ORDER = (0, 2, 1, 3)


class CuDNNBackend(LSTMBackend):
    """An unclipped layer through torch's LSTM kernel, the one `torch.nn.LSTM(proj_size=P)`
    calls (`torch.lstm`), once per direction: cuDNN on CUDA, ATen's own loop on the CPU. The
    same cell as `lstm_cell` without clips: torch's gates are ours reordered
    (`TORCH_GATE_ORDER`), its two biases sum to our bias plus the forget bias, its projection
    has no bias either. The products, the cell and their backward run in torch's kernel, so
    the step loop is not used.

    Rows of all T positions (`lengths` None) run as they are, with fixed shapes; with lengths,
    the rows still running are packed (`pack_padded_sequence`, which reads the lengths on the
    host: a CUDA graph cannot capture that call). The weights and the initial state are cast
    to the input's dtype (under autocast, the autocast dtype); the final cell state is kept
    in float32, as `lstm_cell` keeps it. cuDNN takes fp16, fp32 and fp64 only: in bf16 torch
    runs its own CUDA LSTM kernels (a loop in C++: no step loop in Python either).
    """

    @classmethod
    def applies(cls, layer: nn.Module, x: Tensor) -> bool:
        """Training (autograd records) an unclipped layer."""
        return torch.is_grad_enabled() and not layer.clipped

    def __init__(self, layer: nn.Module) -> None:
        if layer.clipped:
            raise ValueError("the cudnn LSTM back end cannot clip: it serves layers whose "
                             "cell_clip and proj_clip are None")
        super().__init__(layer)

    def torch_weights(self, direction: int, dtype: torch.dtype) -> list[Tensor]:
        """The layer's weights of one direction as `nn.LSTM`'s (differentiable): weight_ih,
        weight_hh, bias_ih, bias_hh, weight_hr."""
        def gates(weight: Tensor) -> Tensor:  # (K, 4C) ours -> (4C, K) torch's
            chunks = weight.t().chunk(4)
            return torch.cat([chunks[k] for k in TORCH_GATE_ORDER]).to(dtype)

        layer = self.layer
        bias = gates(layer.gate_bias()[direction])[:, 0]  # (4C,)
        return [gates(layer.input_weight[direction]), gates(layer.state_weight[direction]),
                bias, torch.zeros_like(bias),
                layer.proj_weight[direction].t().contiguous().to(dtype)]  # cuDNN views each

    def run(
        self, loop: Callable[..., Any], x: Tensor, lengths: Tensor | None,
        state: tuple[Tensor, Tensor] | None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        layer = self.layer
        d, b, t, _ = x.shape
        h0, c0 = layer.zero_state(b, x) if state is None else state
        sizes = None if lengths is None else lengths.cpu()  # packing reads them on the host
        running = b if sizes is None else int((sizes > 0).sum())  # rows of length > 0
        if running == 0:
            return x.new_zeros(d, b, t, layer.proj_dim), (h0, c0)
        outputs, hs, cs = [], [], []
        for k in range(d):
            weights = self.torch_weights(k, x.dtype)
            hx = (h0[k : k + 1, :running].to(x.dtype), c0[k : k + 1, :running].to(x.dtype))
            rows = x[k, :running].contiguous()  # (n, T, I); cuDNN views it
            with warnings.catch_warnings():  # its notes on weights outside one flat buffer
                warnings.simplefilter("ignore", UserWarning)
                if sizes is None:
                    out, h, c = torch.lstm(rows, hx, weights, True, 1, 0.0, True, False, True)
                else:
                    packed = pack_padded_sequence(rows, sizes[:running], batch_first=True)
                    data, h, c = torch.lstm(packed.data, packed.batch_sizes, hx, weights, True,
                                            1, 0.0, True, False)
                    out = pad_packed_sequence(PackedSequence(data, packed.batch_sizes),
                                              batch_first=True, total_length=t)[0]
            if running < b:  # rows that never run: zero output, their state kept
                out = torch.cat([out, out.new_zeros(b - running, t, out.shape[-1])])
                h = torch.cat([h, h0[k : k + 1, running:].to(h.dtype)], dim=1)
                c = torch.cat([c, c0[k : k + 1, running:].to(c.dtype)], dim=1)
            outputs.append(out)
            hs.append(h[0])
            cs.append(c[0].float())
        return torch.stack(outputs), (torch.stack(hs), torch.stack(cs))


class FusedCellBackend(LSTMBackend):
    """The reference with the cell's pointwise parts compiled (`FUSED_OPS`): under autograd,
    the compiled backward too. Experimental: serves only where `ELMO_FUSED_CELL=1`."""

    ops = FUSED_OPS

    @classmethod
    def applies(cls, layer: nn.Module, x: Tensor) -> bool:
        """Training (autograd records) a clipped layer, where switched on."""
        return torch.is_grad_enabled() and layer.clipped and fused_cell.switched_on()

    def run(
        self, loop: Callable[..., Any], x: Tensor, lengths: Tensor | None,
        state: tuple[Tensor, Tensor] | None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        fused_cell.check_available(x.device)
        return super().run(loop, x, lengths, state)


# In order of preference: the first whose `applies` is True runs a layer call.
BACKENDS: dict[str, type[LSTMBackend]] = {
    "int8": Int8Backend,  # a quantized layer
    "cudnn": CuDNNBackend,  # training an unclipped layer
    "fused": FusedCellBackend,  # training a clipped layer, where ELMO_FUSED_CELL=1
    "cpu": CPUBackend,  # inference on the CPU
    "reference": LSTMBackend,  # anything else: training a clipped layer, inference elsewhere
}


def choose_backend(layer: nn.Module, x: Tensor) -> str:
    """The back end of one call of `layer` (a `ProjectedLSTM`) on input x: the first of
    `BACKENDS` that applies."""
    return next(name for name, backend in BACKENDS.items() if backend.applies(layer, x))
