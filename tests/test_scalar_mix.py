"""ScalarMix against hand computation."""

from __future__ import annotations

import math

import pytest
import torch

from elmo import ScalarMix


def layers_and_mask(seed: int = 0) -> tuple[list[torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    layers = [torch.randn(2, 3, 4, generator=g) * (j + 1) + j for j in range(3)]
    mask = torch.tensor([[True, True, True], [True, False, False]])
    return layers, mask


def test_starts_as_the_average_times_one():
    layers, _ = layers_and_mask()
    mix = ScalarMix(3)
    assert mix.weights() == pytest.approx([1 / 3] * 3)
    assert mix.gamma.item() == 1.0
    torch.testing.assert_close(mix(layers), sum(layers) / 3)


def test_weights_and_gamma_by_hand():
    layers, _ = layers_and_mask()
    mix = ScalarMix(3, initial_scalar_parameters=[1.0, 0.0, -2.0])
    with torch.no_grad():
        mix.gamma.fill_(0.5)
    z = math.e + 1 + math.exp(-2)
    w = [math.e / z, 1 / z, math.exp(-2) / z]
    assert mix.weights() == pytest.approx(w)
    assert sum(mix.weights()) == pytest.approx(1.0)
    expected = 0.5 * (w[0] * layers[0] + w[1] * layers[1] + w[2] * layers[2])
    torch.testing.assert_close(mix(layers), expected)
    torch.testing.assert_close(mix(torch.stack(layers)), expected)  # stacked == list


def test_masked_layer_norm_by_hand():
    layers, mask = layers_and_mask()
    mix = ScalarMix(3, do_layer_norm=True)
    expected = []
    for h in layers:
        values = h[mask].flatten().tolist()  # the 4 unmasked tokens x 4 dims
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / len(values)
        expected.append((h - mean) / math.sqrt(var + 1e-12))
    out = mix(layers, mask)
    torch.testing.assert_close(out, sum(expected) / 3)
    # padding values do not change the unmasked outputs
    padded = [h.clone() for h in layers]
    for h in padded:
        h[1, 1:] = 1000.0
    torch.testing.assert_close(mix(padded, mask)[mask], out[mask])


def test_l2_penalty():
    mix = ScalarMix(3, initial_scalar_parameters=[1.0, -2.0, 3.0])
    assert mix.l2_penalty(0.1).item() == pytest.approx(0.1 * 14)
    mix.l2_penalty(1.0).backward()
    grads = [s.grad for s in mix.scalar_parameters]
    torch.testing.assert_close(torch.cat(grads), torch.tensor([2.0, -4.0, 6.0]))


@pytest.mark.parametrize("mode,layer", [("top", 2), ("layer:0", 0), ("layer:1", 1)])
def test_single_layer_modes(mode, layer):
    layers, _ = layers_and_mask()
    mix = ScalarMix(3, mode=mode)
    expected_weights = [0.0, 0.0, 0.0]
    expected_weights[layer] = 1.0
    assert mix.weights() == expected_weights
    torch.testing.assert_close(mix(layers), layers[layer])
    assert not mix.learns_weights
    assert not any(s.requires_grad for s in mix.scalar_parameters)


def test_average_mode_ignores_initial_values_and_does_not_train_s():
    layers, _ = layers_and_mask()
    mix = ScalarMix(3, initial_scalar_parameters=[5.0, 0.0, 0.0], mode="average")
    assert mix.weights() == pytest.approx([1 / 3] * 3)
    mix(layers).sum().backward()
    assert all(s.grad is None for s in mix.scalar_parameters)
    assert mix.gamma.grad is not None


@pytest.mark.parametrize("mode", ["bottom", "layer:3", "layer:-1", "layer:x"])
def test_bad_mode_is_a_clear_error(mode):
    with pytest.raises(ValueError, match="mode"):
        ScalarMix(3, mode=mode)


def test_wrong_number_of_layers():
    layers, _ = layers_and_mask()
    with pytest.raises(ValueError, match="3 layers got 2"):
        ScalarMix(3)(layers[:2])
    with pytest.raises(ValueError, match="initial_scalar_parameters"):
        ScalarMix(3, initial_scalar_parameters=[0.0, 1.0])


def test_gradients_reach_s_and_gamma_only_when_trainable():
    layers, mask = layers_and_mask()
    layers = [h.requires_grad_() for h in layers]
    mix = ScalarMix(3, initial_scalar_parameters=[0.5, 0.0, -0.5])
    mix(layers, mask).pow(2).sum().backward()
    assert all(s.grad.abs().sum() > 0 for s in mix.scalar_parameters)
    assert mix.gamma.grad.abs().sum() > 0
    # d out / d s_j = w_j * (h_j - mixed) summed against the upstream gradient: check s_0
    w = mix.normalized_weights().detach()
    mixed = sum(wj * h.detach() for wj, h in zip(w, layers, strict=True))
    upstream = 2 * mixed
    grad_s0 = (upstream * w[0] * (layers[0].detach() - mixed)).sum()
    torch.testing.assert_close(mix.scalar_parameters[0].grad[0], grad_s0)

    frozen = ScalarMix(3, trainable=False)
    frozen(layers, mask).sum().backward()
    assert frozen.scalar_parameters[0].grad is None and frozen.gamma.grad is None
    assert not any(p.requires_grad for p in frozen.parameters())


def test_layer_scales_multiply_each_layer_and_are_saved():
    layers, _ = layers_and_mask()
    mix = ScalarMix(3, initial_scalar_parameters=[0.0, 1.0, 0.0], layer_scales=[0.5, 2.0, 0.1])
    w = mix.normalized_weights().detach()
    expected = w[0] * 0.5 * layers[0] + w[1] * 2.0 * layers[1] + w[2] * 0.1 * layers[2]
    torch.testing.assert_close(mix(layers), expected)
    assert mix.state_dict()["layer_scales"].tolist() == [0.5, 2.0, pytest.approx(0.1)]
    restored = ScalarMix(3)
    restored.load_state_dict(mix.state_dict())
    torch.testing.assert_close(restored(layers), expected)
    with pytest.raises(ValueError, match="layer_scales"):
        ScalarMix(3, layer_scales=[1.0])


def test_state_dict_has_allennlp_keys_and_loads_the_earlier_layout():
    mix = ScalarMix(3, initial_scalar_parameters=[0.5, 0.0, -0.5])
    state = mix.state_dict()
    # AllenNLP's keys: one (1,) tensor per layer, no layer_scales while they are the default
    assert sorted(state) == ["gamma", "scalar_parameters.0", "scalar_parameters.1",
                             "scalar_parameters.2"]
    assert state["scalar_parameters.2"].tolist() == [-0.5]
    restored = ScalarMix(3, layer_scales=[2.0, 2.0, 2.0])
    restored.load_state_dict(state)  # absent layer_scales: the default ones
    assert restored.layer_scales.tolist() == [1.0, 1.0, 1.0]
    # the layout of earlier versions: s as one (L+1,) tensor
    old = {"scalar_parameters": torch.tensor([1.0, 2.0, 3.0]), "gamma": torch.tensor([0.5]),
           "layer_scales": torch.tensor([1.0, 0.5, 0.25])}
    restored.load_state_dict(old)
    assert [s.item() for s in restored.scalar_parameters] == [1.0, 2.0, 3.0]
    assert restored.layer_scales.tolist() == [1.0, 0.5, 0.25]
    assert restored.state_dict()["layer_scales"].tolist() == [1.0, 0.5, 0.25]


def test_scalar_parameters_index_as_in_allennlp():
    layers, mask = layers_and_mask()
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.scalar_parameters[1].fill_(2.0)
    w = torch.softmax(torch.tensor([0.0, 2.0, 0.0]), 0)
    expected = sum(wj * h for wj, h in zip(w, layers, strict=True))
    torch.testing.assert_close(mix(layers, mask), expected)
