"""simple_elmo's `ElmoModel` over this package's `Embedder`, for the NLPL repository's models.

simple_elmo (TensorFlow) loads the ELMo models of the NLPL vector repository, a ZIP archive
or its extracted directory. Scripts written for simple_elmo 0.9 run with the import changed to
`from elmo.simple_elmo import ElmoModel`; `load` takes any MODEL of ours as well. See
docs/simple-elmo.md, which also says where the numbers differ from simple_elmo's: it
carries the LSTM state from batch to batch (after a warm-up run of the first batch), while
here a sentence's vectors never depend on the other sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from elmo.embedding import Embedder
from elmo.errors import ElmoError
from elmo.layer_choice import LayerChoice, parse_layer_choice
from elmo.loading.load import load_model

LOADED = "The model is now loaded."  # what simple_elmo's `load` returns


class ElmoModel:
    """simple_elmo's ELMo model: `load` a model, then `get_elmo_vectors` (token vectors) or
    `get_elmo_vector_average` (one normalised vector per sentence) of tokenized texts."""

    def __init__(self) -> None:
        self.embedder: Embedder | None = None
        self.batch_size: int | None = None
        self.vector_size: int | None = None  # 2P, the width of a layer
        self.n_layers: int | None = None  # L + 1

    def load(self, directory: str | Path, max_batch_size: int = 32, limit: int = 100,
             full: bool = False, *, device: str | None = None) -> str:
        """Load an NLPL model (`directory`: its ZIP archive or extracted directory) or any
        MODEL of ours. `max_batch_size`: the most sentences computed together. `limit`
        (simple_elmo: how many vocabulary words get their characters cached) changes nothing
        here. `full=True` (simple_elmo's language-model predictions) is not supported.
        `device`: where to compute (default: CUDA if available)."""
        if full:
            raise ElmoError("full=True loads simple_elmo's language-model checkpoints for "
                            "get_elmo_substitutes, which elmo.simple_elmo does not provide; "
                            "call load without it for the ELMo vectors")
        bilm = load_model(directory).bilm
        self.embedder = Embedder(bilm, device=device, batch_size=max_batch_size)
        self.batch_size = max_batch_size
        self.vector_size, self.n_layers = bilm.config.output_dim, bilm.num_layers
        return LOADED

    def get_elmo_vectors(self, texts: Sequence[Sequence[str]], warmup: bool = True,
                         layers: str = "average", session: None = None) -> np.ndarray:
        """The token vectors of tokenized `texts`: (texts, longest, 2P), or with
        `layers="all"` (texts, L+1, longest, 2P); zeros past a text's end. `layers`:
        "average" (the layers' mean: simple_elmo's scalar mix, whose weights start equal and
        are never trained there), "top", "all", or another layer choice
        (`elmo.layer_choice`). `warmup` changes nothing here (no state is carried between
        batches); `session` (a TensorFlow session) must be None."""
        choice, embedded = self._embed(texts, layers, session)
        longest = max((len(t) for t in texts), default=0)
        vectors = np.zeros((len(texts), *choice.shape(self.n_layers, longest, self.vector_size)),
                           dtype=np.float32)
        for row, text_layers in zip(vectors, embedded, strict=True):
            selected = choice.numpy(text_layers)
            row[..., : selected.shape[-2], :] = selected
        return vectors

    def get_elmo_vector_average(self, texts: Sequence[Sequence[str]], warmup: bool = True,
                                layers: str = "average", session: None = None) -> np.ndarray:
        """One vector per text: the mean of its token vectors, divided by its L2 norm (as
        simple_elmo does): (texts, 2P), or (texts, L+1, 2P) with `layers="all"` (normalised
        over the whole matrix). A text without tokens gets zeros. Arguments as for
        `get_elmo_vectors`."""
        choice, embedded = self._embed(texts, layers, session)
        *layer_axis, _, width = choice.shape(self.n_layers, 0, self.vector_size)
        averages = np.zeros((len(texts), *layer_axis, width), dtype=np.float32)
        for row, text_layers in zip(averages, embedded, strict=True):
            if text_layers.shape[1]:
                mean = choice.numpy(text_layers).mean(axis=-2)
                row[...] = mean / np.linalg.norm(mean)
        return averages

    def _embed(self, texts: Sequence[Sequence[str]], layers: str | int,
               session: None) -> tuple[LayerChoice, list[np.ndarray]]:
        """The layer choice and the layers (L+1, n, 2P) of each text, after checking the
        arguments."""
        if self.embedder is None:
            raise ElmoError("no model is loaded: call load(directory) first")
        choice = parse_layer_choice(layers)
        choice.check(self.n_layers)
        if session is not None:
            raise ElmoError("session= takes a TensorFlow session, which elmo.simple_elmo does "
                            "not use: leave it out")
        return choice, self.embedder.embed_sentences(texts)

