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

from elmo.modules.bilm import BiLM
from elmo.modules.softmax import SoftmaxHead

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
        self, char_ids: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
    ) -> LMLosses:
        """Losses of one BPTT window.

        char_ids (2, B, T, C): forward inputs [0] and backward inputs [1], each row in its own
        reading order; targets (2, B, T): next (forward) and previous (backward) token ids;
        mask (B, T) bool: real positions, a prefix of every row. Runs the LSTMs with the BiLM's
        ``stateful`` setting. Under `torch.autocast` only the biLM runs in the lower
        precision: the softmax and the loss are computed in the softmax's dtype (float32).
        """
        tokens = self.bilm.encode_tokens(char_ids)  # (2, B, T, P)
        top = self.bilm.run_lstm(tokens, mask.sum(dim=1))[-1]  # (2, B, T, P)
        top = F.dropout(top, self.bilm.config.dropout, self.training)
        hidden = top[:, mask].to(self.softmax.weight.dtype)  # (2, N, P)
        with torch.autocast(hidden.device.type, enabled=False):
            nll = self._nll(hidden.reshape(-1, hidden.shape[-1]), targets[:, mask].reshape(-1))
        nll = nll.view(2, -1)  # (2, N)
        return LMLosses(nll[0].mean(), nll[1].mean())

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

    def _nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """hidden (N, P), targets (N,) -> (N,) losses: sampled in training if so configured."""
        if self.training and self.softmax_mode == "sampled":
            return self.softmax.sampled_loss(hidden, targets, self.num_samples)
        if torch.is_grad_enabled():
            return self.softmax.full_loss(hidden, targets)
        chunk = max(1, EVAL_LOGITS_BUDGET // self.softmax.vocab_size)
        return self.softmax.full_loss(hidden, targets, chunk_size=chunk)
