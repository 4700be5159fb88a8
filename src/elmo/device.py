"""Choosing the torch device from what the user asked for, and how a model computes on it:
the table of precisions (`PRECISIONS`) that embedding, training and serving share; and the
CPU threads a command uses when it is not told (`default_threads`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
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


LOADAVG = "/proc/loadavg"  # Linux: the load averages and the processes runnable now


@dataclass(frozen=True)
class ThreadChoice:
    """The torch threads of a command not told how many: `threads` (None: torch's own
    choice) and `note`, what is said at its start (None: nothing)."""

    threads: int | None
    note: str | None = None


def default_threads(small_model: bool = False) -> ThreadChoice:
    """One thread per idle core at start: the cores this process may use less those other
    work keeps busy (`busy_cores`), rounded (at least one); on an idle machine, torch's
    choice (one per core). A thread on a busy core makes torch's threads wait on each other,
    which can slow a run ten times or more (docs/robustness.md), so a busy machine gets fewer
    threads and a note that says so. `small_model`: one thread (a small model gains nothing
    from more). With OMP_NUM_THREADS set, torch's choice (which follows it)."""
    if "OMP_NUM_THREADS" in os.environ:
        return ThreadChoice(None)
    if small_model:
        return ThreadChoice(1)
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count()) or 1
    busy = busy_cores()
    idle = max(1, round(cores - busy))
    if idle >= cores:
        return ThreadChoice(None)
    return ThreadChoice(idle, f"the machine is busy (other work keeps {busy:.1f} of its "
                              f"{cores} cores busy): using {idle} thread{'s' * (idle > 1)}, "
                              "as more would wait on each other; --threads N to choose")


def busy_cores() -> float:
    """How many cores other work keeps busy: the load average of the last minute, but no
    more than the processes runnable now besides this one (where /proc/loadavg tells them),
    so that what a command that just ended left in the average does not count."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    try:  # "0.52 0.58 0.59 RUNNABLE/TOTAL LAST_PID"; RUNNABLE counts this process
        runnable = int(Path(LOADAVG).read_text().split()[3].split("/")[0]) - 1
    except (OSError, ValueError, IndexError):
        return load
    return min(load, max(runnable, 0))


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


@dataclass(frozen=True)
class Precision:
    """How a float32 model computes, for embedding, training and serving alike: `tf32` lets
    CUDA matmuls, cuDNN convolutions and cuDNN's LSTM round their inputs to TF32 (10-bit
    mantissa, float32 range; off otherwise, though CUDA's default allows some); `autocast`
    runs the biLM under `torch.autocast` in that dtype (weights, gradients, optimizer state,
    the softmax and the loss stay float32). `devices`: the device types where it differs
    from fp32 (None: every one). `default_for`: the (use, device type) pairs it is the default
    of, use "embed" or "train", device type "*" for any (a pair naming the device wins)."""

    name: str
    description: str
    tf32: bool = False
    autocast: torch.dtype | None = None
    devices: tuple[str, ...] | None = None
    default_for: tuple[tuple[str, str], ...] = ()

    @property
    def plain(self) -> bool:
        """Whether it computes in float32 throughout (no TF32, no autocast): the one kind of
        arithmetic that every path takes (`elmo embed --ray` takes only these)."""
        return not self.tf32 and self.autocast is None

    def applies_on(self, device: torch.device) -> bool:
        """Whether it computes otherwise than fp32 on `device`."""
        return self.devices is None or device.type in self.devices

    def autocast_on(self, device: torch.device) -> torch.autocast:
        """`torch.autocast` of this precision on `device` (a disabled one without)."""
        return torch.autocast(device.type, dtype=self.autocast or torch.bfloat16,
                              enabled=self.autocast is not None)

    def switches(self) -> AbstractContextManager[None]:
        """Inside: the switches of this precision (TF32), which hold for a whole training
        run (restored on exit); its autocast covers forward passes only (`autocast_on`)."""
        return tf32_allowed(self.tf32)

    @contextmanager
    def computing(self, device: torch.device) -> Iterator[None]:
        """Inside: the arithmetic of this precision on `device` (TF32 switches restored on
        exit)."""
        with self.switches(), self.autocast_on(device):
            yield


PRECISIONS: dict[str, Precision] = {p.name: p for p in (
    Precision("fp32", "float32, TF32 off", default_for=(("embed", "*"), ("train", "*"))),
    Precision("tf32", "CUDA matmuls, convolutions and cuDNN's LSTM in TF32 (fp32 elsewhere)",
              tf32=True, devices=("cuda",)),
    Precision("bf16", "the biLM under bfloat16 autocast", autocast=torch.bfloat16,
              default_for=(("train", "cuda"),)),
)}


def default_precision(use: str, device: torch.device) -> str:
    """The precision `use` ("embed" or "train") takes on `device` when none is asked for:
    the record naming (use, the device's type), else the one naming (use, "*")."""
    for device_type in (device.type, "*"):
        for precision in PRECISIONS.values():
            if (use, device_type) in precision.default_for:
                return precision.name
    raise ValueError(f"no precision is the default for {use!r}")


def precisions_described(use: str) -> str:
    """Every precision with its description and the defaults of `use`, for help texts."""
    defaults = [f"{p.name} on {device}" for p in PRECISIONS.values()
                for u, device in p.default_for if u == use and device != "*"]
    anywhere = next(p.name for p in PRECISIONS.values() if (use, "*") in p.default_for)
    default = ", ".join([*defaults, f"{anywhere} elsewhere"]) if defaults else anywhere
    return "; ".join(f"{p.name}: {p.description}" for p in PRECISIONS.values()) + \
        f" (default: {default})"


def check_precision(precision: str) -> None:
    """ValueError unless `precision` is one of PRECISIONS."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {tuple(PRECISIONS)}, got {precision!r}")


def computing_in(precision: str, device: torch.device) -> AbstractContextManager[None]:
    """Inside: the arithmetic of `precision` (a key of PRECISIONS) on `device`."""
    check_precision(precision)
    return PRECISIONS[precision].computing(device)
