"""Sequence tagger: word embeddings (+ ELMo) -> 2-layer BiLSTM (+ ELMo) -> linear -> CRF."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from elmo.extras import import_extra
from elmo.tasks.encoder import EncoderConfig, WordEncoder


def make_crf(num_tags: int) -> nn.Module:
    """A linear-chain CRF (pytorch-crf), batch first."""
    return import_extra("torchcrf", "the tagger's CRF").CRF(num_tags, batch_first=True)


@dataclass
class TaggerConfig(EncoderConfig):
    num_labels: int = 2  # tags


class Tagger(nn.Module):
    """One tag per token, decoded jointly by a CRF (Peters et al. 2018's NER and chunking
    baseline, without the character CNN: ELMo brings character information)."""

    def __init__(self, config: TaggerConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = WordEncoder(config)
        self.project = nn.Linear(config.output_dim, config.num_labels)
        self.crf = make_crf(config.num_labels)

    def forward(self, word_ids, mask, elmo_input=None, elmo_output=None) -> torch.Tensor:
        """(B, T) ids and mask, ELMo (B, T, D) or None -> emission scores (B, T, num_labels)."""
        return self.project(self.encoder(word_ids, mask, elmo_input, elmo_output))

    def loss(self, scores: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Negative log-likelihood of the gold tags (B, T), averaged over sentences."""
        return -self.crf(scores, tags, mask=mask, reduction="mean")

    def predict(self, scores: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        """The best tag sequence of each sentence (Viterbi), without padding."""
        return self.crf.decode(scores, mask=mask)
