"""BiLanguageModel: a BiLM and its tied output softmax, the pretraining objective.

Both directions share ONE softmax (Peters et al. 2018, section 2.1; bilm-tf). The training
loss of a direction is the mean negative log-likelihood of its unmasked next-token (forward)
or previous-token (backward) predictions; the total is their mean, as in bilm-tf.

Softmax choice: ``"full"`` is exact; ``"sampled"`` is bilm-tf's sampled softmax with
``num_samples`` log-uniform candidates, used in train mode only (evaluation is always exact).
``"auto"`` picks full for vocabularies of at most :data:`FULL_SOFTMAX_MAX_VOCAB` words: there
the (N, V) logits cost less than the LSTMs, and sampling would only add noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from elmo.modules.bilm import BiLM, DistinctTokens
from elmo.modules.softmax import SampledCandidates, SoftmaxHead

SOFTMAX_MODES = ("auto", "full", "sampled")
FULL_SOFTMAX_MAX_VOCAB = 20_000
EVAL_LOGITS_BUDGET = 1 << 24  # logits (rows x vocabulary) held at once by the exact softmax


def resolve_softmax(mode: str, vocab_size: int) -> str:
    """``auto`` -> ``full`` up to FULL_SOFTMAX_MAX_VOCAB words, else ``sampled``."""
    if mode not in SOFTMAX_MODES:
        raise ValueError(f"softmax must be one of {SOFTMAX_MODES}, got {mode!r}")
    if mode == "auto":
        return "full" if vocab_size <= FULL_SOFTMAX_MAX_VOCAB else "sampled"
    return mode


@dataclass
class LMLosses:
    """Mean negative log-likelihoods (scalars) of one batch, per direction."""

    forward: torch.Tensor
    backward: torch.Tensor

    @property
    def total(self) -> torch.Tensor:
        """The training objective: the mean of both directions."""
        return 0.5 * (self.forward + self.backward)


class BiLanguageModel(nn.Module):
    """A BiLM with the tied softmax over a word vocabulary (pretraining and perplexity)."""

    def __init__(
        self, bilm: BiLM, vocab_size: int, softmax: str = "auto", num_samples: int = 8192
    ) -> None:
        super().__init__()
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        self.bilm = bilm
        self.softmax = SoftmaxHead(vocab_size, bilm.config.projection_dim)
        self.softmax_mode = resolve_softmax(softmax, vocab_size)
        self.num_samples = num_samples

    def forward(
        self,
        tokens: torch.Tensor | DistinctTokens,
        targets: torch.Tensor,
        mask: torch.Tensor | None = None,
        candidates: SampledCandidates | None = None,
    ) -> LMLosses:
        """Losses of one BPTT window, with fixed shapes (nothing is read back to the host but
        what the token encoder and the sampler need where they are not given).

        tokens: char ids (2, B, T, C), forward inputs [0] and backward inputs [1], each row in
        its own reading order, or the same as `DistinctTokens` (index (2, B, T)); targets
        (2, B, T): next (forward) and previous (backward) token ids; mask (B, T) bool: real
        positions, a prefix of every row (None: every position is real); candidates: the
        sampled softmax's draw for these targets (None: drawn here from torch's global
        generator). Runs the LSTMs with the BiLM's ``stateful`` setting. Under
        `torch.autocast` only the biLM runs in the lower precision: the softmax and the loss
        are computed in the softmax's dtype (float32).
        """
        if isinstance(tokens, torch.Tensor):
            tokens = DistinctTokens.of(tokens)
        vectors = self.bilm.token_vectors(tokens, fixed_shapes=not tokens.chars.is_cpu)
        lengths = None if mask is None else mask.sum(dim=1)
        top = self.bilm.run_lstm(vectors, lengths)[-1]  # (2, B, T, P)
        top = F.dropout(top, self.bilm.config.dropout, self.training)
        hidden = top.reshape(-1, top.shape[-1]).to(self.softmax.weight.dtype)  # (2BT, P)
        with torch.autocast(hidden.device.type, enabled=False):
            nll = self._nll(hidden, targets.reshape(-1), candidates).view(2, -1)  # (2, BT)
        if mask is None:
            return LMLosses(nll[0].mean(), nll[1].mean())
        weight = mask.reshape(-1).to(nll.dtype)  # (BT,) padding counts 0
        count = weight.sum()
        return LMLosses((nll[0] * weight).sum() / count, (nll[1] * weight).sum() / count)

    def sentence_nll(
        self, char_ids: torch.Tensor, token_ids: torch.Tensor, lengths: torch.Tensor
    ) -> torch.Tensor:
        """Exact summed negative log-likelihood of every sentence, each from a zero state.

        char_ids (B, S, C) and token_ids (B, S) hold ``<S> w_1 .. w_n </S>`` in the first
        ``lengths[b]`` = n + 2 positions of row b. The forward direction predicts w_1 .. </S>,
        the backward one w_n .. <S>. Returns (2, B): forward and backward sums over n + 1
        predictions. Needs ``bilm.stateful`` False.
        """
        if self.bilm.stateful:
            raise RuntimeError("sentence_nll scores sentences independently: set stateful=False")
        p = self.bilm.config.projection_dim
        tokens = self.bilm.encode_tokens(char_ids)  # (B, S, P)
        top = self.bilm.contextualize(tokens, lengths, keep_boundaries=True).layers[-1]
        steps = torch.arange(token_ids.shape[1] - 1, device=lengths.device)
        valid = steps < (lengths - 1).unsqueeze(1)  # (B, S-1): n + 1 predictions per row
        fwd = (top[:, :-1, :p], token_ids[:, 1:])  # position i predicts token i + 1
        bwd = (top[:, 1:, p:], token_ids[:, :-1])  # position i predicts token i - 1
        sums = []
        for hidden, targets in (fwd, bwd):
            nll = torch.zeros_like(valid, dtype=hidden.dtype)  # (B, S-1)
            nll[valid] = self._nll(hidden[valid], targets[valid])
            sums.append(nll.sum(dim=1))
        return torch.stack(sums)  # (2, B)

    def _nll(
        self, hidden: torch.Tensor, targets: torch.Tensor,
        candidates: SampledCandidates | None = None,
    ) -> torch.Tensor:
        """hidden (N, P), targets (N,) -> (N,) losses: sampled in training if so configured
        (with `candidates`, or a draw from torch's global generator)."""
        if self.training and self.softmax_mode == "sampled":
            if candidates is None:
                candidates = SampledCandidates.draw(targets.cpu(), self.softmax.vocab_size,
                                                    self.num_samples)
                candidates = candidates.map(lambda t: t.to(hidden.device))
            return self.softmax.sampled_loss(hidden, targets, candidates)
        if torch.is_grad_enabled():
            return self.softmax.full_loss(hidden, targets)
        chunk = max(1, EVAL_LOGITS_BUDGET // self.softmax.vocab_size)
        return self.softmax.full_loss(hidden, targets, chunk_size=chunk)
