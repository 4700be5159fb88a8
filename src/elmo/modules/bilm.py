"""BiLM: the character CNN token encoder and the forward and backward LSTM stacks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from elmo.chars import token_indexer
from elmo.config import BiLMConfig
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.cuda_graphs import CUDA_GRAPHS, LSTMGraphs
from elmo.modules.lstm import LSTMState, StackedLSTM
from elmo.modules.quantize import check_quantize, warn_if_int8_is_slow


@dataclass
class DistinctTokens:
    """Token inputs with each distinct token once: its char ids, and where it occurs.

    The char-CNN then runs once per distinct token (`BiLM.token_vectors`). Made on the host
    by the training batches (`elmo.training.stream.BatchEncoder`), or from char ids by `of`.
    """

    chars: torch.Tensor  # (K, C) char ids of each distinct token
    index: torch.Tensor  # (...) int64: the row of `chars` at each position

    @classmethod
    def of(cls, char_ids: torch.Tensor) -> DistinctTokens:
        """char_ids (..., C) -> their distinct rows (`torch.unique`, which the device must
        read back) and each position's row."""
        flat = char_ids.reshape(-1, char_ids.shape[-1])
        distinct, inverse = torch.unique(flat, dim=0, return_inverse=True)
        return cls(distinct, inverse.reshape(char_ids.shape[:-1]))


@dataclass
class BiLMOutput:
    """All L+1 layers of a batch and the mask of real tokens."""

    layers: torch.Tensor  # (L+1, B, T, 2P): layer 0 = [x, x], layer j = [forward_j, backward_j]
    mask: torch.Tensor  # (B, T) bool


def reverse_within_lengths(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first `lengths[b]` positions along dim 1; padding stays in place.

    x (B, T, ...). Applying it twice gives x back.
    """
    b, t = x.shape[:2]
    steps = torch.arange(t, device=x.device).expand(b, t)
    lengths = lengths.to(x.device).unsqueeze(1)
    index = torch.where(steps < lengths, lengths - 1 - steps, steps)  # (B, T)
    index = index.view(b, t, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


def add_boundaries(
    x: torch.Tensor, lengths: torch.Tensor, bos: torch.Tensor, eos: torch.Tensor
) -> torch.Tensor:
    """x (B, T, ...) whose row b holds `lengths[b]` tokens -> (B, T+2, ...) holding
    `bos, tokens, eos` (bos and eos: one token's (...) entry, e.g. char ids or a vector)."""
    b, t = x.shape[:2]
    wrapped = x.new_zeros(b, t + 2, *x.shape[2:])
    wrapped[:, 1 : t + 1] = x
    wrapped[:, 0] = bos
    wrapped[torch.arange(b, device=x.device), lengths + 1] = eos
    return wrapped


def words_only(mask: torch.Tensor) -> torch.Tensor:
    """The mask (B, T+2) of wrapped sentences -> the mask of their words, (B, T)."""
    return mask[:, 2:]  # position t+1 is a word iff t + 2 < length


class BiLM(nn.Module):
    """Bidirectional language model encoder.

    Stateless by default: every sentence starts from a zero LSTM state, so its vectors do not
    depend on its batch. With `stateful = True` it reproduces the original implementation: the
    final state of batch row r is the initial state of row r in the next call (for the backward
    direction, the state after reading the sentence's first position); `reset_states()` clears it.
    """

    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = CharCNNEncoder(config)
        self.lstm = StackedLSTM(config)
        self.stateful = False
        # True: stateless inference on CUDA replays CUDA graphs of the LSTM stacks
        self.cuda_graphs = CUDA_GRAPHS
        self._graphs = LSTMGraphs(self.lstm)
        self.quantization: str | None = None  # "int8" once `quantize_` has run
        self._states: list[LSTMState] | None = None  # per layer, rows in caller order
        # Tokens -> ids as this model's token encoder reads them (bytes or its vocabulary).
        self.indexer = token_indexer(config)
        bos, eos = (self.indexer.token_ids(t) for t in (self.indexer.bos_token,
                                                         self.indexer.eos_token))
        self.register_buffer("bos_ids", torch.tensor(bos), False)
        self.register_buffer("eos_ids", torch.tensor(eos), False)

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Tokenized sentences -> the ids `forward` takes (B, T, C), boundaries not added."""
        return self.indexer.batch_to_ids(sentences)

    @property
    def num_layers(self) -> int:
        """Number of returned layers, L + 1."""
        return self.config.n_layers + 1

    def quantize_(self, mode: str | None) -> BiLM:
        """Quantize for CPU inference, in place (None: leave as is); returns self.

        "int8": int8 weights for the LSTM input and state products and for the char-CNN's
        highway layers; their inputs are quantized per row as they arrive. Their fp32 weights
        are dropped, so the result can no longer be trained or saved. The projections (the
        LSTM's and the char-CNN's) stay fp32: int8 cannot take their inputs (benchmarks/README.md).
        """
        check_quantize(mode, self.bos_ids.device)
        if mode is None or self.quantization == mode:
            return self
        warn_if_int8_is_slow()
        self.eval()
        self.token_encoder.quantize_int8_()
        for layer in self.lstm.layers:
            layer.quantize_int8_()
        self.quantization = mode
        return self

    def reset_states(self) -> None:
        """Forget the LSTM state carried between calls in stateful mode."""
        self._states = None

    @property
    def carried_states(self) -> list[LSTMState] | None:
        """Stateful mode's carried state: per layer (h (2, B, P), c (2, B, C)), rows in call
        order; None before the first call or after `reset_states()`. Settable, to resume."""
        return self._states

    @carried_states.setter
    def carried_states(self, states: list[LSTMState] | None) -> None:
        self._states = states

    def forward(self, char_ids: torch.Tensor, keep_boundaries: bool = False) -> BiLMOutput:
        """char_ids (B, T, C) of sentences without boundary tokens -> all layers and the mask.

        `<S>` and `</S>` are added around every sentence and, unless `keep_boundaries`, dropped
        again from the result. Absent tokens (all-zero rows) must follow a row's real tokens.
        """
        if char_ids.shape[-1] != self.indexer.width:
            raise ValueError(f"char_ids have {char_ids.shape[-1]} ids per token, but this model "
                             f"reads {self.indexer.width} ({self.config.token_encoder} token "
                             "encoder): make them with bilm.batch_to_ids(sentences)")
        mask = (char_ids > 0).any(dim=-1)  # (B, T)
        lengths = mask.sum(dim=1)  # (B,)
        char_ids = add_boundaries(char_ids, lengths, self.bos_ids, self.eos_ids)  # (B, T+2, C)
        lengths = lengths + 2
        tokens = self.encode_tokens(char_ids)  # (B, T+2, P)
        return self.contextualize(tokens, lengths, keep_boundaries)

    def encode_tokens(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char_ids (..., C) -> token vectors (..., P), the char-CNN run once per distinct token."""
        return self.token_vectors(DistinctTokens.of(char_ids))

    def token_vectors(self, tokens: DistinctTokens, fixed_shapes: bool = False) -> torch.Tensor:
        """The vectors (..., P) of `tokens`, the char-CNN run once per distinct token: in
        chunks of tokens of similar lengths, or, if `fixed_shapes`, over every char position
        at once (nothing read back to the host: a device's training step).

        The vectors are copied out with `index_select`, whose CPU backward (`index_add_`) sums
        a token's gradients in a fixed order; the backward of `vectors[inverse]` adds them with
        atomic adds there and differs from run to run with 2 or more threads.
        """
        encode = self.token_encoder.encode_all if fixed_shapes else self.token_encoder
        vectors = encode(tokens.chars)  # (K, P)
        vectors = vectors.index_select(0, tokens.index.reshape(-1))  # (N, P)
        return vectors.reshape(*tokens.index.shape, vectors.shape[-1])

    def contextualize(
        self, tokens: torch.Tensor, lengths: torch.Tensor, keep_boundaries: bool = False
    ) -> BiLMOutput:
        """Token vectors of wrapped sentences -> all layers.

        tokens (B, T+2, P): row b holds `<S> w_1 .. w_n </S>` in its first `lengths[b]` = n + 2
        positions. Returns layers (L+1, B, T, 2P) and mask (B, T) without the boundaries
        (or with them, (L+1, B, T+2, 2P), if `keep_boundaries`).
        """
        b, t, p = tokens.shape
        if b == 0:  # an empty batch: empty layers; a carried state is kept for the next call
            t = t if keep_boundaries else t - 2
            return BiLMOutput(tokens.new_zeros(self.num_layers, 0, t, 2 * p),
                              torch.zeros(0, t, dtype=torch.bool, device=tokens.device))
        backward_input = reverse_within_lengths(tokens, lengths)
        # Stateless and without boundaries, the forward stack need not read </S> nor the
        # backward stack <S>: their outputs there are dropped and no state is carried on.
        read = lengths if keep_boundaries or self.stateful else lengths - 1
        outputs = self.run_lstm(torch.stack([tokens, backward_input]), read)  # L x (2,B,T+2,P)

        layers = tokens.new_empty(self.num_layers, b, t, 2 * p)  # filled in place: no copies
        layers[0, :, :, :p] = tokens
        layers[0, :, :, p:] = tokens
        for k, out in enumerate(outputs, start=1):
            layers[k, :, :, :p] = out[0]
            layers[k, :, :, p:] = reverse_within_lengths(out[1], lengths)
        full_mask = torch.arange(t, device=lengths.device) < lengths.unsqueeze(1)  # (B, T+2)
        if keep_boundaries:
            return BiLMOutput(layers.mul_(full_mask[None, :, :, None]), full_mask)
        mask = words_only(full_mask)
        inner = layers[:, :, 1:-1]  # a view without <S>; </S> and padding zeroed next
        return BiLMOutput(inner.mul_(mask[None, :, :, None]), mask)

    def run_lstm(self, x: torch.Tensor, lengths: torch.Tensor | None) -> list[torch.Tensor]:
        """Both LSTM stacks on direction-stacked inputs.

        x (2, B, T, P): row b's first `lengths[b]` positions are its input (None: all T), the
        backward direction's already in reading order (reversed). Returns the L layer outputs,
        each (2, B, T, P) in the same order, zero at padding. Updates the carried state if
        stateful.
        """
        if lengths is None:  # every row runs through: no sorting
            states = self._initial_states(None, x) if self.stateful else None
            outputs, final_states = self.lstm(x, None, states)
            if self.stateful:
                self._store_states(final_states, None)
            return outputs
        order = torch.argsort(lengths, descending=True, stable=True)
        sorted_lengths = lengths[order].to(x.device)
        x = x[:, order.to(x.device)]
        inverse = torch.argsort(order).to(x.device)
        graphed = None
        if x.is_cuda and self.cuda_graphs and not (self.stateful or self.training
                                                   or torch.is_grad_enabled()):
            graphed = self._graphs(x, sorted_lengths)  # views of static buffers: copied next
        if graphed is not None:
            return [out[:, inverse] for out in graphed]
        states = self._initial_states(order, x) if self.stateful else None
        outputs, final_states = self.lstm(x, sorted_lengths, states)
        if self.stateful:
            self._store_states(final_states, inverse)
        return [out[:, inverse] for out in outputs]

    # ---- internals ------------------------------------------------------------------

    def _initial_states(self, order: torch.Tensor | None, like: torch.Tensor) -> list[LSTMState]:
        """Carried state for the rows of this call (zeros for rows never seen), in `like`'s
        dtype, sorted by `order` (None: as they are: then a carried state of as many rows and
        `like`'s dtype is passed itself, which a captured training step reads in place)."""
        b = like.shape[1]
        states = []
        for k, layer in enumerate(self.lstm.layers):
            old = None if self._states is None else self._states[k]
            if (order is None and old is not None and old[0].shape[1] == b
                    and old[0].dtype == like.dtype):
                states.append(old)
                continue
            h, c = layer.zero_state(b, like)
            if old is not None:
                n = min(b, old[0].shape[1])
                h[:, :n], c[:, :n] = old[0][:, :n], old[1][:, :n]
            states.append((h, c) if order is None else (h[:, order], c[:, order]))
        return states

    def _store_states(self, final_states: list[LSTMState], inverse: torch.Tensor | None) -> None:
        """Keep each row's final state (rows sorted by `inverse`'s inverse order, or None: as
        they are); rows beyond this call keep what they had."""
        new_states = []
        for k, (h, c) in enumerate(final_states):
            if inverse is not None:
                h, c = h[:, inverse], c[:, inverse]
            h, c = h.detach(), c.detach()
            if self._states is not None and self._states[k][0].shape[1] > h.shape[1]:
                old_h, old_c = self._states[k]
                h = torch.cat([h, old_h[:, h.shape[1] :]], dim=1)
                c = torch.cat([c, old_c[:, c.shape[1] :]], dim=1)
            new_states.append((h, c))
        self._states = new_states


def model_identity(bilm: BiLM) -> str:
    """sha256 of a biLM's architecture and every weight: equal iff its layers are equal."""
    digest = hashlib.sha256(json.dumps(bilm.config.to_dict(), sort_keys=True).encode())
    if bilm.quantization is not None:  # fp32 identities stay as they were
        digest.update(bilm.quantization.encode())
    for name, tensor in sorted(bilm.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
