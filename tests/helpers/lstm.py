"""A small clipped `ProjectedLSTM`, its inputs (rows of mixed lengths, both directions), and
what a loss on its outputs gives: for tests that hold an LSTM back end equal to the reference."""

from __future__ import annotations

import torch

from elmo.modules.lstm import ProjectedLSTM
from elmo.modules.lstm_backends import INT8_PRODUCTS

LENGTHS = [9, 9, 6, 3, 1, 0]  # sorted longest first: full, ending, one step, never running
STEPS = 11  # two padding steps past the longest row


def clipped_layer(seed: int, quantized: bool = False, products=INT8_PRODUCTS) -> ProjectedLSTM:
    """Random weights large enough that both clips bite; `quantized`: `products` in int8."""
    torch.manual_seed(seed)
    layer = ProjectedLSTM(16, 32, 8, cell_clip=1.0, proj_clip=0.5)
    with torch.no_grad():
        for p in layer.parameters():
            p.uniform_(-0.6, 0.6)
    if quantized:
        layer.quantize_int8_(products)
    return layer


def layer_inputs(layer: ProjectedLSTM, stateful: bool, seed: int, lengths=LENGTHS,
                 steps: int = STEPS):
    """x (2, B, steps, 16), lengths (B,) and an initial state (None unless `stateful`)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, len(lengths), steps, 16, generator=g)  # (D, B, T, I), both directions
    state = None
    if stateful:
        state = (torch.randn(2, len(lengths), layer.proj_dim, generator=g),
                 torch.randn(2, len(lengths), layer.cell_dim, generator=g))
    return x, torch.tensor(lengths), state


def with_gradients(layer, backend: str, x, lengths, state, loop: str = "packed"):
    """Outputs, final state, and the gradients of the weights, input and state of a loss on
    all three."""
    layer.zero_grad()
    x = x.clone().requires_grad_()
    state = None if state is None else tuple(s.clone().requires_grad_() for s in state)
    out, (h, c) = layer(x, lengths, state, loop, backend)
    (out.square().sum() + h.sum() + c.square().sum()).backward()
    inputs = [x] + ([] if state is None else list(state))
    return [out, h, c, *(p.grad for p in layer.parameters()), *(t.grad for t in inputs)]
