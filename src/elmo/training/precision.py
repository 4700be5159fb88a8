"""The arithmetic of a training run: fp32, tf32 or bf16 (`TrainConfig.precision`).

fp32 computes in full float32 (on CUDA, TF32 is turned off for matmuls and cuDNN
convolutions, whose default allows it). tf32 lets CUDA matmuls and convolutions round their
inputs to TF32 (10-bit mantissa, float32 range); on other devices it is fp32. bf16 runs the
biLM under `torch.autocast` in bfloat16; the softmax and the loss stay in float32
(`BiLanguageModel.forward`), as do the weights, gradients and optimizer state. Validation
perplexity is always computed in fp32.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch


def resolve_precision(precision: str | None, device: torch.device) -> str:
    """The precision a run uses: `precision`, or (None) bf16 on CUDA and fp32 elsewhere."""
    if precision is not None:
        return precision
    return "bf16" if device.type == "cuda" else "fp32"


def _tf32_switches() -> list[tuple[Any, str, Any, Any]]:
    """(holder, attribute, value with TF32, value without) for CUDA matmuls and cuDNN
    convolutions: torch's `fp32_precision` settings where it has them (torch >= 2.9, where
    the older `allow_tf32` flags warn, and reading them after the new settings were used is
    an error), else the `allow_tf32` flags."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision"):
        return [(matmul, "fp32_precision", "tf32", "ieee"),
                (cudnn.conv, "fp32_precision", "tf32", "ieee")]
    return [(matmul, "allow_tf32", True, False), (cudnn, "allow_tf32", True, False)]


@contextmanager
def tf32_allowed(enabled: bool) -> Iterator[None]:
    """Inside: CUDA matmuls and cuDNN convolutions may use TF32 if `enabled`, and may not
    otherwise; the previous settings are restored on exit."""
    switches = _tf32_switches()
    before = [getattr(holder, name) for holder, name, _, _ in switches]
    for holder, name, on, off in switches:
        setattr(holder, name, on if enabled else off)
    try:
        yield
    finally:
        for (holder, name, _, _), value in zip(switches, before, strict=True):
            setattr(holder, name, value)


def autocast(precision: str, device: torch.device) -> AbstractContextManager[None]:
    """The autocast context of a training forward pass: bfloat16 for bf16, else none."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
