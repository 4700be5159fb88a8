"""What the readers of `elmo task` data share: a file's numbered lines, the check that a file
held examples, a column of a source line replaced."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from elmo.errors import InputFileError
from elmo.io.textfile import read_lines


def numbered_lines(path: str | Path, encoding_errors: str = "strict") -> Iterator[tuple[int, str]]:
    """(1-based number, text without its line ending) for every line of a plain or .gz file:
    `elmo.io.textfile.read_lines`, the project's one text reader (a line that is not UTF-8
    raises InputFileError naming the file and line, unless `encoding_errors="replace"`)."""
    for number, text in read_lines(path, encoding_errors):
        yield number + 1, text


def nonempty(path: str | Path, examples: list, what: str) -> list:
    """`examples`, or InputFileError when the file held none."""
    if not examples:
        raise InputFileError(f"{path} holds no {what}; check the file and --format")
    return examples


def replace_column(row: str, index: int | None, value: str, separator: str) -> str:
    """`row` with its column `index` set to `value` (None: appended); `separator` "\t" for
    tab-separated rows, else white space."""
    columns = row.split(separator) if separator == "\t" else row.split()
    if index is None:
        columns.append(value)
    else:
        columns[index] = value
    return ("\t" if separator == "\t" or "\t" in row else " ").join(columns)
