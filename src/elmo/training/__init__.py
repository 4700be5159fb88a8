"""Pretraining and continued training of a biLM: `elmo train`, checkpoints, perplexity."""

from elmo.training.config import TrainConfig
from elmo.training.evaluate import PerplexityTotals, evaluate_perplexity
from elmo.training.prepare import scan_corpus
from elmo.training.trainer import Trainer, TrainingDiverged, TrainResult, train

__all__ = [
    "PerplexityTotals",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingDiverged",
    "evaluate_perplexity",
    "scan_corpus",
    "train",
]
