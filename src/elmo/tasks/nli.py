"""Natural language inference in its own files (`--format nli`): SNLI's and MultiNLI's JSON
lines, ``{"sentence1", "sentence2", "gold_label", ...}``, and the common re-packaged form
``{"premise", "hypothesis", "label"}`` whose label is a word or 0, 1, 2 (entailment, neutral,
contradiction: the order of SNLI's and MultiNLI's releases on the Hugging Face Hub).

A pair without a gold label (``"-"``: SNLI's annotators did not agree; -1 in the numbered
form) is skipped when training or scoring and counted in the run's data notes; an input to
predict keeps every line. Predictions are the input's lines with the label replaced (or added),
every other field kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elmo.errors import InputFileError
from elmo.io.textfile import read_lines
from elmo.tasks.examples import LabeledPair
from elmo.tokenize import get_tokenizer

NLI_LABELS = ("entailment", "neutral", "contradiction")  # what 0, 1, 2 stand for
NO_GOLD = ("-", -1)  # the label of a pair without one
# (first sentence, second sentence, label) of each form, tried in order
FORMS = (("sentence1", "sentence2", "gold_label"), ("premise", "hypothesis", "label"))
LAYOUT = ('each line is one JSON object, {"sentence1", "sentence2", "gold_label"} or '
          '{"premise", "hypothesis", "label"}')


@dataclass
class NliPair(LabeledPair):
    """A pair of one line of an NLI file."""

    skipped: int = 0  # lines without a gold label skipped before it (and after, for the last)


def _label(value: Any, where: str) -> str | None:
    """The label word of a label field: a word, or an index into NLI_LABELS; None for none."""
    if value in NO_GOLD and not isinstance(value, bool):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(NLI_LABELS):
        return NLI_LABELS[value]
    raise InputFileError(f"{where}: label {value!r} is not a word or 0, 1, 2 ("
                         f"{', '.join(NLI_LABELS)}; {NO_GOLD[0]!r} or {NO_GOLD[1]}: no gold "
                         "label)")


def _pair_fields(item: Any, where: str) -> tuple[str, str, str]:
    """The keys of the two sentences and the label in the form of `item`, a JSON value."""
    if isinstance(item, dict):
        for first, second, label in FORMS:
            if isinstance(item.get(first), str) and isinstance(item.get(second), str):
                return first, second, label
    raise InputFileError(f"{where}: no string fields sentence1 and sentence2, or premise and "
                         f"hypothesis; {LAYOUT}")


def read_nli(path: str | Path, tokenizer: str = "whitespace", encoding_errors: str = "strict",
             skip_unlabeled: bool = True) -> list[NliPair]:
    """Every pair of an NLI JSON-lines file (plain or .gz), its sentences split by
    `tokenizer`. `skip_unlabeled`: pairs without a gold label are left out (and counted in
    `skipped`); otherwise they read with an empty label. Blank lines are skipped."""
    tokenize = get_tokenizer(tokenizer)
    pairs: list[NliPair] = []
    skipped = 0
    for number, text in read_lines(path, encoding_errors):
        where = f"{path}, line {number + 1}"
        if not text.strip():
            continue
        try:
            item = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputFileError(f"{where}: not valid JSON ({err.msg} at column {err.colno}); "
                                 f"{LAYOUT}") from None
        first, second, label_key = _pair_fields(item, where)
        label = _label(item.get(label_key, ""), where)
        if label is None and skip_unlabeled:
            skipped += 1
            continue
        tokens = tokenize(item[first]), tokenize(item[second])
        if not all(tokens):
            raise InputFileError(f"{where}: an empty {first if not tokens[0] else second}")
        pairs.append(NliPair(*tokens, label or "", number + 1, text, skipped=skipped))
        skipped = 0
    if not pairs:
        raise InputFileError(f"{path} holds no pairs" + (f" with a gold label ({skipped} "
                             "without)" if skipped else "") + "; check the file and --format")
    pairs[-1].skipped += skipped
    return pairs


def write_nli(examples: Sequence[NliPair], predictions: Sequence[str],
              options: Mapping[str, Any]) -> list[str]:
    """Each example's line with its label field set to the prediction (an index where the
    line's label was one, else the word); the other fields as they were."""
    lines = []
    for example, label in zip(examples, predictions, strict=True):
        item = json.loads(example.row)
        key = _pair_fields(item, "")[2]
        numbered = isinstance(item.get(key), int) and label in NLI_LABELS
        item[key] = NLI_LABELS.index(label) if numbered else label
        lines.append(json.dumps(item, ensure_ascii=False))
    return lines


def nli_notes(examples: Sequence[NliPair]) -> dict[str, int]:
    """The pairs read and the lines skipped for want of a gold label."""
    return {"pairs": len(examples),
            "skipped_without_gold_label": sum(e.skipped for e in examples)}
