"""ELMo for spaCy v3: the pipe "elmo", over this package's `Embedder`.

`nlp.add_pipe("elmo", config={...})` works without importing this module: the factory is
registered through the `spacy_factories` entry point. The pipe embeds each doc's own tokens
and sets `doc.tensor` (tokens, width) and the vectors of tokens, spans and docs (user hooks:
a span's and a doc's vector is the mean of its tokens'), so `similarity` compares them by
cosine. `nlp.to_disk` saves the pipe's config, which names the model: the model's files are
not copied. See docs/spacy.md.
"""

# No `from __future__ import annotations`: spaCy reads the factory's annotations at run time.

from collections.abc import Callable, Iterable, Iterator
from itertools import islice

import numpy as np

from elmo.device import resolve_device
from elmo.embedding import Embedder
from elmo.extras import import_extra
from elmo.layer_choice import token_vectors_choice

spacy = import_extra("spacy", "elmo.spacy (the ELMo pipe for spaCy)")

FACTORY = "elmo"
DEFAULT_CONFIG = {"model": "default", "layers": "average", "device": None, "batch_size": 64}

LayerMix = Callable[[np.ndarray], np.ndarray]  # (L+1, n, 2P) -> (n, width)


def layer_mix(layers: str | int, n_layers: int) -> LayerMix:
    """What `layers` asks of each doc's layers (L+1, n, 2P): a layer choice of one vector per
    token (`elmo.layer_choice`): "average", "top", "all" (the layers side by side, (n, (L+1) x
    2P)), layer number K, the weights learned by an `elmo task train` run (its
    layer_weights.json, or its directory: the "input" mix), ..."""
    choice = token_vectors_choice(layers, "layers")
    choice.check(n_layers)
    return choice.numpy


class ElmoPipe:
    """The spaCy pipe: sets `doc.tensor` to the chosen ELMo layers of the doc's tokens and
    the vector hooks of the doc, its spans and tokens."""

    def __init__(self, name: str, model: str, layers: str | int, device: str | None,
                 batch_size: int) -> None:
        self.name, self.batch_size = name, batch_size
        # resolved here, so that an error names the pipe's config key, not the command's flag
        device = resolve_device(device, cpu_setting='config={"device": "cpu"}')
        self.embedder = Embedder.from_pretrained(model, device=device, batch_size=batch_size)
        self.mix = layer_mix(layers, self.embedder.model.num_layers)

    def __call__(self, doc):
        return next(self.pipe([doc]))

    def pipe(self, docs: Iterable, batch_size: int | None = None) -> Iterator:
        docs = iter(docs)
        while chunk := list(islice(docs, batch_size or self.batch_size)):
            words = [[token.text for token in doc] for doc in chunk]
            for doc, layers in zip(chunk, self.embedder.embed_sentences(words), strict=True):
                set_vectors(doc, self.mix(layers))
                yield doc


def set_vectors(doc, tensor: np.ndarray) -> None:
    """`doc.tensor` and the vector and similarity hooks of the doc, its spans and tokens."""
    doc.tensor = tensor
    doc.user_hooks.update(vector=_doc_vector, has_vector=_has_vector, similarity=_similarity)
    doc.user_span_hooks.update(vector=_span_vector, has_vector=_has_vector,
                               similarity=_similarity)
    doc.user_token_hooks.update(vector=_token_vector, has_vector=_has_vector,
                                similarity=_similarity)


def _mean(vectors: np.ndarray) -> np.ndarray:
    """The mean of token vectors (n, width); zeros for none."""
    return vectors.mean(axis=0) if len(vectors) else np.zeros(vectors.shape[1], vectors.dtype)


def _doc_vector(doc) -> np.ndarray:
    return _mean(doc.tensor)


def _span_vector(span) -> np.ndarray:
    return _mean(span.doc.tensor[span.start:span.end])


def _token_vector(token) -> np.ndarray:
    return token.doc.tensor[token.i]


def _has_vector(_) -> bool:
    return True


def _similarity(this, other) -> float:
    """The cosine of the two vectors (0 where either is zero)."""
    norms = np.linalg.norm(this.vector) * np.linalg.norm(other.vector)
    return float(np.dot(this.vector, other.vector) / norms) if norms else 0.0


@spacy.Language.factory(FACTORY, default_config=DEFAULT_CONFIG)
def make_elmo(nlp, name: str, model: str, layers: str | int, device: str | None,
              batch_size: int) -> ElmoPipe:
    """The "elmo" pipe. `model`: any MODEL of ours (a name, or a directory or NLPL archive:
    an absolute path keeps a saved pipeline loadable from anywhere); `layers`: see
    `layer_mix`; `device`: "cpu", "cuda", ... (None: CUDA if available); `batch_size`: the
    most docs embedded together."""
    return ElmoPipe(name, model, layers, device, batch_size)
