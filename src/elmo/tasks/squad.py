"""SQuAD-layout question answering data: the JSON reader, the official scores, the prediction
file.

The layout (SQuAD v1.1 and v2.0, CMRC 2018): ``{"data": [{"title", "paragraphs": [{"context",
"qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible",
"plausible_answers"}]}]}]}``, plain or .gz. Each passage is tokenized once, keeping every
token's character offsets, and shared by its questions (the feature cache then holds it once).
Gold answers are mapped to the tokens that cover them; an answer that starts or ends inside a
token is still mapped (to the covering tokens) and counted, one whose text is not in the passage
at its `answer_start` cannot be mapped and is counted too. A question whose text is empty (CMRC
2018's trial set has two) is skipped and counted; the scores count it as unanswered, as the
official scripts count a question missing from a prediction file. Scores always compare answer
texts, as the official scripts do, and a predicted answer is cut from the passage's characters.
"""

from __future__ import annotations

import json
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elmo.errors import InputFileError
from elmo.io.atomic import atomic_write_text
from elmo.io.textfile import open_input
from elmo.tokenize import TOKENIZERS, get_tokenizer


@dataclass
class Passage:
    """A paragraph's text, its tokens and each token's [start, end) character offsets."""

    context: str
    tokens: list[str]
    offsets: list[tuple[int, int]]

    def text(self, start: int, end: int) -> str:
        """The passage's characters from token `start` to token `end` (inclusive)."""
        return self.context[self.offsets[start][0]: self.offsets[end][1]]


@dataclass
class SquadQuestion:
    """A question about a passage with its gold answers (texts) and their token spans."""

    id: str
    question: list[str]
    passage: Passage = field(repr=False)
    answers: list[str]  # gold answer texts (empty: no answer, or none given)
    spans: list[tuple[int, int]]  # token spans (inclusive) of the answers that could be mapped
    impossible: bool = False  # SQuAD 2.0: the passage does not answer the question
    plausible_answers: list[str] = field(default_factory=list)  # SQuAD 2.0, not gold
    off_boundary: int = 0  # answers that start or end inside a token (mapped to whole tokens)
    unmapped: int = 0  # answers whose text is not at their answer_start (no span)
    title: str = ""
    line: int = 0  # JSON has no useful lines; errors name the question id
    skipped: int = 0  # empty questions skipped before it (and after it, for the last)

    @property
    def sentences(self) -> list[list[str]]:
        """The passage and the question: the model's two inputs (the passage list is shared
        by all questions on it)."""
        return [self.passage.tokens, self.question]


def token_offsets(text: str, tokens: Sequence[str], tokenizer: str, where: str
                  ) -> list[tuple[int, int]]:
    """The [start, end) character offsets of `tokens` in `text`, found in order: only white
    space may lie between two tokens (every tokenizer of `elmo.tokenize` keeps the text)."""
    offsets, cursor = [], 0
    for token in tokens:
        start = text.find(token, cursor)
        if start < 0 or text[cursor:start].strip():
            keeping = " or ".join(kind.name for kind in TOKENIZERS.values() if kind.keeps_text)
            raise InputFileError(
                f"{where}: token {token!r} of --tokenizer {tokenizer} is not in the text after "
                f"character {cursor}; the tokenizer changed the text. Use --tokenizer {keeping}")
        offsets.append((start, start + len(token)))
        cursor = start + len(token)
    return offsets


def answer_span(passage: Passage, start: int, text: str) -> tuple[tuple[int, int] | None, bool]:
    """(token span, on token boundaries) of the answer `text` at character `start`; span None
    when the passage does not hold `text` there or it covers no token."""
    stripped = text.strip()
    start += len(text) - len(text.lstrip())
    end = start + len(stripped)
    if not stripped or passage.context[start:end] != stripped:
        return None, False
    covering = [i for i, (a, b) in enumerate(passage.offsets) if a < end and b > start]
    if not covering:
        return None, False
    first, last = covering[0], covering[-1]
    return (first, last), (passage.offsets[first][0] == start and passage.offsets[last][1] == end)


def _load_json(path: Path, encoding_errors: str) -> Any:
    with open_input(path) as f:
        raw = f.read()
    try:
        return json.loads(raw.decode("utf-8-sig", errors=encoding_errors))
    except UnicodeDecodeError as err:
        raise InputFileError(f"{path}: not valid UTF-8 ({err.reason} at byte {err.start}); "
                             "convert it or pass --encoding-errors replace") from None
    except json.JSONDecodeError as err:
        raise InputFileError(f"{path}, line {err.lineno}, column {err.colno}: not valid JSON "
                             f"({err.msg})") from None


def _field(item: dict, key: str, kind: type, where: str) -> Any:
    value = item.get(key) if isinstance(item, dict) else None
    if not isinstance(value, kind):
        raise InputFileError(f"{where}: no {kind.__name__} {key!r}; SQuAD-layout JSON is "
                             '{"data": [{"title", "paragraphs": [{"context", "qas": [{"id", '
                             '"question", "answers": [{"text", "answer_start"}]}]}]}]}')
    return value


def read_squad(path: str | Path, tokenizer: str = "whitespace",
               encoding_errors: str = "strict") -> list[SquadQuestion]:
    """Every question of a SQuAD-layout JSON file (v1.1 or v2.0, plain or .gz), in file order,
    its passage and question split by `tokenizer`."""
    path = Path(path)
    tokenize = get_tokenizer(tokenizer)
    data = _field(_load_json(path, encoding_errors), "data", list, str(path))
    questions: list[SquadQuestion] = []
    seen: set[str] = set()
    skipped = 0
    for a, article in enumerate(data):
        where = f"{path}, article {a}"
        for p, paragraph in enumerate(_field(article, "paragraphs", list, where)):
            here = f"{where}, paragraph {p}"
            context = _field(paragraph, "context", str, here)
            tokens = tokenize(context)
            passage = Passage(context, tokens, token_offsets(context, tokens, tokenizer, here))
            if not tokens:
                raise InputFileError(f"{here}: an empty context")
            for qa in _field(paragraph, "qas", list, here):
                question = _question(qa, passage, tokenize, here, article)
                if question.id in seen:
                    raise InputFileError(f"{here}: question id {question.id!r} occurs "
                                         "twice; ids name the answers in prediction files")
                seen.add(question.id)
                if not question.question:
                    skipped += 1
                    continue
                question.skipped, skipped = skipped, 0
                questions.append(question)
    if not questions:
        raise InputFileError(f"{path} holds no questions; check the file and --format")
    questions[-1].skipped += skipped
    return questions


def _question(qa: dict, passage: Passage, tokenize, where: str, article: dict) -> SquadQuestion:
    qid = qa.get("id") if isinstance(qa, dict) else None
    if not isinstance(qid, str | int):
        raise InputFileError(f"{where}: a question without an 'id'")
    where = f"{where}, question {qid}"
    question = tokenize(_field(qa, "question", str, where))  # [] for an empty question
    answers, spans, off_boundary, unmapped = [], [], 0, 0
    for answer in qa.get("answers") or []:
        text = _field(answer, "text", str, where)
        start = _field(answer, "answer_start", int, where)
        answers.append(text)
        span, aligned = answer_span(passage, start, text)
        if span is None:
            unmapped += 1
        elif span not in spans:
            spans.append(span)
        off_boundary += span is not None and not aligned
    plausible = [_field(x, "text", str, where) for x in qa.get("plausible_answers") or []]
    return SquadQuestion(str(qid), question, passage, answers, spans,
                         bool(qa.get("is_impossible", False)), plausible, off_boundary,
                         unmapped, str(article.get("title", "")))


def answer_counts(questions: Sequence[SquadQuestion]) -> dict[str, int]:
    """How the gold answers of `questions` map to tokens: questions, answers, those off token
    boundaries (mapped to the covering tokens), those not found (no span), questions without
    an answer (SQuAD 2.0), answerable questions left with no span (not trained on) and empty
    questions skipped."""
    return {"questions": len(questions),
            "answers": sum(len(q.answers) for q in questions),
            "off_token_boundaries": sum(q.off_boundary for q in questions),
            "not_in_passage": sum(q.unmapped for q in questions),
            "no_answer_questions": sum(q.impossible for q in questions),
            "questions_without_span": sum(not q.impossible and not q.spans for q in questions),
            "empty_questions_skipped": sum(q.skipped for q in questions)}


def write_squad_predictions(path: str | Path, questions: Sequence[SquadQuestion],
                            answers: Sequence[str]) -> None:
    """SQuAD's prediction file, ``{question id: answer text}`` ("" for no answer), atomically."""
    predictions = {q.id: a for q, a in zip(questions, answers, strict=True)}
    atomic_write_text(path, json.dumps(predictions, ensure_ascii=False, indent=1) + "\n")


# ---- scores --------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str, characters: bool = False) -> str:
    """SQuAD's normalisation: lower case, punctuation removed, the articles a, an, the removed,
    white space collapsed. `characters` (Chinese): all Unicode punctuation is removed, not only
    ASCII's."""
    text = text.lower()
    if characters:
        text = "".join(ch for ch in text if ch not in _ASCII_PUNCTUATION
                       and not unicodedata.category(ch).startswith("P"))
    else:
        text = "".join(ch for ch in text if ch not in _ASCII_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _answer_tokens(text: str, characters: bool) -> list[str]:
    normalized = normalize_answer(text, characters)
    return [ch for ch in normalized if not ch.isspace()] if characters else normalized.split()


def exact_match(prediction: str, gold: str, characters: bool = False) -> float:
    """1.0 if the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction, characters) == normalize_answer(gold, characters))


def token_f1(prediction: str, gold: str, characters: bool = False) -> float:
    """F1 of the normalised answers' tokens (as multisets; `characters`: every character is a
    token, as CMRC 2018 scores Chinese). No common token: 0.0."""
    predicted, wanted = _answer_tokens(prediction, characters), _answer_tokens(gold, characters)
    common = sum((Counter(predicted) & Counter(wanted)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def scores_over_answers(predictions: Sequence[str], golds: Sequence[Sequence[str]],
                        exact: Callable[[str, str], float], f1: Callable[[str, str], float],
                        unanswered: Callable[[str], float], name: str) -> dict[str, float]:
    """Exact match and F1 in 0..100: per question the maximum of `exact` and of `f1` over its
    reference answers, then the mean over questions; a question without references (SQuAD
    2.0's unanswerable) scores `unanswered(prediction)` in both. `name`: the metric, in
    errors."""
    if len(predictions) != len(golds):
        raise ValueError(f"{len(golds)} questions but {len(predictions)} predictions")
    if not golds:
        raise ValueError(f"{name} scores of nothing: no questions")
    em_sum = f1_sum = 0.0
    for prediction, answers in zip(predictions, golds, strict=True):
        if answers:
            em_sum += max(exact(prediction, a) for a in answers)
            f1_sum += max(f1(prediction, a) for a in answers)
        else:
            em_sum, f1_sum = em_sum + unanswered(prediction), f1_sum + unanswered(prediction)
    return {"exact_match": 100.0 * em_sum / len(golds), "f1": 100.0 * f1_sum / len(golds)}


def squad_scores(predictions: Sequence[str], golds: Sequence[Sequence[str]],
                 characters: bool = False) -> dict[str, float]:
    """SQuAD's exact match and F1 in 0..100: per question the maximum over its gold answers,
    then the mean over questions. A question without gold answers (SQuAD 2.0's unanswerable)
    scores 1 when the prediction is empty after normalisation, else 0."""
    return scores_over_answers(
        predictions, golds, lambda p, a: exact_match(p, a, characters),
        lambda p, a: token_f1(p, a, characters),
        lambda p: float(not normalize_answer(p, characters)), "SQuAD")
