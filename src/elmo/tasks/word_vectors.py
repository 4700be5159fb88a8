"""Static word vectors (word2vec / GloVe text format) as a task model's first word embeddings.

The text format: one word per line followed by its values, separated by single spaces; an
optional first line "COUNT DIM" (word2vec's header); plain or .gz. Only the vectors of the
words asked for are kept, so a file of millions of words needs little memory; every line's
number of values is checked, and a line that does not fit stops the read with the file and
line.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from elmo.errors import InputFileError
from elmo.io.textfile import read_lines


def _header(fields: list[str]) -> tuple[int, int] | None:
    """(count, dim) if `fields` is a word2vec header line."""
    if len(fields) == 2 and all(f.isdigit() for f in fields):
        return int(fields[0]), int(fields[1])
    return None


def vector_dim(path: str | Path) -> int:
    """The dimension of the vectors in `path` (from its header or first line)."""
    for _, text in read_lines(path):
        if text.strip():
            fields = text.rstrip(" ").split(" ")
            header = _header(fields)
            return header[1] if header else len(fields) - 1
    raise InputFileError(f"{path} holds no word vectors")


def read_word_vectors(
    path: str | Path, words: Collection[str] | None = None, progress: bool = False
) -> tuple[int, dict[str, np.ndarray]]:
    """(dimension, {word: vector}) of the words of `path` that are in `words` (None: all).
    The first vector of a word that occurs twice is kept. A line whose number of values
    differs from the header's or the first line's, a value that is not a number, or a header
    count that does not match the file raises InputFileError naming the file and line."""
    dim: int | None = None
    count: int | None = None
    where = ""
    vectors: dict[str, np.ndarray] = {}
    lines = 0
    bar = tqdm(read_lines(path), unit=" lines", unit_scale=True, disable=not progress,
               desc=f"reading {Path(path).name}")
    for number, text in bar:
        text = text.rstrip(" ")
        if not text:
            continue
        if dim is None and count is None and (header := _header(text.split(" "))):
            count, dim = header
            where = f"the header (line {number + 1})"
            continue
        values = text.count(" ")
        if dim is None:
            dim, where = values, f"line {number + 1}"
            if dim < 1:
                raise InputFileError(f"{path}, line {number + 1}: a word without values; the "
                                     "word vector format is 'WORD V1 V2 ...' per line")
        if values != dim:
            raise InputFileError(f"{path}, line {number + 1}: {values} values, but {where} "
                                 f"gives vectors of {dim}; every vector needs the same "
                                 "dimension")
        lines += 1
        word, _, rest = text.partition(" ")
        if (words is None or word in words) and word not in vectors:
            try:
                vectors[word] = np.array(rest.split(" "), dtype=np.float32)
            except ValueError:
                raise InputFileError(f"{path}, line {number + 1}: a value of {word!r} is not "
                                     "a number") from None
    if dim is None:
        raise InputFileError(f"{path} holds no word vectors")
    if count is not None and count != lines:
        raise InputFileError(f"{path}: the header says {count} vectors, the file holds {lines};"
                             " fix the header or remove it (it is optional)")
    return dim, vectors


def load_word_vectors(embedding: nn.Embedding, vocab: Sequence[str], path: str | Path,
                      first: int = 2, progress: bool = False) -> dict[str, Any]:
    """Set the rows of `embedding` for `vocab[first:]` (after the special words) to their
    vectors from `path`: the word itself, else its lower-cased form (GloVe's are lower case).
    Rows of words the file lacks keep their random start, rescaled to the spread of the
    file's vectors. Returns the coverage of the vocabulary: vocabulary, found, lowercased,
    coverage (%), file, dim."""
    words = vocab[first:]
    dim, vectors = read_word_vectors(path, set(words) | {w.lower() for w in words}, progress)
    if dim != embedding.embedding_dim:
        raise InputFileError(f"{path}: vectors of {dim} values, the model's word embeddings "
                             f"have {embedding.embedding_dim}; leave out --embedding-dim or "
                             f"set it to {dim}")
    found = lowercased = 0
    std = float(np.std(np.stack(list(vectors.values())))) if vectors else 1.0
    with torch.no_grad():
        for i, word in enumerate(words, start=first):
            vector = vectors.get(word)
            if vector is None and (vector := vectors.get(word.lower())) is not None:
                lowercased += 1
            if vector is None:
                embedding.weight[i] *= std
            else:
                embedding.weight[i] = torch.from_numpy(vector)
                found += 1
    return {"file": str(path), "dim": dim, "vocabulary": len(words), "found": found,
            "lowercased": lowercased, "coverage": 100.0 * found / max(len(words), 1)}
