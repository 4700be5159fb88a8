"""The CoNLL-column family of `elmo task` data: CoNLL columns (one token per line, a tag
column) and CoNLL-U, read into tagged sentences and written back with predicted tags."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from elmo.errors import InputFileError
from elmo.tasks.examples import TaggedSentence
from elmo.tasks.reader_lines import nonempty, numbered_lines, replace_column

SCHEMES = ("iob1", "iob2", "bioes")
CONLLU_TAGS = {"upos": 3, "xpos": 4}
DOCSTART = "-DOCSTART-"


def _blocks(path: Path, encoding_errors: str) -> Iterator[list[tuple[int, str]]]:
    """Groups of consecutive non-blank lines (sentences of the CoNLL formats)."""
    block: list[tuple[int, str]] = []
    for number, text in numbered_lines(path, encoding_errors):
        if text.strip():
            block.append((number, text))
        elif block:
            yield block
            block = []
    if block:
        yield block


def _check_tags(path: Path, number: int, tag: str, scheme: str | None) -> None:
    """A tag must be O or PREFIX-TYPE with a prefix of `scheme` (no check for None)."""
    if scheme is None or tag == "O":
        return
    prefixes = {"iob1": "IB", "iob2": "IB", "bioes": "BIES"}[scheme]
    if len(tag) < 3 or tag[1] != "-" or tag[0] not in prefixes:
        raise InputFileError(
            f"{path}, line {number}: tag {tag!r} is not O or one of "
            f"{', '.join(p + '-TYPE' for p in prefixes)} as --scheme {scheme} expects"
        )


def _tag_index(n_columns: int, token_column: int, tag_column: int) -> int | None:
    """Index of the tag column in a row of `n_columns`, None when the row has none."""
    index = tag_column if tag_column >= 0 else n_columns + tag_column
    if index < 0 or index >= n_columns or index == token_column % n_columns:
        return None
    return index

RowParser = Callable[[int, str, TaggedSentence], tuple[str | None, str | None]]


def _read_tagged(path: Path, encoding_errors: str, parse_row: RowParser) -> list[TaggedSentence]:
    """Sentences of blank-line-separated blocks; `parse_row(number, text, sentence so far)`
    gives each line's token and tag (None, None for a line without a token)."""
    sentences = []
    for block in _blocks(path, encoding_errors):
        sentence = TaggedSentence([], [], line=block[0][0])
        for number, text in block:
            sentence.add_row(text, *parse_row(number, text, sentence))
        if sentence.tokens:
            sentences.append(sentence)
    return nonempty(path, sentences, "sentences")


def read_conll(
    path: str | Path,
    token_column: int = 0,
    tag_column: int = -1,
    encoding_errors: str = "strict",
    scheme: str | None = None,
) -> list[TaggedSentence]:
    """CoNLL columns: one token per line, white-space separated columns, blank lines between
    sentences, ``-DOCSTART-`` lines skipped. Columns count from 0; negative from the end.

    `scheme` ("iob1", "iob2", "bioes") checks that every tag is O or PREFIX-TYPE; None accepts
    any tag (POS, chunks as plain labels). A file without a tag column reads with empty tags.
    """
    path = Path(path)
    if scheme is not None and scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES} or None, got {scheme!r}")

    first_row: list[int] = []  # the line number and column count of the file's first row

    def parse_row(number: int, text: str, sentence: TaggedSentence):
        columns = text.split()
        if columns[0] == DOCSTART:
            return None, None
        if not first_row:
            first_row.extend((number, len(columns)))
        elif len(columns) != first_row[1]:
            conllu = text.count("\t") == 9 or text.startswith("#")
            raise InputFileError(
                f"{path}, line {number}: {len(columns)} columns, but line {first_row[0]} has "
                f"{first_row[1]} columns; every row of a CoNLL file needs the same columns"
                + (" (this looks like CoNLL-U: --format conllu reads it)" if conllu else "")
            )
        if not -len(columns) <= token_column < len(columns):
            raise InputFileError(
                f"{path}, line {number}: {len(columns)} column(s), no token column "
                f"{token_column}; check --token-column"
            )
        tag_index = _tag_index(len(columns), token_column, tag_column)
        tag = None if tag_index is None else columns[tag_index]
        if tag is not None:
            _check_tags(path, number, tag, scheme)
        return columns[token_column], tag

    return _read_tagged(path, encoding_errors, parse_row)


def read_conllu(
    path: str | Path, tag: str = "upos", encoding_errors: str = "strict"
) -> list[TaggedSentence]:
    """CoNLL-U: 10 tab-separated fields per word, `#` comment lines, blank lines between
    sentences. Multiword-token ranges (``1-2``) and empty nodes (``1.1``) are skipped: the
    tokens are the syntactic words. `tag` is "upos" or "xpos"."""
    path = Path(path)
    if tag not in CONLLU_TAGS:
        raise ValueError(f"tag must be one of {tuple(CONLLU_TAGS)}, got {tag!r}")
    field_index = CONLLU_TAGS[tag]

    def parse_row(number: int, text: str, sentence: TaggedSentence):
        if text.startswith("#"):
            return None, None
        fields = text.split("\t")
        if len(fields) != 10:
            raise InputFileError(
                f"{path}, line {number}: {len(fields)} tab-separated field(s), CoNLL-U "
                "has 10 (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC)"
            )
        if "-" in fields[0] or "." in fields[0]:
            return None, None
        if not fields[0].isdigit():
            raise InputFileError(f"{path}, line {number}: ID {fields[0]!r} is not a number")
        return fields[1], fields[field_index]

    return _read_tagged(path, encoding_errors, parse_row)

RowWriter = Callable[[str, str], str]  # (a token's source line, its predicted tag) -> line


def _write_tagged(examples: list, predictions: list, write_row: RowWriter) -> list[str]:
    """The source lines of tagged sentences, each token's line given its predicted tag."""
    out: list[str] = []
    for sentence, tags in zip(examples, predictions, strict=True):
        rows = list(sentence.rows)
        for row_index, tag in zip(sentence.token_rows, tags, strict=True):
            rows[row_index] = write_row(rows[row_index], tag)
        out.extend(rows + [""])
    return out


def write_conll(examples: list, predictions: list, options: Mapping[str, Any]) -> list[str]:
    def write_row(row: str, tag: str) -> str:
        index = _tag_index(len(row.split()), options.get("token_column", 0),
                           options.get("tag_column", -1))
        return replace_column(row, index, tag, " ")

    return _write_tagged(examples, predictions, write_row)


def write_conllu(examples: list, predictions: list, options: Mapping[str, Any]) -> list[str]:
    index = CONLLU_TAGS[options.get("tag", "upos")]
    return _write_tagged(examples, predictions,
                         lambda row, tag: replace_column(row, index, tag, "\t"))
