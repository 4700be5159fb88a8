"""BiLanguageModel: the BPTT training loss, per-sentence scoring, softmax choice, carried state."""

from __future__ import annotations

import pytest
import torch

from elmo.chars import BOS_TOKEN, EOS_TOKEN, batch_to_ids
from elmo.modules.language_model import (
    FULL_SOFTMAX_MAX_VOCAB,
    BiLanguageModel,
    resolve_softmax,
)
from tests.conftest import random_bilm

WORDS = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "on", "mat", "a", "dog", "."]
IDS = {w: i for i, w in enumerate(WORDS)}



def make_lm(softmax: str = "full", seed: int = 0) -> BiLanguageModel:
    lm = BiLanguageModel(random_bilm(seed), len(WORDS), softmax=softmax, num_samples=4)
    with torch.no_grad():
        lm.softmax.bias.uniform_(-1, 1)
    return lm.eval()


def window_inputs(sentence: list[str], start: int, stop: int):
    """The BPTT inputs of positions [start, stop) of one wrapped sentence, as the batcher
    makes them: forward reads <S> w.. predicting the next token, backward reads </S> w..
    reversed predicting the previous one."""
    full = [BOS_TOKEN, *sentence, EOS_TOKEN]
    rev = full[::-1]
    fwd_words, bwd_words = full[start:stop], rev[start:stop]
    char_ids = torch.stack([batch_to_ids([fwd_words]), batch_to_ids([bwd_words])])  # (2,1,T,C)
    targets = torch.tensor([[[IDS[w] for w in full[start + 1 : stop + 1]]],
                            [[IDS[w] for w in rev[start + 1 : stop + 1]]]])  # (2, 1, T)
    mask = torch.ones(1, stop - start, dtype=torch.bool)
    return char_ids, targets, mask


def sentence_inputs(sentences: list[list[str]]):
    wrapped = [[BOS_TOKEN, *s, EOS_TOKEN] for s in sentences]
    char_ids = batch_to_ids(wrapped)
    token_ids = torch.zeros(char_ids.shape[:2], dtype=torch.long)
    for b, words in enumerate(wrapped):
        token_ids[b, : len(words)] = torch.tensor([IDS[w] for w in words])
    return char_ids, token_ids, torch.tensor([len(w) for w in wrapped])


def test_bptt_loss_of_a_whole_sentence_equals_its_sentence_score():
    """The training path (direction-stacked BPTT window) and the evaluation path
    (contextualize, both directions of one sentence) compute the same likelihood."""
    lm = make_lm()
    sentence = ["the", "cat", "sat", "on", "a", "mat", "."]
    n = len(sentence) + 1  # predictions per direction
    with torch.no_grad():
        losses = lm(*window_inputs(sentence, 0, n))
        nll = lm.sentence_nll(*sentence_inputs([sentence]))  # (2, 1)
    torch.testing.assert_close(losses.forward, nll[0, 0] / n)
    torch.testing.assert_close(losses.backward, nll[1, 0] / n)
    torch.testing.assert_close(losses.total, 0.5 * (losses.forward + losses.backward))


def test_sentence_scores_do_not_depend_on_the_batch():
    lm = make_lm()
    sentences = [["the", "dog", "sat"], ["a", "cat", "on", "the", "mat", "."], ["dog"]]
    with torch.no_grad():
        together = lm.sentence_nll(*sentence_inputs(sentences))
        alone = torch.cat([lm.sentence_nll(*sentence_inputs([s])) for s in sentences], dim=1)
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)


def test_stateful_windows_carry_the_context():
    """Two windows with the state carried equal one window over both (no dropout)."""
    lm = make_lm()
    lm.bilm.stateful = True
    sentence = ["the", "cat", "sat", "on", "a", "mat", "."]
    with torch.no_grad():
        whole = lm(*window_inputs(sentence, 0, 8))
        lm.bilm.reset_states()
        first, second = lm(*window_inputs(sentence, 0, 5)), lm(*window_inputs(sentence, 5, 8))
    torch.testing.assert_close((5 * first.forward + 3 * second.forward) / 8, whole.forward)
    torch.testing.assert_close((5 * first.backward + 3 * second.backward) / 8, whole.backward)
    saved = lm.bilm.carried_states
    assert saved is not None and len(saved) == 2 and saved[0][0].shape == (2, 1, 16)
    lm.bilm.carried_states = None
    assert lm.bilm._states is None


def test_padding_does_not_change_the_loss():
    lm = make_lm()
    char_ids, targets, mask = window_inputs(["the", "cat", "sat"], 0, 4)
    padded_chars = torch.cat([char_ids, torch.zeros(2, 1, 3, 50, dtype=torch.long)], dim=2)
    padded_targets = torch.cat([targets, torch.zeros(2, 1, 3, dtype=torch.long)], dim=2)
    padded_mask = torch.cat([mask, torch.zeros(1, 3, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        plain, padded = lm(char_ids, targets, mask), lm(padded_chars, padded_targets, padded_mask)
    torch.testing.assert_close(plain.total, padded.total)


def test_softmax_choice():
    assert resolve_softmax("auto", 1000) == "full"
    assert resolve_softmax("auto", FULL_SOFTMAX_MAX_VOCAB) == "full"
    assert resolve_softmax("auto", FULL_SOFTMAX_MAX_VOCAB + 1) == "sampled"
    assert resolve_softmax("sampled", 10) == "sampled"
    assert resolve_softmax("full", 10**6) == "full"
    with pytest.raises(ValueError, match="softmax"):
        resolve_softmax("hierarchical", 10)


def test_sampled_softmax_in_training_exact_in_evaluation():
    lm = make_lm(softmax="sampled")
    inputs = window_inputs(["the", "cat", "sat", "on", "a", "mat"], 0, 7)
    exact = make_lm(softmax="full")
    with torch.no_grad():
        torch.testing.assert_close(lm(*inputs).total, exact(*inputs).total)  # eval: exact
        lm.train(), exact.train()
        torch.manual_seed(0)
        sampled = lm(*inputs).total
        torch.manual_seed(0)  # the same dropout masks: only the softmax differs
        full = exact(*inputs).total
    assert torch.isfinite(sampled) and not torch.allclose(sampled, full)  # 4 of 11 sampled


def test_one_softmax_for_both_directions():
    lm = make_lm()
    assert [name for name, _ in lm.softmax.named_parameters()] == ["weight", "bias"]
    assert lm.softmax.weight.shape == (len(WORDS), 16)
    lm.train()
    losses = lm(*window_inputs(["the", "cat"], 0, 3))
    losses.total.backward()
    assert lm.softmax.weight.grad is not None
    assert all(p.grad is not None for p in lm.bilm.parameters() if p.requires_grad)


def test_sentence_nll_refuses_stateful_mode():
    lm = make_lm()
    lm.bilm.stateful = True
    with pytest.raises(RuntimeError, match="stateful"):
        lm.sentence_nll(*sentence_inputs([["the"]]))
