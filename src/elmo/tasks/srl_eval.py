"""`srl-f1`: the CoNLL-2005 evaluation's overall figures (`srl-eval.pl`, Carreras and Marquez)
over labelled argument spans of propositions.

As that evaluation counts them: arguments are the phrases of a proposition in order of start
(a longer phrase first); a `C-X` phrase continues the last `X` argument before it, making one
discontinuous argument that is matched as a whole (all its phrases, no more), or becomes an
`X` argument when no `X` precedes it; `R-X` phrases are arguments of their own. A predicted
argument is correct when a gold one has its start, end, type and phrases; gold arguments are
looked up by (start, end), one per pair. `V` is matched but left out of the figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elmo.tasks.conll2012 import LabeledSpan

EXCLUDED = frozenset({"V"})  # matched, not counted (the script's %excluded)
CONTINUATION = "C-"


@dataclass(frozen=True)
class Argument:
    """One argument: its type and phrases ((start, end), end inclusive) in order."""

    type: str
    phrases: tuple[tuple[int, int], ...]

    @property
    def start(self) -> int:
        return self.phrases[0][0]

    @property
    def end(self) -> int:
        return self.phrases[-1][1]


def arguments(spans: Sequence[LabeledSpan]) -> list[Argument]:
    """The arguments of a proposition's labelled spans, continuations joined."""
    found: list[Argument] = []
    last: dict[str, int] = {}  # type -> index in `found` of its last argument
    for label, start, end in sorted(spans, key=lambda s: (s[1], -s[2])):
        base = label[len(CONTINUATION):] if label.startswith(CONTINUATION) else None
        if base is not None and base in last:
            head = found[last[base]]
            found[last[base]] = Argument(base, (*head.phrases, (start, end)))
            continue
        found.append(Argument(base or label, ((start, end),)))
        last[base or label] = len(found) - 1
    return found


def match_counts(gold: Sequence[LabeledSpan], predicted: Sequence[LabeledSpan]
                 ) -> tuple[int, int, int]:
    """(correct, excess, missed) arguments of one proposition, `EXCLUDED` types left out."""
    by_span = {(a.start, a.end): a for a in arguments(gold)}
    correct = excess = 0
    for a in arguments(predicted):
        g = by_span.get((a.start, a.end))
        hit = g is not None and g == a
        if hit:
            del by_span[(a.start, a.end)]
        if a.type not in EXCLUDED:
            correct += hit
            excess += not hit
    missed = sum(a.type not in EXCLUDED for a in by_span.values())
    return correct, excess, missed


def srl_scores(gold: Sequence[Sequence[LabeledSpan]],
               predicted: Sequence[Sequence[LabeledSpan]]) -> dict[str, float]:
    """Overall precision, recall and F1 (0..100) over propositions (gold and predicted
    labelled spans of each), as `srl-eval.pl` prints them, with the counts."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold propositions but {len(predicted)} predicted")
    correct = excess = missed = 0
    for g, p in zip(gold, predicted, strict=True):
        c, e, m = match_counts(g, p)
        correct, excess, missed = correct + c, excess + e, missed + m
    precision = 100 * correct / (correct + excess) if correct + excess else 0.0
    recall = 100 * correct / (correct + missed) if correct + missed else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"f1": f1, "precision": precision, "recall": recall, "correct": correct,
            "excess": excess, "missed": missed}
