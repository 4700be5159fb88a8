"""FASTA: sequences as records, read and checked as the released protein models expect them.

A record is a header line `>ID DESCRIPTION` (the id is the first whitespace-separated word,
taken verbatim; the rest is the description) and the sequence lines after it, joined whatever
their width. The file is read through `elmo.io.textfile.read_lines` (plain or compressed UTF-8,
CRLF). Blank lines between records and a missing final newline are fine. Each letter is one
residue, kept exactly as written. What cannot be a record is an InputFileError naming the file,
the record and the line: a sequence line before any header, a header without an id, a record
without sequence, an id that repeats an earlier one, a character that is not a letter.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from elmo.errors import InputFileError
from elmo.io.textfile import read_lines, strip_compression

SUFFIXES = (".fasta", ".fa", ".faa", ".fas")
# How a record's HDF5 dataset is named: by its id, or by biotrainer's hash of its sequence.
FASTA_KEYS = ("id", "biotrainer")
_NOT_RESIDUE = re.compile(r"[^A-Za-z\s]")
_LOWERCASE = re.compile(r"[a-z]")


def is_fasta_path(path: str | Path) -> bool:
    """Whether `path` is named as a FASTA file: .fasta .fa .faa .fas, plain or compressed."""
    name = strip_compression(Path(path).name.lower())
    return name.endswith(SUFFIXES)


@dataclass(frozen=True)
class FastaRecord:
    """One record: its id, description, sequence, and the 1-based line of its header."""

    id: str
    description: str
    sequence: str
    line: int


def read_fasta(path: str | Path, encoding_errors: str = "strict", unique_ids: bool = True
               ) -> Iterator[FastaRecord]:
    """Every record of a FASTA file in file order, checked as the module docstring says;
    `unique_ids=False` lets ids repeat (a training corpus: no set of ids kept in memory)."""
    name = str(path)
    seen: dict[str, int] = {}  # id -> line of its header
    header: tuple[str, str, int] | None = None
    parts: list[str] = []

    def record() -> FastaRecord:
        ident, description, line = header
        if not parts:
            raise InputFileError(f"{name}, line {line}: record {ident!r} has no sequence; "
                                 "remove its header or add its sequence")
        return FastaRecord(ident, description, "".join(parts), line)

    for number, text in read_lines(path, encoding_errors):
        line = number + 1
        if text.startswith(">"):
            if header is not None:
                yield record()
            fields = text[1:].split(maxsplit=1)
            ident = fields[0] if fields else ""
            description = fields[1].strip() if len(fields) > 1 else ""
            if not ident:
                raise InputFileError(f"{name}, line {line}: a header without an id; write "
                                     "'>ID description'")
            if unique_ids and ident in seen:
                raise InputFileError(f"{name}, line {line}: record {ident!r} repeats the id of "
                                     f"the record at line {seen[ident]}; give each record its "
                                     "own id")
            if unique_ids:
                seen[ident] = line
            header, parts = (ident, description, line), []
        elif text.strip():
            if header is None:
                raise InputFileError(f"{name}, line {line}: sequence before any header; a "
                                     "FASTA record starts with a line '>ID description'")
            bad = _NOT_RESIDUE.search(text)
            if bad:
                raise InputFileError(
                    f"{name}, line {line}, column {bad.start() + 1}: record {header[0]!r} holds "
                    f"{bad.group()!r}, which is not a letter; a residue is one letter (remove "
                    "stop '*', gap '-' and '.' characters)")
            parts.append("".join(text.split()))
    if header is not None:
        yield record()


@dataclass(frozen=True)
class FastaSummary:
    """What a pass over a whole FASTA file found: each record's length, in file order."""

    lengths: array

    def __len__(self) -> int:
        return len(self.lengths)

    def residues(self, records: range) -> int:
        """The number of residues of the records numbered `records` (0-based)."""
        return sum(self.lengths[records.start:records.stop])


def scan_fasta(path: str | Path, encoding_errors: str = "strict") -> FastaSummary:
    """Read and check a whole FASTA file (InputFileError at the first problem) before anything
    is written; warn once, naming the first such record, when lowercase letters occur (the
    released protein models saw uppercase only)."""
    lengths = array("q")
    lowercase = None
    for record in read_fasta(path, encoding_errors):
        lengths.append(len(record.sequence))
        if lowercase is None and _LOWERCASE.search(record.sequence):
            lowercase = record
    if lowercase is not None:
        warnings.warn(f"{path}: record {lowercase.id!r} (line {lowercase.line}) has lowercase "
                      "letters, kept as written; the released protein models saw uppercase "
                      "only (convert with str.upper() if yours did too)", stacklevel=2)
    return FastaSummary(lengths)


def scan_records(path: str | Path, encoding_errors: str = "strict") -> FastaSummary:
    """`scan_fasta`, and an InputFileError where the file holds no record to embed."""
    summary = scan_fasta(path, encoding_errors)
    if len(summary) == 0:
        raise InputFileError(f"{path} has no FASTA record ('>ID' line): there is nothing to "
                             "embed")
    return summary


def dataset_name(record_id: str) -> str:
    """The HDF5 dataset name of a record id: the id verbatim, with `%` written `%25` and `/`
    (which HDF5 reads as a path) `%2F`; the id "." is `%2E`."""
    name = record_id.replace("%", "%25").replace("/", "%2F")
    return "%2E" if name == "." else name


def biotrainer_key(sequence: str) -> str:
    """biotrainer's dataset name of a sequence (its `calculate_sequence_hash`): the hex sha256
    of 'SEQUENCE_LENGTH'."""
    return hashlib.sha256(f"{sequence}_{len(sequence)}".encode()).hexdigest()


def record_key(record: FastaRecord, keys: str = "id") -> str:
    """A record's dataset name: `dataset_name` of its id, or with keys "biotrainer" the
    `biotrainer_key` of its sequence."""
    return biotrainer_key(record.sequence) if keys == "biotrainer" else dataset_name(record.id)


def check_unique_sequences(records: Iterable[FastaRecord], source: str | Path, fix: str
                           ) -> None:
    """InputFileError naming the first of `records` whose sequence repeats an earlier one's
    (datasets keyed by the sequence would collide); `fix` says what to do about it."""
    seen: dict[str, FastaRecord] = {}
    for record in records:
        first = seen.setdefault(record.sequence, record)
        if first is not record:
            raise InputFileError(
                f"{source}, line {record.line}: record {record.id!r} has the same sequence as "
                f"{first.id!r} (line {first.line}); {fix}")
