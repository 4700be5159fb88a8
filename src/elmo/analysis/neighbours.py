"""Nearest neighbours of a word in context (the paper's Table 4).

A corpus (one tokenized sentence per line) is indexed once: one layer's vector of every token,
unit length, in an HDF5 file named by the model's weights, the corpus content, the layer and
the storage type. It is built by the embedding job (`Embedder.run_job`) into an `IndexSink`:
a segment per chunk of lines, saved as they are embedded (a killed build resumes after its last
one), joined into the index file at the end, written atomically.
Search is exact cosine: chunked matrix products over the whole index, keeping the best k.
Static neighbours compare layer 0 (the char-CNN vector, the same in every context) against the
corpus's distinct words.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import torch

from elmo.embedding import Embedder, Item, PartialSink, Progress, read_lines
from elmo.errors import ElmoError
from elmo.io.atomic import output_lock
from elmo.io.textfile import scan_input
from elmo.modules.bilm import BiLM, model_identity
from elmo.tasks.features import default_cache_dir

INDEX_VERSION = "1"
INDEX_DTYPES = ("float16", "float32")
CHUNK_ROWS = 65536


def default_index_dir() -> Path:
    """`neighbours/` beside the feature cache (in `$ELMO_CACHE`, else `~/.cache/elmo`)."""
    return default_cache_dir().parent / "neighbours"


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (zero rows stay zero), float32."""
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def top_k(
    matrix: np.ndarray | h5py.Dataset, queries: np.ndarray, k: int, exclude: Sequence[int] = ()
) -> tuple[np.ndarray, np.ndarray]:
    """Exact k largest dot products of each query with the rows of `matrix`.

    matrix (N, D) (any float type, read CHUNK_ROWS rows at a time), queries (Q, D) ->
    indices (Q, k') and scores (Q, k'), k' = min(k, N - excluded), best first; ties go to
    the lower index. Rows in `exclude` are never returned.
    """
    queries = np.asarray(queries, dtype=np.float32)
    n = matrix.shape[0]
    best_index = np.empty((len(queries), 0), dtype=np.int64)
    best_score = np.empty((len(queries), 0), dtype=np.float32)
    excluded = np.asarray(sorted(set(exclude)), dtype=np.int64)
    for start in range(0, n, CHUNK_ROWS):
        chunk = np.asarray(matrix[start:start + CHUNK_ROWS], dtype=np.float32)  # (C, D)
        scores = queries @ chunk.T  # (Q, C)
        inside = excluded[(excluded >= start) & (excluded < start + len(chunk))] - start
        scores[:, inside] = -np.inf
        index = np.broadcast_to(np.arange(start, start + len(chunk)), scores.shape)
        best_index = np.concatenate([best_index, index], axis=1)
        best_score = np.concatenate([best_score, scores], axis=1)
        if best_score.shape[1] > k:  # keep k per query: sort by (-score, index)
            keep = np.argsort(-best_score, axis=1, kind="stable")[:, :k]
            best_index = np.take_along_axis(best_index, keep, axis=1)
            best_score = np.take_along_axis(best_score, keep, axis=1)
    order = np.lexsort((best_index, -best_score), axis=-1)
    best_index = np.take_along_axis(best_index, order, axis=1)
    best_score = np.take_along_axis(best_score, order, axis=1)
    valid = np.isfinite(best_score).all(axis=0)
    return best_index[:, valid], best_score[:, valid]


def static_vectors(bilm: BiLM, words: Sequence[str], chunk: int = 4096) -> np.ndarray:
    """Layer 0 of each word, context-free: its char-CNN vector (len(words), P), float32.
    (Layer 0 repeats this vector for both directions, which leaves cosines unchanged.)"""
    device = bilm.token_encoder.projection.weight.device
    parts = [np.zeros((0, bilm.config.projection_dim), np.float32)]
    with torch.inference_mode():
        for start in range(0, len(words), chunk):
            ids = bilm.batch_to_ids([list(words[start:start + chunk])])[0]
            parts.append(bilm.token_encoder(ids.to(device)).float().cpu().numpy())
    return np.concatenate(parts)


@dataclass
class Occurrence:
    """A corpus token near the query: its line (0-based), position and cosine."""

    line: int
    position: int
    cosine: float
    tokens: list[str]


class NeighbourIndex:
    """One layer's unit vectors of every token of a corpus, and its distinct words' static
    vectors, in an HDF5 file (`vectors` (N, D), `line`, `position` (N,), `words`, `static`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.file = h5py.File(self.path, "r")
        self.vectors = self.file["vectors"]
        self.layer = int(self.file.attrs["layer"])
        self.corpus = Path(self.file.attrs["corpus"])
        self.words = list(self.file["words"].asstr()[...])
        self.static = self.file["static"][...]

    def close(self) -> None:
        self.file.close()

    def __len__(self) -> int:
        return self.vectors.shape[0]

    @classmethod
    def open_or_build(
        cls,
        embedder: Embedder,
        corpus: str | Path,
        layer: int,
        index_dir: str | Path | None = None,
        dtype: str = "float16",
        progress: bool = True,
    ) -> NeighbourIndex:
        """The index of `corpus` at `layer`, built on first use, reused while the model's
        weights and the corpus content stay the same."""
        corpus = Path(corpus)
        if not corpus.is_file():
            raise ElmoError(f"corpus not found: {corpus} (give a text file, one tokenized "
                            f"sentence per line)")
        if dtype not in INDEX_DTYPES:
            raise ElmoError(f"index dtype must be one of {INDEX_DTYPES}, got {dtype!r}")
        top = embedder.model.num_layers - 1
        if not 0 <= layer <= top:
            raise ElmoError(f"layer {layer}: the model has layers 0..{top}")
        _, digest = scan_input(corpus)
        key = hashlib.sha256(
            f"elmo-neighbours {INDEX_VERSION} {layer} {dtype} {model_identity(embedder.model)} "
            f"{digest}".encode()).hexdigest()[:32]
        path = Path(index_dir if index_dir is not None else default_index_dir()) / f"{key}.hdf5"
        path.parent.mkdir(parents=True, exist_ok=True)
        with output_lock(path, wait=True):  # a build of the same index by another process
            if not path.exists():
                _build_index(path, embedder, corpus, layer, dtype, progress)
        return cls(path)

    def nearest_occurrences(self, query: np.ndarray, k: int) -> list[Occurrence]:
        """The k corpus tokens whose vectors are nearest (cosine) to query (D,)."""
        index, scores = top_k(self.vectors, unit_rows(query[None]), k)
        lines, positions = self.file["line"][...], self.file["position"][...]
        found = [(int(lines[i]), int(positions[i]), float(s))
                 for i, s in zip(index[0], scores[0], strict=True)]
        text = dict(_lines_of(self.corpus, {line for line, _, _ in found}))
        return [Occurrence(line, pos, score, text[line]) for line, pos, score in found]

    def nearest_words(self, static_query: np.ndarray, k: int, word: str) -> list[tuple[str, float]]:
        """The k distinct corpus words (other than `word`) nearest to a static vector (P,)."""
        exclude = [i for i, w in enumerate(self.words) if w == word]
        index, scores = top_k(self.static, unit_rows(static_query[None]), k, exclude)
        return [(self.words[i], float(s)) for i, s in zip(index[0], scores[0], strict=True)]


def _lines_of(corpus: Path, wanted: set[int]) -> Iterator[tuple[int, list[str]]]:
    for line in read_lines(corpus, "replace"):
        if line.number in wanted:
            yield line.number, line.tokens


def _build_index(
    path: Path, embedder: Embedder, corpus: Path, layer: int, dtype: str, progress: bool
) -> None:
    """Embed the lines of `corpus` that have tokens into PATH.partial,
    resuming after the segments a killed build saved; then write the index file `path`."""

    def items(start: int) -> Iterator[Item]:
        """The lines with tokens, numbered from 0 (the job counts them, not the lines)."""
        lines = (line for line in read_lines(corpus) if line.tokens)
        for number, line in enumerate(lines):
            if number >= start:
                yield Item(number, str(line.number), line.tokens, len(line.tokens),
                           where=f"{corpus}, line {line.number + 1:,}")

    sink = IndexSink(path, embedder.model, corpus, layer, dtype)
    # the partial's segments count lines with tokens (before: all lines)
    embedder.run_job(items, sink, {"index": path.stem, "counts": "lines with tokens"},
                     Progress(f"indexing {corpus.name}", "line", unit=" tok",
                              before=lambda done: 0, enabled=progress))


class IndexSink(PartialSink):
    """The job's `Sink` of a neighbour index: per chunk of lines, a segment of their tokens'
    unit vectors at `layer` (in `dtype`), line numbers and positions; at the end, the index
    file: those joined (`vectors` (N, D), `line`, `position` (N,)), the corpus's distinct words
    and their static vectors."""

    def __init__(self, path: Path, bilm: BiLM, corpus: Path, layer: int, dtype: str) -> None:
        super().__init__(path.with_name(path.name + ".partial"))
        self.output, self.bilm, self.corpus, self.layer, self.dtype = \
            path, bilm, corpus, layer, dtype

    def save(self, items: Sequence[Item], layers: Sequence[np.ndarray]) -> None:
        self.partial.save(items[-1].number + 1, [
            ("vectors", np.concatenate([unit_rows(a[self.layer]).astype(self.dtype)
                                        for a in layers])),
            ("line", np.concatenate([np.full(len(item.tokens), int(item.name), dtype=np.int64)
                                     for item in items])),
            ("position", np.concatenate([np.arange(len(item.tokens), dtype=np.int32)
                                         for item in items])),
        ])

    def finish(self) -> None:
        vocabulary = list(dict.fromkeys(t for line in read_lines(self.corpus)
                                        for t in line.tokens))
        if not vocabulary:
            self.discard()
            raise ElmoError(f"{self.corpus}: no tokens to index (empty file?)")
        with self.partial.final(self.output) as out:
            self.partial.concatenate(out, chunk_rows=4096)  # vectors (N, D), line, position
            out.create_dataset("words", data=vocabulary, dtype=h5py.string_dtype("utf-8"))
            out.create_dataset("static", data=unit_rows(static_vectors(self.bilm, vocabulary)))
            out.attrs.update({"layer": self.layer, "corpus": str(self.corpus.resolve()),
                              "dtype": self.dtype})
