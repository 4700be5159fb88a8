"""Paragraphs -> sentences: one `SentenceSplitter` per language, in `SPLITTERS`.

English (and other languages written with spaces) is split by sentencex (Wikimedia's
rule-based segmenter, a compiled extension with no dependencies): the most accurate and the
fastest of the splitters measured (benchmarks/README.md). Chinese is split after 。！？ (and
!?), closing quotes and brackets staying with their sentence: sentencex keeps 。 unsplit
before a digit ("…的魅力。2000年…"), which news text has often. A splitter returns the
sentences of one paragraph, stripped, none empty.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elmo.extras import import_extra

_ZH_END = re.compile(r"[。！？!?]+[”’」』）)》〉】]*")


@dataclass(frozen=True)
class SentenceSplitter:
    """How the paragraphs of one language become sentences: `split(paragraph) -> sentences`."""

    language: str
    description: str
    split: Callable[[str], list[str]]


class _Sentencex:
    """sentencex's segmenter for `language`, imported on first use."""

    def __init__(self, language: str) -> None:
        self.language = language
        self._segment: Any = None

    def __call__(self, paragraph: str) -> list[str]:
        if self._segment is None:
            self._segment = import_extra("sentencex", "splitting paragraphs into "
                                         "sentences").segment
        return [s.strip() for s in self._segment(self.language, paragraph) if s.strip()]


def _split_chinese(paragraph: str) -> list[str]:
    sentences, start = [], 0
    for end in _ZH_END.finditer(paragraph):
        sentences.append(paragraph[start:end.end()])
        start = end.end()
    sentences.append(paragraph[start:])
    return [s.strip() for s in sentences if s.strip()]


SPLITTERS: dict[str, SentenceSplitter] = {s.language: s for s in (
    SentenceSplitter("en", "sentencex's rules (abbreviations, initials, decimals, quotes)",
                     _Sentencex("en")),
    SentenceSplitter("zh", "after 。！？!? and the closing quotes or brackets that follow",
                     _split_chinese),
)}
