"""Masked pooling and attention over time."""

from __future__ import annotations

import torch


def max_mean_pool(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, D), mask (B, T) -> [max over unmasked steps; their mean] (B, 2D)."""
    m = mask.unsqueeze(-1)  # (B, T, 1)
    maximum = h.masked_fill(~m, float("-inf")).max(dim=1).values  # (B, D)
    mean = (h * m).sum(1) / m.sum(1).clamp(min=1)  # (B, D)
    return torch.cat([maximum, mean], dim=-1)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension; keys where `mask` (broadcast to `scores`) is False
    get weight 0."""
    return scores.masked_fill(~mask, float("-inf")).softmax(-1)
