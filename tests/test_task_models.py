"""Each task model overfits a tiny data set, with and without ELMo tensors."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from elmo.tasks.classifier import Classifier, ClassifierConfig
from elmo.tasks.encoder import run_lstm
from elmo.tasks.pair import PairClassifier, PairConfig
from elmo.tasks.tagger import Tagger, TaggerConfig

VOCAB, B, T, D = 12, 6, 5, 8


def tiny_batch(seed: int):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([5, 3, 4, 1, 2, 5])
    mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)  # (B, T)
    word_ids = torch.randint(2, VOCAB, (B, T), generator=g) * mask
    elmo = torch.randn(B, T, D, generator=g) * mask.unsqueeze(-1)
    return word_ids, mask, elmo


@pytest.mark.parametrize("elmo_at", ["none", "input", "output", "both"])
@pytest.mark.parametrize("task", ["tagging", "classification", "pair"])
def test_model_overfits_tiny_data(task, elmo_at):
    torch.manual_seed(0)
    word_ids, mask, elmo = tiny_batch(1)
    g = torch.Generator().manual_seed(2)
    dims = {"elmo_input_dim": D if elmo_at in ("input", "both") else 0,
            "elmo_output_dim": D if elmo_at in ("output", "both") else 0}
    common = dict(vocab_size=VOCAB, embedding_dim=8, hidden_dim=16, dropout=0.0, **dims)
    if task == "tagging":
        model = Tagger(TaggerConfig(num_labels=4, **common))
        gold = torch.randint(4, (B, T), generator=g) * mask
    elif task == "classification":
        model = Classifier(ClassifierConfig(num_labels=3, **common))
        gold = torch.randint(3, (B,), generator=g)
    else:
        model = PairClassifier(PairConfig(num_labels=3, **common))
        gold = torch.randint(3, (B // 2,), generator=g)  # 6 sentences = 3 pairs
    elmo_input = elmo if dims["elmo_input_dim"] else None
    elmo_output = elmo if dims["elmo_output_dim"] else None
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(150):
        scores = model(word_ids, mask, elmo_input, elmo_output)
        loss = model.loss(scores, gold, mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        predicted = model.predict(model(word_ids, mask, elmo_input, elmo_output), mask)
    if task == "tagging":
        assert predicted == [gold[b, : int(mask[b].sum())].tolist() for b in range(B)]
    else:
        assert predicted == gold.tolist()
    assert loss.item() < 0.1


def test_wrong_elmo_inputs_are_refused():
    model = Classifier(ClassifierConfig(vocab_size=VOCAB, elmo_input_dim=D))
    word_ids, mask, elmo = tiny_batch(0)
    with pytest.raises(ValueError, match="elmo_input: the model was built for dimension 8, "
                       "got none"):
        model(word_ids, mask)
    with pytest.raises(ValueError, match="elmo_output: .* dimension 0, got dimension 8"):
        model(word_ids, mask, elmo, elmo)


def test_tagger_output_does_not_depend_on_padding_or_batch():
    torch.manual_seed(0)
    model = Tagger(TaggerConfig(vocab_size=VOCAB, hidden_dim=8)).eval()
    word_ids, mask, _ = tiny_batch(3)
    with torch.no_grad():
        full = model(word_ids, mask)
        alone = model(word_ids[1:2, :3], mask[1:2, :3])
    torch.testing.assert_close(full[1, :3], alone[0], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("layers", [1, 2])
def test_run_lstm_gives_the_packed_lstm_states_and_gradients(layers):
    """run_lstm runs each direction over the padded batch (a packed LSTM's backward pass is
    slow on long rows); its states and gradients are those of the packed LSTM."""
    torch.manual_seed(0)
    lstm = nn.LSTM(6, 4, num_layers=layers, bidirectional=True, batch_first=True).eval()
    lengths = torch.tensor([7, 3, 1, 5])
    mask = torch.arange(7).unsqueeze(0) < lengths.unsqueeze(1)  # (4, 7)
    x = torch.randn(4, 7, 6, requires_grad=True)
    states = run_lstm(lstm, x, mask)
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    expected = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=7)[0]
    torch.testing.assert_close(states, expected, atol=1e-6, rtol=1e-5)
    assert not states[~mask].any()  # padded positions are 0
    weights = torch.randn_like(expected)
    grads = torch.autograd.grad((states * weights).sum(), [x, *lstm.parameters()])
    expected_grads = torch.autograd.grad((expected * weights).sum(), [x, *lstm.parameters()])
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
