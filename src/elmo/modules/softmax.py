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


class _SampledCrossEntropy(torch.autograd.Function):
    """Cross-entropy of the true class against [true, candidates], from the hidden states.

    The same as `F.cross_entropy` on `[true_logits, hidden @ cand_weight.T + cand_bias]` with
    the accidental hits set to -inf and target 0, but the (N, S) candidate logits are the only
    (N, S) buffer: they are exponentiated in place in the forward pass and turned into their
    own gradient in place in the backward pass (so that pass may run only once).
    """

    @staticmethod
    def forward(
        ctx,
        hidden: torch.Tensor,  # (N, P)
        true_logits: torch.Tensor,  # (N,)
        cand_weight: torch.Tensor,  # (S, P)
        cand_bias: torch.Tensor,  # (S,)
        hit_row: torch.Tensor,  # (H,) rows whose target is among the candidates
        hit_col: torch.Tensor,  # (H,) and its candidate position
    ) -> torch.Tensor:
        logits = torch.addmm(cand_bias, hidden, cand_weight.t())  # (N, S)
        logits[hit_row, hit_col] = float("-inf")
        top = torch.maximum(logits.amax(dim=1), true_logits)  # (N,)
        exp = logits.sub_(top.unsqueeze(1)).exp_()  # (N, S) exp(logit - top)
        total = exp.sum(dim=1) + torch.exp(true_logits - top)  # (N,)
        lse = top + total.log()
        ctx.save_for_backward(hidden, cand_weight, exp, total, true_logits, lse)
        ctx.spent = False
        return lse - true_logits

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        if ctx.spent:
            raise RuntimeError("the sampled softmax loss supports one backward pass")
        ctx.spent = True
        hidden, cand_weight, exp, total, true_logits, lse = ctx.saved_tensors
        grad_logits = exp.mul_((grad / total).unsqueeze(1))  # softmax * grad, (N, S)
        grad_hidden = grad_logits @ cand_weight if ctx.needs_input_grad[0] else None
        grad_true = grad * torch.expm1(true_logits - lse)  # (softmax(true) - 1) * grad
        grad_weight = grad_logits.t() @ hidden if ctx.needs_input_grad[2] else None
        grad_bias = grad_logits.sum(dim=0) if ctx.needs_input_grad[3] else None
        return grad_hidden, grad_true, grad_weight, grad_bias, None, None


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

    def rows(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The weight rows (N, P) and biases (N,) of class ``ids`` (N,).

        Looked up with `index_select`, whose CPU backward (`index_add_`) adds repeated ids in
        a fixed order; the backward of ``weight[ids]`` uses atomic adds there, which differ
        from run to run with 2 or more threads.
        """
        return self.weight.index_select(0, ids), self.bias.index_select(0, ids)

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
        weight, bias = self.rows(targets)
        true_logits = (hidden * weight).sum(-1) + bias  # (N,)
        true_logits = true_logits - log_q_true
        # Accidental hits (a row's target among the candidates) get logit -inf; sparse.
        position = torch.full((self.vocab_size,), -1, dtype=torch.long, device=hidden.device)
        position[cands] = torch.arange(len(cands), device=hidden.device)
        hit_col = position[targets]  # (N,) -1 where the target was not sampled
        hit_row = (hit_col >= 0).nonzero().squeeze(1)
        # The correction is folded into the candidates' bias.
        cand_weight, cand_bias = self.rows(cands)
        return _SampledCrossEntropy.apply(hidden, true_logits, cand_weight,
                                          cand_bias - log_q_cand, hit_row, hit_col[hit_row])
