"""ELMo for flair: `ELMoEmbeddings`, a flair `TokenEmbeddings` over this package's `Embedder`.

It takes the constructor of flair's own `flair.embeddings.ELMoEmbeddings` (which needs
AllenNLP 0.9's `allennlp.commands.elmo`, no longer installable), so code written for it runs
with the import changed to `from elmo.flair import ELMoEmbeddings`. Unlike flair's, it is
serializable: a model trained with it is saved with `model.save` and loaded with flair's
`load` (import this module first, which registers the class with flair). See
docs/flair.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from elmo.config import BiLMConfig
from elmo.embedding import Embedder
from elmo.errors import ElmoError
from elmo.extras import import_extra
from elmo.layer_choice import token_vectors_choice
from elmo.loading.load import load_model
from elmo.loading.releases import RELEASED_MODELS
from elmo.modules.bilm import BiLM

flair = import_extra("flair", "elmo.flair (ELMo embeddings for flair)")
flair_embeddings = import_extra("flair.embeddings.base", "elmo.flair (ELMo embeddings for flair)")

FLAIR_DEFAULT_MODEL = "original"
# flair's names for released models of our catalogue under another name
FLAIR_NAMES = {"large": "original-5.5B", "5.5B": "original-5.5B"}
# flair's names for contributed models that our catalogue does not hold
NOT_IN_CATALOGUE = {"pt": "the Portuguese model", "portuguese": "the Portuguese model",
                    "pubmed": "the PubMed model"}
BATCH_SIZE = 64


def flair_model(model: str) -> str:
    """The MODEL of ours that flair's model name `model` means (any other name is ours)."""
    if model in NOT_IN_CATALOGUE:
        raise ElmoError(
            f"flair's ELMo model {model!r} ({NOT_IN_CATALOGUE[model]} that AllenNLP "
            f"contributed) is not among the released models of elmo "
            f"({', '.join(RELEASED_MODELS)}): download its options .json and weights .hdf5 "
            "and pass them as options_file= and weight_file=, or give a model directory")
    return FLAIR_NAMES.get(model, model)


# flair saves an embedding's registered name with a model and, loading it, looks that name up in
# the classes registered so far: it has no plugin mechanism (such as entry points) to find a
# class whose module was not imported. Registered under this module's path, the class's name
# in a saved model, and so in the KeyError of flair's `load` without `import elmo.flair`, says
# what to import; "ELMoEmbeddings", its name until then, still loads the models saved under it.
SAVED_NAME = "elmo.flair.ELMoEmbeddings"


@flair_embeddings.register_embeddings(SAVED_NAME)  # the name saved models now hold
@flair_embeddings.register_embeddings
class ELMoEmbeddings(flair_embeddings.TokenEmbeddings):
    """ELMo token embeddings for flair. `model`: flair's name of a released model ("small",
    "medium", "original", "large"/"5.5B") or any MODEL of ours (`elmo.load_model`'s: "default",
    a model directory, an NLPL archive, ...); or `options_file` and `weight_file`, an official
    pair. `embedding_mode`: flair's "all" (the L+1 layers concatenated, (L+1) x 2P wide), "top"
    or "average" (2P), or any other layer choice of one vector per token (`elmo.layer_choice`:
    "sum", a layer number, ...). `bilm` instead of a model: the biLM to use (how
    `from_params` rebuilds a saved one, whose weights then come from the saved state dict).

    It runs on `flair.device` and is stateless: a sentence's vectors do not depend on the
    sentences embedded with it. The biLM is a sub-module, so its weights are saved with the
    model; they are frozen (`static_embeddings`)."""

    def __init__(
        self,
        model: str = FLAIR_DEFAULT_MODEL,
        options_file: str | Path | None = None,
        weight_file: str | Path | None = None,
        embedding_mode: str = "all",
        *,
        bilm: BiLM | None = None,
    ) -> None:
        layer_choice = token_vectors_choice(embedding_mode, "embedding_mode")
        super().__init__()
        if bilm is None:
            pair = options_file is not None or weight_file is not None
            bilm = load_model(None if pair else flair_model(model), options=options_file,
                              weights=weight_file).bilm
        layer_choice.check(bilm.num_layers)
        self.model, self.embedding_mode, self.layer_choice = model, embedding_mode, layer_choice
        self.options_file, self.weight_file = options_file, weight_file
        self.name = f"elmo-{model}-{embedding_mode}"
        self.static_embeddings = True
        self.bilm = bilm.eval().requires_grad_(False)
        self.embedder: Embedder | None = None

    @property
    def embedding_length(self) -> int:
        return self.layer_choice.width(self.bilm.num_layers, self.bilm.config.output_dim)

    def _embedder(self) -> Embedder:
        """The Embedder over `self.bilm` on `flair.device` (made anew when that changes)."""
        device = torch.device(flair.device)
        if self.embedder is None or self.embedder.device != device:
            # no token cache: flair may load other weights into the biLM at any time
            self.embedder = Embedder(self.bilm, device=device, batch_size=BATCH_SIZE,
                                     token_cache_size=0)
        return self.embedder

    def token_vectors(self, layers: np.ndarray) -> np.ndarray:
        """A sentence's layers (L+1, n, 2P) -> its token vectors (n, embedding_length)."""
        return self.layer_choice.numpy(layers)

    def _add_embeddings_internal(self, sentences: list[Any]) -> list[Any]:
        words = [[token.text for token in sentence] for sentence in sentences]
        for sentence, layers in zip(sentences, self._embedder().embed_sentences(words),
                                    strict=True):
            vectors = torch.from_numpy(self.token_vectors(layers)).to(flair.device)
            for token, vector in zip(sentence, vectors, strict=True):
                token.set_embedding(self.name, vector)
        return sentences

    def to_params(self) -> dict[str, Any]:
        """The configuration flair saves with a model: the constructor's arguments and the
        biLM's architecture (its weights are in the model's state dict)."""
        return {"model": self.model, "embedding_mode": self.embedding_mode,
                "options_file": None if self.options_file is None else str(self.options_file),
                "weight_file": None if self.weight_file is None else str(self.weight_file),
                "bilm_config": self.bilm.config.to_dict()}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ELMoEmbeddings:
        """The embeddings `to_params` describes, with a biLM of the saved architecture whose
        weights the saved state dict then fills (the model files are not read again)."""
        params = dict(params)
        bilm = BiLM(BiLMConfig.from_dict(params.pop("bilm_config")))
        return cls(**params, bilm=bilm)

    def extra_repr(self) -> str:
        return f"model={self.name}"

    def __str__(self) -> str:
        return self.name
