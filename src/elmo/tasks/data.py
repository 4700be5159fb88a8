"""Task examples as tensors: word and label vocabularies, nested samples, batches.

Every example has one sentence (tagging, classification), two (pairs) or a passage and a
question (spans). The feature cache holds the sentences of a list of examples example-major,
each once: a token list that several examples share (a passage with many questions) is listed
at its first use only (`sentence_layout`). A batch of B examples stacks its sentences k-major
into K*B rows (all first sentences, then all second ones), the layout `elmo.tasks.pair` and
`elmo.tasks.span` expect.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from elmo.errors import InputFileError
from elmo.modules.bilm import BiLM
from elmo.tasks.encoder import PAD, UNK
from elmo.tasks.metrics import span_types
from elmo.tasks.readers import TaggedSentence

SPECIAL_WORDS = ("<pad>", "<unk>")


def sentences_of(example) -> list[list[str]]:
    """The token lists of an example (one, two, or a passage and a question)."""
    return example.sentences


def sentence_layout(examples: Sequence) -> tuple[list[list[str]], list[list[int]]]:
    """(the sentences of `examples` in the feature cache's order, each example's sentence
    numbers in it): example-major, a token list shared by several examples listed once."""
    first: dict[int, int] = {}  # id of a token list -> its number
    sentences: list[list[str]] = []
    numbers = []
    for example in examples:
        row = []
        for tokens in sentences_of(example):
            if id(tokens) not in first:
                first[id(tokens)] = len(sentences)
                sentences.append(tokens)
            row.append(first[id(tokens)])
        numbers.append(row)
    return sentences, numbers


def flat_sentences(examples: Sequence) -> list[list[str]]:
    """The sentences of `examples` in the feature cache's order."""
    return sentence_layout(examples)[0]


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


def held_out_split(n: int, fraction: float, groups: Sequence[Hashable] | None = None
                   ) -> tuple[list[int], list[int]]:
    """(kept, held out) indices of n examples, round(fraction * n) held out, the same for
    every run (a fixed permutation): a dev set for a data set that has none.

    `groups` (a key per example) keeps examples that share a key on one side: whole groups
    are held out, in a fixed permutation of the groups, until round(fraction * n) examples
    are (no groups: each example is a group of its own)."""
    if not 0 < fraction < 1:
        raise ValueError(f"--dev-fraction must be in (0, 1), got {fraction}")
    members: dict[Hashable, list[int]] = {}
    for i, key in enumerate(range(n) if groups is None else groups):
        members.setdefault(key, []).append(i)
    units = list(members.values())
    wanted, held = max(1, round(fraction * n)), []
    for unit in np.random.default_rng(0).permutation(len(units)).tolist():
        if len(held) >= wanted:
            break
        held += units[unit]
    if len(held) >= n:
        together = "" if groups is None else f" (in {len(units)} group(s) held out whole)"
        raise ValueError(f"--dev-fraction {fraction} of {n} examples{together} leaves none "
                         "to train on")
    kept = set(range(n)) - set(held)
    return sorted(kept), sorted(held)


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
                  "errors", stacklevel=3)  # the recipe's line (via its TaskType): a
    # warning shows once per line, and training and evaluating warn from different lines


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
                      "--format", stacklevel=3)  # the recipe's line (via its TaskType)


@dataclass
class Batch:
    """K*B sentences of B examples, k-major, plus their targets."""

    indices: list[int]  # the B examples
    sentence_ids: list[int]  # the K*B sentences (feature-cache numbering)
    word_ids: torch.Tensor  # (K*B, T)
    mask: torch.Tensor  # (K*B, T) bool
    targets: torch.Tensor | None  # (B, T) tags, (B,) labels, (B, 2) spans; None: unlabeled
    tokens: list[list[str]]  # the K*B sentences' tokens (for character ids)
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # the task type's own
    # model inputs by keyword (SRL: "predicate", (B, T); coreference: "speakers", (B, N),
    # "genre", (B,))

    def char_ids(self, bilm: BiLM) -> torch.Tensor:  # (K*B, T, C)
        return bilm.batch_to_ids(self.tokens)


def stack_targets(targets: Sequence[torch.Tensor]) -> torch.Tensor:
    """Per-example targets as one tensor: stacked when their shapes agree, else (tags of
    sentences of different lengths) padded with 0 to the longest."""
    if all(t.shape == targets[0].shape for t in targets):
        return torch.stack(list(targets))
    return pad_sequence(list(targets), batch_first=True)


class Encoded:
    """Examples with word ids and targets, cut into batches."""

    def __init__(self, examples: Sequence, vocab: Sequence[str],
                 targets: Sequence[torch.Tensor] | None = None,
                 subset: Sequence[int] | None = None,
                 inputs: Sequence[dict[str, torch.Tensor]] | None = None) -> None:
        """`examples`: the list the feature cache was built from; `targets`: one tensor per
        example (None: unlabeled); `subset`: the examples to batch (default: all); batch
        indices count in it; `inputs`: the task type's model inputs of each example."""
        self.sentences, numbers = sentence_layout(examples)
        self.subset = list(subset) if subset is not None else list(range(len(examples)))
        self.sentence_numbers = [numbers[i] for i in self.subset]
        self.targets = [targets[i] for i in self.subset] if targets is not None else None
        self.inputs = [inputs[i] for i in self.subset] if inputs is not None else None
        word_index = {w: i for i, w in enumerate(vocab)}
        self.word_ids = [[word_index.get(w, UNK) for w in s] for s in self.sentences]

    def __len__(self) -> int:
        return len(self.subset)

    def batch(self, indices: Sequence[int]) -> Batch:
        k = len(self.sentence_numbers[indices[0]])
        rows = [self.sentence_numbers[i][j] for j in range(k) for i in indices]
        lengths = torch.tensor([len(self.word_ids[r]) for r in rows])
        mask = torch.arange(int(lengths.max())).unsqueeze(0) < lengths.unsqueeze(1)  # (KB, T)
        word_ids = torch.full(mask.shape, PAD, dtype=torch.long)
        word_ids[mask] = torch.tensor([w for r in rows for w in self.word_ids[r]])
        targets = None
        if self.targets is not None:
            targets = stack_targets([self.targets[i] for i in indices])
        tokens = [self.sentences[r] for r in rows]
        inputs = {}
        if self.inputs is not None:
            inputs = {key: stack_targets([self.inputs[i][key] for i in indices])
                      for key in self.inputs[indices[0]]}
        return Batch(list(indices), rows, word_ids, mask, targets, tokens, inputs)

    def batches(self, batch_size: int, shuffle_seed: int | None = None) -> list[list[int]]:
        """Index lists of at most `batch_size` examples: shuffled with `shuffle_seed`, else
        sorted by the length of their first sentence (fewer padded positions when
        evaluating)."""
        if shuffle_seed is not None:
            order = np.random.default_rng(shuffle_seed).permutation(len(self)).tolist()
        else:
            order = sorted(range(len(self)),
                           key=lambda i: len(self.word_ids[self.sentence_numbers[i][0]]))
        return [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
