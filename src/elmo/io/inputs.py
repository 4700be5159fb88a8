"""Input kinds: the formats a corpus comes in, one `InputKind` record each, in `INPUT_KINDS`.

A kind says how a file of it is recognised (its name, or its first non-blank line; a folder of
its files, for WikiExtractor's output) and reads a file as *passages*: pieces of text with the
line they are on and a key naming them. A passage is one sentence (a text line, a FASTA
record), or a paragraph that the reader of the corpus splits into sentences
(`elmo.io.sentences`). Every file is read through `elmo.io.textfile.read_lines` (UTF-8, plain or
compressed (gzip, bzip2, xz), a line at a time: nothing holds a whole file; a WikiExtractor
document held until its `</doc>`, a JSON file, is a `HeldDocument`: at most `MAX_DOCUMENT_CHARS`).

Malformed input (a JSON line that is not an object with a "text" or "content" string, a
WikiExtractor document that is not closed or has no id, text outside a document) is skipped
with a warning naming the file and line; after `MAX_NAMED` of them in a file, one more warning
counts the rest.
Text that is not UTF-8 is refused (InputFileError naming file and line), as for every input.

A kind that `elmo embed` reads (text, FASTA) also has `entries`: how a file of it is read as
numbered entries, one sentence each (a text line, blank ones included; a FASTA record), the
datasets of the embedded file.

Adding a kind is one record: its name, description, `paragraphs`, `detect` and `read` (and
`folder_files` if a folder of its files is an input, `entries` if `elmo embed` reads it);
`INPUT_KINDS` tries `detect` in order and the last entry, text, takes every file.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from elmo.errors import InputFileError
from elmo.io.fasta import is_fasta_path, read_fasta, scan_fasta
from elmo.io.markup import html_paragraphs, markdown_paragraphs
from elmo.io.textfile import COMPRESSED, is_stdin, read_lines, scan_input, strip_compression

AUTO = "auto"
MAX_NAMED = 10  # malformed lines or documents named one by one in each file
MAX_DOCUMENT_CHARS = 1 << 26  # the most characters of a document held whole (HeldDocument)
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
# WikiExtractor's output files: wiki_00, ..., compressed with --compress (wiki_00.bz2)
WIKI_FILE = re.compile(r"wiki_\d+(" + "|".join(map(re.escape, COMPRESSED)) + ")?")
WIKI_HEADER = re.compile(r'<doc id="(?P<id>[^"]*)"[^>]*?(?: title="(?P<title>.*)")?>')
Piece = TypeVar("Piece")


@dataclass(frozen=True)
class Passage:
    """A piece of an input file: its text, the 1-based line it is on, its key (a line
    number, a record id, a document id: the passages of a document have its key), and the
    title of its document where the kind gives one (WikiExtractor's title="...", a JSON
    line's "title" string; "" otherwise)."""

    text: str
    line: int
    key: str
    title: str = ""


@dataclass(frozen=True)
class Entry:
    """A sentence of an input file as `elmo embed` numbers it: its 0-based `number`, its
    `text` (a line stripped; a record's sequence), its `key` (a line's number; a record's id)
    and its `attrs` (a record's id and description)."""

    number: int
    text: str
    key: str
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EntryScan:
    """A pass over a whole file, before anything is embedded (its problems found then): the
    number of its entries, the sha256 of its text, and the tokens of each entry where they
    are counted (FASTA: residues; None for text)."""

    count: int
    sha256: str
    sizes: Sequence[int] | None = None


@dataclass(frozen=True)
class Entries:
    """How `elmo embed` reads a kind. `read(path, encoding_errors)`: every entry, in order;
    `scan(path, encoding_errors)`: the `EntryScan`; `noun`: what an entry is ("FILE, line
    12"); `token`: what a token of it is; `tokenizer`: the kind's own (FASTA: `chars`, a
    residue a token; None: the command's); `keyed`: its entries have keys of their own
    (ids), which name their datasets, with no sentence index; `nothing`: what a file without
    entries is, for the error."""

    read: Callable[[Path, str], Iterator[Entry]]
    scan: Callable[[Path, str], EntryScan]
    noun: str = "line"
    token: str = "token"
    tokenizer: str | None = None
    keyed: bool = False
    nothing: str = "is empty"


@dataclass(frozen=True)
class InputKind:
    """A format of input files. `detect(path, first_line)`: whether a file is of this kind
    (`first_line`: its first non-blank line, "" for stdin or an empty file). `read(path)`: its
    passages, in order. `paragraphs`: the passages are paragraphs, to be split into sentences.
    `folder_files(folder)`: the files of a folder that is this kind's output, sorted (None: the
    folder is not). `entries`: how `elmo embed` reads it (None: it does not)."""

    name: str
    description: str
    paragraphs: bool
    detect: Callable[[Path, str], bool]
    read: Callable[[Path], Iterator[Passage]]
    folder_files: Callable[[Path], list[Path] | None] = lambda folder: None
    entries: Entries | None = None


class _Skipped:
    """Warnings for the malformed parts of one file: the first MAX_NAMED named, then one
    count of the others (`close`)."""

    def __init__(self, path: Path) -> None:
        self.path, self.count = path, 0

    def __call__(self, line: int, what: str) -> None:
        self.count += 1
        if self.count <= MAX_NAMED:
            warnings.warn(f"{self.path}, line {line}: {what}; skipped", stacklevel=3)

    def close(self) -> None:
        if self.count > MAX_NAMED:
            warnings.warn(f"{self.path}: {self.count - MAX_NAMED} more malformed lines or "
                          f"documents skipped ({self.count} in all)", stacklevel=3)


class HeldDocument(list[Piece], Generic[Piece]):
    """The pieces (lines, passages) of a document held whole, to be parsed, trimmed or compared:
    `add(piece, chars)` is False past `MAX_DOCUMENT_CHARS` characters in all, where memory would
    grow with the file; the caller then skips or stops, with the message of `too_long`."""

    chars = 0

    def add(self, piece: Piece, chars: int) -> bool:
        self.append(piece)
        self.chars += chars
        return self.chars <= MAX_DOCUMENT_CHARS


def too_long(what: str, why: str, fix: str) -> str:
    """`what` past a `HeldDocument`'s cap, held to `why`; `fix`: the caller adds file and line."""
    return f"{what} is longer than {MAX_DOCUMENT_CHARS:,} characters, too long to {why}; {fix}"


def _first_line(path: Path, encoding_errors: str = "strict") -> str:
    for _, text in read_lines(path, encoding_errors):
        if text.strip():
            return text.strip()
    return ""


def _name(path: Path) -> str:
    return strip_compression(path.name.lower())


# ---- text: a sentence per line ----------------------------------------------------------


def _read_text(path: Path) -> Iterator[Passage]:
    for number, text in read_lines(path):
        if text and not text.isspace():
            yield Passage(text, number + 1, str(number + 1))


def _text_entries(path: Path, encoding_errors: str) -> Iterator[Entry]:
    for number, text in read_lines(path, encoding_errors):
        yield Entry(number, text.strip(), str(number))


def _scan_text(path: Path, encoding_errors: str) -> EntryScan:
    """Lines are counted in the bytes; their encoding is checked as they are read."""
    return EntryScan(*scan_input(path))


TEXT = InputKind("text", "one sentence per line", paragraphs=False,
                 detect=lambda path, first: True, read=_read_text,
                 entries=Entries(_text_entries, _scan_text))


# ---- FASTA: a record per sentence, a residue per token (named .fasta .fa .faa .fas) -------


def _read_fasta(path: Path) -> Iterator[Passage]:
    for record in read_fasta(path, unique_ids=False):
        yield Passage(record.sequence, record.line, record.id)


def _fasta_entries(path: Path, encoding_errors: str) -> Iterator[Entry]:
    """Checked whole by `_scan_fasta` first: no set of ids kept here."""
    for number, record in enumerate(read_fasta(path, encoding_errors, unique_ids=False)):
        yield Entry(number, record.sequence, record.id,
                    {"id": record.id, "description": record.description})


def _scan_fasta(path: Path, encoding_errors: str) -> EntryScan:
    """Every record read and checked (InputFileError naming the first bad one)."""
    summary = scan_fasta(path, encoding_errors)
    return EntryScan(len(summary), scan_input(path)[1], summary.lengths)


FASTA = InputKind("fasta", "FASTA records (.fasta .fa .faa .fas), one sentence each",
                  paragraphs=False, detect=lambda path, first: is_fasta_path(path),
                  read=_read_fasta,
                  entries=Entries(_fasta_entries, _scan_fasta, noun="record", token="residue",
                                  tokenizer="chars", keyed=True,
                                  nothing="has no FASTA record ('>ID' line)"))


# ---- JSON lines: one object per line, its "text" paragraphs (lines) split into sentences --


# The fields a JSON line's text may stand in, the first an object has: "text" (WikiExtractor's
# --json, C4, The Pile), "content" (WuDaoCorpora and other Chinese web corpora).
TEXT_FIELDS = ("text", "content")


def _text_of(line: str) -> tuple[str | None, str, str]:
    """The text string of a JSON line (its first field of TEXT_FIELDS), the object's "id"
    (or "") and its "title" string (or ""); or None and what is wrong with it."""
    try:
        obj = json.loads(line)
    except ValueError as err:
        return None, f"not JSON ({err})", ""
    return _fields(obj)


def _fields(obj: object) -> tuple[str | None, str, str]:
    """A JSON value's text string (its first field of TEXT_FIELDS), "id" (or "") and "title"
    string (or ""); or None and what is wrong with it."""
    field = next((f for f in TEXT_FIELDS if isinstance(obj, dict)
                  and isinstance(obj.get(f), str)), None)
    if field is None:
        return (None, f"not a JSON object with a {' or '.join(map(repr, TEXT_FIELDS))} "
                "string", "")
    ident, title = obj.get("id"), obj.get("title")
    return (obj[field], "" if ident is None else str(ident),
            title if isinstance(title, str) else "")


def _is_json_lines(path: Path, first: str) -> bool:
    return _name(path).endswith(JSON_LINES_SUFFIXES) or (
        first.startswith("{") and _text_of(first)[0] is not None)


def _read_json_lines(path: Path) -> Iterator[Passage]:
    skipped = _Skipped(path)
    for number, line in read_lines(path):
        if not line.strip():
            continue
        text, ident, title = _text_of(line)
        if text is None:
            skipped(number + 1, ident)
            continue
        for paragraph in text.split("\n"):
            if paragraph.strip():
                yield Passage(paragraph, number + 1, ident or str(number + 1), title)
    skipped.close()


JSON_LINES = InputKind(
    "jsonl", 'JSON lines (.jsonl .ndjson, or a first line that is an object with a "text" '
    'or "content" string; WikiExtractor --json): the lines of that string are paragraphs',
    paragraphs=True, detect=_is_json_lines, read=_read_json_lines)


# ---- WikiExtractor: <doc id=.. url=.. title=..> blocks, a paragraph per line ---------------


def _wiki_folder(folder: Path) -> list[Path] | None:
    """The wiki_NN files of a WikiExtractor output folder (AA/wiki_00, ...), if it has any;
    its other files (hidden ones aside) are named in a warning and skipped."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    wiki, stray = [], []
    for p in files:
        if WIKI_FILE.fullmatch(p.name):
            wiki.append(p)
        else:
            stray.append(p.relative_to(folder).as_posix())
    if wiki and stray:
        more = f" and {len(stray) - MAX_NAMED} more" if len(stray) > MAX_NAMED else ""
        warnings.warn(f"{folder}: read as WikiExtractor's output, its {len(wiki)} wiki_NN "
                      f"file(s); skipped {len(stray)} other file(s): "
                      f"{', '.join(stray[:MAX_NAMED])}{more} (to choose the files, pass a "
                      f"quoted glob such as '{folder}/*/wiki_*')", stacklevel=2)
    return wiki or None


def _read_wiki(path: Path) -> Iterator[Passage]:
    """Each document's paragraphs but its first line when that is the title (WikiExtractor
    writes the title again there; its --json output does not)."""
    skipped = _Skipped(path)
    doc: tuple[int, str, str] | None = None  # (line, id, title) of the open document
    lines = HeldDocument[tuple[int, str]]()  # its paragraphs so far; id-less documents keep none
    for number, raw in read_lines(path):
        line, text = number + 1, raw.strip()
        if text == "<doc>" or text.startswith("<doc "):
            if doc is not None and doc[1]:
                skipped(doc[0], f"document {doc[1]!r} has no </doc> before the next <doc>")
            header = WIKI_HEADER.fullmatch(text)
            if header is None or not header["id"]:
                skipped(line, 'a <doc> header without id="..."')
            doc = (line, header["id"] if header else "", header and header["title"] or "")
            lines = HeldDocument()
        elif text == "</doc>":
            if doc is None:
                skipped(line, "</doc> without a <doc> before it")
            elif doc[1]:
                if lines and lines[0][1] == doc[2]:
                    lines = lines[1:]
                yield from (Passage(t, n, doc[1], doc[2]) for n, t in lines)
            doc = None
        elif doc is not None:
            if text and doc[1] and not lines.add((line, text), len(text)):
                skipped(doc[0], too_long(f"document {doc[1]!r}", "hold until its </doc>",
                                         "close it with </doc>"))
                doc, lines = (doc[0], "", ""), HeldDocument()  # the rest of it is skipped too
        elif text:
            skipped(line, "text outside a <doc> ... </doc> document")
    if doc is not None and doc[1]:
        skipped(doc[0], f"document {doc[1]!r} has no </doc> before the end of the file")
    skipped.close()


WIKIEXTRACTOR = InputKind(
    "wikiextractor", "WikiExtractor's output: <doc ...> ... </doc> documents, a paragraph "
    "per line (a folder of its wiki_NN files, or of --compress's wiki_NN.bz2, is an input "
    "too)",
    paragraphs=True, detect=lambda path, first: WIKI_HEADER.fullmatch(first) is not None,
    read=_read_wiki, folder_files=_wiki_folder)


# ---- Markdown: a document per file, its first heading the title, a paragraph per line ------


MARKDOWN_SUFFIXES = (".md", ".markdown")


def _read_markdown(path: Path) -> Iterator[Passage]:
    for line, text, title in markdown_paragraphs(read_lines(path)):
        yield Passage(text, line, path.name, title)


MARKDOWN = InputKind(
    "markdown", "Markdown files (.md .markdown), a document each: the lines of its prose are "
    "paragraphs (front matter, headings, HTML comments, code and list, quote, emphasis and "
    "link markers left out; the first heading is its title)",
    paragraphs=True, detect=lambda path, first: _name(path).endswith(MARKDOWN_SUFFIXES),
    read=_read_markdown)


# ---- JSON: a whole file; each object in it with a "text" or "content" string a document ---


def _json_documents(value: object) -> Iterator[dict]:
    """The objects of a JSON value that have a text string (TEXT_FIELDS), outermost first,
    in order; the objects inside such a one are not looked at."""
    if isinstance(value, dict):
        if any(isinstance(value.get(f), str) for f in TEXT_FIELDS):
            yield value
            return
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            yield from _json_documents(item)


def _read_json(path: Path) -> Iterator[Passage]:
    """Each document's paragraphs: the lines and HTML paragraphs of its text string."""
    skipped, lines = _Skipped(path), HeldDocument[str]()
    for _, line in read_lines(path):
        if not lines.add(line, len(line)):
            skipped(1, too_long("the file", "read whole", "write it as JSON lines (.jsonl)"))
            skipped.close()
            return
    try:
        value = json.loads("\n".join(lines))
    except ValueError as err:
        skipped(getattr(err, "lineno", 1), f"not JSON ({err})")
        value = None
    for number, doc in enumerate(_json_documents(value)):
        text, ident, title = _fields(doc)
        for paragraph in html_paragraphs(text or ""):
            yield Passage(paragraph, 1, f"{number}:{ident}", title)
    skipped.close()


JSON = InputKind(
    "json", 'JSON files (.json) read whole (an export, an API\'s answer): every object in it '
    'with a "text" or "content" string is a document, whose lines and HTML paragraphs are '
    "paragraphs (tags removed)",
    paragraphs=True, detect=lambda path, first: _name(path).endswith(".json"), read=_read_json)


# ---- the table ------------------------------------------------------------------------------

# Tried in this order by `input_kind`; text, the last, takes every file.
# A .json file whose first line is a JSON line with a text string is JSON lines.
INPUT_KINDS: dict[str, InputKind] = {k.name: k for k in (FASTA, JSON_LINES, JSON, MARKDOWN,
                                                         WIKIEXTRACTOR, TEXT)}
INPUT_FORMATS: tuple[str, ...] = (AUTO, *INPUT_KINDS)
# The kinds `elmo embed` reads (those with `entries`), in the table's order.
EMBED_FORMATS: tuple[str, ...] = tuple(k.name for k in INPUT_KINDS.values() if k.entries)


def input_kind(path: str | Path, name: str = AUTO) -> InputKind:
    """The kind of input `path` is: `name`'s, or with "auto" the first of `INPUT_KINDS` that
    detects it (stdin, which cannot be read twice, is text)."""
    if name != AUTO:
        if name not in INPUT_KINDS:
            raise InputFileError(f"unknown input format {name!r}; choose one of "
                                 f"{', '.join(INPUT_FORMATS)}")
        return INPUT_KINDS[name]
    path = Path(path)
    first = "" if is_stdin(path) else _first_line(path)
    return next(kind for kind in INPUT_KINDS.values() if kind.detect(path, first))


def embedded_kind(path: str | Path, name: str | None = None) -> InputKind:
    """The kind `elmo embed` reads `path` as: `name`'s (one of EMBED_FORMATS), or (None) the
    first of those that detects it (its first line read with invalid bytes replaced: the
    encoding is checked as the entries are read)."""
    if name is not None:
        if name not in EMBED_FORMATS:
            raise InputFileError(f"elmo embed reads no input format {name!r}; choose one of "
                                 f"{', '.join(EMBED_FORMATS)}")
        return INPUT_KINDS[name]
    path = Path(path)
    first = _first_line(path, "replace")
    return next(kind for kind in INPUT_KINDS.values()
                if kind.entries is not None and kind.detect(path, first))


def folder_files(folder: Path) -> list[Path] | None:
    """The files of `folder` if it is the output folder of an input kind (WikiExtractor's),
    sorted; None if it is no kind's."""
    return next((files for kind in INPUT_KINDS.values()
                 if (files := kind.folder_files(folder)) is not None), None)
