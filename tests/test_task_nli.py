"""SNLI and MultiNLI in their own files (`--format nli`): the JSON-lines reader (both forms,
pairs without a gold label skipped and counted), its errors, the predictions written into the
input's lines, and `elmo task train|evaluate|predict --task pair --format nli` on tiny files."""

from __future__ import annotations

import gzip
import json
import random

import pytest

from elmo.cli import main
from elmo.errors import InputFileError
from elmo.tasks.config import TaskConfig
from elmo.tasks.nli import read_nli
from elmo.tasks.readers import FORMATS, read_dataset
from tests.conftest import require_shared

SNLI = [
    {"gold_label": "neutral", "sentence1": "A man plays.", "sentence2": "A man sings.",
     "pairID": "1n", "annotator_labels": ["neutral"]},
    {"gold_label": "-", "sentence1": "A dog runs.", "sentence2": "An animal moves.",
     "pairID": "2-"},
    {"gold_label": "entailment", "sentence1": "Kids eat.", "sentence2": "Children eat.",
     "pairID": "3e"},
    {"gold_label": "-", "sentence1": "It rains.", "sentence2": "It pours.", "pairID": "4-"},
]


def jsonl(path, items, gz: bool = False):
    text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)
    if gz:
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_snli_lines_without_a_gold_label_are_skipped_and_counted(tmp_path, gz):
    path = jsonl(tmp_path / ("snli.jsonl.gz" if gz else "snli.jsonl"), SNLI, gz)
    pairs = read_dataset(path, "nli", tokenizer="whitespace")
    assert [(p.tokens_a, p.tokens_b, p.label, p.line) for p in pairs] == [
        (["A", "man", "plays."], ["A", "man", "sings."], "neutral", 1),
        (["Kids", "eat."], ["Children", "eat."], "entailment", 3)]
    assert FORMATS["nli"].notes(pairs) == {"pairs": 2, "skipped_without_gold_label": 2}
    # an input to predict keeps every line, those without a gold label unlabelled
    config = TaskConfig(task="pair", train=str(path), dev=None, dev_fraction=0.5, out="x",
                        format="nli", tokenizer="whitespace")
    every = read_dataset(path, "nli", **config.reader_options(labeled=False))
    assert [p.label for p in every] == ["neutral", "", "entailment", ""]


def test_premise_hypothesis_labels_as_words_or_numbers(tmp_path):
    path = jsonl(tmp_path / "mnli.jsonl", [
        {"premise": "a b", "hypothesis": "c", "label": 2},
        {"premise": "d", "hypothesis": "e f", "label": -1},  # no gold label
        {"premise": "g", "hypothesis": "h", "label": 0},
        {"premise": "i", "hypothesis": "j", "label": 1},
        {"premise": "k", "hypothesis": "l", "label": "neutral"}])
    pairs = read_nli(path)
    assert [p.label for p in pairs] == ["contradiction", "entailment", "neutral", "neutral"]
    assert [p.skipped for p in pairs] == [0, 1, 0, 0]  # before the pair it precedes


def test_predictions_replace_the_label_and_keep_every_other_field(tmp_path):
    items = [{"premise": "a", "hypothesis": "b", "label": 0, "idx": 7},
             {"premise": "c", "hypothesis": "d", "label": "neutral"},
             {"sentence1": "e", "sentence2": "f", "gold_label": "-", "pairID": "x"},
             {"premise": "g", "hypothesis": "h"}]
    path = jsonl(tmp_path / "in.jsonl", items)
    pairs = read_nli(path, skip_unlabeled=False)
    lines = FORMATS["nli"].write(pairs, ["contradiction", "entailment", "neutral", "odd"], {})
    assert [json.loads(line) for line in lines] == [
        {"premise": "a", "hypothesis": "b", "label": 2, "idx": 7},  # numbered as it was
        {"premise": "c", "hypothesis": "d", "label": "entailment"},
        {"sentence1": "e", "sentence2": "f", "gold_label": "neutral", "pairID": "x"},
        {"premise": "g", "hypothesis": "h", "label": "odd"}]


@pytest.mark.parametrize("line, problem", [
    ('{"premise": "a", "hypothesis": ', "line 2: not valid JSON (Expecting value at column 32)"),
    ('{"premise": "a", "text": "b", "label": 0}', "line 2: no string fields sentence1 and "
     "sentence2, or premise and hypothesis"),
    ('["a", "b"]', "line 2: no string fields"),
    ('{"premise": "a", "hypothesis": "b", "label": 3}', "line 2: label 3 is not a word or 0, "
     "1, 2 (entailment, neutral, contradiction"),
    ('{"premise": " ", "hypothesis": "b", "label": 0}', "line 2: an empty premise"),
])
def test_a_bad_line_is_named_with_its_problem(tmp_path, line, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"premise": "x", "hypothesis": "y", "label": 1}\n' + line + "\n",
                    encoding="utf-8")
    with pytest.raises(InputFileError) as err:
        read_nli(path)
    assert str(err.value).startswith(f"{path}, {problem}")
    assert "\n" not in str(err.value)


def test_a_file_of_pairs_without_gold_labels_only(tmp_path):
    path = jsonl(tmp_path / "x.jsonl", [SNLI[1], SNLI[3]])
    with pytest.raises(InputFileError, match=r"holds no pairs with a gold label \(2 without\)"):
        read_nli(path)


def nli_file(path, n: int, seed: int, unlabeled: int = 0):
    """entailment iff the hypothesis names the premise's person, contradiction iff another
    one, neutral for 'someone'; `unlabeled` more lines labelled '-'."""
    rng = random.Random(seed)
    people = ["anna", "bob", "carl"]
    items = []
    for i in range(n + unlabeled):
        a, b = rng.choice(people), rng.choice([*people, "someone"])
        label = "neutral" if b == "someone" else "entailment" if a == b else "contradiction"
        items.append({"sentence1": f"{a} saw the cat", "sentence2": f"{b} saw it",
                      "gold_label": "-" if i >= n else label, "pairID": str(i)})
    rng.shuffle(items)
    return jsonl(path, items)


def test_train_evaluate_predict_nli(tmp_path, capsys):
    train = nli_file(tmp_path / "train.jsonl", 60, 0, unlabeled=5)
    dev = nli_file(tmp_path / "dev.jsonl", 12, 1, unlabeled=3)
    run = tmp_path / "run"
    assert main(["task", "train", "--task", "pair", "--format", "nli", "--train", str(train),
                 "--dev", str(dev), "--elmo", "none", "--out", str(run), "--epochs", "2",
                 "--hidden-dim", "8", "--embedding-dim", "8", "--batch-size", "16",
                 "--quiet"]) == 0
    saved = json.loads((run / "config.json").read_text())
    assert saved["labels"] == ["contradiction", "entailment", "neutral"]
    assert saved["data"]["train"] == {"pairs": 60, "skipped_without_gold_label": 5}
    assert saved["data"]["dev"] == {"pairs": 12, "skipped_without_gold_label": 3}
    capsys.readouterr()
    assert main(["task", "evaluate", str(run), "--test", str(dev), "--json", "--quiet"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["n"] == 12 and scores["skipped_without_gold_label"] == 3
    out = tmp_path / "predicted.jsonl"
    assert main(["task", "predict", str(run), str(dev), str(out), "--quiet"]) == 0
    given = [json.loads(line) for line in dev.read_text().splitlines()]
    predicted = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(predicted) == 15  # every line, those without a gold label too
    assert [{**p, "gold_label": None} for p in predicted] == [
        {**g, "gold_label": None} for g in given]
    assert {p["gold_label"] for p in predicted} <= set(saved["labels"])
    right = sum(p["gold_label"] == g["gold_label"] for p, g in zip(predicted, given, strict=True))
    assert right * 100 / 12 == pytest.approx(scores["score"])


def test_the_command_names_a_broken_line_without_a_traceback(tmp_path, capsys):
    train = nli_file(tmp_path / "train.jsonl", 4, 0)
    with open(train, "a", encoding="utf-8") as f:
        f.write('{"sentence1": "a", "sentence2": "b", "gold_label": "neutral"\n')
    assert main(["task", "train", "--task", "pair", "--format", "nli", "--train", str(train),
                 "--dev-fraction", "0.5", "--elmo", "none", "--out", str(tmp_path / "run"),
                 "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"{train}, line 5: not valid JSON" in err and "Traceback" not in err
    assert not (tmp_path / "run" / "config.json").exists()


def test_multinli_dev_reads_whole():
    path = require_shared("data", "mnli", "dev.jsonl")
    pairs = read_nli(path, tokenizer="whitespace")
    assert len(pairs) == 9815 and sum(p.skipped for p in pairs) == 0
    assert {p.label for p in pairs} == {"entailment", "neutral", "contradiction"}
