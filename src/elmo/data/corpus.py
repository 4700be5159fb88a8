"""Streaming a text corpus of any size: one sentence per line, plain or gzipped UTF-8 (or stdin);
FASTA files (one sentence per record) too.

Nothing here reads a whole file: lines are decoded one at a time, so memory stays flat
however large the corpus is. A *sentence index* counts the non-blank lines (and FASTA
records) of the whole stream (all files, in order); with the built-in tokenizers every
non-blank line yields a non-empty sentence, so it is also the index of the tokenized sentence.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from elmo.errors import InputFileError
from elmo.io.fasta import is_fasta_path, read_fasta
from elmo.io.textfile import is_stdin, read_lines
from elmo.tokenize import Tokenizer, get_tokenizer

PathLike = str | os.PathLike[str]


def expand_paths(patterns: Sequence[PathLike], allow_stdin: bool = False) -> list[Path]:
    """Expand glob patterns (each sorted) and keep plain paths, in the order given.

    `-` (stdin) is kept if `allow_stdin` (for callers that read their input once). Raises
    FileNotFoundError naming a pattern or path that matches no file, InputFileError for a
    directory.
    """
    if isinstance(patterns, str | os.PathLike):
        patterns = [patterns]
    paths: list[Path] = []
    for pattern in patterns:
        text = os.path.expanduser(os.fspath(pattern))
        if glob.has_magic(text):
            matches = sorted(Path(p) for p in glob.glob(text, recursive=True))
            matches = [p for p in matches if p.is_file()]
            if not matches:
                raise FileNotFoundError(f"no file matches the pattern {text!r}")
            paths.extend(matches)
        else:
            path = Path(text)
            if is_stdin(path) and not allow_stdin:
                raise InputFileError("this command reads its input more than once, so it cannot "
                                     "read stdin ('-'): save the text to a file")
            if path.is_dir():
                raise InputFileError(f"{text!r} is a directory, not a text file; to read the "
                                     f"files in it, pass a quoted glob like '{text}/*.txt'")
            if not path.is_file() and not (allow_stdin and is_stdin(path)):
                raise FileNotFoundError(f"no such file: {text!r}")
            paths.append(path)
    return paths


def _as_paths(paths: PathLike | Iterable[PathLike]) -> list[Path]:
    if isinstance(paths, str | os.PathLike):
        return [Path(paths)]
    return [Path(p) for p in paths]


def iter_lines(paths: PathLike | Iterable[PathLike]) -> Iterator[str]:
    """Yield the non-blank lines of the files in order, without their line ending; of a FASTA
    file (.fasta .fa .faa .fas, plain or .gz), each record's sequence instead (a record is a
    sentence: tokenize it with the `chars` tokenizer, a residue per token).

    Read with `elmo.io.textfile.read_lines`: gzip is decompressed on the fly, a byte-order mark
    dropped, and invalid UTF-8 raises InputFileError (a ValueError) naming file and line, as
    does a malformed FASTA record (`elmo.io.fasta.read_fasta`).
    """
    for path in _as_paths(paths):
        if is_fasta_path(path):
            yield from (record.sequence for record in read_fasta(path, unique_ids=False))
            continue
        for _, line in read_lines(path):
            if line and not line.isspace():
                yield line


def iter_sentences(
    paths: PathLike | Iterable[PathLike],
    tokenizer: Tokenizer | str = "whitespace",
    *,
    rank: int = 0,
    world_size: int = 1,
    start: int = 0,
) -> Iterator[list[str]]:
    """Yield tokenized, non-empty sentences (one per non-blank line).

    For distributed training, only sentences whose index ``% world_size == rank`` are
    yielded, so the ranks partition the corpus. ``start`` skips this rank's first ``start``
    sentences without tokenizing them (cheap resumption).
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world={world_size}")
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    tok = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    first = rank + start * world_size  # global index of the first sentence to yield
    for index, line in enumerate(iter_lines(paths)):
        if index < first or (index - rank) % world_size:
            continue
        tokens = tok(line)
        if tokens:
            yield tokens


def count_tokens(
    paths: PathLike | Iterable[PathLike], tokenizer: Tokenizer | str = "whitespace"
) -> int:
    """Number of predicted tokens in one direction: words plus one ``</S>`` per sentence.

    This is how bilm-tf counts ``n_train_tokens`` (streamed; constant memory).
    """
    return sum(len(tokens) + 1 for tokens in iter_sentences(paths, tokenizer))
