"""Streaming a text corpus of any size, in any of the input kinds of `elmo.io.inputs`
(UTF-8, plain or compressed: gzip, bzip2, xz): one sentence per line (or stdin), FASTA (a record
per sentence), JSON lines and WikiExtractor's output (paragraphs, split into sentences by the
splitter of the tokenizer's language, `elmo.io.sentences`), each file of the kind it is
detected as, or of the one named (`input_format`).

Nothing here reads a whole file: lines are decoded one at a time, so memory stays flat
however large the corpus is. A *sentence index* counts the sentences (non-blank lines, FASTA
records, sentences of the paragraphs) of the whole stream (all files, in order); with the
built-in tokenizers every sentence has a token, so it is also the index of the tokenized
sentence.

A `Selection` says which documents a pass reads: those whose title is in a list are left out
(a test set's articles, `elmo.io.titles`), and those that share a run of text with a test set
(`elmo.io.overlap`), and every N-th of the others may be held out (the text of a validation
split of one's own); a `Tally` counts them.
"""

from __future__ import annotations

import glob
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, groupby
from operator import attrgetter
from pathlib import Path

from elmo.errors import InputFileError
from elmo.io.inputs import AUTO, HeldDocument, Passage, folder_files, input_kind, too_long
from elmo.io.overlap import OverlapSet
from elmo.io.sentences import SPLITTERS
from elmo.io.textfile import is_stdin
from elmo.io.titles import TitleSet, read_titles
from elmo.tokenize import DEFAULT_TOKENIZER, TOKENIZERS, Tokenizer, get_tokenizer

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Selection:
    """Which documents of a corpus a pass reads, and which are held out. A document is a
    passage of an input file and the passages after it with its key: a WikiExtractor
    document, a JSON line (or lines in a row with one "id"), a text line, a FASTA record.
    `exclude`: a document whose title is one of these (`elmo.io.titles.TitleSet`) is left
    out; documents without a title (text lines, FASTA records, JSON lines without a "title"
    string) are never left out. `overlap`: a document that shares a run of text with one of
    its test files is left out too. `hold_out_every`: of the documents not left out, the
    N-th, 2N-th, ... (counted over the whole stream, in order) are held out (0: none)."""

    exclude: TitleSet | None = None
    hold_out_every: int = 0
    overlap: OverlapSet | None = None

    def __post_init__(self) -> None:
        if self.hold_out_every < 0:
            raise ValueError(f"hold_out_every must be >= 0, got {self.hold_out_every}")

    @classmethod
    def leaving_out(cls, title_lists: Sequence[PathLike], hold_out_every: int = 0,
                    overlap: OverlapSet | None = None) -> Selection:
        """Leave out the documents titled in the lists `title_lists` (`elmo.io.titles`; none:
        every document is read), and those sharing text with `overlap`'s test files."""
        return cls(read_titles(title_lists) if title_lists else None, hold_out_every, overlap)


EVERY_DOCUMENT = Selection()  # none left out, none held out


@dataclass
class Tally:
    """What a pass over a corpus met: documents left out by title (`left_out`, and the
    `left_out_titles` as the documents give them, in order), documents left out for sharing
    text with a test file (`overlapped`: how many per test file; `overlapped_inputs`: per
    input file), documents held out."""

    left_out: int = 0
    held_out: int = 0
    left_out_titles: list[str] = field(default_factory=list)
    overlapped: Counter[str] = field(default_factory=Counter)
    overlapped_inputs: Counter[str] = field(default_factory=Counter)


def split_language(tokenizer: str | Tokenizer) -> str:
    """The language whose sentence splitter cuts the paragraphs of a corpus read with
    `tokenizer` (its record's `language`; English for a callable)."""
    return TOKENIZERS[tokenizer].language if isinstance(tokenizer, str) else "en"


def expand_paths(patterns: Sequence[PathLike], allow_stdin: bool = False) -> list[Path]:
    """Expand glob patterns (each sorted) and the output folders of an input kind (a folder
    of WikiExtractor's wiki_NN files: those, sorted), and keep plain paths, in the order given.

    `-` (stdin) is kept if `allow_stdin` (for callers that read their input once). Raises
    FileNotFoundError naming a pattern or path that matches no file, InputFileError for
    another directory.
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
                found = folder_files(path)
                if found is None:
                    raise InputFileError(
                        f"{text!r} is a directory, not a text file (nor a folder of "
                        "WikiExtractor's wiki_NN files); to read the files in it, pass a quoted "
                        f"glob like '{text}/*.txt'")
                paths.extend(found)
                continue
            if not path.is_file() and not (allow_stdin and is_stdin(path)):
                raise FileNotFoundError(f"no such file: {text!r}")
            paths.append(path)
    return paths


def _as_paths(paths: PathLike | Iterable[PathLike]) -> list[Path]:
    if isinstance(paths, str | os.PathLike):
        return [Path(paths)]
    return [Path(p) for p in paths]


def _whole(passages: Iterable[Passage], path: Path) -> list[Passage]:
    """A document's passages, read whole to be compared with test text (`HeldDocument`).
    InputFileError for one too long: skipped, it could be a test set's text left in, or
    training text lost unsaid."""
    held = HeldDocument[Passage]()
    for passage in passages:
        if not held.add(passage, len(passage.text)):
            raise InputFileError(f"{path}, line {held[0].line}: " + too_long(
                "a document", "compare with the test files", "split the file into documents"))
    return held


def iter_parts(
    paths: PathLike | Iterable[PathLike], input_format: str = AUTO, language: str = "en",
    selection: Selection = EVERY_DOCUMENT, tally: Tally | None = None,
) -> Iterator[tuple[bool, str]]:
    """(held out, sentence) for the sentences of the documents `selection` reads, in order
    (`iter_lines` has the sentences kept); `tally`, if given, counts the documents left out
    and held out as they are met."""
    split = SPLITTERS[language].split
    tally = Tally() if tally is None else tally
    every, kept = selection.hold_out_every, 0
    exclude, overlap = selection.exclude, selection.overlap
    for path in _as_paths(paths):
        kind = input_kind(path, input_format)
        for _, document in groupby(kind.read(path), attrgetter("key")):
            rest = iter(document)
            first = next(rest)
            if exclude is not None and first.title in exclude:
                tally.left_out += 1
                tally.left_out_titles.append(first.title)
                continue
            passages: Iterable[Passage] = chain([first], rest)
            if overlap is not None:
                passages = _whole(passages, path)
                source = overlap.source_of(p.text for p in passages)
                if source is not None:
                    tally.overlapped[source] += 1
                    tally.overlapped_inputs[str(path)] += 1
                    continue
            held = every > 0 and kept % every == every - 1
            kept += 1
            tally.held_out += held
            for passage in passages:
                yield from ((held, s) for s in (split(passage.text) if kind.paragraphs
                                                else [passage.text]))


def iter_lines(
    paths: PathLike | Iterable[PathLike], input_format: str = AUTO, language: str = "en",
    selection: Selection = EVERY_DOCUMENT, tally: Tally | None = None,
) -> Iterator[str]:
    """Yield the sentences of the files in order, as text: each file read as the input kind
    `input_format` names, or ("auto") the kind it is detected as (`elmo.io.inputs`). A text
    file's non-blank lines without their line ending; a FASTA record's sequence (tokenize it
    with the `chars` tokenizer, a residue per token); the sentences of the paragraphs of JSON
    lines and WikiExtractor documents, split by the splitter of `language`
    (`elmo.io.sentences`). Documents that `selection` leaves out or holds out are not read
    (`tally`, if given, counts them).

    Read with `elmo.io.textfile.read_lines`: gzip, bzip2 and xz are decompressed on the fly, a
    byte-order mark dropped, and invalid UTF-8 raises InputFileError (a ValueError) naming
    file and line, as does a malformed FASTA record (`elmo.io.fasta.read_fasta`); a malformed
    JSON line or WikiExtractor document is skipped with a warning naming file and line.
    """
    for held, sentence in iter_parts(paths, input_format, language, selection, tally):
        if not held:
            yield sentence


def iter_sentences(
    paths: PathLike | Iterable[PathLike],
    tokenizer: Tokenizer | str = DEFAULT_TOKENIZER,
    *,
    rank: int = 0,
    world_size: int = 1,
    start: int = 0,
    input_format: str = AUTO,
    language: str | None = None,
    selection: Selection = EVERY_DOCUMENT,
    tally: Tally | None = None,
) -> Iterator[list[str]]:
    """Yield tokenized, non-empty sentences (those of `iter_lines`, of the documents
    `selection` keeps; paragraphs are split by the splitter of `language`, by default the
    tokenizer's: `split_language`).

    For distributed training, only sentences whose index ``% world_size == rank`` are
    yielded, so the ranks partition the corpus. ``start`` skips this rank's first ``start``
    sentences without tokenizing them (cheap resumption).
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world={world_size}")
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    if language is None:
        language = split_language(tokenizer)
    tok = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    first = rank + start * world_size  # global index of the first sentence to yield
    for index, line in enumerate(iter_lines(paths, input_format, language, selection, tally)):
        if index < first or (index - rank) % world_size:
            continue
        tokens = tok(line)
        if tokens:
            yield tokens


def count_tokens(
    paths: PathLike | Iterable[PathLike], tokenizer: Tokenizer | str = DEFAULT_TOKENIZER,
    input_format: str = AUTO,
) -> int:
    """Number of predicted tokens in one direction: words plus one ``</S>`` per sentence.

    This is how bilm-tf counts ``n_train_tokens`` (streamed; constant memory).
    """
    return sum(len(tokens) + 1 for tokens in iter_sentences(paths, tokenizer,
                                                             input_format=input_format))


@dataclass
class TextCorpus:
    """Training text: files of any input kind (`input_format`, or "auto": each file's own),
    tokenized with `tokenizer` as they are read, of the documents `selection` keeps."""

    paths: list[Path]
    tokenizer: str
    input_format: str = AUTO
    selection: Selection = EVERY_DOCUMENT

    def __post_init__(self) -> None:
        self._tokenize = get_tokenizer(self.tokenizer)

    @property
    def files(self) -> list[str]:
        return [str(p) for p in self.paths]

    def sentences(self, rank: int = 0, world_size: int = 1, start: int = 0
                  ) -> Iterator[list[str]]:
        """Rank `rank`'s sentences from its `start`-th on (`iter_sentences`)."""
        return iter_sentences(self.paths, self._tokenize, rank=rank, world_size=world_size,
                              start=start, input_format=self.input_format,
                              language=split_language(self.tokenizer),
                              selection=self.selection)
