"""Protein embedding with the names SeqVec and bio_embeddings users call, on any biLM.

`SeqVecEmbedder().embed(sequence)` is what `ElmoEmbedder(options, weights)
.embed_sentence(list(sequence))` gave with SeqVec's files: the (L+1, n, D) float32 layers of a
protein, a residue per token (SeqVec: (3, n, 1024)); `reduce_per_protein` turns them into one
vector (the sum over layers, averaged over residues). The default model is the released
`seqvec` (downloaded on first use); any name, directory or official pair works too. Stateless:
a protein's vectors do not depend on the proteins embedded with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from elmo.embedding import Embedder
from elmo.errors import ElmoError
from elmo.loading.load import load_model
from elmo.memory import AUTO
from elmo.modules.bilm import BiLM


class SeqVecEmbedder:
    """bio_embeddings' `SeqVecEmbedder`: protein sequences (str) -> per-residue layers.

    `model`: a released name (default `seqvec`), a model directory or a BiLM; or, as in
    bio_embeddings, `options_file` and `weights_file`, or `model_directory` (a directory
    holding one options/weights pair). `device`: as `Embedder` (default: cuda if available);
    `quantize="int8"` for int8 on the CPU. `max_tokens`: the most padded residues a batch
    holds (a longer protein runs alone; "auto": 16,384 on the CPU, from the free memory on a
    GPU). A batch that runs out of GPU memory is halved and computed again; a protein that
    does not fit alone raises `elmo.memory.DeviceMemoryError` naming its number and length.
    """

    name = "seqvec"

    def __init__(
        self,
        model: str | Path | BiLM | None = "seqvec",
        *,
        options_file: str | Path | None = None,
        weights_file: str | Path | None = None,
        model_directory: str | Path | None = None,
        device: str | torch.device | None = None,
        quantize: str | None = None,
        max_tokens: int | str = AUTO,
    ) -> None:
        if options_file is not None or weights_file is not None:
            model = None
        elif model_directory is not None:
            model = model_directory
        bilm = model if isinstance(model, BiLM) else \
            load_model(model, options=options_file, weights=weights_file).bilm
        self._embedder = Embedder(bilm, device=device, quantize=quantize, max_tokens=max_tokens)

    @property
    def embedder(self) -> Embedder:
        """The `Embedder` that computes the layers (its batching and file jobs)."""
        return self._embedder

    @property
    def embedding_dimension(self) -> int:
        """The size D of a residue's vector in every layer (SeqVec: 1024)."""
        return self._embedder.model.config.output_dim

    @property
    def number_of_layers(self) -> int:
        """L+1: the char-CNN layer and the L LSTM layers (SeqVec: 3)."""
        return self._embedder.model.num_layers

    def embed(self, sequence: str) -> np.ndarray:
        """The layers of one protein: (L+1, n, D) float32."""
        return self._embedder.embed_sentence(_residues(sequence))

    def embed_batch(self, batch: Sequence[str]) -> Iterator[np.ndarray]:
        """The layers of each protein of `batch`, in order."""
        yield from self.embed_many(batch)

    def embed_many(self, sequences: Iterable[str], batch_size: int | None = None
                   ) -> Iterator[np.ndarray]:
        """The layers of each protein, in input order, computed in batches of proteins of
        similar length; `batch_size` (as bio_embeddings): the most residues in one batch
        (default: `max_tokens`). Memory stays bounded however many proteins come."""
        embedder = self._embedder
        if batch_size is not None:
            embedder = Embedder(embedder.model, device=embedder.device, max_tokens=batch_size)
        for _, layers in embedder.iter_embeddings(_residues(s) for s in sequences):
            yield layers

    @staticmethod
    def reduce_per_protein(embedding: np.ndarray) -> np.ndarray:
        """(L+1, n, D) -> (D,): the sum over layers, averaged over residues (SeqVec's
        per-protein vector)."""
        return embedding.sum(0).mean(0)


def _residues(sequence: str) -> list[str]:
    """A protein sequence as tokens, a residue each."""
    if not isinstance(sequence, str):
        raise TypeError(f"a protein sequence is a str of residue letters, not "
                        f"{type(sequence).__name__}")
    if not sequence:
        raise ElmoError("an empty protein sequence has no residues to embed")
    return list(sequence)
