"""OntoNotes named entities from CoNLL-2012 (`elmo task --task tagging --format conll2012`):
each sentence's NER column as BIO tags, and predicted tags written back into that column.

A sentence keeps its document's `#begin document` line (the first) and `#end document` line
(the last) among its source lines, so the written predictions are a CoNLL-2012 file again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elmo.tasks.conll2012 import END, read_conll2012
from elmo.tasks.examples import TaggedSentence
from elmo.tasks.reader_lines import replace_column
from elmo.tasks.srl_data import spans_to_tags, tags_to_spans

NER_COLUMN = 10


def entity_cells(tags: Sequence[str]) -> list[str]:
    """The NER column of BIO tags: `(TYPE)`, or `(TYPE*` ... `*)`, and `*` elsewhere."""
    cells = ["*"] * len(tags)
    for label, start, end in tags_to_spans(tags):
        cells[start] = f"({label})" if start == end else f"({label}*"
        if end > start:
            cells[end] = "*)"
    return cells


def read_ner(path: str | Path, encoding_errors: str = "strict") -> list[TaggedSentence]:
    """Every sentence of a CoNLL-2012 file (or folder) with its entities as BIO tags."""
    sentences = []
    for document in read_conll2012(path, encoding_errors):
        last = len(document.sentences) - 1
        for number, sentence in enumerate(document.sentences):
            begin = [f"#begin document ({document.name}); part {document.part:03d}"] \
                if number == 0 else []
            end = ["", END] if number == last else []
            rows = [*begin, *sentence.rows, *end]
            sentences.append(TaggedSentence(
                list(sentence.words), spans_to_tags(sentence.entities, len(sentence.words)),
                line=sentence.line, rows=rows,
                token_rows=list(range(len(begin), len(begin) + len(sentence.words)))))
    return sentences


def write_ner(examples: list, predictions: list, options: Mapping[str, Any]) -> list[str]:
    """The documents of `examples` (from `read_ner`) with each NER column predicted."""
    out: list[str] = []
    for sentence, tags in zip(examples, predictions, strict=True):
        rows = list(sentence.rows)
        for row_index, cell in zip(sentence.token_rows, entity_cells(tags), strict=True):
            rows[row_index] = replace_column(rows[row_index], NER_COLUMN, cell, " ")
        out.extend([*rows, ""])
    return out
