"""The tied output softmax: exact loss, sampled loss, and the log-uniform sampler."""

import math

import pytest
import torch
import torch.nn.functional as F

from elmo.modules.softmax import (
    SampledCandidates,
    SoftmaxHead,
    expected_count,
    log_uniform_probs,
    sample_log_uniform_unique,
)


def make_head(vocab_size=50, dim=8, seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    head = SoftmaxHead(vocab_size, dim).to(dtype)
    with torch.no_grad():
        head.bias.uniform_(-1, 1)
    return head


def draw(targets, num_samples, generator=None, vocab_size=50):
    return SampledCandidates.draw(targets, vocab_size, num_samples, generator)


def test_shapes_and_init():
    head = SoftmaxHead(100, 16)
    assert head.weight.shape == (100, 16) and head.bias.shape == (100,)
    assert torch.all(head.bias == 0)
    assert abs(head.weight.std().item() - 0.25) < 0.03  # N(0, 1/dim), as bilm-tf


def test_full_loss_is_cross_entropy():
    head = make_head(dtype=torch.float32)
    hidden = torch.randn(13, 8)
    targets = torch.randint(0, 50, (13,))
    want = F.cross_entropy(hidden @ head.weight.T + head.bias, targets, reduction="none")
    torch.testing.assert_close(head.full_loss(hidden, targets), want)
    torch.testing.assert_close(head.full_loss(hidden, targets, chunk_size=4), want)
    assert head.full_loss(hidden, targets).shape == (13,)


def test_log_uniform_probabilities():
    for vocab_size in (1, 2, 50, 793_471):
        p = log_uniform_probs(vocab_size)
        assert p.dtype == torch.float64 and p.shape == (vocab_size,)
        assert abs(p.sum().item() - 1.0) < 1e-9
        assert torch.all(p[1:] <= p[:-1])  # Zipfian: decreasing in the id
    p = log_uniform_probs(50)
    assert p[0].item() == pytest.approx(math.log(2) / math.log(51))


def test_unique_sampler():
    g = torch.Generator().manual_seed(0)
    ids, tries = sample_log_uniform_unique(50, 20, g)
    assert ids.shape == (20,) and ids.dtype == torch.int64
    assert len(set(ids.tolist())) == 20 and 0 <= ids.min() and ids.max() < 50
    assert tries >= 20
    ids2, tries2 = sample_log_uniform_unique(50, 20, torch.Generator().manual_seed(0))
    assert torch.equal(ids, ids2) and tries == tries2  # reproducible with a seeded generator
    all_ids, none = sample_log_uniform_unique(50, 60, g)
    assert torch.equal(all_ids, torch.arange(50)) and none is None
    assert torch.equal(expected_count(all_ids, 50, None), torch.ones(50, dtype=torch.float64))
    with pytest.raises(ValueError):
        sample_log_uniform_unique(50, 0, g)


def test_sampled_equals_full_when_every_class_is_sampled():
    # With num_samples >= V, every class is a candidate with expected count exactly 1, so the
    # correction log(1) = 0 vanishes; the target's duplicate among the candidates is removed
    # as an accidental hit, leaving [true logit, all other logits]: the full softmax.
    head = make_head()
    hidden = torch.randn(17, 8, dtype=torch.float64)
    targets = torch.randint(0, 50, (17,))
    full = head.full_loss(hidden, targets)
    for num_samples in (50, 80):
        sampled = head.sampled_loss(hidden, targets, draw(targets, num_samples))
        torch.testing.assert_close(sampled, full, rtol=0, atol=1e-6)
    head32 = make_head(dtype=torch.float32)
    h32 = hidden.float()
    torch.testing.assert_close(head32.sampled_loss(h32, targets, draw(targets, 50)),
                               head32.full_loss(h32, targets), rtol=0, atol=1e-5)


def test_sampled_loss_matches_the_tensorflow_formula():
    # Recompute one call by hand, with the same candidates (replayed generator state).
    head = make_head()
    hidden = torch.randn(5, 8, dtype=torch.float64)
    g = torch.Generator().manual_seed(7)
    cands, tries = sample_log_uniform_unique(50, 10, torch.Generator().manual_seed(7))
    targets = torch.tensor([int(cands[3]), 0, 1, 30, int(cands[0])])  # two accidental hits
    logits = hidden @ head.weight.T + head.bias  # (5, V)
    q = expected_count(torch.arange(50), 50, tries)  # (V,)
    want = []
    for row, t in enumerate(targets.tolist()):
        true = logits[row, t] - q[t].log()
        others = [logits[row, c] - q[c].log() for c in cands.tolist() if c != t]
        want.append(torch.logsumexp(torch.stack([true, *others]), 0) - true)
    got = head.sampled_loss(hidden, targets, draw(targets, 10, g))
    torch.testing.assert_close(got, torch.stack(want).detach(), rtol=0, atol=1e-10)


def test_sampled_loss_properties_and_gradients():
    head = make_head()
    hidden = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([0, 1, 2, 3, 40, 49])
    loss = head.sampled_loss(hidden, targets, draw(targets, 10, torch.Generator().manual_seed(1)))
    assert loss.shape == (6,) and torch.isfinite(loss).all() and torch.all(loss > 0)
    loss.sum().backward()
    assert torch.isfinite(hidden.grad).all() and torch.isfinite(head.weight.grad).all()
    # only the targets' and the candidates' rows of the weight get a gradient
    assert 6 <= int((head.weight.grad.abs().sum(1) > 0).sum()) <= 16


def test_sampler_draws_follow_the_log_uniform_distribution():
    # With one sample, each call is a single draw from P, whose expected count is P itself.
    # Each class frequency over R draws has standard error sqrt(P(1-P)/R); allow 4.5 of them.
    V, R = 50, 4000
    g = torch.Generator().manual_seed(0)
    counts = torch.zeros(V, dtype=torch.float64)
    for _ in range(R):
        ids, tries = sample_log_uniform_unique(V, 1, g)
        assert tries == 1
        counts[ids] += 1
    p = log_uniform_probs(V)
    torch.testing.assert_close(expected_count(torch.arange(V), V, 1), p)
    se = (p * (1 - p) / R).sqrt()
    assert torch.all((counts / R - p).abs() < 4.5 * se)


def test_sampled_softmax_approximates_full_softmax_in_expectation():
    """Monte-Carlo check of the corrections, V=50, num_samples=20, 2000 draws (fixed seed).

    1. Inclusion: the frequency of each class among the unique samples matches the mean
       expected count 1 - (1-P)^num_tries. Binomial standard error <= 0.5/sqrt(2000) = 0.011;
       4 of them is 0.045, plus 0.015 for the formula's own error (it ignores that num_tries
       depends on the draw; ~0.011 at most, measured over 1e5 draws): tolerance 0.06.
    2. Horvitz-Thompson: sum over candidates of exp(logit - log expected count) estimates the
       full normaliser sum_k exp(logit_k). Tolerance: 4 standard errors of the mean (from the
       draws) plus 3% for the bias of the expected-count approximation of point 1
       (1-2.5% measured with five seeds).
    3. Loss, at a well-chosen check: logits close to the log-uniform prior (as an LM's are:
       Zipfian) and a frequent target (expected count ~1, so its correction is negligible).
       The mean sampled loss then approximates the full loss; the sampled loss is biased
       (log of a ratio estimate; ~0.6% measured over 5000 draws), so allow 3% relative.
    """
    V, S, R = 50, 20, 2000
    g = torch.Generator().manual_seed(123)
    p = log_uniform_probs(V)
    logits = p.log() + 0.5 * torch.randn(V, generator=g, dtype=torch.float64)  # (V,)
    normaliser = logits.exp().sum()
    head = SoftmaxHead(V, V).double()
    with torch.no_grad():  # identity weight: hidden rows are the logits themselves
        head.weight.copy_(torch.eye(V, dtype=torch.float64))
        head.bias.zero_()
    targets = torch.tensor([0, 1])
    hidden = logits.expand(len(targets), V)  # (2, V)

    included = torch.zeros(V, dtype=torch.float64)
    mean_count = torch.zeros(V, dtype=torch.float64)
    ht, losses = [], []
    for _ in range(R):
        replay = torch.Generator()
        replay.set_state(g.get_state())
        ids, tries = sample_log_uniform_unique(V, S, replay)  # the candidates of this call
        with torch.no_grad():
            losses.append(head.sampled_loss(hidden, targets, draw(targets, S, g, V)))
        included[ids] += 1
        mean_count += expected_count(torch.arange(V), V, tries)
        ht.append((logits[ids] - expected_count(ids, V, tries).log()).exp().sum())

    assert torch.all((included / R - mean_count / R).abs() < 0.06)

    ht = torch.stack(ht)
    se = ht.std() / math.sqrt(R)
    assert abs(ht.mean() - normaliser) < 4 * se + 0.03 * normaliser

    mean_loss = torch.stack(losses).mean(0)  # (2,)
    full = head.full_loss(hidden, targets)
    torch.testing.assert_close(mean_loss, full, rtol=0.03, atol=0)


def test_sampled_loss_gradients_equal_cross_entropy_on_the_concatenation():
    """The fused sampled cross-entropy has the values and gradients of F.cross_entropy."""
    from elmo.modules.softmax import _SampledCrossEntropy

    gen = torch.Generator().manual_seed(5)
    inputs = [torch.randn(shape, generator=gen, dtype=torch.float64, requires_grad=True)
              for shape in ((7, 4), (7,), (11, 4), (11,))]  # hidden, true, weight, bias
    hit_row, hit_col = torch.tensor([2, 5]), torch.tensor([3, 0])  # accidental hits
    hits = torch.full((7,), -1).index_put((hit_row,), hit_col)  # each row's hit column or -1
    weights = torch.rand(7, generator=gen, dtype=torch.float64)
    loss = _SampledCrossEntropy.apply(*inputs, hits)
    (loss * weights).sum().backward()
    got = [x.grad.clone() for x in inputs]
    with pytest.raises(RuntimeError, match="one backward pass"):
        loss = _SampledCrossEntropy.apply(*inputs, hits)
        loss.sum().backward(retain_graph=True)
        loss.sum().backward()
    for x in inputs:
        x.grad = None
    hidden, true, weight, bias = inputs
    cand = hidden @ weight.T + bias
    cand = cand.index_put((hit_row, hit_col), torch.tensor(float("-inf"), dtype=cand.dtype))
    logits = torch.cat([true.unsqueeze(1), cand], dim=1)
    reference = torch.nn.functional.cross_entropy(
        logits, torch.zeros(7, dtype=torch.long), reduction="none")
    (reference * weights).sum().backward()
    torch.testing.assert_close(loss, reference)
    for g, x in zip(got, inputs, strict=True):
        torch.testing.assert_close(g, x.grad)
