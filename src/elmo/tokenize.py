"""Tokenizers: turn one line of raw text into a list of tokens.

All tokenizers share one interface, ``Callable[[str], list[str]]``, obtained by name with
:func:`get_tokenizer`. Optional back-ends (sacremoses, jieba) are imported lazily, so the
core package does not depend on them. Tokenizers are small picklable objects, so they can be
sent to data-loading worker processes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elmo.extras import import_extra

Tokenizer = Callable[[str], list[str]]

TOKENIZER_NAMES: tuple[str, ...] = ("whitespace", "moses", "jieba", "chars")


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

    def __call__(self, text: str) -> list[str]:
        if self._tok is None:
            sacremoses = import_extra("sacremoses", "the 'moses' tokenizer")
            self._tok = sacremoses.MosesTokenizer(lang=self.lang)
        return self._tok.tokenize(text, escape=False)

    def __getstate__(self) -> dict[str, Any]:
        return {"lang": self.lang, "_tok": None}  # rebuilt lazily in the worker


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


def get_tokenizer(name: str) -> Tokenizer:
    """Return the tokenizer called ``name`` (one of :data:`TOKENIZER_NAMES`).

    The optional back-ends are imported on first use; a missing one raises ImportError with
    the install command.
    """
    if name == "whitespace":
        return _Whitespace()
    if name == "chars":
        return _Chars()
    if name == "moses":
        tok: Tokenizer = _Moses()
    elif name == "jieba":
        tok = _Jieba()
    else:
        raise ValueError(f"unknown tokenizer {name!r}; choose one of: {', '.join(TOKENIZER_NAMES)}")
    tok("")  # import the back-end now, so a missing dependency fails early and clearly
    return tok
