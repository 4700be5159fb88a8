"""Choosing the torch device from what the user asked for."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from elmo.errors import ElmoError


def resolve_device(device: str | torch.device | None, local_rank: int = 0,
                   cpu_setting: str = "--device cpu") -> torch.device:
    """`None` -> cuda if available, else cpu; a bare `cuda` -> this process's GPU.

    Raises ElmoError for a malformed name or a CUDA device on a machine without CUDA, whose
    message says to use `cpu_setting`: how the caller asks for the CPU (the command's flag by
    default; an integration passes its own setting, e.g. spaCy's config key).
    """
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise ElmoError(f"unknown device {str(device)!r}; use cpu, cuda or cuda:N") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ElmoError(f"device {str(device)!r} was asked for, but CUDA is not available; "
                        f"use {cpu_setting}")
    if resolved.type == "cuda" and resolved.index is None:
        resolved = torch.device("cuda", local_rank)
    return resolved


def _tf32_switches() -> list[tuple[Any, str, Any, Any]]:
    """(holder, attribute, value with TF32, value without) for CUDA matmuls, cuDNN
    convolutions and cuDNN's LSTM (the `cudnn` back end of training): torch's `fp32_precision`
    settings where it has them (torch >= 2.9, where the older `allow_tf32` flags warn, and
    reading them after the new settings were used is an error; cuDNN's RNNs allow TF32 by
    default there), else the `allow_tf32` flags (cuDNN's covers its RNNs too)."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision"):
        return [(matmul, "fp32_precision", "tf32", "ieee"),
                (cudnn.conv, "fp32_precision", "tf32", "ieee"),
                (cudnn.rnn, "fp32_precision", "tf32", "ieee")]
    return [(matmul, "allow_tf32", True, False), (cudnn, "allow_tf32", True, False)]


@contextmanager
def tf32_allowed(enabled: bool) -> Iterator[None]:
    """Inside: CUDA matmuls, cuDNN convolutions and cuDNN LSTMs may use TF32 if `enabled`,
    and may not otherwise; the previous settings are restored on exit."""
    switches = _tf32_switches()
    before = [getattr(holder, name) for holder, name, _, _ in switches]
    for holder, name, on, off in switches:
        setattr(holder, name, on if enabled else off)
    try:
        yield
    finally:
        for (holder, name, _, _), value in zip(switches, before, strict=True):
            setattr(holder, name, value)


def tf32_matmuls() -> bool:
    """Whether CUDA float32 matmuls may round to TF32 now, however it was set (torch >= 2.9's
    `fp32_precision` also reflects the older `allow_tf32`)."""
    holder, name, on, _ = _tf32_switches()[0]  # the matmuls' switch
    return getattr(holder, name) == on


PRECISIONS = ("fp32", "tf32", "bf16")


def check_precision(precision: str) -> None:
    """ValueError unless `precision` is one of PRECISIONS."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")


def bf16_autocast(precision: str, device: torch.device) -> torch.autocast:
    """`torch.autocast` in bfloat16 on `device` for bf16; a disabled one otherwise."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


@contextmanager
def computing_in(precision: str, device: torch.device) -> Iterator[None]:
    """Inside: the arithmetic of `precision` on `device`: fp32 (no TF32), tf32 (CUDA matmuls
    and convolutions in TF32; fp32 elsewhere) or bf16 (`torch.autocast` in bfloat16)."""
    check_precision(precision)
    with tf32_allowed(precision == "tf32"), bf16_autocast(precision, device):
        yield
