"""An int8 "kernel" for tests: the exact integer product, summed in float64 by torch, whatever
the CPU and its libraries do (even `torch._int_mm` saturates where oneDNN is held to AVX2 on a
VNNI CPU). Forced like a real kernel, through `ELMO_INT8_KERNEL`."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from elmo.config import BiLMConfig
from elmo.modules import quantize
from elmo.modules.bilm import BiLM


def _exact_product(x: torch.Tensor, operand: Any, zero_point: int) -> torch.Tensor:
    """x (M, K), rounded to integers, @ the int8 weight (K, N), times its column scales."""
    weight, scale = operand
    return (x.round().double() @ weight.double()).float().mul_(scale)


EXACT_INT8 = quantize.Int8Kernel("exact", lambda weight, scale: (weight, scale), _exact_product,
                                 0, saturating=False)


def use_exact_int8(monkeypatch: pytest.MonkeyPatch) -> quantize.Int8Kernel:
    """Makes the exact kernel the one every int8 weight packed from now on uses."""
    monkeypatch.setitem(quantize.INT8_KERNELS, EXACT_INT8.name, EXACT_INT8)
    monkeypatch.setenv(quantize.KERNEL_ENV, EXACT_INT8.name)
    return EXACT_INT8


def large_activation_bilm(seed: int = 2) -> BiLM:
    """A tiny unclipped biLM (256 cells) whose outputs reach ~6, as the shipped `default`'s do,
    with the projection input that makes int8 err there: in each direction most cells are shut
    (input gate bias -4) and one in 128 is open and remembers (input and forget gates +4), so
    o * tanh(c) has a few saturated values among many small ones, which set each row's int8
    scale; the projections are 25x Glorot's, and two char-CNN filters 8x larger than the rest."""
    torch.manual_seed(seed)
    model = BiLM(BiLMConfig.preset("tiny", lstm_dim=256, cell_clip=None, proj_clip=None))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.5, 0.5)
        for layer in model.lstm.layers:
            c = layer.cell_dim
            gates = layer.bias.view(layer.bias.shape[0], 4, c)  # (D, 4, C): i, j, f, o
            gates[:, 0] = -4.0
            gates[:, 0, ::128] = 4.0
            gates[:, 2, ::128] = 4.0
            layer.proj_weight.mul_(25.0)
        model.token_encoder.convolutions[-1].weight[:2].mul_(8.0)
    return model.eval()
