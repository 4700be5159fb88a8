"""Text shared with a test set: the n-grams of test texts, hashed into a set
(`OverlapSet`), to leave out of a training corpus the documents that repeat any of them.

Text is compared in *units* (`UNITS`, picked by whether the tokenizer reads characters): for
Chinese, its characters with white space removed (a segmented test file's spaces do not
count); for languages written with spaces, its words (runs of letters and digits, and single
other characters). Both sides are NFKC-normalized and case-folded first (full-width digits and
Latin letters are their ASCII ones). A document shares text with a test file when they have a
run of the unit's `n` in common: 13 words, as GPT-3's contamination check; 25 Chinese
characters, about as many words (13 characters are official titles that news and laws repeat
everywhere: "全国人民代表大会常务委员会" alone left out most laws of LawRefBook). A test
text shorter than that adds nothing. The set holds a 64-bit hash per distinct n-gram, about
80 bytes each in memory; the texts themselves are hashed as they are read, none is held.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class OverlapUnit:
    """What a run of text is counted in: `ngrams(text, n)` -> the hashes of its runs of `n`
    units, in order, one at a time; `n`, the length of a run that a document shares with a
    test text to be left out."""

    name: str
    description: str
    ngrams: Callable[[str, int], Iterator[int]]
    n: int


def _normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _char_ngrams(text: str, n: int) -> Iterator[int]:
    chars = _SPACE.sub("", _normal(text))
    return (hash(chars[i:i + n]) for i in range(len(chars) - n + 1))


def _word_ngrams(text: str, n: int) -> Iterator[int]:
    words = _WORD.findall(_normal(text))
    return (hash(tuple(words[i:i + n])) for i in range(len(words) - n + 1))


UNITS: dict[str, OverlapUnit] = {u.name: u for u in (
    OverlapUnit("characters", "characters, white space removed", _char_ngrams, 25),
    OverlapUnit("words", "words and punctuation marks", _word_ngrams, 13),
)}


def unit_for(characters: bool) -> OverlapUnit:
    """The unit of a corpus whose tokenizer reads characters (Chinese) or words."""
    return UNITS["characters" if characters else "words"]


@dataclass(frozen=True)
class OverlapSet:
    """The n-grams of one or more test files (`sources`; `sha256`, of the sha256s of each
    file's texts), a set of hashes per file (`ngrams`), counted in `unit` runs of `n`."""

    sources: tuple[str, ...]
    sha256: str
    unit: OverlapUnit
    n: int
    ngrams: tuple[frozenset[int], ...]

    @property
    def size(self) -> int:
        """The distinct n-grams held, all files together (a shared one counted per file)."""
        return sum(map(len, self.ngrams))

    def source_of(self, texts: Iterable[str]) -> str | None:
        """The first test file (in `sources`' order) that shares a run of `n` units with `texts`
        (a document's paragraphs, read as one text), or None. The document's runs are hashed
        one at a time, not held: memory does not grow with the document."""
        first = len(self.sources)  # the first test file found so far; none yet
        for ngram in self.unit.ngrams("\n".join(texts), self.n):
            first = next((i for i in range(first) if ngram in self.ngrams[i]), first)
            if first == 0:
                break
        return self.sources[first] if first < len(self.sources) else None

    def describe(self) -> dict[str, object]:
        """What the manifest of a corpus records of it."""
        return {"sources": list(self.sources), "sha256": self.sha256, "unit": self.unit.name,
                "n": self.n, "ngrams": self.size}


def overlap_set(test_texts: Sequence[tuple[str | Path, Iterable[str]]], characters: bool,
                n: int | None = None) -> OverlapSet:
    """The n-grams of the test files `test_texts`: (path, its texts) each, in units of
    characters (`characters`) or words, runs of `n` of them (None: the unit's). Each file's
    texts are read once, as they come, into its n-grams and the sha256 of its texts."""
    unit, digest, sets = unit_for(characters), hashlib.sha256(), []
    n = unit.n if n is None else n
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    for _, texts in test_texts:
        file_digest = hashlib.sha256()
        sets.append(frozenset(_hashed(texts, unit, n, file_digest.update)))
        digest.update(file_digest.digest())
    return OverlapSet(tuple(str(p) for p, _ in test_texts), digest.hexdigest(), unit, n,
                      tuple(sets))


def _hashed(texts: Iterable[str], unit: OverlapUnit, n: int, digest: Callable[[bytes], None]
            ) -> Iterator[int]:
    """The n-grams of `texts`, each text given to `digest` (its length first) as it passes."""
    for text in texts:
        data = text.encode("utf-8")
        digest(len(data).to_bytes(8, "little") + data)
        yield from unit.ngrams(text, n)
