"""Sentence-pair model, ESIM-style (Chen et al. 2017, the paper's SNLI model): encode both
sentences, align each word with the other sentence by attention, compose, pool, classify.

A batch of B pairs comes as 2B sentences: rows 0..B-1 are the first sentences, rows B..2B-1
the second ones, so it takes the same inputs (and ELMo tensors) as the other task models.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from elmo.tasks.classifier import LabelPrediction
from elmo.tasks.encoder import EncoderConfig, WordEncoder, run_lstm
from elmo.tasks.pooling import masked_softmax, max_mean_pool


@dataclass
class PairConfig(EncoderConfig):
    num_labels: int = 3
    num_layers: int = 1


class PairClassifier(LabelPrediction, nn.Module):
    """One label per sentence pair."""

    def __init__(self, config: PairConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = WordEncoder(config)
        d = config.output_dim
        self.project = nn.Sequential(nn.Linear(4 * d, config.hidden_dim), nn.ReLU())
        self.compose = nn.LSTM(config.hidden_dim, config.hidden_dim, bidirectional=True,
                               batch_first=True)
        self.head = nn.Sequential(
            nn.Dropout(config.dropout), nn.Linear(8 * config.hidden_dim, config.hidden_dim),
            nn.Tanh(), nn.Dropout(config.dropout), nn.Linear(config.hidden_dim, config.num_labels),
        )

    def forward(self, word_ids, mask, elmo_input=None, elmo_output=None) -> torch.Tensor:
        """(2B, T) ids and mask, ELMo (2B, T, D) or None -> logits (B, num_labels)."""
        h = self.encoder(word_ids, mask, elmo_input, elmo_output)  # (2B, T, d)
        a, b = h.chunk(2)  # (B, T, d) each
        mask_a, mask_b = mask.chunk(2)  # (B, T)
        scores = a @ b.transpose(1, 2)  # (B, T, T): a_i . b_j
        a_aligned = masked_softmax(scores, mask_b.unsqueeze(1)) @ b  # (B, T, d)
        b_aligned = masked_softmax(scores.transpose(1, 2), mask_a.unsqueeze(1)) @ a
        pooled = []
        for x, x_aligned, m in ((a, a_aligned, mask_a), (b, b_aligned, mask_b)):
            enhanced = torch.cat([x, x_aligned, x - x_aligned, x * x_aligned], dim=-1)  # (B,T,4d)
            composed = run_lstm(self.compose, self.project(enhanced), m)  # (B, T, 2H)
            pooled.append(max_mean_pool(composed, m))  # (B, 4H)
        return self.head(torch.cat(pooled, dim=-1))  # (B, num_labels)
