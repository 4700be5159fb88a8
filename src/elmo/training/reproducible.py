"""What makes a training run reproducible: its seeds and, if asked, deterministic kernels."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch


@contextmanager
def deterministic_algorithms(enabled: bool) -> Iterator[None]:
    """Inside: `torch.use_deterministic_algorithms(True)` if `enabled` (an op without a
    deterministic kernel then raises), with the cuBLAS workspace setting it needs on CUDA
    (`CUBLAS_WORKSPACE_CONFIG`, unless already set; it must precede the first CUDA matmul of
    the process). The previous setting is restored on exit."""
    if not enabled:
        yield
        return
    before = torch.are_deterministic_algorithms_enabled()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def seed_everything(seed: int) -> None:
    """torch's, numpy's and Python's random generators seeded with `seed`."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def seed_new_run(seed: int, rank: int, step: int) -> None:
    """Seed rank `rank`'s generators (dropout) for a new run from `step`: with `seed + rank`
    at step 0; later (a run continued from a weights copy) from all three, so that it does not
    draw its first steps' numbers again."""
    if step == 0:
        seed_everything(seed + rank)
    else:
        seed_everything(int(np.random.SeedSequence([seed, rank, step]).generate_state(1)[0]))
