"""1-nearest-neighbour word sense disambiguation per biLM layer (the paper's Table 5).

A sense's vector is the mean of a layer's vectors of its occurrences in sense-annotated text
(SemCor); a test word takes the sense, among those of its lemma and part of speech seen in
training, whose vector is nearest by cosine. Lemmas never seen back off to WordNet's first
sense. Scored as the WSD evaluation framework's scorer does (Raganato et al. 2017).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from elmo.embedding import Embedder

from .embedding import embed_items
from .wordnet import WordNet, sense_key_pos
from .wsd_data import EvalSet, SenseTarget, WsdSentence, read_framework

FIRST_SENSE = "first-sense"


def embed_targets(
    embedder: Embedder, sentences: Iterable[WsdSentence], desc: str = "embedding",
    progress: bool = True,
) -> Iterator[tuple[SenseTarget, np.ndarray]]:
    """(target, its vectors (L+1, D): the mean of each layer over the target's span), each
    sentence embedded once for all layers."""
    with_targets = (s for s in sentences if s.targets)
    for sentence, layers in embed_items(embedder, with_targets, lambda s: s.tokens, desc,
                                        progress):  # layers (L+1, n, D)
        for target in sentence.targets:
            yield target, layers[:, target.start:target.end].mean(axis=1)


@dataclass
class SenseVectors:
    """Unit-length mean vectors of each sense seen in training, per layer."""

    keys: list[str]
    vectors: np.ndarray  # (L+1, S, D), rows of unit length
    counts: np.ndarray  # (S,) occurrences
    candidates: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)  # (lemma, pos)

    @classmethod
    def from_occurrences(
        cls, occurrences: Iterable[tuple[SenseTarget, np.ndarray]]
    ) -> SenseVectors:
        """Average the occurrences of each sense key; an occurrence with several keys
        counts for each of them."""
        index: dict[str, int] = {}
        sums: list[np.ndarray] = []
        counts: list[int] = []
        for target, vectors in occurrences:
            for key in target.keys:
                if key not in index:
                    index[key] = len(sums)
                    sums.append(np.zeros(vectors.shape, np.float32))
                    counts.append(0)
                sums[index[key]] += vectors
                counts[index[key]] += 1
        if not sums:
            raise ValueError("no sense-annotated occurrences to learn sense vectors from")
        stacked = np.stack(sums, axis=1)  # (L+1, S, D)
        norms = np.linalg.norm(stacked, axis=-1, keepdims=True)
        vectors = (stacked / np.maximum(norms, 1e-12)).astype(np.float32)
        keys = list(index)
        by_lemma: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(keys):
            by_lemma.setdefault((key.split("%", 1)[0].lower(), sense_key_pos(key)), []).append(i)
        candidates = {k: np.array(v) for k, v in by_lemma.items()}
        return cls(keys, vectors, np.array(counts), candidates)

    @property
    def num_layers(self) -> int:
        return self.vectors.shape[0]

    def nearest(self, lemma: str, pos: str, vectors: np.ndarray) -> list[str] | None:
        """The nearest seen sense of (lemma, pos) in each layer, for a word's vectors
        (L+1, D); None if the lemma was never seen in training."""
        candidates = self.candidates.get((lemma, pos))
        if candidates is None:
            return None
        similarity = np.einsum("lsd,ld->ls", self.vectors[:, candidates], vectors)  # (L+1, C)
        return [self.keys[candidates[i]] for i in similarity.argmax(axis=1)]


@dataclass
class WsdScore:
    """The framework scorer's counts: a hit when the answer is one of the gold keys."""

    correct: int = 0
    answered: int = 0
    total: int = 0

    def add(self, answer: str | None, gold: tuple[str, ...]) -> None:
        self.total += 1
        if answer is not None:
            self.answered += 1
            self.correct += answer in gold

    @property
    def f1(self) -> float:
        """F1 of precision (correct / answered) and recall (correct / total), in 0..100."""
        if self.correct == 0:
            return 0.0
        precision, recall = self.correct / self.answered, self.correct / self.total
        return 100 * 2 * precision * recall / (precision + recall)


@dataclass
class WsdResult:
    """F1 per layer ("0", "1", ...) and for the first-sense baseline, per evaluation set."""

    f1: dict[str, dict[str, float]]
    first_sense: dict[str, float]
    instances: dict[str, int]
    backoff: dict[str, float]  # fraction of instances whose lemma was not seen in training
    senses: int  # senses with a vector

    def to_dict(self) -> dict:
        return {"f1": self.f1, FIRST_SENSE: self.first_sense, "instances": self.instances,
                "backoff": self.backoff, "senses": self.senses}


def score_set(
    senses: SenseVectors, wordnet: WordNet, occurrences: Iterable[tuple[SenseTarget, np.ndarray]]
) -> tuple[list[WsdScore], WsdScore, float]:
    """Scores per layer, the first-sense baseline's score, and the back-off fraction."""
    layers = [WsdScore() for _ in range(senses.num_layers)]
    baseline = WsdScore()
    backed_off = 0
    for target, vectors in occurrences:
        first = wordnet.first_sense_key(target.lemma, target.pos)
        answers = senses.nearest(target.lemma, target.pos, vectors)
        if answers is None:
            backed_off += 1
            answers = [first] * senses.num_layers
        for score, answer in zip(layers, answers, strict=True):
            score.add(answer, target.keys)
        baseline.add(first, target.keys)
    return layers, baseline, backed_off / max(baseline.total, 1)


def evaluate_wsd(
    embedder: Embedder,
    train: Iterable[WsdSentence],
    eval_sets: list[EvalSet],
    wordnet: WordNet,
    progress: bool = True,
) -> WsdResult:
    """Sense vectors from `train`, then F1 per layer on each evaluation set."""
    eval_data = {s.name: read_framework(s.data, s.keys) for s in eval_sets}  # fail early
    senses = SenseVectors.from_occurrences(
        embed_targets(embedder, train, "training senses", progress))
    f1: dict[str, dict[str, float]] = {str(k): {} for k in range(senses.num_layers)}
    first_sense, instances, backoff = {}, {}, {}
    for name, sentences in eval_data.items():
        layers, baseline, backoff[name] = score_set(
            senses, wordnet, embed_targets(embedder, sentences, name, progress))
        for k, score in enumerate(layers):
            f1[str(k)][name] = score.f1
        first_sense[name], instances[name] = baseline.f1, baseline.total
    return WsdResult(f1, first_sense, instances, backoff, len(senses.keys))
