"""Elmo: a biLM plus N learned mixes of its layers, for use inside a task model."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from elmo.errors import ElmoError
from elmo.modules.bilm import BiLM
from elmo.modules.scalar_mix import ScalarMix


class Elmo(nn.Module):
    """ELMo representations for a task model: `num_output_representations` mixes of the biLM's
    L+1 layers, each followed by dropout (AllenNLP's `Elmo` interface).

    The biLM is frozen by default: it stays in eval mode and gets no gradient, while the mixes
    still train. `requires_grad=True` fine-tunes it (it then follows `train()`/`eval()`).
    `scalar_mix_parameters` fixes every mix's s to these values (not trained); `mode` picks
    "learned" (default), "average", "top" or "layer:K" for every mix; `layer_scales` (L+1
    constants, e.g. 1 / `LayerStore.layer_rms`) multiply the layers before every mix.
    `quantize="int8"` quantizes the frozen biLM in place for int8 CPU inference
    (docs/speed.md); it cannot be combined with `requires_grad=True`.

    Stateless: every sentence starts from a zero LSTM state, so its vectors do not depend on
    its batch, its neighbours or its padding. AllenNLP's `Elmo` is stateful: it carries each
    batch row's final LSTM state into the same row of the next call, so a sentence's vectors
    depend on the batches before it (and on which row it lands in); running the same sentence
    twice gives different vectors, and AllenNLP recommends warming the state up on a few
    batches first. Set `elmo.bilm.stateful = True` to reproduce that.
    """

    def __init__(
        self,
        options_file: str | Path | None,
        weight_file: str | Path | None,
        num_output_representations: int,
        requires_grad: bool = False,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        keep_sentence_boundaries: bool = False,
        scalar_mix_parameters: list[float] | None = None,
        mode: str = "learned",
        layer_scales: list[float] | None = None,
        *,
        bilm: BiLM | None = None,
        quantize: str | None = None,
    ) -> None:
        super().__init__()
        if (bilm is None) == (options_file is None or weight_file is None):
            raise ElmoError("Elmo needs either options_file and weight_file or a bilm")
        if quantize is not None and requires_grad:
            raise ElmoError(f"quantize={quantize!r} is for a frozen biLM: it cannot be "
                            "fine-tuned (requires_grad=True)")
        if bilm is None:
            from elmo.formats.bilm_tf import load_bilm_tf  # formats import modules

            bilm = load_bilm_tf(options_file, weight_file)
        self.bilm = bilm.quantize_(quantize)
        self.requires_grad = requires_grad
        self.keep_sentence_boundaries = keep_sentence_boundaries
        self.bilm.stateful = False
        self.bilm.reset_states()
        self.bilm.requires_grad_(requires_grad)
        self.mixes = nn.ModuleList(
            ScalarMix(
                self.bilm.num_layers,
                do_layer_norm=do_layer_norm,
                initial_scalar_parameters=scalar_mix_parameters,
                trainable=scalar_mix_parameters is None,
                mode=mode,
                layer_scales=layer_scales,
            )
            for _ in range(num_output_representations)
        )
        self.dropout = nn.Dropout(dropout)
        self.train(self.training)

    @classmethod
    def from_pretrained(
        cls, model: str | Path | None, num_output_representations: int, **kwargs
    ) -> Elmo:
        """Elmo over any MODEL `elmo embed` takes: None/"default", a released name or a
        model directory (ours or an official options/weights pair). `kwargs` as for
        `Elmo(...)`, e.g. `quantize="int8"`."""
        from elmo.pretrained import load_bilm  # pretrained imports modules

        return cls(None, None, num_output_representations, bilm=load_bilm(model), **kwargs)

    @property
    def output_dim(self) -> int:
        """2P: the size of each representation."""
        return self.bilm.config.output_dim

    def train(self, mode: bool = True) -> Elmo:
        """A frozen biLM stays in eval mode (no LSTM dropout) whatever the task model does."""
        super().train(mode)
        self.bilm.train(mode and self.requires_grad)
        return self

    def forward(self, char_ids: torch.Tensor) -> dict[str, torch.Tensor | list[torch.Tensor]]:
        """char_ids (B, T, C) from `batch_to_ids` -> {"elmo_representations": N x (B, T, 2P),
        "mask": (B, T) bool}; with `keep_sentence_boundaries`, T + 2 positions (<S>, </S>)."""
        with torch.set_grad_enabled(self.requires_grad and torch.is_grad_enabled()):
            out = self.bilm(char_ids, keep_boundaries=self.keep_sentence_boundaries)
        return self.represent(out.layers, out.mask)  # layers (L+1, B, T, 2P)

    def represent(
        self, layers: torch.Tensor, mask: torch.Tensor
    ) -> dict[str, torch.Tensor | list[torch.Tensor]]:
        """Precomputed layers (L+1, B, T, 2P) and mask (B, T) -> the mixes with dropout."""
        representations = [self.dropout(mix(layers, mask)) for mix in self.mixes]  # (B, T, 2P)
        return {"elmo_representations": representations, "mask": mask}
