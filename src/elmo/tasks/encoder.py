"""The part every task model shares: words (+ ELMo) -> BiLSTM states (+ ELMo)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

PAD, UNK = 0, 1  # word ids reserved in every task vocabulary


@dataclass
class EncoderConfig:
    vocab_size: int
    embedding_dim: int = 100
    hidden_dim: int = 128  # per direction
    num_layers: int = 2
    dropout: float = 0.3
    elmo_input_dim: int = 0  # D of ELMo concatenated to the word embeddings (0: none)
    elmo_output_dim: int = 0  # D of ELMo concatenated to the BiLSTM states (0: none)

    @property
    def output_dim(self) -> int:
        return 2 * self.hidden_dim + self.elmo_output_dim


def run_lstm(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A batch-first LSTM over the unmasked prefix of each row: padding never reaches it,
    so a sentence's states do not depend on its batch. Padded positions come out as 0.

    Each layer and direction runs over the padded batch (the backward direction over each
    row reversed within its length, so padding only follows a row's words), as packed
    sequences would give, but without their backward pass on a CPU, whose time grows with
    the batch's tokens times its longest row: for 64 rows up to 820 tokens (CMRC 2018's
    passages) it was 5x this one's."""
    lengths = mask.sum(1, keepdim=True).clamp(min=1)  # (B, 1)
    t = torch.arange(x.shape[1], device=x.device)  # (T,)
    reverse = torch.where(t < lengths, lengths - 1 - t, t)  # (B, T): row-wise reversal
    keep = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    for layer in range(lstm.num_layers):
        states = [_direction(lstm, layer, "", x)]
        if lstm.bidirectional:
            backward = _direction(lstm, layer, "_reverse", _gather_rows(x, reverse))
            states.append(_gather_rows(backward, reverse))
        x = torch.cat(states, dim=-1) * keep  # (B, T, directions * H)
        if layer < lstm.num_layers - 1:
            x = nn.functional.dropout(x, lstm.dropout, lstm.training)
    return x


def _direction(lstm: nn.LSTM, layer: int, suffix: str, x: torch.Tensor) -> torch.Tensor:
    """One direction of one layer of `lstm` (its weights `*_l{layer}{suffix}`) over (B, T, I)
    -> (B, T, H), left to right."""
    one = nn.LSTM(x.shape[-1], lstm.hidden_size, bias=lstm.bias, batch_first=True,
                  device="meta")  # a shape only: the weights are lstm's
    names = ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if lstm.bias else ())
    weights = {f"{name}_l0": getattr(lstm, f"{name}_l{layer}{suffix}") for name in names}
    return torch.func.functional_call(one, weights, (x,))[0]


def _gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[b, index[b, t]] for every row b: (B, T, D), (B, T) -> (B, T, D)."""
    return x.gather(1, index.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


class WordEncoder(nn.Module):
    """Trainable word embeddings, [; ELMo], [; a task's own features], dropout, BiLSTM,
    [; ELMo], dropout."""

    def __init__(self, config: EncoderConfig, extra_dim: int = 0) -> None:
        """`extra_dim`: the width of features the task adds at the input (SRL: the predicate
        indicator's embedding)."""
        super().__init__()
        self.config, self.extra_dim = config, extra_dim
        self.embed = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=PAD)
        # Training never sees <unk> (the vocabulary holds every training word), so its row
        # keeps its start: zero lets an unseen word's context decide. A random row did harm:
        # 1.5 dev F1 on CoNLL-2003, up to 9 beside word2vec vectors of a smaller scale.
        with torch.no_grad():
            self.embed.weight[UNK].zero_()
        self.lstm = nn.LSTM(config.embedding_dim + config.elmo_input_dim + extra_dim,
                            config.hidden_dim,
                            num_layers=config.num_layers, bidirectional=True, batch_first=True,
                            dropout=config.dropout if config.num_layers > 1 else 0.0)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        word_ids: torch.Tensor,  # (B, T)
        mask: torch.Tensor,  # (B, T) bool
        elmo_input: torch.Tensor | None = None,  # (B, T, elmo_input_dim)
        elmo_output: torch.Tensor | None = None,  # (B, T, elmo_output_dim)
        extra: torch.Tensor | None = None,  # (B, T, extra_dim)
    ) -> torch.Tensor:  # (B, T, output_dim)
        _check_input("elmo_input", elmo_input, self.config.elmo_input_dim)
        _check_input("elmo_output", elmo_output, self.config.elmo_output_dim)
        _check_input("extra", extra, self.extra_dim)
        x = self.embed(word_ids)  # (B, T, E)
        if elmo_input is not None:
            x = torch.cat([x, elmo_input], dim=-1)  # (B, T, E + D)
        if extra is not None:
            x = torch.cat([x, extra], dim=-1)  # (B, T, E [+ D] + X)
        h = run_lstm(self.lstm, self.dropout(x), mask)  # (B, T, 2H)
        if elmo_output is not None:
            h = torch.cat([h, elmo_output], dim=-1)  # (B, T, 2H + D)
        return self.dropout(h)


def _check_input(name: str, tensor: torch.Tensor | None, dim: int) -> None:
    if (tensor is None) != (dim == 0) or (tensor is not None and tensor.shape[-1] != dim):
        got = "none" if tensor is None else f"dimension {tensor.shape[-1]}"
        raise ValueError(f"{name}: the model was built for dimension {dim}, got {got}")
