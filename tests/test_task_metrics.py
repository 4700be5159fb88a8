"""Span F1 in each tagging scheme, accuracy, and the CRF against brute force."""

from __future__ import annotations

import itertools

import pytest
import torch

from elmo.tasks.metrics import accuracy, iob1_to_iob2, span_f1


def test_iob1_to_iob2():
    assert iob1_to_iob2(["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]) == \
        ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]


def test_span_f1_iob1_counts_spans_not_tokens():
    gold = [["I-PER", "I-PER", "B-PER", "O", "I-LOC"]]  # PER, PER, LOC
    assert span_f1(gold, gold, "iob1") == pytest.approx(100.0)
    merged = [["I-PER", "I-PER", "I-PER", "O", "I-LOC"]]  # one PER span of 3, LOC
    # predicted 2 spans, 1 right (LOC); gold 3: P = 1/2, R = 1/3, F1 = 0.4
    assert span_f1(gold, merged, "iob1") == pytest.approx(40.0)


def test_span_f1_iob2_and_bioes():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    assert span_f1(gold, [["B-PER", "I-PER", "O", "O"]], "iob2") == pytest.approx(100 * 2 / 3)
    bioes = [["B-PER", "E-PER", "O", "S-LOC"]]
    assert span_f1(bioes, bioes, "bioes") == pytest.approx(100.0)
    # the span is not closed by E-: invalid in BIOES, so not counted
    assert span_f1(bioes, [["B-PER", "I-PER", "O", "S-LOC"]], "bioes") == \
        pytest.approx(100 * 2 / 3)


def test_accuracy_flat_and_nested():
    assert accuracy(["a", "b", "c", "d"], ["a", "b", "x", "d"]) == pytest.approx(75.0)
    assert accuracy([["A", "B"], ["C"]], [["A", "X"], ["C"]]) == pytest.approx(200 / 3)
    with pytest.raises(ValueError, match="2 gold items but 1"):
        accuracy(["a", "b"], ["a"])


def brute_force(emissions, transitions, start, end, length):
    """log Z and the best path over all tag sequences of `length` (one sentence)."""
    num_tags = emissions.shape[-1]
    scores = {}
    for path in itertools.product(range(num_tags), repeat=length):
        s = start[path[0]] + end[path[-1]] + sum(emissions[i, t] for i, t in enumerate(path))
        s = s + sum(transitions[a, b] for a, b in itertools.pairwise(path))
        scores[path] = s
    log_z = torch.logsumexp(torch.stack(list(scores.values())), 0)
    return log_z, scores, max(scores, key=lambda p: scores[p].item())


def test_crf_log_likelihood_and_viterbi_against_brute_force():
    from elmo.tasks.tagger import make_crf

    torch.manual_seed(0)
    num_tags, lengths = 3, [4, 2, 1]
    crf = make_crf(num_tags)
    with torch.no_grad():
        for p in (crf.transitions, crf.start_transitions, crf.end_transitions):
            p.normal_()
    emissions = torch.randn(len(lengths), max(lengths), num_tags)
    mask = torch.tensor([[i < n for i in range(max(lengths))] for n in lengths])
    tags = torch.randint(num_tags, (len(lengths), max(lengths)))
    log_likelihood = crf(emissions, tags, mask=mask, reduction="none")
    best = crf.decode(emissions, mask=mask)
    for b, n in enumerate(lengths):
        log_z, scores, path = brute_force(emissions[b], crf.transitions,
                                          crf.start_transitions, crf.end_transitions, n)
        gold = tuple(tags[b, :n].tolist())
        assert log_likelihood[b].item() == pytest.approx((scores[gold] - log_z).item(), abs=1e-5)
        assert tuple(best[b]) == path
