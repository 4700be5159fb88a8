"""The coreference task (`--task coref --format conll2012`): CoNLL-2012 documents in segments
(`elmo.tasks.coref_data`), the span-ranking model (`elmo.tasks.coref_model`), scored by the
CoNLL F1 (`elmo.tasks.coref_metrics`), predictions written back in the CoNLL-2012 layout."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import torch

from elmo.errors import InputFileError
from elmo.tasks.coref_data import (
    CorefSegment,
    Span,
    cut_mentions,
    document_clusters,
    documents_of,
    write_coref_predictions,
)
from elmo.tasks.coref_metrics import coref_scores
from elmo.tasks.coref_model import CorefConfig, CorefModel
from elmo.tasks.task_type import TaskType


class CorefTask(TaskType):
    """Clusters of mentions in documents; one segment per batch."""

    name, model, model_config = "coref", CorefModel, CorefConfig
    example, metrics = CorefSegment, ("coref-f1",)
    examples_per_batch = 1

    def labels(self, examples: Sequence[CorefSegment]) -> list[str]:
        return []  # clusters have no labels

    def require_targets(self, examples: Sequence[CorefSegment], path: str | Path) -> None:
        if not any(d.token_clusters() for d in documents_of(examples)):
            raise InputFileError(f"{path}: no coreference mention in the last column of any "
                                 "document; training and evaluation need gold clusters")

    def model_options(self, config: Any, labels: Sequence[str]) -> dict[str, Any]:
        return {"max_span_width": config.max_span_width,
                "top_span_ratio": config.top_span_ratio,
                "max_antecedents": config.max_antecedents}

    def held_out_groups(self, examples: Sequence[CorefSegment]) -> list[Hashable]:
        """A document's segments are held out together."""
        return [(e.document.name, e.document.part) for e in examples]

    def model_inputs(self, example: CorefSegment) -> dict[str, torch.Tensor]:
        """speakers (N,): a speaker number per word; genre (): an index in GENRES."""
        return {"speakers": torch.tensor(example.speakers), "genre": torch.tensor(example.genre)}

    def target(self, example: CorefSegment, label_index: dict[str, int]) -> torch.Tensor:
        """The gold mentions (M, 3): start, end, cluster number."""
        return torch.tensor(example.mentions, dtype=torch.long).reshape(-1, 3)

    def decode(self, example: CorefSegment, predicted: list[list[Span]],
               labels: Sequence[str]) -> list[list[Span]]:
        """The segment's clusters in document offsets."""
        return [[(example.offset + s, example.offset + e) for s, e in cluster]
                for cluster in predicted]

    def evaluate(self, examples: Sequence[CorefSegment], predictions: Sequence, config: Any
                 ) -> dict[str, float]:
        """The CoNLL F1 ("score") and MUC, B-cubed, CEAF-phi4 F1, over the documents."""
        clusters = document_clusters(examples, predictions)
        return coref_scores((d.token_clusters(), clusters[id(d)])
                            for d in documents_of(examples))

    def write_predictions(self, path: str | Path, examples: Sequence[CorefSegment],
                          predictions: Sequence, config: Any) -> None:
        write_coref_predictions(path, examples, predictions)

    def data_notes(self, examples: Sequence[CorefSegment]) -> dict[str, Any]:
        return {"documents": len(documents_of(examples)), "segments": len(examples),
                "mentions": sum(len(e.mentions) for e in examples),
                "mentions_cut_by_segments": cut_mentions(examples)}
