"""The task types `elmo task --task NAME` knows, by name (see `elmo.tasks.task_type`)."""

from __future__ import annotations

from elmo.tasks.classifier import Classifier, ClassifierConfig
from elmo.tasks.coref import CorefTask
from elmo.tasks.pair import PairClassifier, PairConfig
from elmo.tasks.readers import LabeledPair, LabeledText, TaggedSentence
from elmo.tasks.span import SpanTask
from elmo.tasks.srl import SrlTask
from elmo.tasks.tagger import Tagger, TaggerConfig
from elmo.tasks.task_type import LabelTask, TaskType

TASKS: dict[str, TaskType] = {task.name: task for task in (
    LabelTask("tagging", Tagger, TaggerConfig, TaggedSentence, per_token=True,
              metrics=("accuracy", "span-f1"), checks_labels=False),
    LabelTask("classification", Classifier, ClassifierConfig, LabeledText),
    # pair and span: ELMo at the input and output, as the paper's SNLI and SQuAD models
    LabelTask("pair", PairClassifier, PairConfig, LabeledPair, elmo_at="both"),
    SpanTask(),
    SrlTask(),
    CorefTask(),
)}
