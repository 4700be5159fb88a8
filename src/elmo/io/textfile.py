"""The one reader of input text: UTF-8 lines from a plain or gzipped file, or `-` for stdin.

Every command reads its text through `read_lines`, so all of them accept the same files: `.gz`
(or any gzip data) is decompressed on the fly, a UTF-8 byte-order mark at the start is dropped,
`\\r\\n` endings are handled, and a line that is not UTF-8 is reported with the file and line.
"""

from __future__ import annotations

import gzip
import hashlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from elmo.errors import InputFileError

STDIN = "-"
ENCODING_ERRORS = ("strict", "replace")
_GZIP_MAGIC = b"\x1f\x8b"


def is_stdin(path: str | Path) -> bool:
    return str(path) == STDIN


@contextmanager
def open_input(path: str | Path) -> Iterator[BinaryIO]:
    """`path` opened for reading bytes, gunzipped if it is gzip data; `-` is stdin.

    A missing file, a directory or an unreadable file raises InputFileError naming it.
    """
    if is_stdin(path):
        yield _maybe_gunzip(sys.stdin.buffer)
        return
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise InputFileError(f"input file not found: {path}") from None
    except IsADirectoryError:
        raise InputFileError(f"input {path} is a directory, not a text file") from None
    except PermissionError:
        raise InputFileError(f"cannot read {path}: permission denied") from None
    with f:
        yield _maybe_gunzip(f)


def _maybe_gunzip(f: BinaryIO) -> BinaryIO:
    magic = f.peek(2)[:2] if hasattr(f, "peek") else b""
    return gzip.GzipFile(fileobj=f, mode="rb") if magic == _GZIP_MAGIC else f


def read_lines(path: str | Path, encoding_errors: str = "strict") -> Iterator[tuple[int, str]]:
    """(0-based number, text without its line ending) for every line, blank ones included.

    A line that is not UTF-8 raises InputFileError naming the file and 1-based line number,
    unless `encoding_errors="replace"` (invalid bytes become U+FFFD).
    """
    if encoding_errors not in ENCODING_ERRORS:
        raise ValueError(f"encoding_errors must be one of {ENCODING_ERRORS}")
    name = "<stdin>" if is_stdin(path) else str(path)
    with open_input(path) as f:
        try:
            for number, raw in enumerate(f):
                try:
                    text = raw.decode("utf-8", errors=encoding_errors)
                except UnicodeDecodeError as err:
                    raise InputFileError(
                        f"{name}, line {number + 1}: not valid UTF-8 ({err.reason} at byte "
                        f"{err.start}); convert the file to UTF-8 (or, where the command takes it, "
                        "pass --encoding-errors replace)"
                    ) from None
                if number == 0 and text.startswith("\ufeff"):
                    text = text[1:]
                yield number, text.rstrip("\r\n")
        except (gzip.BadGzipFile, EOFError) as err:
            raise InputFileError(f"{name} is not a complete gzip file: {err}") from None


def scan_input(path: str | Path) -> tuple[int, str]:
    """The number of lines of a file (a last line without a newline counts) and the sha256 of
    its text (after gunzipping): what identifies an input for resuming and merging."""
    digest = hashlib.sha256()
    count, last = 0, b""
    with open_input(path) as f:
        try:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
                count += block.count(b"\n")
                last = block
        except (gzip.BadGzipFile, EOFError) as err:
            raise InputFileError(f"{path} is not a complete gzip file: {err}") from None
    return count + (1 if last and not last.endswith(b"\n") else 0), digest.hexdigest()
