"""Elmo: the hand mix of BiLM layers, frozen vs fine-tuned, boundaries, mask, batch invariance."""

from __future__ import annotations

import pytest
import torch

from elmo import Elmo, batch_to_ids, save_bilm_tf
from elmo.errors import ElmoError
from tests.conftest import random_bilm

SENTENCES = [["The", "cat", "sat", "down"], ["Dogs", "bark"], ["A"]]


def make_elmo(**kwargs) -> Elmo:
    return Elmo(None, None, kwargs.pop("n", 2), module=random_bilm(), **kwargs)


def test_representations_are_the_hand_mix_of_the_bilm_layers():
    elmo = make_elmo(dropout=0.0)
    with torch.no_grad():
        for s, value in zip(elmo.scalar_mix_1.scalar_parameters, [1.0, -1.0, 0.5], strict=True):
            s.fill_(value)
        elmo.mixes[1].gamma.fill_(2.0)
    ids = batch_to_ids(SENTENCES)
    out = elmo(ids)
    layers = elmo.bilm(ids).layers  # (L+1, B, T, 2P)
    assert len(out["elmo_representations"]) == 2
    assert out["elmo_representations"][0].shape == (3, 4, elmo.output_dim)
    torch.testing.assert_close(out["elmo_representations"][0], layers.mean(0))
    w = torch.softmax(torch.tensor([1.0, -1.0, 0.5]), 0)
    torch.testing.assert_close(out["elmo_representations"][1],
                               2.0 * (w[:, None, None, None] * layers).sum(0))
    assert out["mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]]


def test_dropout_is_on_in_training_and_off_in_eval():
    elmo = make_elmo(n=1, dropout=0.5)
    ids = batch_to_ids(SENTENCES)
    elmo.eval()
    a, b = elmo(ids)["elmo_representations"][0], elmo(ids)["elmo_representations"][0]
    torch.testing.assert_close(a, b)
    elmo.train()
    c = elmo(ids)["elmo_representations"][0]
    assert not torch.allclose(a, c)
    assert not elmo.bilm.training  # frozen biLM: no LSTM dropout


def test_keep_sentence_boundaries():
    elmo = make_elmo(n=1, dropout=0.0, keep_sentence_boundaries=True).eval()
    ids = batch_to_ids(SENTENCES)
    out = elmo(ids)
    assert out["elmo_representations"][0].shape == (3, 6, elmo.output_dim)
    assert out["mask"].sum(1).tolist() == [6, 4, 3]
    inner = make_elmo(n=1, dropout=0.0).eval()(ids)["elmo_representations"][0]
    torch.testing.assert_close(out["elmo_representations"][0][0, 1:5], inner[0])


def test_a_sentence_does_not_depend_on_its_batch():
    elmo = make_elmo(n=1, dropout=0.0).eval()
    together = elmo(batch_to_ids(SENTENCES))["elmo_representations"][0]
    for b, sentence in enumerate(SENTENCES):
        alone = elmo(batch_to_ids([sentence]))["elmo_representations"][0][0]
        torch.testing.assert_close(together[b, : len(sentence)], alone, atol=1e-5, rtol=1e-5)
    again = elmo(batch_to_ids(list(reversed(SENTENCES))))["elmo_representations"][0]
    torch.testing.assert_close(again[0, :1], together[2, :1], atol=1e-5, rtol=1e-5)


def test_frozen_bilm_gets_no_gradient_but_the_mix_does():
    elmo = make_elmo(n=1).train()
    elmo(batch_to_ids(SENTENCES))["elmo_representations"][0].pow(2).sum().backward()
    assert all(p.grad is None for p in elmo.bilm.parameters())
    assert all(s.grad is not None for s in elmo.scalar_mix_0.scalar_parameters)


def test_fine_tuning_trains_the_bilm():
    elmo = make_elmo(n=1, requires_grad=True).train()
    assert elmo.bilm.training
    elmo(batch_to_ids(SENTENCES))["elmo_representations"][0].pow(2).sum().backward()
    grads = [p.grad for p in elmo.bilm.parameters()]
    assert all(g is not None for g in grads)
    assert elmo.bilm.lstm.layers[-1].state_weight.grad.abs().sum() > 0


def test_represent_equals_forward_on_precomputed_layers():
    elmo = make_elmo(n=1, dropout=0.0).eval()
    ids = batch_to_ids(SENTENCES)
    out = elmo.bilm(ids)
    torch.testing.assert_close(elmo.represent(out.layers, out.mask)["elmo_representations"][0],
                               elmo(ids)["elmo_representations"][0])


def test_modes_and_fixed_parameters():
    top = make_elmo(n=1, dropout=0.0, mode="top").eval()
    ids = batch_to_ids(SENTENCES)
    torch.testing.assert_close(top(ids)["elmo_representations"][0], top.bilm(ids).layers[-1])
    fixed = make_elmo(n=1, scalar_mix_parameters=[0.0, 1.0, 2.0])
    assert not any(p.requires_grad for p in fixed.parameters())


def test_from_options_and_weights_files(tmp_path):
    bilm = random_bilm()
    options, weights = save_bilm_tf(bilm, tmp_path)
    elmo = Elmo(options, weights, 1, dropout=0.0).eval()
    ids = batch_to_ids(SENTENCES)
    torch.testing.assert_close(elmo(ids)["elmo_representations"][0], bilm(ids).layers.mean(0))
    with pytest.raises(ElmoError, match="options_file and weight_file"):
        Elmo(options, None, 1)
    with pytest.raises(ElmoError, match="not both"):
        Elmo(options, weights, 1, module=bilm)


def test_from_pretrained_default_model():
    elmo = Elmo.from_pretrained("default", 1)
    out = elmo(batch_to_ids([["Hello", "world"]]))
    assert out["elmo_representations"][0].shape == (1, 2, elmo.output_dim)


def test_layer_scales_reach_every_mix():
    elmo = make_elmo(n=2, dropout=0.0, layer_scales=[0.5, 2.0, 1.0]).eval()
    ids = batch_to_ids(SENTENCES)
    layers = elmo.bilm(ids).layers
    scaled = layers * torch.tensor([0.5, 2.0, 1.0])[:, None, None, None]
    for rep in elmo(ids)["elmo_representations"]:
        torch.testing.assert_close(rep, scaled.mean(0))
