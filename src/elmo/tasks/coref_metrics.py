"""Coreference metrics as the CoNLL-2012 reference scorer (`scorer.pl` v8.01) computes them:
MUC, B-cubed and CEAF-phi4 (entity-based CEAF), each a recall and a precision summed over
documents (numerators and denominators apart), and the CoNLL F1, the mean of the three F1s.

A document's clusters are lists of mentions (any hashable: (start, end) token spans here);
the scorer's conventions hold: every mention of the key counts, singletons included; a
response mention outside the key counts against precision only; a mention repeated in the
response is kept where it first occurs (the scorer does so for mentions of the key).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from elmo.extras import import_extra

Clusters = Sequence[Sequence[Hashable]]
COREF_METRICS = ("muc", "bcub", "ceafe")  # the three the CoNLL F1 averages


@dataclass
class Tally:
    """One metric's recall and precision as numerators and denominators."""

    recall_num: float = 0.0
    recall_den: float = 0.0
    precision_num: float = 0.0
    precision_den: float = 0.0

    def add(self, recall_num: float, recall_den: float, precision_num: float,
            precision_den: float) -> None:
        self.recall_num += recall_num
        self.recall_den += recall_den
        self.precision_num += precision_num
        self.precision_den += precision_den

    @property
    def recall(self) -> float:
        return self.recall_num / self.recall_den if self.recall_den else 0.0

    @property
    def precision(self) -> float:
        return self.precision_num / self.precision_den if self.precision_den else 0.0

    @property
    def f1(self) -> float:
        r, p = self.recall, self.precision
        return 2 * r * p / (r + p) if r + p else 0.0


def _deduplicated(clusters: Clusters) -> list[list[Hashable]]:
    """Each mention where it first occurs; clusters left empty dropped."""
    seen: set[Hashable] = set()
    out = []
    for cluster in clusters:
        kept = [m for m in cluster if not (m in seen or seen.add(m))]
        if kept:
            out.append(kept)
    return out


def overlaps(key: Clusters, response: Clusters) -> np.ndarray:
    """|K_i & R_j| for every key cluster i and response cluster j: (n_key, n_response)."""
    cluster_of = {m: i for i, cluster in enumerate(key) for m in cluster}
    counts = np.zeros((len(key), len(response)))
    for j, cluster in enumerate(response):
        for m in cluster:
            if m in cluster_of:
                counts[cluster_of[m], j] += 1
    return counts


def _muc(common: np.ndarray, key_sizes: np.ndarray, response_sizes: np.ndarray) -> tuple:
    """Links: each response cluster links |R & K| - 1 mentions of every key cluster it meets."""
    correct = (common[common > 0] - 1).sum()
    return correct, (key_sizes - 1).sum(), correct, (response_sizes - 1).sum()


def _bcub(common: np.ndarray, key_sizes: np.ndarray, response_sizes: np.ndarray) -> tuple:
    """Per mention: |R & K|/|K| (recall) and |R & K|/|R| (precision), over all mentions."""
    squared = common ** 2
    return ((squared / key_sizes[:, None]).sum(), key_sizes.sum(),
            (squared / response_sizes[None, :]).sum(), response_sizes.sum())


def _ceafe(common: np.ndarray, key_sizes: np.ndarray, response_sizes: np.ndarray) -> tuple:
    """phi4(K, R) = 2 |K & R| / (|K| + |R|) summed over the best one-to-one alignment of
    clusters (Kuhn-Munkres), over the number of key (recall) or response (precision)
    clusters."""
    assign = import_extra("scipy.optimize", "CEAF").linear_sum_assignment
    phi = 2 * common / (key_sizes[:, None] + response_sizes[None, :])
    rows, cols = assign(phi, maximize=True)
    similarity = phi[rows, cols].sum()
    return similarity, len(key_sizes), similarity, len(response_sizes)


SCORERS = {"muc": _muc, "bcub": _bcub, "ceafe": _ceafe}


def coref_tallies(documents: Iterable[tuple[Clusters, Clusters]]) -> dict[str, Tally]:
    """Each metric's tally over (key clusters, response clusters) of every document."""
    tallies = {name: Tally() for name in COREF_METRICS}
    for key, response in documents:
        key, response = _deduplicated(key), _deduplicated(response)
        common = overlaps(key, response)
        key_sizes = np.array([len(c) for c in key], dtype=float)
        response_sizes = np.array([len(c) for c in response], dtype=float)
        for name in COREF_METRICS:
            tallies[name].add(*SCORERS[name](common, key_sizes, response_sizes))
    return tallies


def coref_scores(documents: Iterable[tuple[Clusters, Clusters]]) -> dict[str, float]:
    """{"score": the CoNLL F1, "muc", "bcub", "ceafe": each metric's F1}, in 0..100."""
    tallies = coref_tallies(documents)
    f1 = {name: 100.0 * tally.f1 for name, tally in tallies.items()}
    return {"score": sum(f1.values()) / len(f1), **f1}
