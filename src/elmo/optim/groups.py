"""Layer groups of a BiLanguageModel for discriminative learning rates and gradual unfreezing.

The groups, bottom to top: the token encoder (char-CNN), LSTM layer 1 .. L (both directions),
the softmax. With a discriminative factor F, group g of G gets ``lr / F ** (G - 1 - g)``
(ULMFiT uses F = 2.6). Gradual unfreezing trains only the top group at first and unfreezes
one more group, downwards, every ``interval`` steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from elmo.modules.bilm import BiLM
from elmo.modules.language_model import BiLanguageModel


@dataclass
class LayerGroup:
    name: str
    params: list[nn.Parameter]


def bilm_layer_groups(bilm: BiLM) -> list[LayerGroup]:
    """The L + 1 groups of a biLM, bottom (token encoder) to top (LSTM layer L)."""
    groups = [LayerGroup("token_encoder", list(bilm.token_encoder.parameters()))]
    for k, layer in enumerate(bilm.lstm.layers):
        groups.append(LayerGroup(f"lstm_{k + 1}", list(layer.parameters())))
    return groups


def layer_groups(lm: BiLanguageModel) -> list[LayerGroup]:
    """The L + 2 groups, bottom (token encoder) to top (softmax)."""
    return [*bilm_layer_groups(lm.bilm), LayerGroup("softmax", list(lm.softmax.parameters()))]


def discriminative_lrs(lr: float, n_groups: int, factor: float = 1.0) -> list[float]:
    """Per-group learning rates, bottom to top: the top group gets ``lr``."""
    return [lr / factor ** (n_groups - 1 - g) for g in range(n_groups)]


def trainable_groups(step: int, n_groups: int, interval: int | None) -> int:
    """How many groups (counted from the top) are trained at ``step``; all if interval is None."""
    if interval is None:
        return n_groups
    return min(n_groups, 1 + step // interval)


def set_trainable(groups: list[LayerGroup], n_trainable: int) -> None:
    """Freeze all but the top ``n_trainable`` groups (frozen parameters get no gradient)."""
    first = len(groups) - n_trainable
    for g, group in enumerate(groups):
        for param in group.params:
            param.requires_grad_(g >= first)
