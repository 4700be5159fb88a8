"""Learning-rate schedules, as multipliers of the peak learning rate at each step.

A schedule is a pure function of the step, so a resumed run needs no scheduler state.
"""

from __future__ import annotations

import math

STLR_RATIO = 32  # slanted triangular: the lowest learning rate is 1/32 of the peak (ULMFiT)


def slanted_triangular(
    step: int, total_steps: int, warmup_frac: float = 0.1, ratio: float = STLR_RATIO
) -> float:
    """ULMFiT's slanted triangular multiplier for the update made at ``step`` (0-based).

    Rises linearly from 1/ratio to 1 over the first ``floor(total_steps * warmup_frac)``
    steps, then falls linearly back to 1/ratio at the last step.
    """
    cut = max(1, math.floor(total_steps * warmup_frac))
    if step < cut:
        p = step / cut
    else:
        p = 1.0 - (step - cut) / max(1, total_steps - 1 - cut)
    p = min(1.0, max(0.0, p))
    return (1.0 + p * (ratio - 1.0)) / ratio


def lr_multiplier(name: str, step: int, total_steps: int, warmup_frac: float = 0.1) -> float:
    """The multiplier of schedule ``name`` (``constant`` or ``slanted-triangular``)."""
    if name == "constant":
        return 1.0
    if name == "slanted-triangular":
        return slanted_triangular(step, total_steps, warmup_frac)
    raise ValueError(f"unknown schedule {name!r}")
