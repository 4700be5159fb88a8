"""WordNet 3.0 dictionary files (`index.POS`, `data.POS`): sense keys and first senses.

Only the files every WordNet dict directory has are read (Debian's `wordnet-base` ships no
`index.sense`): `index.POS` lists a lemma's synsets in sense-number order, and `data.POS`,
addressed by byte offset, gives each synset's lexicographer file, words and lex ids, from
which the sense key `lemma%ss_type:lex_filenum:lex_id:head_word:head_id` is built.
"""

from __future__ import annotations

import itertools
import os
import re
import warnings
from pathlib import Path

from elmo.errors import ElmoError

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
SS_TYPE_NUMBER = {"n": 1, "v": 2, "a": 3, "r": 4, "s": 5}
NUMBER_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}  # satellites are adjectives
DEBIAN_DIR = Path("/usr/share/wordnet")
_MARKER = re.compile(r"\((a|p|ip)\)$")  # adjective position markers: `galore(ip)`
_HOW_TO_GET = (
    "install WordNet 3.0 (Debian/Ubuntu: `apt-get install wordnet-base`, which puts it in "
    f"{DEBIAN_DIR}) or pass --wordnet DIR, a WordNet 3.0 dict directory (or set $WNHOME)"
)


def default_wordnet_dir() -> Path:
    """$WNSEARCHDIR, else $WNHOME/dict, else Debian's /usr/share/wordnet."""
    if os.environ.get("WNSEARCHDIR"):
        return Path(os.environ["WNSEARCHDIR"])
    if os.environ.get("WNHOME"):
        return Path(os.environ["WNHOME"]) / "dict"
    return DEBIAN_DIR


def sense_key_pos(key: str) -> str:
    """The WordNet part of speech (n, v, a, r) of a sense key; satellites count as `a`."""
    try:
        return NUMBER_POS[key.split("%", 1)[1][0]]
    except (IndexError, KeyError):
        raise ElmoError(f"{key!r} is not a WordNet sense key (lemma%ss_type:...)") from None


def clean_word(word: str) -> str:
    """A word of a `data.POS` line as it appears in sense keys: lower case, no marker."""
    return _MARKER.sub("", word).lower()


class WordNet:
    """Read-only access to a WordNet 3.0 dict directory."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_wordnet_dir()
        needed = [f"{kind}.{name}" for name in POS_FILES.values() for kind in ("index", "data")]
        missing = [name for name in needed if not (self.directory / name).is_file()]
        if missing:
            where = "does not exist" if not self.directory.is_dir() else \
                f"lacks {', '.join(missing)}"
            raise ElmoError(f"WordNet not found: {self.directory} {where}; {_HOW_TO_GET}")
        self._first_offsets: dict[str, dict[str, int]] = {}
        self._first_keys: dict[tuple[str, str], str | None] = {}
        self._check_version()

    def _check_version(self) -> None:
        with open(self.directory / "data.noun", encoding="utf-8", errors="replace") as f:
            header = "".join(itertools.islice(f, 40))
        found = re.search(r"WordNet (\d+\.\d+)", header)
        if found and found.group(1) != "3.0":
            warnings.warn(
                f"{self.directory} holds WordNet {found.group(1)}; the WSD evaluation sets "
                f"use WordNet 3.0 sense keys, so keys may not match", stacklevel=3)

    def _index(self, pos: str) -> dict[str, int]:
        """lemma -> byte offset of its first sense's synset, for one part of speech."""
        if pos not in self._first_offsets:
            path = self.directory / f"index.{POS_FILES[pos]}"
            first: dict[str, int] = {}
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    if line.startswith(" "):  # licence header
                        continue
                    fields = line.split()
                    try:
                        n_pointers = int(fields[3])
                        first[fields[0]] = int(fields[4 + n_pointers + 2])
                    except (IndexError, ValueError):
                        raise ElmoError(
                            f"{path}, line {number}: not a WordNet index line "
                            f"(lemma pos synset_cnt p_cnt ... offsets); {_HOW_TO_GET}"
                        ) from None
            self._first_offsets[pos] = first
        return self._first_offsets[pos]

    def _synset(self, pos: str, offset: int) -> tuple[str, str, list[tuple[str, int]], int | None]:
        """(ss_type, lex_filenum, [(word, lex_id)], head synset offset of a satellite)."""
        path = self.directory / f"data.{POS_FILES[pos]}"
        with open(path, "rb") as f:
            f.seek(offset)
            line = f.readline().decode("utf-8", errors="replace")
        fields = line.split()
        try:
            if int(fields[0]) != offset:
                raise ValueError
            lex_filenum, ss_type, n_words = fields[1], fields[2], int(fields[3], 16)
            words = [(fields[4 + 2 * i], int(fields[5 + 2 * i], 16)) for i in range(n_words)]
            at = 4 + 2 * n_words
            pointers = [fields[at + 1 + 4 * i: at + 5 + 4 * i] for i in range(int(fields[at]))]
        except (IndexError, ValueError):
            raise ElmoError(f"{path}: no synset at byte offset {offset}; the index and data "
                            f"files do not belong together; {_HOW_TO_GET}") from None
        head = next((int(p[1]) for p in pointers if p[0] == "&" and p[2] == "a"), None)
        return ss_type, lex_filenum, words, head if ss_type == "s" else None

    def first_sense_key(self, lemma: str, pos: str) -> str | None:
        """The sense key of WordNet's first sense of `lemma` (n, v, a or r), or None if absent."""
        lemma = lemma.lower().replace(" ", "_")
        if (lemma, pos) not in self._first_keys:
            self._first_keys[lemma, pos] = self._first_sense_key(lemma, pos)
        return self._first_keys[lemma, pos]

    def _first_sense_key(self, lemma: str, pos: str) -> str | None:
        offset = self._index(pos).get(lemma)
        if offset is None:
            return None
        ss_type, lex_filenum, words, head = self._synset(pos, offset)
        lex_id = next((i for w, i in words if clean_word(w) == lemma), None)
        if lex_id is None:
            return None
        head_word = head_id = ""
        if head is not None:
            word, number = self._synset("a", head)[2][0]
            head_word, head_id = clean_word(word), f"{number:02d}"
        return (f"{lemma}%{SS_TYPE_NUMBER[ss_type]}:{lex_filenum}:{lex_id:02d}:"
                f"{head_word}:{head_id}")
