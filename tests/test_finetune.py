"""Fine-tuning the biLM in a task model: groups, learning rates, schedule, gradual unfreezing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from elmo import Elmo, batch_to_ids
from elmo.errors import ElmoError
from elmo.modules.scalar_mix import MIX_LR, parameter_groups
from elmo.tasks.finetune import FineTuneConfig, GradualUnfreezer
from tests.conftest import random_bilm

SENTENCES = [["The", "cat", "sat"], ["Dogs", "bark"]]


class Tagger(nn.Module):
    def __init__(self, requires_grad: bool = True) -> None:
        super().__init__()
        self.elmo = Elmo(None, None, 1, requires_grad=requires_grad, dropout=0.0,
                         module=random_bilm())
        self.out = nn.Linear(self.elmo.output_dim, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.elmo(ids)["elmo_representations"][0])


def grads_after_one_step(model: Tagger) -> dict[str, bool]:
    model.zero_grad(set_to_none=True)
    model(batch_to_ids(SENTENCES)).pow(2).sum().backward()
    return {name: p.grad is not None and bool(p.grad.abs().sum() > 0)
            for name, p in model.named_parameters()}


def test_groups_and_discriminative_learning_rates():
    model = Tagger()
    tuner = GradualUnfreezer(model, model.elmo, 100,
                             FineTuneConfig(lr=1.0, discriminative_factor=2.0, mix_lr=0.5))
    names = [g["name"] for g in tuner.param_groups]
    assert names == ["token_encoder", "lstm_1", "lstm_2", "task", "mix"]
    assert [g["lr"] for g in tuner.param_groups] == [1 / 8, 1 / 4, 1 / 2, 1.0, 0.5]
    by_group = {g["name"]: {id(p) for p in g["params"]} for g in tuner.param_groups}
    assert by_group["task"] == {id(model.out.weight), id(model.out.bias)}
    assert by_group["mix"] == {id(p) for p in model.elmo.scalar_mix_0.parameters()}
    every = set().union(*by_group.values())
    assert every == {id(p) for p in model.parameters()}  # each parameter in one group
    assert sum(len(v) for v in by_group.values()) == len(every)


def test_gradual_unfreezing_trains_the_top_lstm_first_and_one_more_group_each_epoch():
    model = Tagger()
    tuner = GradualUnfreezer(model, model.elmo, 100, FineTuneConfig())
    trained = {}
    for epoch in range(4):
        tuner.on_epoch_start(epoch)
        grads = grads_after_one_step(model)
        trained[epoch] = {group.name for group in tuner.bilm_groups
                          if any(grads[n] for n, p in model.named_parameters()
                                 if any(p is q for q in group.params))}
        assert grads["out.weight"] and grads["elmo.scalar_mix_0.scalar_parameters.0"]
    assert trained[0] == {"lstm_2"}
    assert trained[1] == {"lstm_2", "lstm_1"}
    assert trained[2] == trained[3] == {"lstm_2", "lstm_1", "token_encoder"}


def test_without_gradual_unfreezing_everything_trains_from_the_start():
    model = Tagger()
    tuner = GradualUnfreezer(model, model.elmo, 100, FineTuneConfig(gradual_unfreeze=False))
    tuner.on_epoch_start(0)
    grads = grads_after_one_step(model)
    assert grads["elmo._elmo_lstm.token_encoder.projection.weight"]


def test_slanted_triangular_learning_rates_per_group():
    model = Tagger()
    config = FineTuneConfig(lr=1.0, discriminative_factor=2.0, warmup_frac=0.1)
    tuner = GradualUnfreezer(model, model.elmo, 101, config)
    optimizer = torch.optim.Adam(tuner.param_groups)
    tuner.set_learning_rates(optimizer, 0)
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx(
        [x / 32 for x in (1 / 8, 1 / 4, 1 / 2, 1.0, 0.01)])
    tuner.set_learning_rates(optimizer, 10)  # the peak, after 10% of the steps
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx(
        [1 / 8, 1 / 4, 1 / 2, 1.0, 0.01])  # the mixes at MIX_LR
    tuner.set_learning_rates(optimizer, 55)  # half way down
    assert optimizer.param_groups[3]["lr"] == pytest.approx((1 + 0.5 * 31) / 32)


def test_a_frozen_elmo_cannot_be_fine_tuned():
    model = Tagger(requires_grad=False)
    with pytest.raises(ElmoError, match="requires_grad=True"):
        GradualUnfreezer(model, model.elmo, 100, FineTuneConfig())


def test_parameter_groups_split_off_the_mixes_and_skip_frozen_parameters():
    model = Tagger(requires_grad=False)
    groups = parameter_groups(model, 1e-3, 0.1)
    assert [(g["name"], g["lr"], len(g["params"])) for g in groups] == [
        ("task", 1e-3, 2), ("mix", 0.1, 4)]  # mix: s_0, s_1, s_2 (AllenNLP's layout), gamma
    assert parameter_groups(model, 1e-3)[1]["lr"] == MIX_LR
    assert parameter_groups(model, 1e-3, None)[1]["lr"] == 1e-3
