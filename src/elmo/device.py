"""Choosing the torch device from what the user asked for."""

from __future__ import annotations

import torch

from elmo.errors import ElmoError


def resolve_device(device: str | torch.device | None, local_rank: int = 0) -> torch.device:
    """`None` -> cuda if available, else cpu; a bare `cuda` -> this process's GPU.

    Raises ElmoError for a malformed name or a CUDA device on a machine without CUDA.
    """
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise ElmoError(f"unknown device {str(device)!r}; use cpu, cuda or cuda:N") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ElmoError(f"device {str(device)!r} was asked for, but CUDA is not available; "
                        "use --device cpu")
    if resolved.type == "cuda" and resolved.index is None:
        resolved = torch.device("cuda", local_rank)
    return resolved


def tf32_matmuls() -> bool:
    """Whether CUDA float32 matmuls may round to TF32 now, however it was set (torch >= 2.9's
    `fp32_precision`, which also reflects the older `allow_tf32`; reading `allow_tf32` after
    the newer setting was used is an error there)."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        return matmul.fp32_precision == "tf32"
    return bool(matmul.allow_tf32)
