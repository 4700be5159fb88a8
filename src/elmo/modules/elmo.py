"""MixedBiLM: a biLM plus N learned mixes of its layers, for use inside a task model; and
`contextualize_words`, the biLM over token vectors kept in a table (MixedBiLM's
`vocab_to_cache`, the Embedder's token vector cache)."""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn

from elmo.errors import ElmoError
from elmo.modules.bilm import BiLM, BiLMOutput, add_boundaries, words_only
from elmo.modules.scalar_mix import ScalarMix

Representations = dict[str, torch.Tensor | list[torch.Tensor]]


def contextualize_words(bilm: BiLM, table: torch.Tensor, word_ids: torch.Tensor,
                        boundaries: torch.Tensor, keep_boundaries: bool = False) -> BiLMOutput:
    """The layers of sentences whose token vectors are already computed: `word_ids` (B, T)
    index `table` (V, P), whose row 0 is the padding after each sentence's words;
    `boundaries` (2, P) holds the vectors of <S> and </S>. What `bilm(char_ids)` gives for
    the same words, without running the char-CNN on them."""
    lengths = (word_ids > 0).sum(dim=1)
    vectors = F.embedding(word_ids, table, padding_idx=0)  # (B, T, P)
    tokens = add_boundaries(vectors, lengths, boundaries[0], boundaries[1])
    return bilm.contextualize(tokens, lengths + 2, keep_boundaries)


class MixedBiLM(nn.Module):
    """ELMo representations for a task model: `num_output_representations` mixes of the biLM's
    L+1 layers, each followed by dropout. The call is AllenNLP's `Elmo`'s.

    It takes its biLM as `module`: a `BiLM`, or (as AllenNLP) any module called as
    `module(char_ids, word_ids)` that returns AllenNLP's dict of "activations" (L+1 tensors
    (B, T+2, D) with the sentence boundaries) and "mask" (B, T+2). `elmo.Elmo`, the class
    users import, is this with AllenNLP's constructor (it also reads `options_file` and
    `weight_file`) and state-dict layout (this one's: `_elmo_lstm.*` as the biLM's own,
    `scalar_mix_{k}.*`).
    `quantize="int8"` quantizes a frozen `BiLM` in place for int8 CPU inference
    (docs/speed.md); it cannot be combined with `requires_grad=True`.

    A `BiLM` is frozen by default: it stays in eval mode and gets no gradient, while the
    mixes still train. `requires_grad=True` fine-tunes it (it then follows `train()`/`eval()`,
    with the LSTM dropout its config carries: none for official options without a "dropout"
    key, as AllenNLP). `vocab_to_cache` (words; word id i is `vocab_to_cache[i]`, 0 is
    padding) precomputes their char-CNN vectors, used when `forward` gets `word_inputs`.
    `scalar_mix_parameters` fixes every mix's s to these values (not trained).

    `do_layer_norm` normalises each layer before mixing by the mean and variance of the
    batch's positions, which by default include `<S>` and `</S>` (AllenNLP's numbers);
    `layer_norm_boundaries=False` leaves them out (bilm-tf's `weight_layers`).

    Ours beside AllenNLP's (keyword-only): `mode` picks "learned" (default), "average", "top"
    or "layer:K" for every mix; `layer_scales` (L+1 constants, e.g. 1 / `LayerStore.layer_rms`)
    multiply the layers before every mix.

    Stateless by default: every sentence starts from a zero LSTM state, so its vectors do not
    depend on its batch, its neighbours or its padding. AllenNLP's `Elmo` is stateful: it
    carries each batch row's final LSTM state into the same row of the next call, so a
    sentence's vectors depend on the batches before it (and on which row it lands in).
    `stateful=True` reproduces that.
    """

    def __init__(
        self,
        module: nn.Module,
        num_output_representations: int,
        requires_grad: bool = False,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        vocab_to_cache: list[str] | None = None,
        keep_sentence_boundaries: bool = False,
        scalar_mix_parameters: list[float] | None = None,
        *,
        stateful: bool = False,
        mode: str = "learned",
        layer_scales: list[float] | None = None,
        layer_norm_boundaries: bool = True,
        quantize: str | None = None,
    ) -> None:
        super().__init__()
        if quantize is not None and requires_grad:
            raise ElmoError(f"quantize={quantize!r} is for a frozen biLM: it cannot be "
                            "fine-tuned (requires_grad=True)")
        if quantize is not None:
            if not isinstance(module, BiLM):
                raise ElmoError(f"quantize={quantize!r} needs a BiLM; the module= given is a "
                                f"{type(module).__name__}")
            module.quantize_(quantize)
        self._elmo_lstm = module
        self.requires_grad = requires_grad
        self.keep_sentence_boundaries = keep_sentence_boundaries
        self.layer_norm_boundaries = layer_norm_boundaries
        self._word_embedding: nn.Embedding | None = None
        if isinstance(module, BiLM):
            module.stateful = stateful
            module.reset_states()
            module.requires_grad_(requires_grad)
            num_layers = module.num_layers
            if vocab_to_cache:
                self._word_embedding = self._cache_words(module, vocab_to_cache, requires_grad)
        else:
            if stateful or vocab_to_cache:
                raise ElmoError("stateful and vocab_to_cache need a BiLM; the module= given is "
                                f"a {type(module).__name__}")
            num_layers = module.num_layers
        for k in range(num_output_representations):
            self.add_module(f"scalar_mix_{k}", ScalarMix(
                num_layers,
                do_layer_norm=do_layer_norm,
                initial_scalar_parameters=scalar_mix_parameters,
                trainable=scalar_mix_parameters is None,
                mode=mode,
                layer_scales=layer_scales,
            ))
        self.num_output_representations = num_output_representations
        self.dropout = nn.Dropout(dropout)
        self.register_state_dict_post_hook(_write_layout)
        self.register_load_state_dict_pre_hook(_read_layout)
        self.train(self.training)

    def write_layout(self, state: dict[str, torch.Tensor], prefix: str) -> None:
        """Rewrite this module's entries (keys under `prefix`) of a state dict being saved;
        here none: `_elmo_lstm.*` (the biLM's own keys), `scalar_mix_{k}.*`."""

    def read_layout(self, state: dict[str, torch.Tensor], prefix: str) -> None:
        """Rewrite the entries under `prefix` of a state dict being loaded into this module's
        layout. Earlier versions' keys: `bilm.*` is now `_elmo_lstm.*`, `mixes.{k}.*`
        `scalar_mix_{k}.*` (each ScalarMix upgrades its own tensors)."""
        renames = [("bilm.", "_elmo_lstm.")] + [
            (f"mixes.{k}.", f"scalar_mix_{k}.") for k in range(self.num_output_representations)]
        for key in list(state):
            for old, new in renames:
                if key.startswith(prefix + old):
                    state[prefix + new + key.removeprefix(prefix + old)] = state.pop(key)

    @staticmethod
    def _cache_words(bilm: BiLM, words: list[str], trainable: bool) -> nn.Embedding:
        """The char-CNN vectors of `words` as an embedding table (V, P); id 0 is padding."""
        if trainable:
            warnings.warn("fine-tuning the biLM with vocab_to_cache: the cached word vectors "
                          "train apart from the char-CNN that made them", stacklevel=3)
        ids = bilm.batch_to_ids([words])[0]  # (V, C): the model's own token ids
        with torch.no_grad():
            table = bilm.token_encoder(ids.to(bilm.bos_ids.device))  # (V, P)
        return nn.Embedding.from_pretrained(table, freeze=not trainable,
                                            padding_idx=0)

    @property
    def bilm(self) -> BiLM:
        """The biLM (a `BiLM`; an error for a module= of another kind)."""
        if not isinstance(self._elmo_lstm, BiLM):
            raise ElmoError(f"this Elmo runs a {type(self._elmo_lstm).__name__}, not a BiLM")
        return self._elmo_lstm

    @property
    def mixes(self) -> list[ScalarMix]:
        """The ScalarMixes `scalar_mix_0` .. `scalar_mix_{N-1}`, one per representation."""
        return [getattr(self, f"scalar_mix_{k}") for k in range(self.num_output_representations)]

    @property
    def output_dim(self) -> int:
        """2P: the size of each representation."""
        if isinstance(self._elmo_lstm, BiLM):
            return self._elmo_lstm.config.output_dim
        return self._elmo_lstm.get_output_dim()

    def get_output_dim(self) -> int:
        """2P: the size of each representation (AllenNLP's name for `output_dim`)."""
        return self.output_dim

    def train(self, mode: bool = True) -> MixedBiLM:
        """A frozen BiLM stays in eval mode (no LSTM dropout) whatever the task model does."""
        super().train(mode)
        if isinstance(self._elmo_lstm, BiLM):
            self._elmo_lstm.train(mode and self.requires_grad)
        return self

    def forward(
        self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None
    ) -> Representations:
        """Character ids (B, T, C) from `batch_to_ids` (or (B, N, T, C): N sentences per
        example) -> {"elmo_representations": N x (B, T, 2P), "mask": (B, T) bool}; with
        `keep_sentence_boundaries`, T + 2 positions (<S>, </S>). `word_inputs` (B, T) (or
        (B, N, T)): ids into `vocab_to_cache` for the same tokens, to skip the char-CNN."""
        shape = inputs.shape
        char_ids = inputs.reshape(-1, *shape[-2:]) if inputs.dim() > 3 else inputs
        word_ids = None
        if word_inputs is not None:
            if self._word_embedding is None:
                warnings.warn("word_inputs were passed to Elmo without vocab_to_cache: they are "
                              "ignored", stacklevel=2)
            else:
                word_ids = word_inputs.reshape(-1, word_inputs.shape[-1])
        layers, mask, boundaries = self._layers(char_ids, word_ids)
        # Layer-norm statistics over the words, or (AllenNLP) over the words and boundaries.
        stats_mask = mask if self.layer_norm_boundaries or not boundaries else \
            F.pad(words_only(mask), (1, 1))
        out_mask = mask if self.keep_sentence_boundaries or not boundaries else words_only(mask)
        representations = []
        for mix in self.mixes:
            h = mix(layers, stats_mask)  # (B, T or T+2, 2P)
            if boundaries and not self.keep_sentence_boundaries:
                h = h[:, 1:-1] * out_mask.unsqueeze(-1)  # </S> and padding zeroed
            representations.append(self.dropout(h))
        if inputs.dim() > 3:
            lead = shape[:-2]
            out_mask = out_mask.reshape(*lead, out_mask.shape[-1])
            representations = [h.reshape(*lead, *h.shape[-2:]) for h in representations]
        return {"elmo_representations": representations, "mask": out_mask}

    def _layers(
        self, char_ids: torch.Tensor, word_ids: torch.Tensor | None
    ) -> tuple[torch.Tensor | list[torch.Tensor], torch.Tensor, bool]:
        """The L+1 layers (B, T', D) each, their mask (B, T'), and whether T' = T + 2 (the
        boundaries included): always for a foreign module; for a BiLM only when kept or
        needed for AllenNLP's layer-norm statistics."""
        if not isinstance(self._elmo_lstm, BiLM):
            out = self._elmo_lstm(char_ids, word_ids)
            return out["activations"], out["mask"].bool(), True
        boundaries = self.keep_sentence_boundaries or (
            self.layer_norm_boundaries and any(mix.do_layer_norm for mix in self.mixes))
        bilm = self._elmo_lstm
        with torch.set_grad_enabled(self.requires_grad and torch.is_grad_enabled()):
            if word_ids is not None and 0 <= int(word_ids.min()) and \
                    int(word_ids.max()) < self._word_embedding.num_embeddings:
                bos_eos = bilm.encode_tokens(torch.stack([bilm.bos_ids, bilm.eos_ids]))  # (2, P)
                out = contextualize_words(bilm, self._word_embedding.weight, word_ids, bos_eos,
                                          keep_boundaries=boundaries)
            else:  # no cache, or words outside it: the char-CNN (as AllenNLP backs off)
                out = bilm(char_ids, keep_boundaries=boundaries)
        return out.layers, out.mask, boundaries  # (L+1, B, T', 2P), (B, T')

    def represent(self, layers: torch.Tensor, mask: torch.Tensor) -> Representations:
        """Precomputed layers (L+1, B, T, 2P) and mask (B, T) -> the mixes with dropout; the
        layer-norm statistics are over the positions `mask` marks."""
        representations = [self.dropout(mix(layers, mask)) for mix in self.mixes]  # (B, T, 2P)
        return {"elmo_representations": representations, "mask": mask}


def _write_layout(module: MixedBiLM, state: dict, prefix: str, _metadata: dict) -> None:
    module.write_layout(state, prefix)


def _read_layout(module: MixedBiLM, state: dict, prefix: str, *_args) -> None:
    module.read_layout(state, prefix)
