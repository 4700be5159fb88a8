"""Question answering: the SQuAD reader, SQuAD's scores, the BiDAF-style span model, and
`elmo task train|evaluate|predict --task span` end to end on tiny files."""

from __future__ import annotations

import json
import random

import pytest
import torch

from elmo.cli import main
from elmo.errors import InputFileError
from elmo.tasks.readers import read_dataset
from elmo.tasks.span import SpanConfig, SpanModel, SpanTask
from elmo.tasks.squad import (
    answer_counts,
    exact_match,
    normalize_answer,
    read_squad,
    squad_scores,
    token_f1,
)
from tests.conftest import write_text


def squad_json(paragraphs: list[tuple[str, list[dict]]], version: str = "1.1") -> dict:
    return {"version": version, "data": [{"title": "T", "paragraphs": [
        {"context": context, "qas": qas} for context, qas in paragraphs]}]}


def qa(qid: str, question: str, *answers: tuple[str, int], **extra) -> dict:
    return {"id": qid, "question": question,
            "answers": [{"text": t, "answer_start": s} for t, s in answers], **extra}


def write(path, data, gz: bool = False):
    return write_text(path, json.dumps(data, ensure_ascii=False), gz)


CONTEXT = "Zoë visited  Köln, then Zürich."  # two spaces after "visited"


@pytest.mark.parametrize("gz", [False, True])
def test_reader_offsets_non_ascii_answers_at_the_end_and_several_golds(tmp_path, gz):
    data = squad_json([(CONTEXT, [
        qa("q1", "Who visited?", ("Zoë", 0)),
        qa("q2", "Where last?", ("Zürich.", 24), ("Zürich", 24), ("Zürich.", 24)),
        qa("q3", "Where first?", ("Köln", 13)),  # ends inside the token "Köln,"
        qa("q4", "Where?", ("Berlin", 13)),  # not at its answer_start: no span
    ])])
    questions = read_squad(write(tmp_path / "d.json", data, gz))
    passage = questions[0].passage
    assert passage.tokens == ["Zoë", "visited", "Köln,", "then", "Zürich."]
    assert passage.offsets == [(0, 3), (4, 11), (13, 18), (19, 23), (24, 31)]
    assert all(q.passage is passage for q in questions)  # shared: cached once
    q1, q2, q3, q4 = questions
    assert (q1.id, q1.question, q1.answers, q1.spans) == ("q1", ["Who", "visited?"], ["Zoë"],
                                                          [(0, 0)])
    assert q2.answers == ["Zürich.", "Zürich", "Zürich."] and q2.spans == [(4, 4)]
    assert q2.off_boundary == 1  # "Zürich" without its full stop
    assert passage.text(*q2.spans[0]) == "Zürich."  # at the end of the passage
    assert q3.spans == [(2, 2)] and q3.off_boundary == 1
    assert q4.spans == [] and q4.unmapped == 1
    assert passage.text(1, 2) == "visited  Köln,"  # the passage's own characters
    assert answer_counts(questions) == {
        "questions": 4, "answers": 6, "off_token_boundaries": 2, "not_in_passage": 1,
        "no_answer_questions": 0, "questions_without_span": 1,
        "empty_questions_skipped": 0}


def test_reader_moses_tokens_align_with_the_answer(tmp_path):
    path = write(tmp_path / "d.json", squad_json([(CONTEXT, [qa("q", "Where?", ("Köln", 13))])]))
    (q,) = read_squad(path, tokenizer="moses")
    assert q.passage.tokens[2:4] == ["Köln", ","] and q.spans == [(2, 2)]
    assert q.off_boundary == 0


def test_reader_squad2_unanswerable_question(tmp_path):
    data = squad_json([(CONTEXT, [
        qa("q1", "Who left?", is_impossible=True,
           plausible_answers=[{"text": "Zoë", "answer_start": 0}]),
        qa("q2", "Who visited?", ("Zoë", 0), is_impossible=False),
    ])], version="v2.0")
    q1, q2 = read_dataset(write(tmp_path / "v2.json", data), "squad")
    assert q1.impossible and q1.answers == [] and q1.spans == []
    assert q1.plausible_answers == ["Zoë"]
    assert not q2.impossible and q2.spans == [(0, 0)]
    assert answer_counts([q1, q2])["no_answer_questions"] == 1


def test_reader_chinese_characters(tmp_path):
    context = "北京是中国的首都。"
    path = write(tmp_path / "zh.json",
                 squad_json([(context, [qa("z", "中国的首都是哪里？", ("北京", 0))])]))
    (q,) = read_squad(path, tokenizer="chars")
    assert q.passage.tokens == list(context) and q.spans == [(0, 1)]
    assert q.passage.offsets[8] == (8, 9) and q.question[-1] == "？"


def test_reader_errors_name_file_and_place(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [\n  {"title": 1,}\n]}', encoding="utf-8")
    with pytest.raises(InputFileError, match=r"bad.json, line 2, column 15: not valid JSON"):
        read_squad(bad)
    path = write(tmp_path / "nq.json", squad_json([(CONTEXT, [{"id": "x", "answers": []}])]))
    with pytest.raises(InputFileError, match=r"nq.json, article 0, paragraph 0, question x: "
                       r"no str 'question'"):
        read_squad(path)
    twice = squad_json([(CONTEXT, [qa("x", "a?"), qa("x", "b?")])])
    with pytest.raises(InputFileError, match="question id 'x' occurs twice"):
        read_squad(write(tmp_path / "twice.json", twice))
    with pytest.raises(InputFileError, match="no list 'data'"):
        read_squad(write(tmp_path / "list.json", [1, 2]))


# ---- scores --------------------------------------------------------------------------------


def test_normalisation_and_scores_of_one_answer():
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert normalize_answer("an apple a day; theatre") == "apple day theatre"
    assert exact_match("the Denver Broncos", "Denver Broncos.") == 1.0
    assert exact_match("Denver", "Denver Broncos") == 0.0
    # [denver, broncos, win] vs [denver, broncos]: P 2/3, R 1 -> 0.8
    assert token_f1("Denver Broncos win", "the Denver Broncos") == pytest.approx(0.8)
    # multisets: [x, y, y] vs [y, y, z]: 2 in common, P = R = 2/3
    assert token_f1("x y y", "y y z") == pytest.approx(2 / 3)
    assert token_f1("nothing", "in common") == 0.0
    assert token_f1("the", "a") == 0.0  # nothing left after normalising


def test_squad_scores_take_the_best_gold_answer_and_average_questions():
    predictions = ["Broncos", "the Panthers team", "", "x"]
    golds = [["Denver Broncos", "Broncos"], ["Carolina Panthers"], [], []]
    # EM: 1, 0, 1 (no answer, empty prediction), 0; F1: 1, 0.5 ([panthers, team] vs
    # [carolina, panthers]: P = R = 1/2), 1, 0
    assert squad_scores(predictions, golds) == {"exact_match": 50.0, "f1": 62.5}
    with pytest.raises(ValueError, match="2 questions but 1 predictions"):
        squad_scores(["a"], [["a"], ["b"]])


def test_chinese_scores_count_characters():
    assert normalize_answer("北京。", characters=True) == "北京"
    # 4 predicted characters, 2 gold, 2 in common: P 1/2, R 1 -> 2/3
    assert token_f1("北京大学", "北京", characters=True) == pytest.approx(2 / 3)
    assert token_f1("北京大学", "北京") == 0.0  # one white-space token each: no overlap
    assert squad_scores(["北京"], [["北京。"]], characters=True)["exact_match"] == 100.0


# ---- the model -----------------------------------------------------------------------------


def span_batch(seed: int):
    """4 passages (rows 0-3) of lengths 7, 5, 6, 3 and their questions (rows 4-7)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 5, 6, 3, 3, 2, 4, 1])
    mask = torch.arange(7).unsqueeze(0) < lengths.unsqueeze(1)  # (8, 7)
    word_ids = torch.randint(2, 20, (8, 7), generator=g) * mask
    elmo = torch.randn(8, 7, 6, generator=g) * mask.unsqueeze(-1)
    return word_ids, mask, elmo


@pytest.mark.parametrize("elmo_at", ["none", "both"])
def test_span_model_overfits_a_tiny_set(elmo_at):
    torch.manual_seed(0)
    word_ids, mask, elmo = span_batch(1)
    dims = 6 if elmo_at == "both" else 0
    model = SpanModel(SpanConfig(vocab_size=20, embedding_dim=8, hidden_dim=12, dropout=0.0,
                                 elmo_input_dim=dims, elmo_output_dim=dims, no_answer=True))
    elmo_in = elmo if dims else None
    spans = [(2, 4), (0, 0), None, (1, 2)]  # None: no answer
    targets = torch.tensor([[0, 0] if s is None else [s[0] + 1, s[1] + 1] for s in spans])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(150):
        loss = model.loss(model(word_ids, mask, elmo_in, elmo_in), targets, mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        scores = model(word_ids, mask, elmo_in, elmo_in)
    assert scores.shape == (4, 2, 8)
    assert torch.isinf(scores[1, :, 6:]).all()  # passage 1 has 5 tokens
    assert model.predict(scores, mask) == spans
    assert loss.item() < 0.1


def test_a_questions_scores_do_not_depend_on_its_batch():
    torch.manual_seed(0)
    word_ids, mask, elmo = span_batch(2)
    model = SpanModel(SpanConfig(vocab_size=20, embedding_dim=8, hidden_dim=12,
                                 elmo_input_dim=6, elmo_output_dim=6)).eval()
    with torch.no_grad():
        together = model(word_ids, mask, elmo, elmo)  # (4, 2, 8)
        for i, n in enumerate([7, 5, 6, 3]):  # each question with its passage alone
            rows = [i, 4 + i]
            alone = model(word_ids[rows, :n], mask[rows, :n], elmo[rows, :n], elmo[rows, :n])
            torch.testing.assert_close(alone[0], together[i, :, :1 + n])


def test_best_span_respects_order_and_length():
    model = SpanModel(SpanConfig(vocab_size=5, max_answer_tokens=2))
    scores = torch.full((1, 2, 6), -5.0)
    scores[0, 0, 0] = scores[0, 1, 0] = float("-inf")  # no "no answer" column
    scores[0, 0, 4], scores[0, 1, 2] = 9.0, 9.0  # best start 3 after best end 1: not allowed
    scores[0, 1, 4] = 3.0  # end 3: (3, 3) is the best allowed span
    assert model.predict(scores, None) == [(3, 3)]
    scores[0, 0, 1] = 10.0  # start 0: (0, 1) is two tokens, allowed, and better
    assert model.predict(scores, None) == [(0, 1)]
    model.config.max_answer_tokens = 1
    assert model.predict(scores, None) == [(3, 3)]


# ---- the commands --------------------------------------------------------------------------

PEOPLE, PLACES = ["Anna", "Bob", "Carl", "Dora"], ["Paris", "Rome", "Oslo", "Lima"]


def people_and_places(path, n: int, seed: int, impossible: bool = False):
    """Who went where: 'Who ...?' is answered by the person, 'Where ...?' by the place."""
    rng = random.Random(seed)
    paragraphs = []
    for p in range(n):
        who, where = rng.choice(PEOPLE), rng.choice(PLACES)
        context = f"Yesterday {who} went to {where} by train. It was sunny."
        qas = [qa(f"{p}w", "Who went there?", (who, context.index(who))),
               qa(f"{p}p", "Where did someone go?", (f"{where} ", context.index(where)))]
        if impossible:
            qas.append(qa(f"{p}n", "Why did it rain?", is_impossible=True))
        paragraphs.append((context, qas))
    return write(path, squad_json(paragraphs))


def span_args(tmp_path, train, dev, elmo, *extra) -> list[str]:
    return ["task", "train", "--task", "span", "--format", "squad", "--train", str(train),
            "--dev", str(dev), "--test", str(dev), "--elmo", elmo, "--out",
            str(tmp_path / "run"), "--epochs", "6", "--hidden-dim", "16", "--embedding-dim",
            "16", "--batch-size", "8", "--lr", "0.01", "--cache-dir", str(tmp_path / "cache"),
            "--quiet", *extra]


def test_train_evaluate_predict_spans(tmp_path, tiny_model, capsys):
    train = people_and_places(tmp_path / "train.json", 30, 0)
    dev = people_and_places(tmp_path / "dev.json", 8, 1)
    assert main(span_args(tmp_path, train, dev, str(tiny_model), "--elmo-at", "both",
                          "--epochs", "12", "--patience", "12")) == 0
    run = tmp_path / "run"
    result = json.loads((run / "result.json").read_text())
    assert result["metric"] == "squad-f1" and result["n_train"] == 60
    assert result["test"] == result["dev"] > 90 and result["test_exact_match"] > 90
    assert result["data"]["train"]["questions"] == 60
    assert set(result["layer_weights"]) == {"input", "output"}
    # the feature cache holds each passage once and every question
    from elmo.tasks.features import LayerStore
    (entry,) = [p for p in (tmp_path / "cache").glob("*.hdf5")
                if LayerStore(p).num_sentences == 8 + 16]
    assert entry
    capsys.readouterr()
    assert main(["task", "evaluate", str(run), "--test", str(dev), "--json", "--quiet"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["metric"] == "squad-f1" and scores["n"] == 16
    assert scores["score"] == pytest.approx(result["test"])
    assert scores["exact_match"] == pytest.approx(result["test_exact_match"])
    out = tmp_path / "predictions.json"
    assert main(["task", "predict", str(run), str(dev), str(out), "--quiet"]) == 0
    predictions = json.loads(out.read_text(encoding="utf-8"))
    questions = read_squad(dev)
    assert list(predictions) == [q.id for q in questions]
    assert all(a in q.passage.context for q, a in zip(questions, predictions.values(),
                                                        strict=True))
    em = squad_scores(list(predictions.values()), [q.answers for q in questions])
    assert em["exact_match"] == pytest.approx(scores["exact_match"])


def test_unanswerable_questions_are_learned(tmp_path, capsys):
    train = people_and_places(tmp_path / "train.json", 30, 0, impossible=True)
    dev = people_and_places(tmp_path / "dev.json", 6, 1, impossible=True)
    assert main(span_args(tmp_path, train, dev, "none", "--epochs", "10")) == 0
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["labels"] == ["answer", "no-answer"] and saved["model"]["no_answer"]
    out = tmp_path / "p.json"
    assert main(["task", "predict", str(tmp_path / "run"), str(dev), str(out), "--quiet"]) == 0
    predictions = json.loads(out.read_text())
    assert [predictions[f"{p}n"] for p in range(6)] == [""] * 6


def test_chinese_passages_with_character_tokens(tmp_path, tiny_model, capsys):
    rng = random.Random(0)
    people, places = ["张三", "李四", "王五"], ["北京", "上海", "广州"]

    def chinese(path, n):
        paragraphs = []
        for p in range(n):
            who, where = rng.choice(people), rng.choice(places)
            context = f"昨天{who}坐火车去了{where}。"
            paragraphs.append((context, [
                qa(f"{p}w", "谁去了？", (who, context.index(who))),
                qa(f"{p}p", "去了哪里？", (where, context.index(where)))]))
        return write(path, squad_json(paragraphs))

    train, dev = chinese(tmp_path / "train.json", 30), chinese(tmp_path / "dev.json", 6)
    # ELMo at the input only: a random biLM's mix at the output too slows this tiny set
    args = span_args(tmp_path, train, dev, str(tiny_model), "--tokenizer", "chars",
                     "--elmo-at", "input", "--epochs", "14", "--patience", "14")
    assert main(args) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["test"] > 90
    out = tmp_path / "p.json"
    assert main(["task", "predict", str(tmp_path / "run"), str(dev), str(out), "--quiet"]) == 0
    answers = set(json.loads(out.read_text(encoding="utf-8")).values())
    assert answers <= set(people) | set(places)


def test_span_task_reads_only_squad(tmp_path, capsys):
    train = people_and_places(tmp_path / "train.json", 3, 0)
    args = span_args(tmp_path, train, train, "none")
    args[args.index("squad")] = "conll"
    assert main(args) == 1
    assert "--task span reads --format squad, not conll" in capsys.readouterr().err


def test_a_run_keeps_its_model_config_when_defaults_change(tmp_path, monkeypatch, capsys):
    train = people_and_places(tmp_path / "train.json", 4, 0)
    assert main(span_args(tmp_path, train, train, "none", "--epochs", "1")) == 0
    monkeypatch.setattr(SpanTask, "model_options",  # as if a later version's defaults
                        lambda self, config, labels: {"modelling_layers": 3})
    assert main(["task", "evaluate", str(tmp_path / "run"), "--test", str(train), "--quiet"]) == 0
    assert "squad-f1" in capsys.readouterr().out


# ---- --dev-fraction holds out whole passages (issue 39, defect 8) ------------------------------

def _held_out(tmp_path, data) -> tuple[list, list]:
    from elmo.tasks.config import TaskConfig
    from elmo.tasks.recipe import read_splits

    config = TaskConfig(task="span", format="squad", train=str(write(tmp_path / "t.json", data)),
                        dev=None, dev_fraction=0.3, out=str(tmp_path / "run"),
                        tokenizer="whitespace")
    train, dev, _, _ = read_splits(config)
    return train, dev


def test_dev_fraction_holds_out_whole_articles(tmp_path):
    def paragraph(a: int, p: int) -> dict:
        context = f"In year {a}{p} Anna went to Rome by train."
        return {"context": context, "qas": [qa(f"{a}-{p}-{k}", f"Question {k}?",
                                                ("Anna", context.index("Anna")))
                                             for k in range(3)]}

    articles = [{"title": f"article {a}", "paragraphs": [paragraph(a, p) for p in range(4)]}
                for a in range(10)]
    train, dev = _held_out(tmp_path, {"version": "1.1", "data": articles})
    assert len(train) + len(dev) == 120 and 30 <= len(dev) <= 42  # 0.3 of 120, whole articles
    assert all(q.spans == [(3, 3)] for q in train + dev)
    assert {q.passage.context for q in train}.isdisjoint(q.passage.context for q in dev)
    assert {q.title for q in train}.isdisjoint(q.title for q in dev)


def test_dev_fraction_holds_out_whole_passages_of_one_article(tmp_path):
    train, dev = _held_out(tmp_path, squad_json([
        (f"Passage {p}: Anna went to Rome.", [qa(f"{p}-{k}", f"Who {k}?", ("Anna", 11))
                                             for k in range(4)]) for p in range(10)]))
    assert all(q.spans == [(2, 2)] for q in train + dev)
    assert len(dev) == 12 and len(train) == 28  # 3 passages of 4 questions: >= 0.3 of 40
    assert {q.passage.context for q in train}.isdisjoint(q.passage.context for q in dev)
    (title,) = {q.title for q in train + dev}  # one article: split by passage
    assert title == "T"
