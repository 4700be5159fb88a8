"""Answer spans, BiDAF-style (Seo et al. 2017, the paper's SQuAD model, reduced: no character
CNN, as ELMo brings characters; one modelling layer): encode the passage and the question,
attend passage-to-question and question-to-passage, model the passage again with a BiLSTM,
score every token as the answer's start and end.

A batch of B questions comes as 2B sentences: rows 0..B-1 are the passages, rows B..2B-1 the
questions (the pair layout), so it takes the same inputs (and ELMo tensors) as the other task
models. Scores have one column before the passage's tokens: "no answer" (SQuAD 2.0), used only
when the training data has unanswerable questions (`no_answer`), else never chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from elmo.errors import InputFileError
from elmo.tasks.cmrc import cmrc_scores
from elmo.tasks.encoder import EncoderConfig, WordEncoder, run_lstm
from elmo.tasks.pooling import masked_softmax, max_mean_pool
from elmo.tasks.squad import SquadQuestion, answer_counts, squad_scores, write_squad_predictions
from elmo.tasks.task_type import TaskType
from elmo.tokenize import TOKENIZERS

ANSWER, NO_ANSWER = "answer", "no-answer"  # the span task's "labels": what training had


@dataclass(frozen=True)
class AnswerMetric:
    """A score of predicted answer texts: `scores(predictions, gold answers, config)` ->
    {"f1", "exact_match"} in 0..100, per question the best over its gold answers."""

    name: str
    help: str
    scores: Callable[[Sequence[str], Sequence[Sequence[str]], Any], dict[str, float]]


ANSWER_METRICS: dict[str, AnswerMetric] = {m.name: m for m in (
    AnswerMetric("squad-f1", "SQuAD's official F1 and exact match (white-space tokens; "
                 "characters with a Chinese --tokenizer)",
                 lambda predictions, golds, config: squad_scores(
                     predictions, golds, characters=TOKENIZERS[config.tokenizer].characters)),
    AnswerMetric("cmrc", "CMRC 2018's official F1 and exact match (Chinese characters and "
                 "English words, punctuation removed)",
                 lambda predictions, golds, config: cmrc_scores(predictions, golds)),
)}


@dataclass
class SpanConfig(EncoderConfig):
    num_layers: int = 1  # the contextual BiLSTM shared by passage and question
    modelling_layers: int = 1  # BiDAF has 2; one is half the time on a CPU
    max_answer_tokens: int = 30
    no_answer: bool = False  # learn a "no answer" score (SQuAD 2.0)


class SpanModel(nn.Module):
    """Start and end scores over the passage's tokens for each question."""

    def __init__(self, config: SpanConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = WordEncoder(config)
        d, h = config.output_dim, config.hidden_dim
        self.similarity = nn.Linear(3 * d, 1)  # w . [c; q; c * q], split in three below
        self.modelling = nn.LSTM(4 * d, h, num_layers=config.modelling_layers,
                                 bidirectional=True, batch_first=True,
                                 dropout=config.dropout if config.modelling_layers > 1 else 0.0)
        self.end_lstm = nn.LSTM(2 * h, h, bidirectional=True, batch_first=True)
        self.start = nn.Linear(4 * d + 2 * h, 1)
        self.end = nn.Linear(4 * d + 2 * h, 1)
        if config.no_answer:
            self.no_answer = nn.Linear(4 * h, 2)  # (start, end) scores of "no answer"
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, word_ids, mask, elmo_input=None, elmo_output=None) -> torch.Tensor:
        """(2B, T) ids and mask, ELMo (2B, T, D) or None -> scores (B, 2, 1 + T): start and
        end, column 0 "no answer", then the passage's tokens (-inf where padded)."""
        h = self.encoder(word_ids, mask, elmo_input, elmo_output)  # (2B, T, d)
        c, q = h.chunk(2)  # passages, questions (B, T, d)
        c_mask, q_mask = mask.chunk(2)  # (B, T)
        tq = int(q_mask.sum(1).max())  # questions come padded to the passages' length
        q, q_mask = q[:, :tq], q_mask[:, :tq]  # (B, Tq, d), (B, Tq)
        w_c, w_q, w_cq = self.similarity.weight.squeeze(0).chunk(3)  # (d,) each
        s = ((c @ w_c).unsqueeze(2) + (q @ w_q).unsqueeze(1)
             + (c * w_cq) @ q.transpose(1, 2) + self.similarity.bias)  # (B, Tc, Tq)
        c2q = masked_softmax(s, q_mask.unsqueeze(1)) @ q  # (B, Tc, d): question per token
        best = s.masked_fill(~q_mask.unsqueeze(1), float("-inf")).max(-1).values  # (B, Tc)
        q2c = masked_softmax(best, c_mask).unsqueeze(1) @ c  # (B, 1, d): key passage tokens
        g = torch.cat([c, c2q, c * c2q, c * q2c.expand_as(c)], dim=-1)  # (B, Tc, 4d)
        # One dropout mask on g for the modelling layer and both scores: g is the widest
        # tensor of the model, and drawing its mask was a third of a training step on a CPU.
        g = self.dropout(g)
        m = run_lstm(self.modelling, g, c_mask)  # (B, Tc, 2h)
        m2 = run_lstm(self.end_lstm, self.dropout(m), c_mask)  # (B, Tc, 2h)
        start = _score(self.start, g, self.dropout(m))  # (B, Tc)
        end = _score(self.end, g, self.dropout(m2))  # (B, Tc)
        tokens = torch.stack([start, end], 1).masked_fill(~c_mask.unsqueeze(1), float("-inf"))
        if self.config.no_answer:
            none = self.no_answer(max_mean_pool(m, c_mask))  # (B, 2)
        else:
            none = start.new_full((start.shape[0], 2), float("-inf"))
        return torch.cat([none.unsqueeze(-1), tokens], dim=-1)  # (B, 2, 1 + Tc)

    def loss(self, scores: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
             ) -> torch.Tensor:
        """Cross-entropy of the gold start and end columns (B, 2) (0: no answer, 1 + i:
        token i), summed over the two, averaged over questions."""
        return (nn.functional.cross_entropy(scores[:, 0], targets[:, 0])
                + nn.functional.cross_entropy(scores[:, 1], targets[:, 1]))

    def predict(self, scores: torch.Tensor, mask: torch.Tensor
                ) -> list[tuple[int, int] | None]:
        """The best span (start <= end, at most `max_answer_tokens` tokens) of each passage
        by the sum of its start and end log-probabilities; None when "no answer" scores
        higher."""
        log_p = scores.log_softmax(-1)  # (B, 2, 1 + T)
        start, end = log_p[:, 0, 1:], log_p[:, 1, 1:]  # (B, T)
        t = start.shape[1]
        i, j = torch.arange(t).unsqueeze(1), torch.arange(t).unsqueeze(0)
        allowed = ((j >= i) & (j - i < self.config.max_answer_tokens)).to(scores.device)
        pairs = (start.unsqueeze(2) + end.unsqueeze(1)).masked_fill(~allowed, float("-inf"))
        best, index = pairs.flatten(1).max(-1)  # (B,)
        none = log_p[:, 0, 0] + log_p[:, 1, 0]  # (B,)
        return [None if n > b else (k // t, k % t)
                for b, k, n in zip(best.tolist(), index.tolist(), none.tolist(), strict=True)]


def _score(linear: nn.Linear, g: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """linear([g; m]) without building [g; m]: (B, T, 4d), (B, T, 2h) -> (B, T)."""
    w_g, w_m = linear.weight.squeeze(0).split([g.shape[-1], m.shape[-1]])
    return g @ w_g + m @ w_m + linear.bias


class SpanTask(TaskType):
    """Questions answered by a span of their passage (`--format squad`), scored by SQuAD's
    or CMRC 2018's F1 (and exact match). Its labels record whether training had unanswerable
    questions."""

    name, model, model_config = "span", SpanModel, SpanConfig
    example, metrics = SquadQuestion, tuple(ANSWER_METRICS)
    elmo_at = "both"  # as the paper's SQuAD model (registry.TASKS)

    def labels(self, examples: Sequence[SquadQuestion]) -> list[str]:
        return [ANSWER, NO_ANSWER] if any(q.impossible for q in examples) else [ANSWER]

    def require_targets(self, examples: Sequence[SquadQuestion], path: str | Path) -> None:
        if not any(q.answers or q.impossible for q in examples):
            raise InputFileError(f"{path}: no question has answers; training and evaluation "
                                 "need gold answers (a file without them is for `elmo task "
                                 "predict`)")
        for q in examples:
            if not q.answers and not q.impossible:
                raise InputFileError(f"{path}, question {q.id}: no answers and not "
                                     "is_impossible; training and evaluation need gold answers")

    def model_options(self, config: Any, labels: Sequence[str]) -> dict[str, Any]:
        return {"max_answer_tokens": config.max_answer_tokens, "no_answer": NO_ANSWER in labels}

    def held_out_groups(self, examples: Sequence[SquadQuestion]) -> list[Hashable]:
        """Whole articles (by title; a passage without one on its own) when there are two or
        more, else whole passages: a dev question never shares its passage with a training
        question, whose answer the model could have learnt."""
        articles = [("article", q.title) if q.title else ("passage", q.passage.context)
                    for q in examples]
        if len(set(articles)) > 1:
            return articles
        return [q.passage.context for q in examples]

    def target(self, example: SquadQuestion, label_index: dict[str, int]
               ) -> torch.Tensor | None:
        """(start, end) columns of the first mapped gold answer; (0, 0) for no answer; None
        (not trained on) when no answer could be mapped."""
        if example.impossible:
            return torch.tensor([0, 0]) if NO_ANSWER in label_index else None
        if not example.spans:
            return None
        start, end = example.spans[0]
        return torch.tensor([start + 1, end + 1])

    def decode(self, example: SquadQuestion, predicted: tuple[int, int] | None,
               labels: Sequence[str]) -> str:
        return "" if predicted is None else example.passage.text(*predicted)

    def evaluate(self, examples: Sequence[SquadQuestion], predictions: Sequence[str],
                 config: Any) -> dict[str, float]:
        """The metric's F1 (as "score") and exact match; empty questions skipped by the
        reader count as unanswered (0), as the official scripts count a missing answer."""
        scores = ANSWER_METRICS[config.metric].scores(predictions, [q.answers for q in examples],
                                                      config)
        asked = len(examples) / (len(examples) + sum(q.skipped for q in examples))
        return {"score": scores["f1"] * asked, "exact_match": scores["exact_match"] * asked}

    def write_predictions(self, path: str | Path, examples: Sequence[SquadQuestion],
                          predictions: Sequence[str], config: Any) -> None:
        write_squad_predictions(path, examples, predictions)

    def data_notes(self, examples: Sequence[SquadQuestion]) -> dict[str, Any]:
        return answer_counts(examples)
