"""The one reader of input text: UTF-8 lines from a plain or compressed file, or `-` for stdin.

Every command reads its text through `read_lines`, so all of them accept the same files: a
file in one of `COMPRESSIONS` (gzip, `.gz`; bzip2, `.bz2`, as WikiExtractor's `--compress`
writes; xz, `.xz`), told by its first bytes whatever its name, is decompressed on the fly; a
UTF-8 byte-order mark at the start is dropped, `\\r\\n` endings are handled, and a line that is
not UTF-8 is reported with the file and line.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from elmo.errors import InputFileError

STDIN = "-"
ENCODING_ERRORS = ("strict", "replace")


@dataclass(frozen=True)
class Compression:
    """A compressed form of input files: its `name`, file-name `suffix`, `detect(first six
    bytes)` and `open(binary file) -> its decompressed bytes`, read as a stream."""

    name: str
    suffix: str
    detect: Callable[[bytes], bool]
    open: Callable[[BinaryIO], BinaryIO]


# Tried on the first bytes of every input; a file that none detects is read as it is.
COMPRESSIONS = (
    Compression("gzip", ".gz", lambda head: head[:2] == b"\x1f\x8b",
                lambda f: gzip.GzipFile(fileobj=f, mode="rb")),
    Compression("bzip2", ".bz2", lambda head: head[:3] == b"BZh" and head[3:4].isdigit(),
                lambda f: bz2.BZ2File(f, "rb")),
    Compression("xz", ".xz", lambda head: head[:6] == b"\xfd7zXZ\x00",
                lambda f: lzma.LZMAFile(f, mode="rb")),
)
COMPRESSED = tuple(c.suffix for c in COMPRESSIONS)  # the suffixes every reader takes
# A compressed stream cut short or corrupt (gzip's BadGzipFile and bzip2's are OSErrors)
_BROKEN = (OSError, lzma.LZMAError, EOFError)


def strip_compression(name: str) -> str:
    """A file name without its compression suffix (`COMPRESSED`), any case."""
    lower = name.lower()
    return next((name[: -len(s)] for s in COMPRESSED if lower.endswith(s)), name)


def is_stdin(path: str | Path) -> bool:
    return str(path) == STDIN


@contextmanager
def open_input(path: str | Path) -> Iterator[BinaryIO]:
    """`path` opened for reading bytes, decompressed if it is in one of `COMPRESSIONS`; `-`
    is stdin.

    A missing file, a directory or an unreadable file raises InputFileError naming it, as
    does compressed data that is cut short or corrupt, when it is read.
    """
    if is_stdin(path):
        with _decompressed(sys.stdin.buffer, "<stdin>") as f:
            yield f
        return
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise InputFileError(f"input file not found: {path}") from None
    except IsADirectoryError:
        raise InputFileError(f"input {path} is a directory, not a text file") from None
    except PermissionError:
        raise InputFileError(f"cannot read {path}: permission denied") from None
    with f, _decompressed(f, str(path)) as stream:
        yield stream


@contextmanager
def _decompressed(f: BinaryIO, name: str) -> Iterator[BinaryIO]:
    """`f`'s bytes, decompressed if its first bytes are a compression's; a compressed
    stream's read errors (cut short, corrupt) as InputFileError naming `name`."""
    head = f.peek(6)[:6] if hasattr(f, "peek") else b""
    compression = next((c for c in COMPRESSIONS if c.detect(head)), None)
    if compression is None:
        yield f
        return
    try:
        with compression.open(f) as stream:
            yield stream
    except _BROKEN as err:
        raise InputFileError(f"{name} is not a complete compressed file ({compression.name}: "
                             f"{err}); compress it again, or decompress it and pass the "
                             "text") from None


def read_lines(path: str | Path, encoding_errors: str = "strict") -> Iterator[tuple[int, str]]:
    """(0-based number, text without its line ending) for every line, blank ones included.

    A line that is not UTF-8 raises InputFileError naming the file and 1-based line number,
    unless `encoding_errors="replace"` (invalid bytes become U+FFFD).
    """
    if encoding_errors not in ENCODING_ERRORS:
        raise ValueError(f"encoding_errors must be one of {ENCODING_ERRORS}")
    name = "<stdin>" if is_stdin(path) else str(path)
    with open_input(path) as f:
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


def scan_input(path: str | Path) -> tuple[int, str]:
    """The number of lines of a file (a last line without a newline counts) and the sha256 of
    its text (decompressed): what identifies an input for resuming and merging."""
    digest = hashlib.sha256()
    count, last = 0, b""
    with open_input(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            count += block.count(b"\n")
            last = block
    return count + (1 if last and not last.endswith(b"\n") else 0), digest.hexdigest()
