"""The optimizer of a run, in the fastest implementation its device has, and its state
resumed on any device.

On CUDA: torch's fused kernel for Adam, the multi-tensor (`foreach`) one for Adagrad (whose
fused kernel is CPU-only in torch 2.11: asked for on CUDA it raises, though the dispatcher
lists a CUDA kernel). Elsewhere torch's default, a loop over the tensors (CPU runs compute as
they always did).

A step captured in a CUDA graph needs an optimizer whose step reads nothing on the host:
Adam with `capturable=True` (step counts on the device, a tensor learning rate read where it
lies), and `DeviceAdagrad`, torch's Adagrad step written as foreach ops on device tensors
(torch 2.13's Adagrad has no capturable form: its foreach step reads the learning rate and
the step counts on the host).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

IMPLEMENTATION_FLAGS = ("fused", "foreach", "capturable")  # how, not what, a step computes
FUSED_ON_CUDA = ("adam",)  # measured on torch 2.11 + CUDA 13 (H200, 2026-11-26)


class DeviceAdagrad(torch.optim.Adagrad):
    """torch's Adagrad (no weight or learning-rate decay), its step as foreach ops on device
    tensors only: the step counts live on the parameters' devices and the learning rate may be
    a tensor there, so the step can be captured in a CUDA graph. Its arithmetic is that of
    torch's foreach step, and its state dict loads into torch's Adagrad and back."""

    def __init__(self, params: Any, lr: float = 1e-2, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach: bool | None = True) -> None:
        super().__init__(params, lr=lr, initial_accumulator_value=initial_accumulator_value,
                         eps=eps, foreach=foreach)
        self.defaults["capturable"] = True  # `load_state_dict` then puts steps on the device
        for group in self.param_groups:
            group["capturable"] = True
            for p in group["params"]:
                state = self.state[p]
                state["step"] = state["step"].to(p.device, torch.float32)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            sums = [self.state[p]["sum"] for p in params]
            torch._foreach_add_([self.state[p]["step"] for p in params], 1)
            torch._foreach_addcmul_(sums, grads, grads, value=1)
            std = torch._foreach_sqrt(sums)
            torch._foreach_add_(std, group["eps"])
            lr = group["lr"]
            numerator = torch._foreach_mul(grads, lr.neg() if torch.is_tensor(lr) else -lr)
            torch._foreach_addcdiv_(params, numerator, std)
        return loss


def implementation(name: str, device: torch.device) -> dict[str, bool]:
    """The implementation flags of optimizer `name` ("adagrad", "adam") on `device`."""
    if device.type != "cuda":
        return {}
    return {"fused": True} if name in FUSED_ON_CUDA else {"foreach": True}


def build_optimizer(
    name: str, param_groups: list[dict[str, Any]], lr: float, device: torch.device,
    capturable: bool = False,
) -> torch.optim.Optimizer:
    """Adagrad (initial accumulator 1.0, as bilm-tf) or Adam over `param_groups`; with
    `capturable`, in a form whose step a CUDA graph can capture."""
    flags = implementation(name, device)
    if name == "adagrad":
        kind = DeviceAdagrad if capturable else torch.optim.Adagrad
        return kind(param_groups, lr=lr, initial_accumulator_value=1.0, **flags)
    return torch.optim.Adam(param_groups, lr=lr, capturable=capturable, **flags)


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load `state`, saved by this optimizer on any device and in any implementation: its
    tensors land on their parameters' devices, and the implementation stays this
    optimizer's own (a fused CUDA run's state resumes on the CPU, and the reverse)."""
    groups = []
    for saved, current in zip(state["param_groups"], optimizer.param_groups, strict=True):
        what = {k: v for k, v in saved.items() if k not in IMPLEMENTATION_FLAGS}
        groups.append({**what, **{k: current[k] for k in IMPLEMENTATION_FLAGS if k in current}})
    optimizer.load_state_dict({**state, "param_groups": groups})
