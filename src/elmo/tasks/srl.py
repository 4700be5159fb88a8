"""Semantic role labelling (He et al. 2017, the paper's SRL model, at a depth a CPU trains):
one instance per gold predicate, a predicate-indicator embedding beside each word's
representation (and ELMo), a deep BiLSTM, a softmax over BIO tags of PropBank roles per
token, and Viterbi decoding constrained to valid BIO (`I-X` only after `B-X` or `I-X`).

Read from CoNLL-2012 files (`--format conll2012`, `elmo.tasks.srl_data`), scored by the
CoNLL-2005 evaluation's F1 (`elmo.tasks.srl_eval`), predictions written in the CoNLL-2005 props
layout.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import nn

from elmo.errors import InputFileError
from elmo.tasks.data import warn_unseen
from elmo.tasks.encoder import EncoderConfig, WordEncoder
from elmo.tasks.srl_data import SrlInstance, tags_to_spans, write_props
from elmo.tasks.srl_eval import srl_scores
from elmo.tasks.task_type import TaskType


@dataclass
class SrlConfig(EncoderConfig):
    num_layers: int = 2  # He et al. 2017: 8 with highway connections (see docs/tasks.md)
    num_labels: int = 2  # BIO tags
    predicate_dim: int = 100  # the predicate indicator's embedding


class SrlTagger(nn.Module):
    """BIO tag scores per token for one predicate of a sentence."""

    def __init__(self, config: SrlConfig) -> None:
        super().__init__()
        self.config = config
        self.predicate = nn.Embedding(2, config.predicate_dim)  # 0: another word, 1: it
        self.encoder = WordEncoder(config, extra_dim=config.predicate_dim)
        self.project = nn.Linear(config.output_dim, config.num_labels)

    def forward(self, word_ids, mask, elmo_input=None, elmo_output=None, predicate=None
                ) -> torch.Tensor:
        """(B, T) ids, mask and predicate indicator, ELMo (B, T, D) or None -> tag scores
        (B, T, num_labels)."""
        extra = self.predicate(predicate)  # (B, T, P)
        return self.project(self.encoder(word_ids, mask, elmo_input, elmo_output, extra))

    def loss(self, scores: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor
             ) -> torch.Tensor:
        """Cross-entropy of the gold tags (B, T), averaged over the batch's tokens."""
        return nn.functional.cross_entropy(scores[mask], tags[mask])

    def predict(self, scores: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        """Each sentence's tag log-probabilities (n, num_labels), without padding: decoded
        with the labels' constraints by `SrlTask.decode`."""
        log_p = scores.log_softmax(-1).cpu()
        return [log_p[i, :n] for i, n in enumerate(mask.sum(1).tolist())]


@lru_cache(maxsize=8)
def transitions(labels: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """(allowed (L, L): tag j may follow tag i, allowed first (L,)): `I-X` only after `B-X`
    or `I-X`, never first."""
    def continues(i: int, j: int) -> bool:
        return not labels[j].startswith("I-") or labels[i][2:] == labels[j][2:] \
            and labels[i][:2] in ("B-", "I-")

    allowed = torch.tensor([[continues(i, j) for j in range(len(labels))]
                            for i in range(len(labels))])
    first = torch.tensor([not label.startswith("I-") for label in labels])
    return allowed, first


def constrained_viterbi(log_p: torch.Tensor, allowed: torch.Tensor, first: torch.Tensor
                        ) -> list[int]:
    """The best tag sequence of (n, L) log-probabilities that takes only `allowed`
    transitions (L, L) and starts with a `first` (L,) tag."""
    blocked = torch.tensor(float("-inf"))
    step = torch.where(allowed, 0.0, blocked)  # (L, L)
    score = log_p[0] + torch.where(first, 0.0, blocked)  # (L,)
    back = []
    for t in range(1, log_p.shape[0]):
        best, index = (score.unsqueeze(1) + step).max(0)  # (L,): the best previous tag
        score = best + log_p[t]
        back.append(index)
    path = [int(score.argmax())]
    for index in reversed(back):
        path.append(int(index[path[-1]]))
    return path[::-1]


class SrlTask(TaskType):
    """Semantic role labelling (`--format conll2012`), scored by `srl-f1`."""

    name, model, model_config = "srl", SrlTagger, SrlConfig
    example, metrics = SrlInstance, ("srl-f1",)

    def labels(self, examples: Sequence[SrlInstance]) -> list[str]:
        return sorted({t for e in examples if e.predicate is not None for t in e.tags})

    def require_targets(self, examples: Sequence[SrlInstance], path: str | Path) -> None:
        if not any(e.predicate is not None for e in examples):
            raise InputFileError(f"{path}: no gold predicate (V) in any argument column; SRL "
                                 "trains and scores one instance per predicate marked (V*)")

    def warn_unseen(self, examples: Sequence[SrlInstance], labels: Sequence[str],
                    path: str | Path, config: Any) -> None:
        warn_unseen([e for e in examples if e.predicate is not None], labels, path,
                    config.train, "iob2")

    def model_options(self, config: Any, labels: Sequence[str]) -> dict[str, Any]:
        return {"num_labels": len(labels)}

    def held_out_groups(self, examples: Sequence[SrlInstance]) -> list[Hashable]:
        """Whole documents: a dev sentence never shares its document with training."""
        return [e.sentence.document for e in examples]

    def model_inputs(self, example: SrlInstance) -> dict[str, torch.Tensor]:
        indicator = torch.zeros(len(example.sentence.words), dtype=torch.long)
        if example.predicate is not None:
            indicator[example.predicate] = 1
        return {"predicate": indicator}

    def target(self, example: SrlInstance, label_index: dict[str, int]
               ) -> torch.Tensor | None:
        if example.predicate is None:
            return None
        return torch.tensor([label_index[t] for t in example.tags])

    def decode(self, example: SrlInstance, predicted: torch.Tensor, labels: Sequence[str]
               ) -> list[tuple[str, int, int]]:
        """The predicate's arguments (labelled spans) by constrained Viterbi; [] for a
        sentence without predicates."""
        if example.predicate is None:
            return []
        path = constrained_viterbi(predicted, *transitions(tuple(labels)))
        return tags_to_spans([labels[t] for t in path])

    def evaluate(self, examples: Sequence[SrlInstance], predictions: Sequence, config: Any
                 ) -> dict[str, float]:
        scored = [i for i, e in enumerate(examples) if e.predicate is not None]
        scores = srl_scores([examples[i].arguments for i in scored],
                            [predictions[i] for i in scored])
        return {"score": scores["f1"], "precision": scores["precision"],
                "recall": scores["recall"], "propositions": len(scored)}

    def write_predictions(self, path: str | Path, examples: Sequence[SrlInstance],
                          predictions: Sequence, config: Any) -> None:
        write_props(path, examples, predictions)

    def data_notes(self, examples: Sequence[SrlInstance]) -> dict[str, Any]:
        predicates = sum(e.predicate is not None for e in examples)
        return {"predicates": predicates,
                "sentences": len({id(e.sentence) for e in examples})}
