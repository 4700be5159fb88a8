"""The LSTM cell's pointwise parts as fused kernels, compiled by `torch.compile` (inductor).

Training a clipped layer runs the step loop under autograd, and each step's pointwise part
(the gates' sigmoids and tanh, the cell's update and clip, o * tanh(c), then the projection's
clip after its product) is a dozen small kernels forward and as many backward. Compiled, each
part is fused into a kernel or two forward and backward (inductor writes both: Triton on a GPU,
C++ on the CPU). The products stay outside, in torch's own kernels.

`compiled` compiles a function once per process with dynamic sizes: the packed loop's row
count, which shrinks step by step, and other batch sizes reuse the compiled code. A few
variants are compiled once each as they first occur: the first step without a cell state, a
state without gradient, a single row left (inductor specializes sizes of 1).

It is experimental, and off until switched on with `ELMO_FUSED_CELL=1` (the "fused" back end
of `elmo.modules.lstm_backends` then trains clipped layers): it has not yet been measured
faster than the eager cell on any device.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TypeVar

import torch

from elmo.errors import ElmoError

ENV = "ELMO_FUSED_CELL"
F = TypeVar("F", bound=Callable[..., object])


def switched_on() -> bool:
    """Whether `ELMO_FUSED_CELL` is 1: the fused cell trains clipped layers."""
    return os.environ.get(ENV, "0") == "1"


@functools.cache
def unavailable_reason(device_type: str) -> str | None:
    """Why inductor cannot compile for a device of this type here (None: it can)."""
    if device_type == "cuda":
        from torch.utils._triton import has_triton

        return None if has_triton() else "Triton is not installed"
    if device_type == "cpu":
        from torch._inductor.cpp_builder import get_cpp_compiler

        try:
            get_cpp_compiler()
        except RuntimeError as err:
            return f"no C++ compiler ({err})"
        return None
    return f"inductor does not compile for {device_type} devices"


def check_available(device: torch.device) -> None:
    """Refuse, with the fix, where the fused cell is switched on but cannot compile."""
    reason = unavailable_reason(device.type)
    if reason is not None:
        raise ElmoError(f"{ENV}=1 asks for the fused LSTM cell, which cannot be compiled on "
                        f"{device.type} here: {reason}; unset {ENV} to train with the eager "
                        "cell")


@functools.cache
def compiled(fn: F) -> F:
    """fn compiled by inductor, once per process; its sizes dynamic from the first call."""
    return torch.compile(fn, dynamic=True)  # type: ignore[return-value]
