"""CMRC 2018 (Chinese reading comprehension): its official metric (`--metric cmrc`) on cases
worked out by hand, its SQuAD-style files read with character tokens (empty questions skipped
and scored as unanswered), a file without answers refused, and train/evaluate/predict."""

from __future__ import annotations

import json
import random
import sys
from types import SimpleNamespace

import pytest

from elmo.cli import main
from elmo.errors import ElmoError, InputFileError
from elmo.tasks.cmrc import cmrc_exact_match, cmrc_f1, cmrc_scores, segments
from elmo.tasks.registry import TASKS
from elmo.tasks.squad import answer_counts, read_squad
from tests.conftest import require_shared


@pytest.mark.parametrize("text, expected", [
    ("北京大学", ["北", "京", "大", "学"]),
    ("  iPhone 5s手机 ", ["iphone", "5s", "手", "机"]),  # lower case, English words kept
    ("1,000元和3.5米", ["1,000", "元", "和", "3.5", "米"]),  # numbers kept whole
    ("《红楼梦》。", ["红", "楼", "梦"]),  # the script's punctuation removed
    ("abc-def", ["abcdef"]),  # removed first: it joins the text around it
    ("hello, world!", ["hello", ",", "world", "!"]),  # ASCII , ! are not in its list
    ("红 楼梦", ["红", "楼", "梦"]),  # white space between characters is no segment
])
def test_mixed_segmentation(text, expected):
    assert segments(text) == expected


@pytest.mark.parametrize("prediction, answer, f1", [
    ("北京", "北京", 1.0),
    ("北京大学", "北京", 2 / 3),  # common run 2: precision 2/4, recall 2/2
    ("京北", "北京", 0.5),  # common run 1 (a bag of characters would give 1.0)
    ("大学北京", "北京大学", 0.5),  # common run 2 of 4 each
    ("Beijing!", "beijing", 2 / 3),  # [beijing, !] vs [beijing]
    ("《北京》", "北京", 1.0),
    ("上海", "北京", 0.0),
    ("，。", "北京", 0.0),  # nothing left of the prediction
])
def test_f1_over_the_longest_common_run(prediction, answer, f1):
    assert cmrc_f1(prediction, answer) == pytest.approx(f1)


@pytest.mark.parametrize("prediction, answer, em", [
    ("《红楼梦》", "红楼梦", 1.0),
    ("红楼梦。", "红楼梦", 1.0),
    ("红 楼梦", "红楼梦", 0.0),  # inner white space counts (F1 is 1.0)
    ("Beijing!", "beijing", 0.0),  # ! is not removed
    ("IPHONE", "iphone", 1.0),
])
def test_exact_match_after_removing_punctuation(prediction, answer, em):
    assert cmrc_exact_match(prediction, answer) == em


def test_scores_take_the_best_reference_and_average_questions():
    # question 1: vs 北京市 F1 0.8 (P 1, R 2/3), EM 0; vs 上海 0. question 2: exact.
    scores = cmrc_scores(["北京", "长江"], [["上海", "北京市"], ["长江", "黄河"]])
    assert scores == {"f1": pytest.approx(90.0), "exact_match": pytest.approx(50.0)}
    with pytest.raises(ValueError, match="2 questions but 1 predictions"):
        cmrc_scores(["a"], [["a"], ["b"]])


def cmrc_json(path, n: int, seed: int, empty: int = 0, answers: bool = True):
    """SQuAD-style Chinese articles (CMRC 2018's layout and ids): who went where; `empty`
    more questions without text."""
    rng = random.Random(seed)
    people, places = ["张三", "李四", "王五"], ["北京", "上海", "广州"]
    articles = []
    for a in range(n):
        who, where = rng.choice(people), rng.choice(places)
        context = f"昨天{who}坐火车去了{where}。 今天下雨。"
        qas = [{"id": f"TRIAL_{a}_QUERY_0", "question": "谁去了？",
                "answers": [{"text": who, "answer_start": context.index(who)}]},
               {"id": f"TRIAL_{a}_QUERY_1", "question": "去了哪里？",
                "answers": [{"text": where, "answer_start": context.index(where)}]}]
        if a < empty:
            qas.append({"id": f"TRIAL_{a}_QUERY_2", "question": "",
                        "answers": [{"text": "今天", "answer_start": context.index("今天")}]})
        if not answers:
            for qa in qas:
                del qa["answers"]
        articles.append({"id": f"TRIAL_{a}", "title": f"第{a}篇",
                         "paragraphs": [{"id": f"TRIAL_{a}", "context": context, "qas": qas}]})
    path.write_text(json.dumps({"version": "v1.0", "data": articles}, ensure_ascii=False),
                    encoding="utf-8")
    return path


def test_empty_questions_are_skipped_counted_and_scored_as_unanswered(tmp_path):
    path = cmrc_json(tmp_path / "d.json", 3, 0, empty=2)
    questions = read_squad(path, tokenizer="chars")
    assert [q.id for q in questions] == [f"TRIAL_{a}_QUERY_{i}" for a in range(3)
                                         for i in range(2)]
    assert answer_counts(questions)["empty_questions_skipped"] == 2
    config = SimpleNamespace(metric="cmrc", tokenizer="chars")
    scores = TASKS["span"].evaluate(questions, [q.answers[0] for q in questions], config)
    assert scores == {"score": pytest.approx(75.0), "exact_match": pytest.approx(75.0)}  # 6/8


def test_the_cmrc_trial_file_reads_with_character_tokens():
    path = require_shared("data", "cmrc2018", "cmrc2018_trial.json")
    questions = read_squad(path, tokenizer="chars")
    counts = answer_counts(questions)
    assert counts["questions"] == 1000 and counts["empty_questions_skipped"] == 2
    assert counts["off_token_boundaries"] == 0  # every character a token
    assert counts["not_in_passage"] == 5  # TRIAL_210's answer_start are one character late
    first = questions[0]
    assert first.id == "TRIAL_800_QUERY_0" and first.answers == ["踢爆"]
    assert first.passage.text(*first.spans[0]) == "踢爆"


def cmrc_args(tmp_path, train, dev, *extra) -> list[str]:
    return ["task", "train", "--task", "span", "--format", "squad", "--tokenizer", "chars",
            "--metric", "cmrc", "--train", str(train), "--dev", str(dev), "--elmo", "none",
            "--out", str(tmp_path / "run"), "--epochs", "3", "--hidden-dim", "8",
            "--embedding-dim", "8", "--batch-size", "8", "--lr", "0.01", "--quiet", *extra]


def test_train_evaluate_predict_with_the_cmrc_metric(tmp_path, capsys):
    train = cmrc_json(tmp_path / "train.json", 20, 0)
    dev = cmrc_json(tmp_path / "dev.json", 4, 1, empty=1)
    assert main(cmrc_args(tmp_path, train, dev)) == 0
    run = tmp_path / "run"
    saved = json.loads((run / "config.json").read_text())
    assert saved["task"]["metric"] == "cmrc"
    assert saved["data"]["dev"]["empty_questions_skipped"] == 1
    capsys.readouterr()
    assert main(["task", "evaluate", str(run), "--test", str(dev), "--json", "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metric"] == "cmrc" and result["n"] == 8
    out = tmp_path / "predictions.json"
    assert main(["task", "predict", str(run), str(dev), str(out), "--quiet"]) == 0
    predictions = json.loads(out.read_text(encoding="utf-8"))
    questions = read_squad(dev, tokenizer="chars")
    assert list(predictions) == [q.id for q in questions]  # the empty question has none
    # as the official script scores this file: the unanswered question counts 0 of 9
    scores = cmrc_scores(list(predictions.values()) + [""], [q.answers for q in questions]
                         + [["今天"]])
    assert result["score"] == pytest.approx(scores["f1"])
    assert result["exact_match"] == pytest.approx(scores["exact_match"])


def test_a_training_file_without_answers_is_one_clear_line(tmp_path, capsys):
    train = cmrc_json(tmp_path / "train.json", 3, 0, answers=False)
    dev = cmrc_json(tmp_path / "dev.json", 2, 1)
    assert main(cmrc_args(tmp_path, train, dev)) == 1
    err = capsys.readouterr().err.strip()
    assert f"{train}: no question has answers; training and evaluation need gold answers" \
        in err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run" / "config.json").exists()
    # a file with some answers names the first question without one
    questions = read_squad(dev, tokenizer="chars")
    questions[1].answers = []
    with pytest.raises(InputFileError, match=r"question TRIAL_0_QUERY_1: no answers"):
        TASKS["span"].require_targets(questions, dev)


def test_nltk_is_needed_only_for_text_besides_chinese(monkeypatch):
    monkeypatch.setitem(sys.modules, "nltk.tokenize", None)  # as if nltk were not installed
    assert cmrc_f1("北京 。", "北京") == 1.0
    with pytest.raises(ElmoError, match=r"CMRC 2018's metric needs nltk: pip install "
                       r"'elmo-bilm\[tasks\]'"):
        cmrc_f1("Beijing", "北京")
