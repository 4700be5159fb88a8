"""Semantic role labelling data: one instance per gold predicate of a CoNLL-2012 file, its
arguments as BIO tags, and predictions written in the CoNLL-2005 props layout.

The props layout is what the CoNLL-2005 evaluation (`srl-eval.pl`) reads: one line per token,
a first column with the predicate's word (or `-`), then one bracketed column per predicate in
the order of the predicates' positions (`(ARG0*`, `*`, `*)`, `(V*)`); a blank line after every
sentence, sentences without predicates included, in the input's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elmo.io.atomic import atomic_write_text
from elmo.tasks.conll2012 import LabeledSpan, Sentence, read_conll2012

OUTSIDE = "O"


@dataclass
class SrlInstance:
    """One predicate of a sentence with its gold arguments (labelled spans, `V` included).
    A sentence without predicates is one instance with `predicate` None: written back with
    the others, never trained on or scored."""

    sentence: Sentence
    predicate: int | None
    arguments: list[LabeledSpan]

    @property
    def sentences(self) -> list[list[str]]:
        return [self.sentence.words]  # the sentence's own list: cached once per sentence

    @property
    def line(self) -> int:
        return self.sentence.line

    @property
    def tags(self) -> list[str]:
        """The gold arguments as BIO tags (B-ARG0, I-ARG0, B-V, O ...)."""
        return spans_to_tags(self.arguments, len(self.sentence.words))


def read_srl(path: str | Path, encoding_errors: str = "strict") -> list[SrlInstance]:
    """The SRL instances of a CoNLL-2012 file or folder: one per gold predicate (`(V*)`), in
    order of position within each sentence, and one for each sentence without any."""
    instances = []
    for document in read_conll2012(path, encoding_errors):
        for sentence in document.sentences:
            propositions = sorted(sentence.predicates, key=lambda p: p.predicate)
            instances += [SrlInstance(sentence, p.predicate, p.arguments) for p in propositions]
            if not propositions:
                instances.append(SrlInstance(sentence, None, []))
    return instances


def spans_to_tags(spans: Sequence[LabeledSpan], length: int) -> list[str]:
    """Labelled spans (not overlapping) -> BIO tags over `length` tokens."""
    tags = [OUTSIDE] * length
    for label, start, end in spans:
        tags[start: end + 1] = [f"B-{label}"] + [f"I-{label}"] * (end - start)
    return tags


def tags_to_spans(tags: Sequence[str]) -> list[LabeledSpan]:
    """BIO tags -> labelled spans; an I-X that does not continue an X span starts one."""
    spans: list[LabeledSpan] = []
    for i, tag in enumerate(tags):
        if tag == OUTSIDE:
            continue
        prefix, label = tag[:2], tag[2:]
        if prefix == "I-" and spans and spans[-1][0] == label and spans[-1][2] == i - 1:
            spans[-1] = (label, spans[-1][1], i)
        else:
            spans.append((label, i, i))
    return spans


def props_column(spans: Sequence[LabeledSpan], length: int) -> list[str]:
    """One bracketed props column: `(ARG0*`, `*`, `*)`, `(V*)`."""
    opens, closes = [""] * length, [""] * length
    for label, start, end in spans:
        opens[start] += f"({label}"
        closes[end] += ")"
    return [f"{o}*{c}" for o, c in zip(opens, closes, strict=True)]


def props_lines(instances: Sequence[SrlInstance], spans: Sequence[Sequence[LabeledSpan]]
                ) -> list[str]:
    """The props layout of `instances` (consecutive instances of one sentence grouped) with
    the arguments `spans` of each: a sentence's lines, then a blank one."""
    lines: list[str] = []
    start = 0
    while start < len(instances):
        sentence = instances[start].sentence
        end = start
        while end < len(instances) and instances[end].sentence is sentence:
            end += 1
        group = sorted((i for i in range(start, end) if instances[i].predicate is not None),
                       key=lambda i: instances[i].predicate)
        words = sentence.words
        predicates = {instances[i].predicate for i in group}
        columns = [props_column(spans[i], len(words)) for i in group]
        for t, word in enumerate(words):
            lines.append("\t".join([word if t in predicates else "-", *(c[t] for c in columns)]))
        lines.append("")
        start = end
    return lines


def write_props(path: str | Path, instances: Sequence[SrlInstance],
                spans: Sequence[Sequence[LabeledSpan]]) -> None:
    """`props_lines` written to `path` atomically."""
    atomic_write_text(path, "".join(line + "\n" for line in props_lines(instances, spans)))
