"""Task metrics in 0..100: span F1 (seqeval, scheme-aware) and accuracy (the answer metrics,
SQuAD's and CMRC 2018's: `elmo.tasks.span.ANSWER_METRICS`)."""

from __future__ import annotations

from collections.abc import Sequence

from elmo.extras import import_extra

METRICS = ("span-f1", "accuracy", "squad-f1", "cmrc", "srl-f1", "coref-f1")  # squad-f1, cmrc:
# elmo.tasks.span; srl-f1: elmo.tasks.srl_eval; coref-f1: elmo.tasks.coref_metrics


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 (I- starts a span unless it continues one of the same type; B- only between
    adjacent spans of one type) -> IOB2 (every span starts with B-)."""
    out = []
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return out


def span_types(tags: Sequence[str], scheme: str) -> list[str]:
    """The type of each span in `tags` (in `scheme`), in order: the tags that start one."""
    tags = iob1_to_iob2(tags) if scheme == "iob1" else tags
    return [t[2:] for t in tags if t[:2] in ("B-", "S-")]


def span_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
            scheme: str = "iob2") -> float:
    """Micro-averaged F1 of exact spans (CoNLL's measure) for tag sequences in `scheme`
    ("iob1", "iob2" or "bioes"). IOB1 is converted to IOB2 first; then seqeval's strict mode,
    in which a span counts only if its tags are valid in the scheme."""
    f1_score = import_extra("seqeval.metrics", "span F1").f1_score
    schemes = import_extra("seqeval.scheme", "span F1")
    if scheme not in ("iob1", "iob2", "bioes"):
        raise ValueError(f"scheme must be iob1, iob2 or bioes, got {scheme!r}")
    if scheme == "iob1":
        gold = [iob1_to_iob2(s) for s in gold]
        predicted = [iob1_to_iob2(s) for s in predicted]
    mode = schemes.IOBES if scheme == "bioes" else schemes.IOB2
    return 100.0 * f1_score([list(s) for s in gold], [list(s) for s in predicted],
                            mode="strict", scheme=mode, zero_division=0)


def accuracy(gold: Sequence, predicted: Sequence) -> float:
    """Percentage of equal items; sequences of sequences (tags) are compared token by token."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold items but {len(predicted)} predictions")
    if gold and isinstance(gold[0], list | tuple):
        gold = [t for s in gold for t in s]
        predicted = [t for s in predicted for t in s]
    if not gold:
        raise ValueError("accuracy of nothing: no gold items")
    return 100.0 * sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)
