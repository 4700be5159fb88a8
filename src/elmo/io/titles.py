"""Lists of document titles, to leave documents out of a corpus by title (a test set's
articles out of the training text): a file of one of the kinds of `TITLE_LISTS`, read into a
`TitleSet` that tells whether a document's title is one of them.

Titles are compared by `title_key`, which makes WikiText's tokenized titles and Wikipedia's
own equal ("American Beauty ( 1999 film )", "M @-@ 82" and "2011 – 12 ... men 's" name
"American Beauty (1999 film)", "M-82" and "2011–12 ... men's"). WikiText-2 writes the words
outside its vocabulary as `<unk>`: there, `<unk>` stands for any one word, and a title made of
`<unk>` alone matches nothing (it is kept in `unmatched`, to be reported).

Adding a kind of list is one `TitleListKind`: its name, description, `detect(first line)`
(tried in the table's order; lines, the last, takes every file) and `title(line)`.
"""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from elmo.errors import InputFileError
from elmo.io.textfile import read_lines

UNKNOWN = "<unk>"  # WikiText's word outside its vocabulary: any one word of a title
_UNKNOWN_MARK = "\ue000"  # UNKNOWN while a title is normalized (a private-use character)
_WIKITEXT_JOIN = re.compile(r" ?@([-,.])@ ?")  # "M @-@ 82", "1 @,@ 000", "2 @.@ 5"
_TOKEN = re.compile(r"\w+|[^\w\s]")  # a run of letters and digits, or one other character
_WORD = re.compile(r"\w+")
_HEADING = re.compile(r"= (?!=)(?P<title>.*\S) =")  # " = Title = " stripped; not " = = S = = "


def title_key(title: str) -> str:
    """A title as titles are compared: WikiText's joins `@-@`, `@,@` and `@.@` (with the
    spaces around them) read as `-`, `,` and `.`; HTML entities (`&amp;`) unescaped; NFKC
    normalized and case-folded; then cut into runs of letters and digits and single other
    characters (punctuation, brackets, dashes), joined by one space, so that the spaces a
    tokenizer put around punctuation, or took away, and runs of whitespace do not count."""
    text = _WIKITEXT_JOIN.sub(r"\1", title).replace(UNKNOWN, _UNKNOWN_MARK)
    text = unicodedata.normalize("NFKC", html.unescape(text)).casefold()
    return " ".join(_TOKEN.findall(text))


@dataclass(frozen=True)
class TitleListKind:
    """A format of title lists. `detect(first_line)`: whether a file is of this kind (its
    first non-blank line, stripped); `title(line)`: the title a line names, or None."""

    name: str
    description: str
    detect: Callable[[str], bool]
    title: Callable[[str], str | None]


def _heading(line: str) -> str | None:
    match = _HEADING.fullmatch(line.strip())
    return match["title"] if match else None


WIKITEXT = TitleListKind(
    "wikitext", "WikiText's text (a first line ' = Title = '): its ' = Title = ' headings "
    "name its articles (' = = Section = = ' lines are sections)",
    detect=lambda first: _HEADING.fullmatch(first) is not None, title=_heading)
LINES = TitleListKind("lines", "one title per line (blank lines skipped)",
                      detect=lambda first: True, title=lambda line: line.strip() or None)

# Tried in this order by `read_titles`; lines, the last, takes every file.
TITLE_LISTS: dict[str, TitleListKind] = {k.name: k for k in (WIKITEXT, LINES)}


@dataclass(frozen=True)
class TitleSet:
    """The titles of one or more lists (`sources`; `sha256`, of their files' sha256s):
    `keys`, the `title_key`s of those without `<unk>`; `pattern`, one expression for those
    with `<unk>` and a word of their own; `unmatched`, those of `<unk>` words alone, which
    match nothing; `size`, the titles read (repeats included). `title in titles`: whether a
    document's title is one of them ("" never is)."""

    sources: tuple[str, ...]
    sha256: str
    keys: frozenset[str]
    pattern: re.Pattern[str] | None
    unmatched: tuple[str, ...]
    size: int

    def __contains__(self, title: object) -> bool:
        if not isinstance(title, str) or not title:
            return False
        key = title_key(title)
        return key in self.keys or (self.pattern is not None
                                    and self.pattern.fullmatch(key) is not None)


def _titles_of(path: Path) -> list[str]:
    """The titles a list names (plain or gzipped UTF-8; its kind the first of `TITLE_LISTS`
    that detects it)."""
    if not path.is_file():
        raise InputFileError(f"the titles file {path} does not exist: give a file of titles, "
                             "one per line, or a WikiText file whose ' = Title = ' headings "
                             "name its articles")
    lines = [text for _, text in read_lines(path)]
    first = next((line.strip() for line in lines if line.strip()), "")
    kind = next(k for k in TITLE_LISTS.values() if k.detect(first))
    titles = [t for t in map(kind.title, lines) if t is not None]
    if not titles:
        raise InputFileError(f"the titles file {path} names no title (read as "
                             f"{kind.description})")
    return titles


def read_titles(paths: Sequence[str | Path]) -> TitleSet:
    """The titles of the lists in `paths`. InputFileError for a missing file or one that
    names no title."""
    keys, patterns, unmatched, size, digest = set(), set(), [], 0, hashlib.sha256()
    for path in map(Path, paths):
        titles = _titles_of(path)
        size += len(titles)
        digest.update(hashlib.sha256(path.read_bytes()).digest())
        for title in titles:
            tokens = title_key(title).split(" ")
            if _UNKNOWN_MARK not in tokens:
                keys.add(" ".join(tokens))
            elif any(_WORD.fullmatch(t) for t in tokens):
                patterns.add(" ".join(r"\w+" if t == _UNKNOWN_MARK else re.escape(t)
                                      for t in tokens))
            else:
                unmatched.append(title)
    pattern = "|".join(f"(?:{p})" for p in sorted(patterns))
    return TitleSet(tuple(map(str, paths)), digest.hexdigest(), frozenset(keys),
                    re.compile(pattern) if pattern else None, tuple(unmatched), size)
