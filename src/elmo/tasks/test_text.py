"""The text of a task's test files, to leave what repeats it out of a training corpus
(`elmo prepare-corpus --exclude-overlap`): one `TestTextKind` per format, in `TEST_TEXTS`,
each read by the task reader of its format where there is one.

squad (SQuAD-layout JSON, CMRC 2018): every passage and question; conll (a token per line, a
tag column last: MSRA NER's `char tag` lines): the sentences, their tokens joined by spaces;
text (a segmented SIGHAN 2005 gold file, or any text): every line. A file's kind is the first
that detects it (its name, or its first non-blank line); text takes every file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from elmo.errors import InputFileError
from elmo.io.overlap import OverlapSet, overlap_set
from elmo.io.textfile import read_lines
from elmo.tasks.conll_readers import read_conll
from elmo.tasks.readers import format_of_name
from elmo.tasks.squad import read_squad

_TAG = re.compile(r"O|[BIESML]-\S+")  # a BIO/BIOES tag: the last column of a CoNLL line


@dataclass(frozen=True)
class TestTextKind:
    """A format of test files: `detect(path, first_line)`, `texts(path)` -> its texts."""

    __test__ = False  # a record, not a class of tests for pytest
    name: str
    description: str
    detect: Callable[[Path, str], bool]
    texts: Callable[[Path], Iterable[str]]


def _first_line(path: Path) -> str:
    return next((text.strip() for _, text in read_lines(path) if text.strip()), "")


def _squad_texts(path: Path) -> list[str]:
    questions = read_squad(path, "whitespace")
    passages = {id(q.passage): q.passage.context for q in questions}
    return [*passages.values(), *(" ".join(q.question) for q in questions)]


def _is_conll(path: Path, first: str) -> bool:
    columns = first.split()
    return format_of_name(path) == "conll" or (len(columns) >= 2
                                                and _TAG.fullmatch(columns[-1]) is not None)


TEST_TEXTS: dict[str, TestTextKind] = {k.name: k for k in (
    TestTextKind("squad", "SQuAD-layout JSON (.json; CMRC 2018): passages and questions",
                 lambda path, first: format_of_name(path) == "squad", _squad_texts),
    TestTextKind("conll", "a token per line and a tag last (MSRA NER's 'char tag' lines): "
                 "the sentences", _is_conll,
                 lambda path: (" ".join(s.tokens) for s in read_conll(path))),
    TestTextKind("text", "text (SIGHAN 2005's segmented gold files): the lines",
                 lambda path, first: True, lambda path: (t for _, t in read_lines(path))),
)}


def text_kind_of(path: Path) -> TestTextKind:
    """The kind of the test file `path`: the first of TEST_TEXTS that detects it."""
    first = _first_line(path)
    return next(k for k in TEST_TEXTS.values() if k.detect(path, first))


def _texts(path: Path) -> Iterator[str]:
    """The texts of the test file `path` as its kind reads them, one at a time. InputFileError
    naming a missing file, or one whose format finds no text in it."""
    if not path.is_file():
        raise InputFileError(f"the test file {path} does not exist: give the test sets' "
                             "files (SQuAD JSON, CoNLL 'token tag' lines, or text)")
    kind, blank = text_kind_of(path), True
    for text in kind.texts(path):
        blank = blank and not text.strip()
        yield text
    if blank:
        raise InputFileError(f"the test file {path} has no text (read as {kind.description})")


def read_test_texts(paths: Sequence[str | Path], characters: bool, n: int | None = None
                    ) -> OverlapSet:
    """The n-grams of the test files `paths` (`elmo.io.overlap`), in characters or words, runs
    of `n` (None: the unit's), each file read once (its first line aside, to tell its kind),
    its texts not held. InputFileError naming a missing file, or one whose format cannot
    read it."""
    return overlap_set([(path, _texts(path)) for path in map(Path, paths)], characters, n)
