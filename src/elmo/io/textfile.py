"""The one reader of input text: UTF-8 lines from a plain, gzipped or xz file, or `-` for stdin.

Every command reads its text through `read_lines`, so all of them accept the same files: `.gz`
and `.xz` (or any gzip or xz data) are decompressed on the fly, a UTF-8 byte-order mark at the
start is dropped, `\\r\\n` endings are handled, and a line that is not UTF-8 is reported with
the file and line.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from elmo.errors import InputFileError

STDIN = "-"
ENCODING_ERRORS = ("strict", "replace")
_GZIP_MAGIC = b"\x1f\x8b"
_XZ_MAGIC = b"\xfd7zXZ\x00"
COMPRESSED = (".gz", ".xz")  # the suffixes of compressed files, which every reader takes
_BROKEN = (gzip.BadGzipFile, lzma.LZMAError, EOFError)  # a truncated or corrupt file


def is_stdin(path: str | Path) -> bool:
    return str(path) == STDIN


@contextmanager
def open_input(path: str | Path) -> Iterator[BinaryIO]:
    """`path` opened for reading bytes, decompressed if it is gzip or xz data; `-` is stdin.

    A missing file, a directory or an unreadable file raises InputFileError naming it.
    """
    if is_stdin(path):
        yield _decompressed(sys.stdin.buffer)
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
        yield _decompressed(f)


def _decompressed(f: BinaryIO) -> BinaryIO:
    magic = f.peek(len(_XZ_MAGIC))[:len(_XZ_MAGIC)] if hasattr(f, "peek") else b""
    if magic.startswith(_GZIP_MAGIC):
        return gzip.GzipFile(fileobj=f, mode="rb")
    if magic == _XZ_MAGIC:
        return lzma.LZMAFile(f, mode="rb")
    return f


def strip_compression(name: str) -> str:
    """A file name without its compression suffix (.gz, .xz), any case."""
    lower = name.lower()
    return next((name[: -len(s)] for s in COMPRESSED if lower.endswith(s)), name)


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
        except _BROKEN as err:
            raise InputFileError(f"{name} is not a complete compressed file: {err}") from None


def scan_input(path: str | Path) -> tuple[int, str]:
    """The number of lines of a file (a last line without a newline counts) and the sha256 of
    its text (after decompressing): what identifies an input for resuming and merging."""
    digest = hashlib.sha256()
    count, last = 0, b""
    with open_input(path) as f:
        try:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
                count += block.count(b"\n")
                last = block
        except _BROKEN as err:
            raise InputFileError(f"{path} is not a complete compressed file: {err}") from None
    return count + (1 if last and not last.endswith(b"\n") else 0), digest.hexdigest()
