"""Tokenizers: turn one line of raw text into a list of tokens.

All tokenizers share one interface, ``Callable[[str], list[str]]``, obtained by name with
:func:`get_tokenizer`. Each is one `TokenizerKind` record in `TOKENIZERS`, which every
`--tokenizer` option (embed, serve, train, vocab, task, perplexity), the model card's
install line (`elmo.loading.publish`) and the span task's scoring read. Optional back-ends
(sacremoses, jieba) are imported lazily, so the core package does not depend on them.
Tokenizers are small picklable objects, so they can be sent to data-loading worker processes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elmo.extras import EXTRA_PACKAGES, import_extra

Tokenizer = Callable[[str], list[str]]


class _Whitespace:
    """Split on runs of whitespace (``str.split``)."""

    def __call__(self, text: str) -> list[str]:
        return text.split()


class _Chars:
    """Every non-whitespace character is a token (character-level Chinese)."""

    def __call__(self, text: str) -> list[str]:
        return [ch for ch in text if not ch.isspace()]


class _Moses:
    """English Moses tokenization via sacremoses, without HTML escaping."""

    def __init__(self, lang: str = "en") -> None:
        self.lang = lang
        self._tok: Any = None

    def _moses(self, text: str, **options: bool) -> list[str]:
        if self._tok is None:
            sacremoses = import_extra("sacremoses", "the Moses tokenizers")
            self._tok = sacremoses.MosesTokenizer(lang=self.lang)
        return self._tok.tokenize(text, escape=False, **options)

    def __call__(self, text: str) -> list[str]:
        return self._moses(text)

    def __getstate__(self) -> dict[str, Any]:
        return {"lang": self.lang, "_tok": None}  # rebuilt lazily in the worker


# A number's inner separators, which WikiText writes as tokens of their own: 1 @,@ 000, 3 @.@ 5.
_NUMBER_SEPARATOR = re.compile(r"(?<=\d)([,.])(?=\d)")


class _WikiText(_Moses):
    """Raw English text split as WikiText-2/-103 are (Merity et al. 2016): Moses with hyphens
    between letters or digits as `@-@`, and a number's `,` and `.` as `@,@` and `@.@`."""

    def __call__(self, text: str) -> list[str]:
        tokens = self._moses(text, aggressive_dash_splits=True)
        return [piece for token in tokens
                for piece in _NUMBER_SEPARATOR.sub(r" @\1@ ", token).split()]


class _Jieba:
    """Chinese word segmentation via jieba; whitespace-only pieces are dropped."""

    def __init__(self) -> None:
        self._lcut: Any = None

    def __call__(self, text: str) -> list[str]:
        if self._lcut is None:
            import logging

            jieba = import_extra("jieba", "the 'jieba' tokenizer")

            jieba.setLogLevel(logging.WARNING)  # silence the dictionary-loading banner
            self._lcut = jieba.lcut
        return [tok for tok in self._lcut(text) if tok.strip()]

    def __getstate__(self) -> dict[str, Any]:
        return {"_lcut": None}


@dataclass(frozen=True)
class TokenizerKind:
    """A tokenizer by name: its `description`, the `factory` that makes it, the optional
    module its back-end imports (`needs`, one of `elmo.extras.EXTRA_PACKAGES`: the model
    card's install line names its extra), whether its tokens are characters or words of a
    language written without spaces (`characters`: SQuAD-style scores then compare answers by
    characters), whether its tokens are the text's own characters in order with only white
    space between (`keeps_text`: what span tasks need to cut answers from a passage), and the
    language whose sentence splitter cuts a corpus's paragraphs before it tokenizes them
    (`language`, a key of `elmo.io.sentences.SPLITTERS`)."""

    name: str
    description: str
    factory: Callable[[], Tokenizer]
    needs: str | None = None
    characters: bool = False
    keeps_text: bool = True
    language: str = "en"

    @property
    def extra(self) -> str | None:
        """The extra of ours that installs what it needs (None: nothing)."""
        return EXTRA_PACKAGES[self.needs][1] if self.needs else None


TOKENIZERS: dict[str, TokenizerKind] = {kind.name: kind for kind in (
    TokenizerKind("whitespace", "tokens separated by white space", _Whitespace),
    TokenizerKind("moses", "English Moses tokenization (sacremoses)", _Moses,
                  needs="sacremoses"),
    TokenizerKind("wikitext", "English split as WikiText is: Moses, with @-@, @,@ and @.@ "
                  "(sacremoses)", _WikiText, needs="sacremoses", keeps_text=False),
    TokenizerKind("jieba", "Chinese word segmentation (jieba)", _Jieba, needs="jieba",
                  characters=True, language="zh"),
    TokenizerKind("chars", "every character but white space a token (character-level "
                  "Chinese, proteins)", _Chars, characters=True, language="zh"),
)}
# The tokenizer of a model that records none, and of a corpus read without --tokenizer.
DEFAULT_TOKENIZER = "whitespace"
TOKENIZER_NAMES: tuple[str, ...] = tuple(TOKENIZERS)  # the built-in ones (read TOKENIZERS)


def tokenizers_described() -> str:
    """Every tokenizer with its description, for help texts."""
    return "; ".join(f"{kind.name}: {kind.description}" for kind in TOKENIZERS.values())


def get_tokenizer(name: str) -> Tokenizer:
    """Return the tokenizer called ``name`` (a key of :data:`TOKENIZERS`).

    The optional back-ends are imported on first use; a missing one raises ImportError with
    the install command.
    """
    if name not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name!r}; choose one of: {', '.join(TOKENIZERS)}")
    kind = TOKENIZERS[name]
    tok = kind.factory()
    if kind.needs:
        tok("")  # import the back-end now, so a missing dependency fails early and clearly
    return tok
