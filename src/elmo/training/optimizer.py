"""The optimizer of a run, in the fastest implementation its device has, and its state
resumed on any device.

On CUDA: torch's fused kernel for Adam, the multi-tensor (`foreach`) one for Adagrad (whose
fused kernel is CPU-only in torch 2.11: asked for on CUDA it raises, though the dispatcher
lists a CUDA kernel). Elsewhere torch's default, a loop over the tensors (CPU runs compute as
they always did).
"""

from __future__ import annotations

from typing import Any

import torch

IMPLEMENTATION_FLAGS = ("fused", "foreach", "capturable")  # how, not what, a step computes
FUSED_ON_CUDA = ("adam",)  # measured on torch 2.11 + CUDA 13 (H200, 2026-11-26)


def implementation(name: str, device: torch.device) -> dict[str, bool]:
    """The implementation flags of optimizer `name` ("adagrad", "adam") on `device`."""
    if device.type != "cuda":
        return {}
    return {"fused": True} if name in FUSED_ON_CUDA else {"foreach": True}


def build_optimizer(
    name: str, param_groups: list[dict[str, Any]], lr: float, device: torch.device
) -> torch.optim.Optimizer:
    """Adagrad (initial accumulator 1.0, as bilm-tf) or Adam over `param_groups`."""
    flags = implementation(name, device)
    if name == "adagrad":
        return torch.optim.Adagrad(param_groups, lr=lr, initial_accumulator_value=1.0, **flags)
    return torch.optim.Adam(param_groups, lr=lr, **flags)


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load `state`, saved by this optimizer on any device and in any implementation: its
    tensors land on their parameters' devices, and the implementation stays this
    optimizer's own (a fused CUDA run's state resumes on the CPU, and the reverse)."""
    groups = [{**saved, **{k: current[k] for k in IMPLEMENTATION_FLAGS if k in current}}
              for saved, current in zip(state["param_groups"], optimizer.param_groups,
                                        strict=True)]
    optimizer.load_state_dict({**state, "param_groups": groups})
