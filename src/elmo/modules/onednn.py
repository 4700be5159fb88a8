"""fp32 inference products through oneDNN with prepacked weights (CPU).

torch's default fp32 matmul on the CPU is MKL's. On this project's 2-core AMD EPYC (AVX-512)
it reaches about 210 GFLOP/s on 2048^3 and 120 on the LSTM's per-step 64 x 512 x 16,384
product, where oneDNN's inner product, with the weight reordered once into its own blocked
layout, reaches about 470 on both (`benchmarks/int8_kernels.py`, benchmarks/README.md). Its results
are ordinary fp32 in another summation order, and a row's result does not depend on the other
rows of its matrix.

The reordered copy is made on first use without autograd and kept until the weight changes
(its version counter or its storage), so training, which records gradients, never uses it, and
a model trained further is repacked. A weight made under `torch.inference_mode` has no version
counter: changed in place in that mode, it keeps its old copy. `ELMO_ONEDNN=0` turns the path
off.
"""

from __future__ import annotations

import functools
import os

import torch

_PACKED = "_onednn_packed"  # attribute of the owning module: {name: (weight key, packed)}


@functools.cache
def _kernel_works() -> bool:
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(torch.ones(8, 8))
        torch.ops.mkldnn._linear_pointwise(torch.ones(2, 8), packed, None, "none", [], "")
    except (AttributeError, RuntimeError):  # an op missing from this build or platform
        return False
    return True


# Below this many multiply-adds a product is faster through torch's default kernel: oneDNN's
# call costs ~15 us more (e.g. one row times 128 x 4,096: 28 against 39 us, `original`'s one
# row times 512 x 16,384: 932 against 614 us; 1 thread, this machine).
MIN_MULTIPLY_ADDS = 2**20


def switched_on() -> bool:
    """Whether oneDNN's kernels may be used: `ELMO_ONEDNN` is not 0 (fp32 and int8 paths)."""
    return os.environ.get("ELMO_ONEDNN", "1") != "0"


def enabled_for(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether x (..., M, K) @ a weight of K x N (either layout; leading axes are separate
    products) takes the oneDNN path: fp32 on the CPU, autograd off, at least
    MIN_MULTIPLY_ADDS per product, the kernels present and `ELMO_ONEDNN` not 0."""
    rows = x.shape[-2] if x.dim() == 3 else x.numel() // max(x.shape[-1], 1)
    return (not torch.is_grad_enabled() and x.device.type == "cpu"
            and rows * weight.shape[-1] * weight.shape[-2] >= MIN_MULTIPLY_ADDS
            and x.dtype == torch.float32 and switched_on() and _kernel_works())


def packed_weight(owner: torch.nn.Module, name: str, weight: torch.Tensor) -> torch.Tensor:
    """`weight` (N, K) of `owner`, reordered by oneDNN; cached on `owner` until it changes."""
    cache = owner.__dict__.setdefault(_PACKED, {})
    # Inference tensors (made under `torch.inference_mode`) have no version counter.
    version = None if weight.is_inference() else weight._version
    key = (weight.data_ptr(), version, tuple(weight.shape))
    if name not in cache or cache[name][0] != key:
        cache[name] = (key, torch.ops.mkldnn._reorder_linear_weight(weight.detach()))
    return cache[name][1]


def packed_linear(
    x: torch.Tensor, owner: torch.nn.Module, name: str, weight: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """x (..., K) @ weight (N, K).T + bias (N,) -> (..., N), like `F.linear` (inference)."""
    return torch.ops.mkldnn._linear_pointwise(
        x, packed_weight(owner, name, weight), bias, "none", [], "")


def linear(x: torch.Tensor, module: torch.nn.Module) -> torch.Tensor:
    """`module(x)`, through oneDNN where it is an `nn.Linear` and `enabled_for` it."""
    if isinstance(module, torch.nn.Linear) and enabled_for(x, module.weight):
        return packed_linear(x, module, "weight", module.weight, module.bias)
    return module(x)
