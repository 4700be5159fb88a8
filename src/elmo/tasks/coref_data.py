"""Coreference examples: CoNLL-2012 documents (`elmo.tasks.conll2012`) cut into segments of at
most `segment_words` words, which bound a training step's memory; and predicted clusters
written back into the documents' last column, where the reference scorer reads them.

A segment holds whole sentences while they fit (a longer sentence is cut into pieces of
`segment_words`); a gold mention that crosses a segment's edge cannot be predicted (the data
notes count such mentions). Scoring compares each document's predicted clusters, its
segments' together, with all of its gold clusters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elmo.io.atomic import atomic_write_text
from elmo.tasks.conll2012 import Document, read_conll2012

Span = tuple[int, int]  # (start, end) word offsets, end inclusive
GENRES = ("bc", "bn", "mz", "nw", "pt", "tc", "wb")  # OntoNotes'; any other: one more index


@dataclass
class CorefSegment:
    """Consecutive words of a document, as sentences (or pieces of one), with the gold
    mentions that lie inside them."""

    document: Document = field(repr=False)
    offset: int  # the document-level offset of its first word
    sentences: list[list[str]]
    speakers: list[int]  # a number per word: its speaker's in the document
    mentions: list[tuple[int, int, int]]  # (start, end, cluster number), segment offsets

    @property
    def line(self) -> int:
        return self.document.line

    @property
    def size(self) -> int:
        return sum(len(s) for s in self.sentences)

    @property
    def genre(self) -> int:
        """Its document's genre as an index in GENRES (len(GENRES): another)."""
        genre = self.document.genre
        return GENRES.index(genre) if genre in GENRES else len(GENRES)


def segments(document: Document, segment_words: int) -> list[CorefSegment]:
    """`document` in segments of at most `segment_words` words, in order."""
    pieces = [s.words[i: i + segment_words] for s in document.sentences
              for i in range(0, len(s.words), segment_words)]
    groups: list[list[list[str]]] = []
    for piece in pieces:
        if not groups or sum(map(len, groups[-1])) + len(piece) > segment_words:
            groups.append([])
        groups[-1].append(piece)
    speaker_index: dict[str, int] = {}
    speakers = [speaker_index.setdefault(s, len(speaker_index)) for s in document.speakers]
    clusters = document.token_clusters()
    out, offset = [], 0
    for group in groups:
        n = sum(map(len, group))
        mentions = [(start - offset, end - offset, c) for c, cluster in enumerate(clusters)
                    for start, end in cluster if offset <= start and end < offset + n]
        out.append(CorefSegment(document, offset, group, speakers[offset: offset + n],
                                sorted(mentions)))
        offset += n
    return out


def read_coref(path: str | Path, segment_words: int = 512, encoding_errors: str = "strict"
               ) -> list[CorefSegment]:
    """The segments of every document of a `*_gold_conll` file (or folder of them)."""
    return [segment for document in read_conll2012(path, encoding_errors)
            for segment in segments(document, segment_words)]


def documents_of(examples: Sequence[CorefSegment]) -> list[Document]:
    """The documents of `examples`, each once, in order."""
    return list({id(e.document): e.document for e in examples}.values())


def document_clusters(examples: Sequence[CorefSegment],
                      predictions: Sequence[list[list[Span]]]) -> dict[int, list[list[Span]]]:
    """Each document's predicted clusters (by the document's id()), its segments' together,
    in document offsets."""
    clusters: dict[int, list[list[Span]]] = {id(d): [] for d in documents_of(examples)}
    for segment, predicted in zip(examples, predictions, strict=True):
        clusters[id(segment.document)] += predicted
    return clusters


def cut_mentions(examples: Sequence[CorefSegment]) -> int:
    """Gold mentions that no segment holds whole (they cross a segment's edge)."""
    documents = documents_of(examples)
    total = sum(len(m) for d in documents for m in d.token_clusters())
    return total - sum(len(e.mentions) for e in examples)


def coref_column(clusters: Sequence[Sequence[Span]], n_words: int) -> list[str]:
    """The last column of a document's rows: `(n`, `n)`, `(n)`, several joined by `|`, `-`."""
    cells: list[list[str]] = [[] for _ in range(n_words)]
    for number, cluster in enumerate(clusters):
        for start, end in sorted(cluster):
            if start == end:
                cells[start].append(f"({number})")
            else:
                cells[start].append(f"({number}")
                cells[end].append(f"{number})")
    return ["|".join(c) or "-" for c in cells]


def _with_last_column(row: str, cell: str) -> str:
    """`row` with its last white-space separated column replaced by `cell`."""
    return re.sub(r"\S+(\s*)$", lambda m: cell + m.group(1), row, count=1)


def write_coref_predictions(path: str | Path, examples: Sequence[CorefSegment],
                            predictions: Sequence[list[list[Span]]]) -> None:
    """The documents of `examples` in the CoNLL-2012 layout, their rows as read, the last
    column holding the predicted clusters."""
    clusters = document_clusters(examples, predictions)
    lines = []
    for document in documents_of(examples):
        column = iter(coref_column(clusters[id(document)], len(document.words)))
        lines.append(f"#begin document ({document.name}); part {document.part:03d}")
        for sentence in document.sentences:
            lines += [_with_last_column(row, next(column)) for row in sentence.rows]
            lines.append("")
        lines.append("#end document")
    atomic_write_text(path, "\n".join(lines) + "\n")
