"""The biLM output layer: one softmax over the vocabulary, shared by both directions.

Pretraining uses the sampled softmax of TensorFlow's ``tf.nn.sampled_softmax_loss`` with the
log-uniform candidate sampler, as bilm-tf does; evaluation uses the exact softmax. The
log-uniform (Zipfian) proposal assumes word ids sorted by descending frequency, which is how
vocabulary files are written.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass
class SampledCandidates:
    """One draw of the sampled softmax for a batch of targets: the candidates, shared by the
    batch, and the corrections of the candidates and of each target. Fixed shapes: S =
    min(num_samples, V) candidates, one entry per target; nothing depends on the draw's size.
    """

    ids: torch.Tensor  # (S,) int64 candidate classes
    log_q: torch.Tensor  # (S,) float64 log expected count of each candidate
    target_log_q: torch.Tensor  # (*targets.shape) float64 log expected count of each target
    target_hit: torch.Tensor  # (*targets.shape) int64 each target's candidate position, or -1

    @classmethod
    def draw(
        cls, targets: torch.Tensor, vocab_size: int, num_samples: int,
        generator: torch.Generator | None = None,
    ) -> SampledCandidates:
        """Draw ``num_samples`` unique log-uniform candidates (a CPU `generator`, or torch's
        global one) for `targets` (any shape, on the CPU)."""
        ids, num_tries = sample_log_uniform_unique(vocab_size, num_samples, generator)
        position = torch.full((vocab_size,), -1, dtype=torch.int64)
        position[ids] = torch.arange(len(ids))
        return cls(ids, expected_count(ids, vocab_size, num_tries).log(),
                   expected_count(targets, vocab_size, num_tries).log(), position[targets])

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.ids, self.log_q, self.target_log_q, self.target_hit

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> SampledCandidates:
        """The same draw with `fn` applied to every tensor (a copy to a device, pinning)."""
        return SampledCandidates(*(fn(t) for t in self.tensors()))


class _SampledCrossEntropy(torch.autograd.Function):
    """Cross-entropy of the true class against [true, candidates], from the hidden states.

    The same as `F.cross_entropy` on `[true_logits, hidden @ cand_weight.T + cand_bias]` with
    the accidental hits set to -inf and target 0, but the (N, S) candidate logits are the only
    (N, S) buffer: they are exponentiated in place in the forward pass and turned into their
    own gradient in place in the backward pass (so that pass may run only once). The hits are
    masked with fixed shapes (a gather and a scatter of one column per row), so nothing is
    read back to the host.
    """

    @staticmethod
    def forward(
        ctx,
        hidden: torch.Tensor,  # (N, P)
        true_logits: torch.Tensor,  # (N,)
        cand_weight: torch.Tensor,  # (S, P)
        cand_bias: torch.Tensor,  # (S,)
        hit: torch.Tensor,  # (N,) the candidate position of each row's target, -1 if none
    ) -> torch.Tensor:
        logits = torch.addmm(cand_bias, hidden, cand_weight.t())  # (N, S)
        column = hit.clamp(min=0).unsqueeze(1)  # (N, 1)
        hit_logit = torch.where(hit.unsqueeze(1) >= 0, float("-inf"), logits.gather(1, column))
        logits.scatter_(1, column, hit_logit)
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
        return grad_hidden, grad_true, grad_weight, grad_bias, None


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
        self, hidden: torch.Tensor, targets: torch.Tensor, candidates: SampledCandidates
    ) -> torch.Tensor:
        """Sampled-softmax negative log-likelihoods (N,), as ``tf.nn.sampled_softmax_loss``.

        One set of unique log-uniform candidates (`SampledCandidates.draw` for these
        `targets`, on hidden's device) is shared by the batch. The logits of the true and
        sampled classes are lowered by log(expected count); a sampled class equal to a row's
        target gets logit -inf in that row; the loss is the cross-entropy with the true class
        at position 0. With ``num_samples >= V`` every class is a candidate with expected count
        1 and this equals :meth:`full_loss`. Fixed shapes, nothing read back to the host.
        """
        weight, bias = self.rows(targets)
        true_logits = (hidden * weight).sum(-1) + bias  # (N,)
        true_logits = true_logits - candidates.target_log_q.reshape(-1).to(hidden.dtype)
        # The correction is folded into the candidates' bias.
        cand_weight, cand_bias = self.rows(candidates.ids)
        return _SampledCrossEntropy.apply(hidden, true_logits, cand_weight,
                                          cand_bias - candidates.log_q.to(hidden.dtype),
                                          candidates.target_hit.reshape(-1))
