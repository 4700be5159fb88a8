"""Word vocabulary in the bilm-tf file format.

A vocabulary file holds one word per line; the line number (from 0) is the word id. Our files
start with ``<S>``, ``</S>``, ``<UNK>`` and continue by descending corpus frequency, which the
sampled softmax relies on (its log-uniform proposal assumes frequency-sorted ids).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from elmo.io.atomic import atomic_output

BOS = "<S>"
EOS = "</S>"
UNK = "<UNK>"
SPECIAL_TOKENS: tuple[str, str, str] = (BOS, EOS, UNK)


class Vocabulary:
    """Bidirectional word <-> id mapping; unknown words map to the ``<UNK>`` id."""

    def __init__(self, words: Sequence[str], *, source: str = "vocabulary") -> None:
        self._id_to_word: list[str] = list(words)
        self._word_to_id: dict[str, int] = {}
        for i, word in enumerate(self._id_to_word):
            if not word or word != word.strip() or len(word.split()) != 1:
                raise ValueError(f"{source}: word {i} ({word!r}) is empty or has whitespace")
            if word in self._word_to_id:
                raise ValueError(
                    f"{source}: duplicate word {word!r} (ids {self._word_to_id[word]} and {i})"
                )
            self._word_to_id[word] = i
        missing = [tok for tok in SPECIAL_TOKENS if tok not in self._word_to_id]
        if missing:
            raise ValueError(
                f"{source}: missing special token(s) {', '.join(missing)}; "
                f"a vocabulary must contain all of {', '.join(SPECIAL_TOKENS)}"
            )
        self._bos = self._word_to_id[BOS]
        self._eos = self._word_to_id[EOS]
        self._unk = self._word_to_id[UNK]

    # -- construction / persistence -------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Vocabulary:
        """Read a bilm-tf vocabulary file (UTF-8, one word per line; line index = id)."""
        path = Path(path)
        words: list[str] = []
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                word = line.strip()
                if not word:
                    raise ValueError(f"{path}:{lineno}: empty line in vocabulary file")
                words.append(word)
        return cls(words, source=str(path))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the vocabulary file atomically (temporary file beside it, then rename)."""
        with atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for word in self._id_to_word:
                f.write(word + "\n")

    @classmethod
    def build(
        cls,
        sentences: Iterable[list[str]],
        min_count: int = 1,
        max_size: int | None = None,
    ) -> Vocabulary:
        """Count words and build a frequency-sorted vocabulary.

        Words seen fewer than ``min_count`` times are dropped; ties in frequency are broken by
        the word itself so the result is deterministic. ``max_size`` bounds the total size,
        the three special tokens included. Special tokens appearing in the text are not
        counted (they are always present, first).
        """
        if max_size is not None and max_size < len(SPECIAL_TOKENS):
            raise ValueError(f"max_size must be >= {len(SPECIAL_TOKENS)}, got {max_size}")
        counts: Counter[str] = Counter()
        for tokens in sentences:
            counts.update(tokens)
        for tok in SPECIAL_TOKENS:
            counts.pop(tok, None)
        ranked = sorted(
            (w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w)
        )
        if max_size is not None:
            ranked = ranked[: max_size - len(SPECIAL_TOKENS)]
        return cls([*SPECIAL_TOKENS, *ranked], source="built vocabulary")

    # -- lookups --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._id_to_word)

    def __contains__(self, word: object) -> bool:
        return word in self._word_to_id

    def __iter__(self) -> Iterator[str]:
        return iter(self._id_to_word)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self._id_to_word == other._id_to_word

    def __hash__(self) -> int:
        return hash(tuple(self._id_to_word))

    def __repr__(self) -> str:
        return f"Vocabulary(size={len(self)})"

    @property
    def words(self) -> list[str]:
        """All words in id order (a copy)."""
        return list(self._id_to_word)

    @property
    def bos(self) -> int:
        """Id of the sentence-start token ``<S>``."""
        return self._bos

    @property
    def eos(self) -> int:
        """Id of the sentence-end token ``</S>``."""
        return self._eos

    @property
    def unk(self) -> int:
        """Id of the unknown-word token ``<UNK>``."""
        return self._unk

    def word_to_id(self, word: str) -> int:
        """Id of ``word``, or the ``<UNK>`` id if it is not in the vocabulary."""
        return self._word_to_id.get(word, self._unk)

    def id_to_word(self, idx: int) -> str:
        """Word with id ``idx`` (IndexError if out of range)."""
        if not 0 <= idx < len(self._id_to_word):
            raise IndexError(f"word id {idx} out of range for vocabulary of size {len(self)}")
        return self._id_to_word[idx]

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens`` (no ``<S>``/``</S>`` added)."""
        get, unk = self._word_to_id.get, self._unk
        return [get(tok, unk) for tok in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Words of ``ids``."""
        return [self.id_to_word(int(i)) for i in ids]
