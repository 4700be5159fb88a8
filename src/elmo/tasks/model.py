"""A task model fed by ELMo: mixes of the biLM layers at the task RNN's input and/or output."""

from __future__ import annotations

import torch
from torch import nn

from elmo.modules.elmo import MixedBiLM
from elmo.tasks.data import Batch

ELMO_AT = ("input", "output", "both")
BILM_KEYS = "elmo._elmo_lstm."  # the biLM's weights in the state dict


class TaskModel(nn.Module):
    """`task` (a Tagger, Classifier or PairClassifier) with ELMo from `elmo`, or alone.

    With a frozen biLM the caller passes the batch's precomputed layers (the feature cache);
    when the biLM trains (`elmo.requires_grad`) it runs on the batch's characters.
    """

    def __init__(self, task: nn.Module, elmo: MixedBiLM | None = None,
                 elmo_at: str = "input") -> None:
        super().__init__()
        if elmo_at not in ELMO_AT:
            raise ValueError(f"elmo_at must be one of {ELMO_AT}, got {elmo_at!r}")
        self.task, self.elmo, self.elmo_at = task, elmo, elmo_at

    @property
    def mix_names(self) -> list[str]:
        """Where each of `elmo.mixes` goes."""
        return ["input", "output"] if self.elmo_at == "both" else [self.elmo_at]

    def forward(self, batch: Batch, layers: torch.Tensor | None = None) -> torch.Tensor:
        """A batch (and its layers (L+1, K*B, T, 2P) from the cache) -> the task's scores."""
        elmo = {"input": None, "output": None}
        if self.elmo is not None:
            if layers is not None:
                out = self.elmo.represent(layers, batch.mask)
            else:
                out = self.elmo(batch.char_ids(self.elmo.bilm).to(batch.word_ids.device))
            elmo.update(zip(self.mix_names, out["elmo_representations"], strict=True))
        return self.task(batch.word_ids, batch.mask, elmo["input"], elmo["output"],
                         **batch.inputs)

    def layer_weights(self) -> dict[str, list[float]]:
        """softmax(s) of each mix, by where it goes ({} without ELMo)."""
        if self.elmo is None:
            return {}
        return {name: mix.weights() for name, mix in zip(self.mix_names, self.elmo.mixes,
                                                         strict=True)}

    def set_layer_scales(self, scales: list[float]) -> None:
        """Multiply the biLM's layers by these constants before every mix (saved with it)."""
        for mix in self.elmo.mixes:
            mix.layer_scales.copy_(torch.tensor(scales))

    def mix_penalty(self, lam: float) -> torch.Tensor | float:
        """The paper's lambda * sum_j s_j^2 over the learned mixes."""
        if self.elmo is None or lam == 0:
            return 0.0
        return sum(m.l2_penalty(lam) for m in self.elmo.mixes if m.learns_weights)

    def saved_state(self) -> dict[str, torch.Tensor]:
        """The weights to save: all but a frozen biLM's (found again from its name)."""
        frozen = self.elmo is not None and not self.elmo.requires_grad
        return {k: v for k, v in self.state_dict().items()
                if not (frozen and k.startswith(BILM_KEYS))}

    def load_saved_state(self, state: dict[str, torch.Tensor]) -> None:
        """Inverse of :meth:`saved_state`."""
        missing, unexpected = self.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.startswith(BILM_KEYS)]
        if missing or unexpected:
            raise ValueError(f"task model weights do not match: missing {missing[:5]}, "
                             f"unexpected {unexpected[:5]}")
