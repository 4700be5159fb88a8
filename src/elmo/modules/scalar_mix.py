"""ScalarMix: a task's weighted sum of the biLM layers, gamma * sum_j softmax(s)_j * h_j.

The paper's equation (1). Constructor and call as AllenNLP's `ScalarMix`; new beside them:
`weights()` (softmax(s) as numbers), `l2_penalty(lam)` (the paper's lambda * sum_j s_j^2 to add
to a task loss) and fixed modes (`average`, `top`, `layer:K`).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from elmo.layer_choice import LayerChoiceError, parse_layer_choice

LAYER_NORM_EPS = 1e-12
# Adam's learning rate for s and gamma in the task recipe (benchmarks/scalar_mix.py): at the
# task's 1e-3 the s_j move < 0.2 in 500 steps and the mix stays the average.
MIX_LR = 0.01
MIX_MODES = ("learned", "average", "top", "layer:K")


def parse_mode(mode: str, mixture_size: int | None) -> int | None:
    """The one layer a fixed-layer mode selects ("top" -> L, "layer:K" -> K), else None.

    Besides "learned", the modes are the layer choices (`elmo.layer_choice`) that a mix
    computes with s fixed (`fixed_mix`): the average (s = 0) and one layer. Raises ValueError
    naming the mode for any other, or for a layer K outside 0..mixture_size - 1; with
    `mixture_size` None (no biLM yet) only the mode is checked.
    """
    if mode == "learned":
        return None
    try:
        choice = parse_layer_choice(mode, "mix mode")
    except LayerChoiceError:
        choice = None
    if choice is None or not choice.fixed_mix:
        raise ValueError(f"mix mode must be one of {', '.join(MIX_MODES)} (K >= 0; 0: the "
                         f"context-free token layer); got {mode!r}")
    if mixture_size is None:
        return None
    try:
        choice.check(mixture_size)
    except LayerChoiceError as err:
        raise ValueError(f"mix mode {mode!r}: {err}") from None
    return choice.one_layer(mixture_size)


def masked_layer_norm(h: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """h (B, T, D) normalised by the mean and variance of all its unmasked elements.

    As bilm-tf's `weight_layers` and AllenNLP: one mean and one variance over the whole batch
    (every unmasked token and dimension), eps 1e-12. Masked positions are shifted and scaled
    too (callers ignore them).
    """
    if mask is None:
        mask = h.new_ones(h.shape[:2], dtype=torch.bool)
    m = mask.unsqueeze(-1).to(h.dtype)  # (B, T, 1)
    n = m.sum() * h.shape[-1]
    mean = (h * m).sum() / n
    variance = (((h - mean) * m) ** 2).sum() / n
    return (h - mean) / torch.sqrt(variance + LAYER_NORM_EPS)


class ScalarMix(nn.Module):
    """gamma * sum_j w_j * h_j over L+1 layers, w = softmax(s).

    `scalar_parameters` s (a list of L+1 parameters of shape (1,), as AllenNLP's) start at zero
    (or `initial_scalar_parameters`), `gamma` (1,) at one; both are trained unless
    `trainable=False`. `mode`: "learned" (default), "average" (s fixed at 0), "top" (the last
    layer only) or "layer:K" (layer K only; K = 0 is the context-free token layer). In the
    fixed modes s is not trained; gamma is, if `trainable`.

    `layer_scales` (L+1 constants, saved with the module unless all 1) multiply the layers
    before mixing: give 1 / each layer's RMS over the training data (`LayerStore.layer_rms`) so
    that layers of different scales compete on equal terms and the weights say which layer is
    used. With `do_layer_norm`, each layer is instead normalised over the batch's elements that
    `mask` marks (as the original), which makes a sentence's output depend on the rest of its
    batch.
    """

    def __init__(
        self,
        mixture_size: int,
        do_layer_norm: bool = False,
        initial_scalar_parameters: list[float] | None = None,
        trainable: bool = True,
        mode: str = "learned",
        layer_scales: list[float] | None = None,
    ) -> None:
        super().__init__()
        if mixture_size < 1:
            raise ValueError(f"mixture_size must be >= 1, got {mixture_size}")
        self.mixture_size = mixture_size
        self.do_layer_norm = do_layer_norm
        self.mode = mode
        self.layer = parse_mode(mode, mixture_size)
        if initial_scalar_parameters is None or mode == "average":
            initial_scalar_parameters = [0.0] * mixture_size
        if len(initial_scalar_parameters) != mixture_size:
            raise ValueError(f"initial_scalar_parameters has {len(initial_scalar_parameters)} "
                             f"values for a mixture of {mixture_size} layers")
        # AllenNLP's layout: one (1,) parameter per layer, so `scalar_parameters[j]` and the
        # state-dict keys `scalar_parameters.{j}` are as there.
        self.scalar_parameters = nn.ParameterList(
            nn.Parameter(torch.tensor([float(s)]), requires_grad=trainable and mode == "learned")
            for s in initial_scalar_parameters
        )
        self.gamma = nn.Parameter(torch.ones(1), requires_grad=trainable)
        if layer_scales is not None and len(layer_scales) != mixture_size:
            raise ValueError(f"layer_scales has {len(layer_scales)} values for a mixture of "
                             f"{mixture_size} layers")
        scales = torch.ones(mixture_size) if layer_scales is None else torch.tensor(layer_scales)
        self.register_buffer("layer_scales", scales.float())
        self.register_state_dict_post_hook(_omit_unit_scales)
        self.register_load_state_dict_pre_hook(_upgrade_state)

    @property
    def learns_weights(self) -> bool:
        """Whether s is trained (a learned mix that is not frozen)."""
        return self.scalar_parameters[0].requires_grad

    def scalar_parameters_tensor(self) -> torch.Tensor:
        """s as one tensor (L+1,)."""
        return torch.cat(list(self.scalar_parameters))

    def normalized_weights(self) -> torch.Tensor:
        """The layer weights w (L+1,) as a tensor: softmax(s), or one-hot in top/layer:K."""
        s = self.scalar_parameters_tensor()
        if self.layer is None:
            return torch.softmax(s, dim=0)
        weights = torch.zeros_like(s)
        weights[self.layer] = 1.0
        return weights

    def weights(self) -> list[float]:
        """The layer weights w_0 .. w_L as numbers (they sum to 1)."""
        return self.normalized_weights().detach().cpu().tolist()

    def l2_penalty(self, lam: float) -> torch.Tensor:
        """lam * sum_j s_j^2: the paper's regularisation of the mix, to add to a task loss."""
        return lam * (self.scalar_parameters_tensor() ** 2).sum()

    def forward(
        self, tensors: list[torch.Tensor] | torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """L+1 layers (a list of (B, T, D) or one (L+1, B, T, D)), mask (B, T) -> (B, T, D)."""
        if len(tensors) != self.mixture_size:
            raise ValueError(f"ScalarMix of {self.mixture_size} layers got {len(tensors)}")
        w = self.normalized_weights()  # (L+1,)
        layers = range(self.mixture_size) if self.layer is None else [self.layer]
        mixed = None
        for j in layers:
            h = tensors[j] * self.layer_scales[j]  # (B, T, D)
            if self.do_layer_norm:
                h = masked_layer_norm(h, mask)
            term = w[j] * h
            mixed = term if mixed is None else mixed + term
        return self.gamma * mixed  # (B, T, D)

    def extra_repr(self) -> str:
        return f"mixture_size={self.mixture_size}, mode={self.mode!r}, " \
               f"do_layer_norm={self.do_layer_norm}"


def _omit_unit_scales(module: ScalarMix, state: dict, prefix: str, _metadata: dict) -> None:
    """Leave `layer_scales` out of the state dict while they are all 1 (the default), so that
    the dict has AllenNLP's keys and AllenNLP's `ScalarMix` loads it."""
    if bool((module.layer_scales == 1).all()):
        state.pop(prefix + "layer_scales", None)


def _upgrade_state(module: ScalarMix, state: dict, prefix: str, *_args) -> None:
    """Accept the state dicts of earlier versions and of AllenNLP: s as one (L+1,) tensor
    (ours before) becomes the per-layer keys; absent `layer_scales` are the default ones."""
    old = state.pop(prefix + "scalar_parameters", None)
    if old is not None:
        state.update({f"{prefix}scalar_parameters.{j}": s.reshape(1) for j, s in enumerate(old)})
    state.setdefault(prefix + "layer_scales", torch.ones_like(module.layer_scales))


def parameter_groups(
    model: nn.Module,
    lr: float,
    mix_lr: float | None = MIX_LR,
    exclude: Iterable[nn.Parameter] = (),
) -> list[dict[str, object]]:
    """Optimizer parameter groups: "task", every trainable parameter of `model` at `lr`, and
    "mix", the s and gamma of every ScalarMix in it at `mix_lr` (`lr` if None). Frozen
    parameters and those in `exclude` are left out; so is an empty group."""
    excluded = {id(p) for p in exclude}
    mix_params = {id(p) for m in model.modules() if isinstance(m, ScalarMix)
                  for p in m.parameters()}
    trainable = [p for p in model.parameters() if p.requires_grad and id(p) not in excluded]
    groups = [
        {"params": [p for p in trainable if id(p) not in mix_params], "lr": lr, "name": "task"},
        {"params": [p for p in trainable if id(p) in mix_params],
         "lr": lr if mix_lr is None else mix_lr, "name": "mix"},
    ]
    return [g for g in groups if g["params"]]
