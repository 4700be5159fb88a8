"""CharCNNEncoder: a token's character ids -> a context-independent vector of size P."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from elmo.chars import PAD_CHAR
from elmo.config import BiLMConfig
from elmo.modules import onednn
from elmo.modules.quantize import quantize_linears_

# Fewer rows than this take other matmul and convolution kernels, whose last bits differ (CPU,
# torch 2.13: 1-15 rows differ, 16 and more agree). Smaller groups are padded to it, so that a
# token's vector does not depend on how many tokens are encoded with it.
MIN_ROWS = 16


class Highway(nn.Module):
    """x <- t * relu(W_h x) + (1 - t) * x, with gate t = sigmoid(W_t x)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.transform = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.sigmoid(onednn.linear(x, self.gate))
        return t * F.relu(onednn.linear(x, self.transform)) + (1.0 - t) * x


class CharCNNEncoder(nn.Module):
    """Char embedding, n-gram convolutions with max-pooling, highway layers, projection.

    With a vocabulary token encoder (ELMoForManyLangs), the characters are ids of the model's
    own vocabulary, and an optional word embedding (the token's last id column) is
    concatenated before the char-CNN output ahead of the projection.
    """

    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        self.config = config
        vocab = config.encoder.vocabulary
        # The id of padding inside a word (ids are shifted by +1: 0 marks an absent token).
        self.pad_id = config.char_vocab.index("<pad>") + 1 if vocab else PAD_CHAR + 1
        self.n_chars = config.max_characters_per_token
        self.char_embedding = nn.Embedding(config.n_char_ids, config.char_embed_dim, padding_idx=0)
        self.word_embedding = nn.Embedding(len(config.word_vocab) + 1, config.word_embed_dim,
                                           padding_idx=0) if config.word_embed_dim else None
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embed_dim, count, kernel_size=width)
            for width, count in config.filters
        )
        self.highways = nn.ModuleList(Highway(config.n_filters) for _ in range(config.n_highway))
        self.projection = nn.Linear(config.word_embed_dim + config.n_filters,
                                    config.projection_dim)
        self.activation = torch.tanh if config.activation == "tanh" else F.relu

    def quantize_int8_(self) -> None:
        """int8 weights for the highway layers (inference only). The convolutions and the
        projection stay fp32: the projection's input has a few large channels per token, which
        set its int8 scale; on the shipped `default` it alone gave the char-CNN's vectors 1.4%
        of mean relative error (benchmarks/int8_error.py, benchmarks/README.md)."""
        for highway in self.highways:
            quantize_linears_(highway)

    def forward(self, char_ids: torch.Tensor, chunk_size: int = 256) -> torch.Tensor:
        """char_ids (..., C) (with a word embedding (..., C + 1)) -> token vectors (..., P).

        Tokens are encoded `chunk_size` at a time, shortest first, and each chunk only over as
        many character positions as its longest token needs (see `_encode`), which keeps the
        (N, filters, C) convolution outputs small.
        """
        flat = char_ids.reshape(-1, char_ids.shape[-1])  # (N, C) or (N, C + 1)
        # A token's chars are [BOW, chars, EOW] then PAD (or all 0 for an absent token).
        chars = flat[:, : self.n_chars]
        lengths = ((chars != 0) & (chars != self.pad_id)).sum(dim=1)  # (N,)
        order = torch.argsort(lengths)
        chunks = [self._encode(flat[part], int(lengths[part[-1]]))
                  for part in order.split(chunk_size) if len(part)] or [self._encode(flat, 0)]
        vectors = torch.cat(chunks)[torch.argsort(order)]  # (N, P) in input order
        return vectors.reshape(*char_ids.shape[:-1], vectors.shape[-1])

    def encode_all(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char_ids (N, C[+1]) -> (N, P) in one pass over all C char positions: the same
        vectors as `forward`, with fixed shapes and nothing read back to the host (a device's
        training step, which a CUDA graph can capture)."""
        return self._encode(char_ids, self.n_chars)

    def _encode(self, ids: torch.Tensor, longest: int) -> torch.Tensor:
        """ids (N, C[+1]) whose tokens have at most `longest` chars before their padding ->
        (N, P).

        Exact on `longest + widest filter` positions: every window left out lies wholly in the
        padding, and equals a window that is kept (one at a token's first PAD position).
        """
        n = ids.shape[0]
        if 0 < n < MIN_ROWS:
            ids = torch.cat([ids, ids[:1].expand(MIN_ROWS - n, -1)])
        char_ids = ids[:, : min(self.n_chars, longest + max(w for w, _ in self.config.filters))]
        x = self.char_embedding(char_ids)  # (N, C, E)
        x = x.transpose(1, 2)  # (N, E, C)
        # Each filter: convolve over character positions, max over positions, activate.
        pooled = [self.activation(conv(x).max(dim=-1).values) for conv in self.convolutions]
        x = torch.cat(pooled, dim=-1)  # (N, n_filters)
        for highway in self.highways:
            x = highway(x)
        if self.word_embedding is not None:  # [word vector, char-CNN vector]
            x = torch.cat([self.word_embedding(ids[:, self.n_chars]), x], dim=-1)
        return onednn.linear(x, self.projection)[:n]  # (N, P)
