"""The CoNLL-2012 `*_gold_conll` layout (OntoNotes 5.0): documents of sentences with words,
POS, speakers, named entities, one PropBank argument column per predicate and coreference.

One token per line, white-space separated columns, a blank line after each sentence,
`#begin document (NAME); part NNN` ... `#end document` around each part. Columns: 0 document
id, 1 part, 2 word number, 3 word, 4 POS, 5 parse bit, 6 predicate lemma, 7 frameset, 8 word
sense, 9 speaker, 10 named entities, 11..N-2 one argument column per predicate, N-1
coreference. Bracketed columns become spans: `(start, end)` word indices within the sentence,
both inclusive (CoNLL's convention). SRL (`elmo.tasks.srl`), coreference and OntoNotes NER
read this one module. Bad input raises InputFileError naming the file, line and problem.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from elmo.errors import InputFileError
from elmo.io.textfile import read_lines, strip_compression

BEGIN = re.compile(r"#begin document \((.*)\);?\s*(?:part\s+(\d+))?")
END = "#end document"
FIXED_COLUMNS = 11  # columns 0..10, before the argument columns and the coreference column
_OPEN = re.compile(r"\(([^()*]+)")  # "(ARG0" in "(ARG0*", "(ORG" in "(ORG)"
_COREF = re.compile(r"(\()?(\d+)(\))?")  # "(12", "12)", "(12)"

LabeledSpan = tuple[str, int, int]  # (label, start, end), end inclusive


@dataclass
class Proposition:
    """One argument column: its predicate (the first word of its `V` span; None when the
    column has none), its labelled spans (the `V` span included) and the raw column."""

    predicate: int | None
    arguments: list[LabeledSpan]
    column: list[str] = field(repr=False)


@dataclass
class Sentence:
    """One sentence of a document: its words and annotations, the 1-based line of its first
    row and its source lines (for writing predictions back)."""

    words: list[str]
    pos: list[str]
    lemmas: list[str]  # the predicate lemma column ("-" where none)
    speakers: list[str]
    entities: list[LabeledSpan]  # named entities (label, start, end)
    propositions: list[Proposition]  # one per argument column, in column order
    mentions: list[tuple[int, int, int]]  # coreference (cluster id, start, end)
    line: int
    rows: list[str] = field(repr=False)
    document: str = ""  # its document's name

    @property
    def predicates(self) -> list[Proposition]:
        """The propositions with a gold predicate (`V`), in column order."""
        return [p for p in self.propositions if p.predicate is not None]


@dataclass
class Document:
    """One `#begin document` ... `#end document` part."""

    name: str  # e.g. "bc/cctv/00/cctv_0001"
    part: int
    sentences: list[Sentence]
    line: int  # the `#begin document` line (1-based)

    @property
    def genre(self) -> str:
        """The first path component of the name ("bc", "nw", ...)."""
        return self.name.split("/")[0]

    @property
    def words(self) -> list[str]:
        return [w for s in self.sentences for w in s.words]

    @property
    def speakers(self) -> list[str]:
        return [w for s in self.sentences for w in s.speakers]

    @property
    def sentence_starts(self) -> list[int]:
        """The document-level offset of each sentence's first word."""
        starts, total = [], 0
        for sentence in self.sentences:
            starts.append(total)
            total += len(sentence.words)
        return starts

    def clusters(self) -> dict[int, list[tuple[int, int, int]]]:
        """Coreference clusters by id: (sentence, start, end) mentions in document order."""
        clusters: dict[int, list[tuple[int, int, int]]] = {}
        for number, sentence in enumerate(self.sentences):
            for cluster, start, end in sorted(sentence.mentions, key=lambda m: m[1:]):
                clusters.setdefault(cluster, []).append((number, start, end))
        return clusters

    def token_clusters(self) -> list[list[tuple[int, int]]]:
        """The clusters as lists of (start, end) document-level word offsets, by cluster id."""
        starts = self.sentence_starts
        return [[(starts[s] + a, starts[s] + b) for s, a, b in mentions]
                for _, mentions in sorted(self.clusters().items())]


def conll2012_files(path: str | Path) -> list[Path]:
    """`path` itself, or the `*_conll` / `*.gold_conll` files (plain, .gz, .xz) under a
    folder, sorted by path."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file()
                   and strip_compression(p.name).endswith(("_conll", ".gold_conll")))
    if not files:
        raise InputFileError(f"{path}: a folder without *_conll files; give a CoNLL-2012 "
                             "file or a folder holding them")
    return files


def read_conll2012(path: str | Path, encoding_errors: str = "strict") -> list[Document]:
    """The documents of a `*_gold_conll` file (plain, .gz or .xz) or of every such file under a
    folder, in order."""
    documents = [d for f in conll2012_files(path) for d in _read_file(f, encoding_errors)]
    if not documents:
        raise InputFileError(f"{path} holds no '#begin document' part; is it in the "
                             "CoNLL-2012 *_gold_conll layout?")
    return documents


def _read_file(path: Path, encoding_errors: str) -> Iterator[Document]:
    document: Document | None = None
    block: list[tuple[int, str]] = []
    for number, text in read_lines(path, encoding_errors):
        number += 1
        stripped = text.strip()
        if stripped.startswith("#begin document"):
            if document is not None:
                raise InputFileError(f"{path}, line {number}: '#begin document' while the "
                                     f"document of line {document.line} has no "
                                     f"'{END}'; add it before line {number}")
            match = BEGIN.match(stripped)
            if match is None:
                raise InputFileError(f"{path}, line {number}: expected '#begin document "
                                     f"(NAME); part NNN', got {stripped!r}")
            document = Document(match[1], int(match[2] or 0), [], number)
        elif stripped.startswith(END):
            if document is None:
                raise InputFileError(f"{path}, line {number}: '{END}' without "
                                     "'#begin document'")
            if block:
                document.sentences.append(_sentence(path, block, document.name))
                block = []
            yield document
            document = None
        elif not stripped:
            if block:
                document.sentences.append(_sentence(path, block, document.name))
                block = []
        elif stripped.startswith("#"):
            continue
        elif document is None:
            raise InputFileError(f"{path}, line {number}: a row outside a document; every "
                                 "row lies between '#begin document' and '#end document'")
        else:
            block.append((number, text))
    if document is not None:
        raise InputFileError(f"{path}: the document of line {document.line} "
                             f"({document.name}) has no '{END}' before the end of the file")


def _sentence(path: Path, block: list[tuple[int, str]], name: str) -> Sentence:
    """A sentence from its rows (1-based line, text), columns checked."""
    rows = [(number, text.split()) for number, text in block]
    first_line, first = rows[0]
    if len(first) < FIXED_COLUMNS + 1:
        raise InputFileError(f"{path}, line {first_line}: {len(first)} columns; a CoNLL-2012 "
                             f"row has at least {FIXED_COLUMNS + 1} (words, annotations, "
                             "coreference)")
    for number, columns in rows:
        if len(columns) != len(first):
            raise InputFileError(f"{path}, line {number}: {len(columns)} columns, but line "
                                 f"{first_line} of the same sentence has {len(first)}; every "
                                 "row of a sentence needs one column per predicate")
    lines = [number for number, _ in rows]
    column = list(zip(*(columns for _, columns in rows), strict=True))
    propositions = []
    for args in column[FIXED_COLUMNS:-1]:
        spans = bracket_spans(path, lines, args)
        verbs = [start for label, start, _ in spans if label == "V"]
        propositions.append(Proposition(verbs[0] if verbs else None, spans, list(args)))
    return Sentence(
        words=list(column[3]), pos=list(column[4]), lemmas=list(column[6]),
        speakers=list(column[9]), entities=bracket_spans(path, lines, column[10]),
        propositions=propositions, mentions=coref_mentions(path, lines, column[-1]),
        line=first_line, rows=[text for _, text in block], document=name)


def bracket_spans(path: str | Path, lines: list[int], cells: tuple[str, ...] | list[str]
                  ) -> list[LabeledSpan]:
    """The labelled spans of a bracketed column (`(ARG0*`, `*`, `*)`, `(V*)`, `(ORG)`), in
    order of their start; `lines` gives each cell's line for errors."""
    spans: list[LabeledSpan] = []
    open_spans: list[tuple[str, int]] = []
    for i, cell in enumerate(cells):
        opened = _OPEN.findall(cell)
        if cell.replace("*", "").replace(")", "") != "".join(f"({o}" for o in opened):
            raise InputFileError(f"{path}, line {lines[i]}: {cell!r} is not a bracketed "
                                 "cell such as (ARG0*, *, *) or (V*)")
        open_spans += [(label, i) for label in opened]
        for _ in range(cell.count(")")):
            if not open_spans:
                raise InputFileError(f"{path}, line {lines[i]}: {cell!r} closes a span that "
                                     "was never opened (unbalanced brackets)")
            label, start = open_spans.pop()
            spans.append((label, start, i))
    if open_spans:
        label, start = open_spans[-1]
        raise InputFileError(f"{path}, line {lines[start]}: span ({label} is never closed "
                             "before the end of its sentence (unbalanced brackets)")
    return sorted(spans, key=lambda s: (s[1], -s[2]))


def coref_mentions(path: str | Path, lines: list[int], cells: tuple[str, ...] | list[str]
                   ) -> list[tuple[int, int, int]]:
    """The (cluster id, start, end) mentions of a coreference column (`-`, `(12`, `12)`,
    `(12)`, several joined by `|`), in order of their end."""
    mentions: list[tuple[int, int, int]] = []
    open_at: dict[int, list[int]] = {}
    for i, cell in enumerate(cells):
        if cell == "-":
            continue
        for part in cell.split("|"):
            match = _COREF.fullmatch(part)
            if match is None or not (match[1] or match[3]):
                raise InputFileError(f"{path}, line {lines[i]}: coreference {cell!r}: "
                                     f"{part!r} is not (ID, ID) or (ID)")
            cluster = int(match[2])
            if match[1]:
                open_at.setdefault(cluster, []).append(i)
            if match[3]:
                if not open_at.get(cluster):
                    raise InputFileError(f"{path}, line {lines[i]}: coreference {part!r} "
                                         "closes a mention never opened (unbalanced brackets)")
                mentions.append((cluster, open_at[cluster].pop(), i))
    unclosed = [(starts[-1], cluster) for cluster, starts in open_at.items() if starts]
    if unclosed:
        start, cluster = min(unclosed)
        raise InputFileError(f"{path}, line {lines[start]}: coreference mention ({cluster} "
                             "is never closed in its sentence (unbalanced brackets)")
    return mentions
