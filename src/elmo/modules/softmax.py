"""The biLM output layer: one softmax over the vocabulary, shared by both directions.

Pretraining uses the sampled softmax of TensorFlow's ``tf.nn.sampled_softmax_loss`` with the
log-uniform candidate sampler, as bilm-tf does; evaluation uses the exact softmax. The
log-uniform (Zipfian) proposal assumes word ids sorted by descending frequency, which is how
vocabulary files are written.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def log_uniform_probs(vocab_size: int) -> torch.Tensor:
    """P(k) = (log(k+2) - log(k+1)) / log(V+1) for k in [0, V); (V,) float64, sums to 1."""
    return _log_uniform_prob(torch.arange(vocab_size), vocab_size)


def _log_uniform_prob(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return torch.log1p(1.0 / (ids.double() + 1.0)) / math.log(vocab_size + 1)


def sample_log_uniform_unique(
    vocab_size: int, num_samples: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, int | None]:
    """Draw ``num_samples`` distinct ids from the log-uniform distribution.

    As TensorFlow's unique sampler: draw i.i.d. until ``num_samples`` distinct ids were seen.
    Returns the ids (S,) int64 in order of first appearance and ``num_tries``, the number of
    draws that took. If ``num_samples >= vocab_size`` every id is taken (``arange(V)``) and
    ``num_tries`` is None: each class is then included with probability 1. ``generator``
    must be a CPU generator.
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    if num_samples >= vocab_size:
        return torch.arange(vocab_size), None
    log_range = math.log(vocab_size + 1)
    drawn = torch.empty(0, dtype=torch.int64)
    chunk = num_samples + 64
    while True:
        u = torch.rand(chunk, generator=generator, dtype=torch.float64)
        ids = (torch.exp(u * log_range).floor().long() - 1).clamp_(0, vocab_size - 1)
        drawn = torch.cat([drawn, ids])
        _, first = np.unique(drawn.numpy(), return_index=True)
        if len(first) >= num_samples:
            first.sort()
            first = first[:num_samples]  # where each of the first S distinct ids appeared
            return drawn[torch.from_numpy(first)], int(first[-1]) + 1
        chunk = len(drawn)  # rare classes are slow to collect: double the draws


def expected_count(ids: torch.Tensor, vocab_size: int, num_tries: int | None) -> torch.Tensor:
    """Probability that each id is among the unique samples: 1 - (1 - P(k))^num_tries.

    ``num_tries=None`` means every class was taken, so the count is exactly 1. (TensorFlow
    uses ``P(k) * num_samples`` when no draw repeated; we always use the inclusion
    probability.) Returns float64 with the shape and device of ``ids``.
    """
    if num_tries is None:
        return torch.ones(ids.shape, dtype=torch.float64, device=ids.device)
    p = _log_uniform_prob(ids, vocab_size)
    return -torch.expm1(num_tries * torch.log1p(-p))


class _TrueClassCrossEntropy(torch.autograd.Function):
    """Cross-entropy of the true class against [true, candidates]: lse - true.

    The same as `F.cross_entropy` on the concatenated logits, without making the (N, 1 + S)
    concatenation and log-softmax: the backward writes the candidates' gradient,
    softmax * grad, into one new (N, S) buffer in place.
    """

    @staticmethod
    def forward(ctx, true_logits: torch.Tensor, cand_logits: torch.Tensor) -> torch.Tensor:
        # true_logits (N,), cand_logits (N, S) -> losses (N,)
        lse = torch.logaddexp(true_logits, torch.logsumexp(cand_logits, dim=1))  # (N,)
        ctx.save_for_backward(true_logits, cand_logits, lse)
        return lse - true_logits

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        true_logits, cand_logits, lse = ctx.saved_tensors
        grad_cand = (cand_logits - lse.unsqueeze(1)).exp_().mul_(grad.unsqueeze(1))  # (N, S)
        grad_true = grad * torch.expm1(true_logits - lse)  # softmax(true) - 1
        return grad_true, grad_cand


class SoftmaxHead(nn.Module):
    """Output layer ``logits = hidden @ weight.T + bias`` with full and sampled losses."""

    def __init__(self, vocab_size: int, dim: int) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.dim = dim
        self.weight = nn.Parameter(torch.empty(vocab_size, dim))  # (V, P)
        self.bias = nn.Parameter(torch.empty(vocab_size))  # (V,)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """bilm-tf's initialisation: weight ~ N(0, 1/dim), bias 0."""
        nn.init.normal_(self.weight, mean=0.0, std=1.0 / math.sqrt(self.dim))
        nn.init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, dim={self.dim}"

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(N, P) -> (N, V) unnormalised scores over the whole vocabulary."""
        return F.linear(hidden, self.weight, self.bias)

    def full_loss(
        self, hidden: torch.Tensor, targets: torch.Tensor, chunk_size: int | None = None
    ) -> torch.Tensor:
        """Exact negative log-likelihoods (N,) of ``targets`` (N,) given ``hidden`` (N, P).

        ``chunk_size`` rows at a time bounds the (chunk, V) logits kept in memory when no
        gradient is needed (evaluation over a large vocabulary).
        """
        if chunk_size is None or chunk_size >= len(hidden):
            return F.cross_entropy(self.logits(hidden), targets, reduction="none")
        return torch.cat(
            [
                F.cross_entropy(self.logits(h), t, reduction="none")
                for h, t in zip(hidden.split(chunk_size), targets.split(chunk_size), strict=True)
            ]
        )

    def sampled_loss(
        self,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        num_samples: int,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Sampled-softmax negative log-likelihoods (N,), as ``tf.nn.sampled_softmax_loss``.

        One set of ``num_samples`` unique log-uniform candidates is shared by the batch. The
        logits of the true and sampled classes are lowered by log(expected count); a sampled
        class equal to a row's target gets logit -inf in that row; the loss is the
        cross-entropy with the true class at position 0. With ``num_samples >= V`` every
        class is a candidate with expected count 1 and this equals :meth:`full_loss`.
        """
        cands, num_tries = sample_log_uniform_unique(self.vocab_size, num_samples, generator)
        cands = cands.to(hidden.device)  # (S,)
        log_q_true = expected_count(targets, self.vocab_size, num_tries).log().to(hidden.dtype)
        log_q_cand = expected_count(cands, self.vocab_size, num_tries).log().to(hidden.dtype)
        true_logits = (hidden * self.weight[targets]).sum(-1) + self.bias[targets]  # (N,)
        true_logits = true_logits - log_q_true
        # The correction is folded into the bias, so the (N, S) logits are made only once.
        cand_logits = F.linear(hidden, self.weight[cands], self.bias[cands] - log_q_cand)
        # Accidental hits (a row's target among the candidates), marked in place; sparse.
        position = torch.full((self.vocab_size,), -1, dtype=torch.long, device=hidden.device)
        position[cands] = torch.arange(len(cands), device=hidden.device)
        hit_col = position[targets]  # (N,) -1 where the target was not sampled
        hit_row = (hit_col >= 0).nonzero().squeeze(1)
        cand_logits[hit_row, hit_col[hit_row]] = float("-inf")
        return _TrueClassCrossEntropy.apply(true_logits, cand_logits)
