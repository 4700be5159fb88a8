"""AllenNLP's torch layout of a biLM's weights (`_ElmoBiLm`'s state dict) <-> our BiLM's.

The keys a fine-tuned AllenNLP model's `weights.th` holds under its `Elmo`'s `_elmo_lstm.`:

    _token_embedder._char_embedding_weights            (262, E)   our char_embedding.weight
    _token_embedder.char_conv_{i}.weight / .bias                  our convolutions.{i}
    _token_embedder._highways._layers.{k}.weight       (2F, F)    [transform; -gate]
    _token_embedder._highways._layers.{k}.bias         (2F,)      [transform; -gate]
    _token_embedder._projection.weight / .bias                    our projection
    _elmo_lstm.{forward,backward}_layer_{l}.input_linearity.weight  (4C, P)
    _elmo_lstm.{forward,backward}_layer_{l}.state_linearity.weight  (4C, P)
    _elmo_lstm.{forward,backward}_layer_{l}.state_linearity.bias    (4C,)
    _elmo_lstm.{forward,backward}_layer_{l}.state_projection.weight (P, C)

AllenNLP's highway gate is our gate negated (it computes g x + (1 - g) f(x), we t f(x) +
(1 - t) x); its LSTM gates are ordered i, f, j, o (ours, as TensorFlow's, i, j, f, o) and its
bias holds TensorFlow's constant forget bias of 1.
"""

from __future__ import annotations

import torch

TOKEN_EMBEDDER = "_token_embedder."
LSTM = "_elmo_lstm."
DIRECTIONS = ("forward", "backward")


def _swap_middle_gates(w: torch.Tensor) -> torch.Tensor:
    """Blocks (i, j, f, o) <-> (i, f, j, o) along dim 0 of a (4C, ...) tensor (an involution)."""
    i, j, f, o = w.chunk(4, dim=0)
    return torch.cat([i, f, j, o], dim=0)


def _forget_bias(cell_dim: int, like: torch.Tensor) -> torch.Tensor:
    """TensorFlow's constant forget bias in our (i, j, f, o) order: 1 on the f block."""
    bias = like.new_zeros(4 * cell_dim)
    bias[2 * cell_dim : 3 * cell_dim] = 1.0
    return bias


def is_allennlp_layout(keys: object) -> bool:
    """Whether biLM-relative `keys` are in AllenNLP's layout."""
    return any(str(k).startswith((TOKEN_EMBEDDER, LSTM)) for k in keys)


def to_allennlp(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our BiLM's state dict (`bilm.state_dict()`) -> AllenNLP's `_ElmoBiLm` keys and tensors."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        part, _, rest = name.partition(".")
        if part == "token_encoder":
            out.update(_char_cnn_to_allennlp(rest, tensor, state))
        elif part == "lstm":
            out.update(_lstm_to_allennlp(rest, tensor))
        else:
            raise ValueError(f"no AllenNLP name for biLM tensor {name!r}")
    return out


def from_allennlp(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """AllenNLP's `_ElmoBiLm` keys and tensors -> our BiLM's state dict.

    Raises ValueError naming a key it does not know.
    """
    out: dict[str, torch.Tensor] = {}
    lstm: dict[tuple[int, int], dict[str, torch.Tensor]] = {}
    for name, tensor in state.items():
        if name.startswith(TOKEN_EMBEDDER):
            out.update(_char_cnn_from_allennlp(name.removeprefix(TOKEN_EMBEDDER), tensor))
        elif name.startswith(LSTM):
            cell, _, tensor_name = name.removeprefix(LSTM).partition(".")
            direction, _, layer = cell.rpartition("_layer_")
            if direction not in DIRECTIONS or not layer.isdigit():
                raise ValueError(f"unknown AllenNLP biLM tensor {name!r}")
            lstm.setdefault((int(layer), DIRECTIONS.index(direction)), {})[tensor_name] = tensor
        else:
            raise ValueError(f"unknown AllenNLP biLM tensor {name!r}")
    layers = sorted({layer for layer, _ in lstm})
    for layer in layers:
        cells = [lstm.get((layer, d)) for d in range(len(DIRECTIONS))]
        if any(c is None for c in cells):
            raise ValueError(f"AllenNLP biLM layer {layer} lacks a direction")
        out.update(_lstm_from_allennlp(layer, cells))
    return out


# ---- the character CNN ------------------------------------------------------------------

def _char_cnn_to_allennlp(
    name: str, tensor: torch.Tensor, state: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    kind, _, rest = name.partition(".")
    if kind == "char_embedding":
        return {TOKEN_EMBEDDER + "_char_embedding_weights": tensor}
    if kind == "convolutions":
        index, _, param = rest.partition(".")
        return {f"{TOKEN_EMBEDDER}char_conv_{index}.{param}": tensor}
    if kind == "projection":
        return {f"{TOKEN_EMBEDDER}_projection.{rest}": tensor}
    if kind == "highways":  # written once, from its transform tensor
        index, part, param = rest.split(".")
        if part == "gate":
            return {}
        gate = state[f"token_encoder.highways.{index}.gate.{param}"]
        return {f"{TOKEN_EMBEDDER}_highways._layers.{index}.{param}": torch.cat([tensor, -gate])}
    raise ValueError(f"no AllenNLP name for biLM tensor 'token_encoder.{name}'")


def _char_cnn_from_allennlp(name: str, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
    prefix = "token_encoder."
    if name == "_char_embedding_weights":
        return {prefix + "char_embedding.weight": tensor}
    if name.startswith("char_conv_"):
        index, _, param = name.removeprefix("char_conv_").partition(".")
        return {f"{prefix}convolutions.{index}.{param}": tensor}
    if name.startswith("_projection."):
        return {prefix + "projection." + name.removeprefix("_projection."): tensor}
    if name.startswith("_highways._layers."):
        index, param = name.removeprefix("_highways._layers.").split(".")
        transform, gate = tensor.chunk(2, dim=0)
        return {f"{prefix}highways.{index}.transform.{param}": transform,
                f"{prefix}highways.{index}.gate.{param}": -gate}
    raise ValueError(f"unknown AllenNLP biLM tensor {TOKEN_EMBEDDER + name!r}")


# ---- the LSTM stacks --------------------------------------------------------------------

def _lstm_to_allennlp(name: str, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
    """'layers.{l}.{input_weight|state_weight|bias|proj_weight}' (D, ...) -> one per direction."""
    _, layer, param = name.split(".")
    out = {}
    for d, direction in enumerate(DIRECTIONS):
        key = f"{LSTM}{direction}_layer_{layer}."
        t = tensor[d]
        if param == "input_weight":  # (P, 4C) -> (4C, P)
            out[key + "input_linearity.weight"] = _swap_middle_gates(t.T)
        elif param == "state_weight":
            out[key + "state_linearity.weight"] = _swap_middle_gates(t.T)
        elif param == "bias":
            out[key + "state_linearity.bias"] = _swap_middle_gates(
                t + _forget_bias(t.shape[0] // 4, t))
        elif param == "proj_weight":  # (C, P) -> (P, C)
            out[key + "state_projection.weight"] = t.T.contiguous()
        else:
            raise ValueError(f"no AllenNLP name for biLM tensor 'lstm.{name}'")
    return out


def _lstm_from_allennlp(
    layer: int, cells: list[dict[str, torch.Tensor]]
) -> dict[str, torch.Tensor]:
    """One layer's forward and backward cells -> our direction-stacked tensors."""
    try:
        input_weight = [_swap_middle_gates(c["input_linearity.weight"]).T for c in cells]
        state_weight = [_swap_middle_gates(c["state_linearity.weight"]).T for c in cells]
        bias = [_swap_middle_gates(c["state_linearity.bias"]) for c in cells]
        proj_weight = [c["state_projection.weight"].T for c in cells]
    except KeyError as err:
        raise ValueError(f"AllenNLP biLM layer {layer} lacks {err.args[0]!r}") from None
    bias = [b - _forget_bias(b.shape[0] // 4, b) for b in bias]
    prefix = f"lstm.layers.{layer}."
    return {prefix + "input_weight": torch.stack(input_weight),
            prefix + "state_weight": torch.stack(state_weight),
            prefix + "bias": torch.stack(bias),
            prefix + "proj_weight": torch.stack(proj_weight)}
