"""Task examples as tensors: word and label vocabularies, nested samples, batches.

Every example has one sentence (tagging, classification) or two (pairs), so its sentences
are numbered example-major: example i's k-th sentence is sentence `i * per_example + k`, the
order in which they are given to the feature cache. A batch of B examples stacks its
sentences k-major into K*B rows (all first sentences, then all second ones), the layout
`elmo.tasks.pair` expects.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from elmo.chars import batch_to_ids
from elmo.errors import InputFileError
from elmo.tasks.encoder import PAD, UNK
from elmo.tasks.metrics import span_types
from elmo.tasks.readers import LabeledPair, TaggedSentence

SPECIAL_WORDS = ("<pad>", "<unk>")


def sentences_of(example) -> list[list[str]]:
    """The one or two token lists of an example."""
    if isinstance(example, LabeledPair):
        return [example.tokens_a, example.tokens_b]
    return [example.tokens]


def flat_sentences(examples: Sequence) -> list[list[str]]:
    """All sentences of `examples`, example-major (the feature cache's order)."""
    return [s for e in examples for s in sentences_of(e)]


def targets_of(example) -> list[str]:
    """The gold tags of a sentence, or the one label of a sentence or pair."""
    return list(example.tags) if isinstance(example, TaggedSentence) else [example.label]


def nested_sample(n: int, fraction: float, seed: int) -> list[int]:
    """round(fraction * n) (at least 1) indices of n: a prefix of one seeded permutation, so
    for a fixed seed a smaller fraction's sample lies inside every larger one's."""
    if not 0 < fraction <= 1:
        raise ValueError(f"--train-fraction must be in (0, 1], got {fraction}")
    order = np.random.default_rng(seed).permutation(n)
    return sorted(order[: max(1, round(fraction * n))].tolist())


def held_out_split(n: int, fraction: float) -> tuple[list[int], list[int]]:
    """(kept, held out) indices of n examples, round(fraction * n) held out, the same for
    every run (a fixed permutation): a dev set for a data set that has none."""
    if not 0 < fraction < 1:
        raise ValueError(f"--dev-fraction must be in (0, 1), got {fraction}")
    order = np.random.default_rng(0).permutation(n)
    held = max(1, round(fraction * n))
    if held >= n:
        raise ValueError(f"--dev-fraction {fraction} of {n} examples leaves none to train on")
    return sorted(order[held:].tolist()), sorted(order[:held].tolist())


def build_vocab(examples: Sequence) -> list[str]:
    """The special words, then every word of `examples` in order of first appearance."""
    words = dict.fromkeys(SPECIAL_WORDS)
    for sentence in flat_sentences(examples):
        words.update(dict.fromkeys(sentence))
    return list(words)


def build_labels(examples: Sequence) -> list[str]:
    """The sorted tags or labels of the training examples."""
    return sorted({t for e in examples for t in targets_of(e)})


def require_targets(examples: Sequence, path: str | Path) -> None:
    """Every example must have its gold tags or label (training and scoring need them)."""
    for example in examples:
        targets = targets_of(example)
        if not targets or "" in targets:
            what = "tag column" if isinstance(example, TaggedSentence) else "label"
            raise InputFileError(f"{path}, line {example.line}: no {what}; training and "
                                 "evaluation need gold tags or labels (check the format "
                                 "options)")


def unseen_targets(examples: Sequence, labels: Sequence[str], scheme: str | None = None
                   ) -> Counter[str]:
    """The gold labels (tags; with a span `scheme`, span types) of `examples` that the training
    labels lack, and how many gold items (labels, tags, spans) each covers."""
    if scheme is None:
        known = set(labels)
        return Counter(t for e in examples for t in targets_of(e) if t not in known)
    known = {t[2:] for t in labels if t != "O"}
    return Counter(t for e in examples for t in span_types(e.tags, scheme) if t not in known)


def warn_unseen(examples: Sequence, labels: Sequence[str], path: str | Path,
                train_path: str | Path, scheme: str | None = None) -> None:
    """One warning naming the gold labels of `examples` that never occur in the training
    file, with how many gold items each covers: the model cannot predict them, so they count
    as errors (every example is still scored)."""
    unseen = unseen_targets(examples, labels, scheme)
    if not unseen:
        return
    tagging = isinstance(examples[0], TaggedSentence)
    kind, unit = ("span type", "span") if scheme else ("tag", "tag") if tagging else \
        ("label", "label")
    one = len(unseen) == 1
    items = ", ".join(f"{k!r} ({n} gold {unit}{'s' * (n != 1)})"
                      for k, n in sorted(unseen.items()))
    warnings.warn(f"{path}: {kind}{'' if one else 's'} {items} never occur{'s' * one} in the "
                  f"training file {train_path}; the model cannot predict "
                  f"{'it' if one else 'them'}, so {'it counts' if one else 'they count'} as "
                  "errors", stacklevel=2)


def warn_label_like_text(examples: Sequence, labels: Sequence[str], path: str | Path,
                         format: str) -> None:
    """Warn when most labels occur once among many: the labels are likely words of text (a
    file in another format, or the wrong label column)."""
    counts = Counter(targets_of(e)[0] for e in examples)
    once = sum(1 for n in counts.values() if n == 1)
    if len(labels) > 20 and once > len(labels) / 2:
        warnings.warn(f"{path}: {len(labels)} distinct labels, {once} of them on one line "
                      f"only: is this file in --format {format}? (label-text: 'LABEL "
                      "sentence' per line; tsv: --label-column names the label); check "
                      "--format", stacklevel=2)


@dataclass
class Batch:
    """K*B sentences of B examples, k-major, plus their targets."""

    indices: list[int]  # the B examples
    sentence_ids: list[int]  # the K*B sentences (feature-cache numbering)
    word_ids: torch.Tensor  # (K*B, T)
    mask: torch.Tensor  # (K*B, T) bool
    targets: torch.Tensor  # (B, T) tags or (B,) labels
    tokens: list[list[str]]  # the K*B sentences' tokens (for character ids)

    def char_ids(self) -> torch.Tensor:  # (K*B, T, 50)
        return batch_to_ids(self.tokens)


class Encoded:
    """Examples with word and label ids, cut into batches."""

    def __init__(self, examples: Sequence, vocab: Sequence[str], labels: Sequence[str],
                 with_targets: bool = True, positions: Sequence[int] | None = None) -> None:
        """`positions`: each example's index in the list the feature cache was built from
        (default: its own index)."""
        self.examples = list(examples)
        self.positions = list(positions) if positions is not None else range(len(examples))
        self.per_example = len(sentences_of(self.examples[0]))
        self.tagging = isinstance(self.examples[0], TaggedSentence)
        self.sentences = flat_sentences(self.examples)
        word_index = {w: i for i, w in enumerate(vocab)}
        label_index = {label: i for i, label in enumerate(labels)}
        self.word_ids = [[word_index.get(w, UNK) for w in s] for s in self.sentences]
        self.targets = [[label_index[t] for t in targets_of(e)] if with_targets else []
                        for e in self.examples]

    def __len__(self) -> int:
        return len(self.examples)

    def batch(self, indices: Sequence[int]) -> Batch:
        k = self.per_example
        rows = [i * k + j for j in range(k) for i in indices]  # into self.sentences
        lengths = torch.tensor([len(self.word_ids[r]) for r in rows])
        mask = torch.arange(int(lengths.max())).unsqueeze(0) < lengths.unsqueeze(1)  # (KB, T)
        word_ids = torch.full(mask.shape, PAD, dtype=torch.long)
        word_ids[mask] = torch.tensor([w for r in rows for w in self.word_ids[r]])
        if self.tagging:  # (B, T), 0 where padded or when there are no targets
            targets = torch.zeros(mask.shape, dtype=torch.long)
            for row, i in enumerate(indices):
                targets[row, : len(self.targets[i])] = torch.tensor(self.targets[i])
        else:  # (B,)
            targets = torch.tensor([(self.targets[i] or [0])[0] for i in indices])
        sentence_ids = [self.positions[i] * k + j for j in range(k) for i in indices]
        tokens = [self.sentences[r] for r in rows]
        return Batch(list(indices), sentence_ids, word_ids, mask, targets, tokens)

    def batches(self, batch_size: int, shuffle_seed: int | None = None) -> list[list[int]]:
        """Index lists of at most `batch_size` examples: shuffled with `shuffle_seed`, else
        sorted by length (fewer padded positions when evaluating)."""
        if shuffle_seed is not None:
            order = np.random.default_rng(shuffle_seed).permutation(len(self)).tolist()
        else:
            k = self.per_example
            order = sorted(range(len(self)), key=lambda i: len(self.word_ids[i * k]))
        return [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
