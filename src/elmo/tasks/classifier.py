"""Sentence classifier: word embeddings (+ ELMo) -> BiLSTM (+ ELMo) -> max & mean pooling
-> MLP. A reduced BCN (McCann et al. 2017, the paper's SST-5 model) without its
biattention."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from elmo.tasks.encoder import EncoderConfig, WordEncoder
from elmo.tasks.pooling import max_mean_pool


@dataclass
class ClassifierConfig(EncoderConfig):
    num_labels: int = 2
    num_layers: int = 1


class LabelPrediction:
    """Loss and predictions of a model with one label per example: logits (B, num_labels)."""

    def loss(self, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(scores, labels)

    def predict(self, scores: torch.Tensor, mask: torch.Tensor) -> list[int]:
        return scores.argmax(-1).tolist()


class Classifier(LabelPrediction, nn.Module):
    """One label per sentence."""

    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = WordEncoder(config)
        self.head = nn.Sequential(
            nn.Linear(2 * config.output_dim, config.hidden_dim), nn.ReLU(),
            nn.Dropout(config.dropout), nn.Linear(config.hidden_dim, config.num_labels),
        )

    def forward(self, word_ids, mask, elmo_input=None, elmo_output=None) -> torch.Tensor:
        """(B, T) ids and mask, ELMo (B, T, D) or None -> logits (B, num_labels)."""
        h = self.encoder(word_ids, mask, elmo_input, elmo_output)  # (B, T, O)
        return self.head(max_mean_pool(h, mask))  # (B, num_labels)
