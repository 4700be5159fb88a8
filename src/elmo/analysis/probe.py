"""Linear probes of each biLM layer for token tags (the paper's Table 6).

Every sentence is embedded once for all layers; a softmax regression (scikit-learn's
multinomial logistic regression on standardised features) is trained on the frozen vectors
of each layer alone and of the layer average, and scored by test accuracy.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from elmo.embedding import Embedder
from elmo.errors import ElmoError
from elmo.extras import import_extra
from elmo.tasks.readers import FORMATS, TaggedSentence

from .embedding import embed_items

# elmo.analysis.settings.ProbeSettings, which takes its --format choices from TAGGED_FORMATS
# below: named here by what the formats read of it, not imported (no circle)
ProbeSettings = Any

AVERAGE = "average"


@dataclass(frozen=True)
class TaggedFormat:
    """How the probe reads a dataset format of `elmo task` (`elmo.tasks.readers.FORMATS`)
    that gives tagged sentences: `options(settings)`, the reader's options from the probe's
    settings (`encoding_errors` besides); `fix(settings)`, what to do when a file lacks
    tags; `note`, what `--format` says of it."""

    options: Callable[[ProbeSettings], dict[str, Any]]
    fix: Callable[[ProbeSettings], str]
    note: str = ""

    def read(self, name: str, path: str | Path, settings: ProbeSettings
             ) -> list[TaggedSentence]:
        """The tagged sentences of the file `path` in format `name`, each with its tags
        (an error naming the fix for one without)."""
        sentences = FORMATS[name].read(path, **self.options(settings),
                                       encoding_errors=settings.encoding_errors)
        check_tagged(sentences, path, self.fix(settings))
        return sentences


# The formats the probe reads, the default first.
TAGGED_FORMATS = {
    "conllu": TaggedFormat(
        lambda s: {"tag": s.conllu_tag},
        lambda s: "CoNLL-U files have their tags in UPOS or XPOS (--conllu-tag)"),
    "conll": TaggedFormat(
        lambda s: {"token_column": s.token_column, "tag_column": s.tag_column},
        lambda s: f"--tag-column {s.tag_column} is not a tag column of this file; give the "
        "right --tag-column (0-based, negative counts from the end)",
        note="white-space columns"),
}


@dataclass
class TokenFeatures:
    """All layers of every token of a tagged data set, and the tokens' tags."""

    layers: np.ndarray  # (L+1, N, D) float32
    tags: np.ndarray  # (N,) str

    @property
    def names(self) -> list[str]:
        """The probed representations: "0" .. "L" and "average"."""
        return [str(k) for k in range(self.layers.shape[0])] + [AVERAGE]

    def representation(self, name: str) -> np.ndarray:
        """(N, D): layer `name` or the average of all layers."""
        return self.layers.mean(axis=0) if name == AVERAGE else self.layers[int(name)]


def check_tagged(sentences: Sequence[TaggedSentence], path: str | Path, fix: str) -> None:
    """Every sentence must have one tag per token (a reader leaves tags empty when the tag
    column asked for is absent)."""
    for sentence in sentences:
        if len(sentence.tags) != len(sentence.tokens):
            raise ElmoError(f"{path}, line {sentence.line}: no tag for these tokens; {fix}")


def token_features(
    embedder: Embedder, sentences: Sequence[TaggedSentence], desc: str = "embedding",
    progress: bool = True,
) -> TokenFeatures:
    """Embed each sentence once; gather every token's L+1 layer vectors."""
    n = sum(len(s.tokens) for s in sentences)
    config = embedder.model.config
    layers = np.empty((embedder.model.num_layers, n, config.output_dim), np.float32)
    tags: list[str] = []
    for sentence, vectors in embed_items(embedder, sentences, lambda s: s.tokens, desc,
                                         progress):  # vectors (L+1, n_i, D)
        layers[:, len(tags):len(tags) + vectors.shape[1]] = vectors
        tags.extend(sentence.tags)
    return TokenFeatures(layers, np.array(tags))


def probe_accuracy(
    train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray,
    c: float = 1.0, max_iter: int = 300, name: str = "",
) -> float:
    """Test accuracy (0..100) of softmax regression trained on (train_x (N, D), train_y)."""
    linear_model = import_extra("sklearn.linear_model", "the probe")
    preprocessing = import_extra("sklearn.preprocessing", "the probe")
    exceptions = import_extra("sklearn.exceptions", "the probe")
    if len(np.unique(train_y)) < 2:
        raise ElmoError("the probe's training data has fewer than 2 distinct tags")
    scaler = preprocessing.StandardScaler().fit(train_x)
    classifier = linear_model.LogisticRegression(C=c, max_iter=max_iter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", exceptions.ConvergenceWarning)
        classifier.fit(scaler.transform(train_x), train_y)
    if any(issubclass(w.category, exceptions.ConvergenceWarning) for w in caught):
        warnings.warn(f"probe {name}: not converged in {max_iter} iterations; the accuracy "
                      f"may still rise with a larger --max-iter", stacklevel=2)
    predicted = classifier.predict(scaler.transform(test_x))
    return 100.0 * float(np.mean(predicted == test_y))


def probe_layers(
    train: TokenFeatures, test: TokenFeatures, c: float = 1.0, max_iter: int = 300,
    progress: bool = True,
) -> dict[str, float]:
    """Accuracy of a probe per representation: {"0": ..., ..., "L": ..., "average": ...};
    a progress bar counts the probes fitted."""
    return {name: probe_accuracy(train.representation(name), train.tags,
                                 test.representation(name), test.tags, c, max_iter, name)
            for name in tqdm(train.names, desc="fitting probes", unit="probe",
                             disable=not progress)}


def majority_accuracy(train_tags: np.ndarray, test_tags: np.ndarray) -> float:
    """Accuracy (0..100) of always answering the most frequent training tag."""
    values, counts = np.unique(train_tags, return_counts=True)
    return 100.0 * float(np.mean(test_tags == values[counts.argmax()]))
