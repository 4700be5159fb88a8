"""The examples the readers of `elmo.tasks.readers` give: a tagged sentence, a labelled
sentence, a labelled pair of sentences. Each remembers the 1-based line it starts on and its
source lines, so predictions can be written back in the input's format."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TaggedSentence:
    """A sentence with one tag per token (`tags` is empty when the file has no tag column)."""

    tokens: list[str]
    tags: list[str]
    line: int = 0  # 1-based line of the first token
    rows: list[str] = field(default_factory=list, repr=False)  # source lines, comments too
    token_rows: list[int] = field(default_factory=list, repr=False)  # row of each token

    def add_row(self, row: str, token: str | None = None, tag: str | None = None) -> None:
        """Append a source line, and the token (and tag) it holds, if any."""
        self.rows.append(row)
        if token is not None:
            self.tokens.append(token)
            self.token_rows.append(len(self.rows) - 1)
        if tag is not None:
            self.tags.append(tag)

    @property
    def sentences(self) -> list[list[str]]:
        return [self.tokens]


@dataclass
class LabeledText:
    """A sentence with one label."""

    tokens: list[str]
    label: str
    line: int = 0
    row: str = field(default="", repr=False)  # the source line
    header: list[str] | None = field(default=None, repr=False)  # tsv: the column names

    @property
    def sentences(self) -> list[list[str]]:
        return [self.tokens]


@dataclass
class LabeledPair:
    """Two sentences with one label (entailment, paraphrase ...)."""

    tokens_a: list[str]
    tokens_b: list[str]
    label: str
    line: int = 0
    row: str = field(default="", repr=False)
    header: list[str] | None = field(default=None, repr=False)

    @property
    def sentences(self) -> list[list[str]]:
        return [self.tokens_a, self.tokens_b]
