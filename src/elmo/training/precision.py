"""The arithmetic of a training run: fp32, tf32 or bf16 (`TrainConfig.precision`).

fp32 computes in full float32 (on CUDA, TF32 is turned off for matmuls and cuDNN
convolutions, whose default allows it). tf32 lets CUDA matmuls and convolutions round their
inputs to TF32 (10-bit mantissa, float32 range); on other devices it is fp32. bf16 runs the
biLM under `torch.autocast` in bfloat16; the softmax and the loss stay in float32
(`BiLanguageModel.forward`), as do the weights, gradients and optimizer state. Validation
perplexity is always computed in fp32.
"""

from __future__ import annotations

import torch


def resolve_precision(precision: str | None, device: torch.device) -> str:
    """The precision a run uses: `precision`, or (None) bf16 on CUDA and fp32 elsewhere."""
    if precision is not None:
        return precision
    return "bf16" if device.type == "cuda" else "fp32"
