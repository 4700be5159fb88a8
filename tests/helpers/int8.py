"""An int8 "kernel" for tests: the exact integer product, summed in float64 by torch, whatever
the CPU and its libraries do (even `torch._int_mm` saturates where oneDNN is held to AVX2 on a
VNNI CPU). Forced like a real kernel, through `ELMO_INT8_KERNEL`."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from elmo.modules import quantize


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
