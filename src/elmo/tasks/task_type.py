"""What the task recipe needs to know about one kind of task, behind one interface.

`elmo.tasks.recipe` trains, evaluates and predicts with any task type through this interface;
`elmo.tasks.registry.TASKS` names them. A new kind of task adds a TaskType (its model, targets,
metric and prediction writer), not branches in the recipe.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from elmo.tasks.data import (
    build_labels,
    require_targets,
    targets_of,
    warn_label_like_text,
    warn_unseen,
)
from elmo.tasks.metrics import accuracy, span_f1
from elmo.tasks.readers import write_predictions


class TaskType:
    """A kind of task: its model class and config, the examples it reads (it reads the
    formats of `elmo.tasks.readers.FORMATS` that give them), its metrics, and how examples
    become targets and predictions become output."""

    name: str
    model: type[nn.Module]  # takes (word_ids, mask, elmo_input, elmo_output, **the examples'
    # model_inputs(), where they have them), has loss, predict
    model_config: type  # an EncoderConfig
    example: type  # TaggedSentence, LabeledText, ...
    metrics: tuple[str, ...]  # the first is the default
    elmo_at: str = "input"  # where ELMo goes without --elmo-at (elmo.tasks.model.ELMO_AT)
    examples_per_batch: int | None = None  # fixed by the task (None: --batch-size; 64 when
    # predicting)

    def default_metric(self, config: Any) -> str:
        return self.metrics[0]

    def labels(self, examples: Sequence) -> list[str]:
        """What the model predicts among, from the training examples (saved with the run)."""
        raise NotImplementedError

    def require_targets(self, examples: Sequence, path: str | Path) -> None:
        """Every example must have what training and scoring need."""
        raise NotImplementedError

    def check_training(self, examples: Sequence, labels: Sequence[str], config: Any) -> None:
        """Warn when the training file looks misread (another format, a wrong column)."""

    def warn_unseen(self, examples: Sequence, labels: Sequence[str], path: str | Path,
                    config: Any) -> None:
        """Warn about targets of a dev or test file that the model cannot predict (they are
        still scored, as errors)."""

    def model_options(self, config: Any, labels: Sequence[str]) -> dict[str, Any]:
        """The model config's fields that depend on the task (beyond the encoder's)."""
        return {}

    def held_out_groups(self, examples: Sequence) -> list[Hashable] | None:
        """A key per example: examples with one key are held out together by --dev-fraction
        (None: each example on its own)."""
        return None

    def model_inputs(self, example: Any) -> dict[str, torch.Tensor]:
        """The example's inputs to the model beyond its words, by keyword of the model's
        forward (SRL: the predicate indicator); {} for none."""
        return {}

    def target(self, example: Any, label_index: dict[str, int]) -> torch.Tensor | None:
        """The example's training target (None: not trained on)."""
        raise NotImplementedError

    def decode(self, example: Any, predicted: Any, labels: Sequence[str]) -> Any:
        """The model's prediction for one example (from its `predict`) as output."""
        raise NotImplementedError

    def evaluate(self, examples: Sequence, predictions: Sequence, config: Any
                 ) -> dict[str, float]:
        """{"score": the config's metric (0..100), and any further scores by name}."""
        raise NotImplementedError

    def write_predictions(self, path: str | Path, examples: Sequence, predictions: Sequence,
                          config: Any) -> None:
        raise NotImplementedError

    def data_notes(self, examples: Sequence) -> dict[str, Any]:
        """Facts about a split worth recording in the run ({}: none)."""
        return {}


@dataclass(frozen=True)
class LabelTask(TaskType):
    """Tasks with labels from a fixed set, one record per kind: `per_token`, one tag per token
    (tagging) or one label per sentence or pair; `metrics`, the first the default (span-f1
    with --scheme where it is one); `checks_labels`, whether training warns when the labels
    look like words of text (a file misread); `elmo_at`, where ELMo goes by default."""

    name: str
    model: type[nn.Module]
    model_config: type
    example: type
    per_token: bool = False
    metrics: tuple[str, ...] = ("accuracy",)
    checks_labels: bool = True
    elmo_at: str = "input"

    def default_metric(self, config: Any) -> str:
        return "span-f1" if config.scheme and "span-f1" in self.metrics else self.metrics[0]

    def labels(self, examples: Sequence) -> list[str]:
        return build_labels(examples)

    def require_targets(self, examples: Sequence, path: str | Path) -> None:
        require_targets(examples, path)

    def check_training(self, examples: Sequence, labels: Sequence[str], config: Any) -> None:
        if self.checks_labels:
            warn_label_like_text(examples, labels, config.train, config.format)

    def warn_unseen(self, examples: Sequence, labels: Sequence[str], path: str | Path,
                    config: Any) -> None:
        warn_unseen(examples, labels, path, config.train, config.scheme)

    def model_options(self, config: Any, labels: Sequence[str]) -> dict[str, Any]:
        return {"num_labels": len(labels)}

    def target(self, example: Any, label_index: dict[str, int]) -> torch.Tensor:
        ids = [label_index[t] for t in targets_of(example)]
        return torch.tensor(ids if self.per_token else ids[0])

    def decode(self, example: Any, predicted: Any, labels: Sequence[str]) -> Any:
        return [labels[t] for t in predicted] if self.per_token else labels[predicted]

    def evaluate(self, examples: Sequence, predictions: Sequence, config: Any
                 ) -> dict[str, float]:
        gold = [targets_of(e) if self.per_token else targets_of(e)[0] for e in examples]
        if config.metric == "span-f1":
            return {"score": span_f1(gold, predictions, config.scheme)}
        return {"score": accuracy(gold, predictions)}

    def write_predictions(self, path: str | Path, examples: Sequence, predictions: Sequence,
                          config: Any) -> None:
        write_predictions(path, config.format, examples, predictions, **config.reader_options())
