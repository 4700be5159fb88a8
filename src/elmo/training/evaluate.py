"""Perplexity of a BiLanguageModel on held-out sentences: forward, backward and average.

Stateless per sentence, exact softmax: every sentence ``<S> w_1 .. w_n </S>`` is scored from
a zero LSTM state, so the result does not depend on batching or sentence order. Each direction
makes n + 1 predictions per sentence (forward: w_1 .. w_n, </S>; backward: w_n .. w_1, <S>);
unknown words count as ``<UNK>``. (bilm-tf's `run_test` instead carries the state through the
file one token at a time, which gives slightly lower numbers.) The average perplexity is
``exp`` of the mean of both directions' mean losses, the exponential of the training objective.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

import torch

from elmo.modules.language_model import BiLanguageModel
from elmo.vocab import Vocabulary


@dataclass
class PerplexityTotals:
    """Summed negative log-likelihoods and the number of predictions per direction."""

    nll_forward: float = 0.0
    nll_backward: float = 0.0
    n_tokens: int = 0

    def __add__(self, other: PerplexityTotals) -> PerplexityTotals:
        return PerplexityTotals(
            self.nll_forward + other.nll_forward,
            self.nll_backward + other.nll_backward,
            self.n_tokens + other.n_tokens,
        )

    def _ppl(self, nll: float) -> float:
        return math.exp(nll / self.n_tokens) if self.n_tokens else float("nan")

    @property
    def forward(self) -> float:
        return self._ppl(self.nll_forward)

    @property
    def backward(self) -> float:
        return self._ppl(self.nll_backward)

    @property
    def average(self) -> float:
        return self._ppl(0.5 * (self.nll_forward + self.nll_backward))

    def to_dict(self) -> dict[str, float]:
        return {"forward": self.forward, "backward": self.backward, "average": self.average,
                "tokens": self.n_tokens}


def _batches(sentences: Iterable[list[str]], size: int) -> Iterator[list[list[str]]]:
    it = iter(sentences)
    while batch := list(islice(it, size)):
        yield batch


@torch.no_grad()
def evaluate_perplexity(
    lm: BiLanguageModel,
    sentences: Iterable[list[str]],
    vocab: Vocabulary,
    batch_size: int = 64,
) -> PerplexityTotals:
    """Score tokenized sentences (no boundary tokens) with `lm` on its own device.

    The model is put in eval mode and stateless for the call, then restored; carried training
    states are left untouched.
    """
    was_training, was_stateful = lm.training, lm.bilm.stateful
    lm.eval()
    lm.bilm.stateful = False
    device = lm.softmax.weight.device
    bos, eos = lm.bilm.indexer.bos_token, lm.bilm.indexer.eos_token
    totals = PerplexityTotals()
    try:
        for batch in _batches(sentences, batch_size):
            wrapped = [[bos, *words, eos] for words in batch]
            char_ids = lm.bilm.batch_to_ids(wrapped).to(device)  # (B, S, C)
            token_ids = torch.zeros(char_ids.shape[:2], dtype=torch.long)  # (B, S)
            for b, words in enumerate(wrapped):
                token_ids[b, : len(words)] = torch.tensor(vocab.encode(words))
            lengths = torch.tensor([len(words) for words in wrapped], device=device)
            nll = lm.sentence_nll(char_ids, token_ids.to(device), lengths).sum(dim=1)  # (2,)
            n_predictions = int(lengths.sum()) - len(batch)  # n + 1 per sentence
            totals += PerplexityTotals(nll[0].item(), nll[1].item(), n_predictions)
    finally:
        lm.train(was_training)
        lm.bilm.stateful = was_stateful
    return totals
