"""A task kind of `elmo task` is one record in `TASKS`: a throwaway kind added there is
trained, evaluated and predicted with through the recipe, scored by the metrics its record
allows, and reads only the formats that give its examples."""

from __future__ import annotations

import json

import pytest

from elmo.cli import main
from elmo.errors import ElmoError
from elmo.tasks.config import TaskConfig
from elmo.tasks.readers import TaggedSentence, read_conll
from elmo.tasks.registry import TASKS
from elmo.tasks.tagger import Tagger, TaggerConfig
from elmo.tasks.task_type import LabelTask
from tests.helpers.tasks import tagging_file

# a toy kind: entity spans only (no tag accuracy), one tag per token
TOY = LabelTask("entities", Tagger, TaggerConfig, TaggedSentence, per_token=True,
                metrics=("span-f1",), checks_labels=False)


@pytest.fixture
def toy_data(tmp_path, monkeypatch):
    monkeypatch.setitem(TASKS, TOY.name, TOY)
    for split, n, seed in (("train", 40, 0), ("dev", 12, 1), ("test", 12, 2)):
        tagging_file(tmp_path / split, n, seed)
    return tmp_path


def train_args(data, *extra: str) -> list[str]:
    return ["task", "train", "--task", TOY.name, "--train", str(data / "train"), "--dev",
            str(data / "dev"), "--test", str(data / "test"), "--format", "conll", "--elmo",
            "none", "--out", str(data / "run"), "--epochs", "1", "--hidden-dim", "8",
            "--embedding-dim", "8", "--batch-size", "8", "--quiet", *extra]


def test_a_toy_kind_is_trained_evaluated_and_predicted_with(toy_data, capsys):
    assert main(train_args(toy_data, "--scheme", "iob1")) == 0
    saved = json.loads((toy_data / "run" / "config.json").read_text())
    assert saved["task"]["task"] == TOY.name and saved["task"]["metric"] == "span-f1"

    out = toy_data / "predicted"
    assert main(["task", "predict", str(toy_data / "run"), str(toy_data / "test"), str(out),
                 "--quiet"]) == 0
    gold, predicted = read_conll(toy_data / "test"), read_conll(out)
    assert [s.tokens for s in predicted] == [s.tokens for s in gold]
    assert all(len(s.tags) == len(s.tokens) for s in predicted)  # per token, as its record says
    capsys.readouterr()
    assert main(["task", "evaluate", str(toy_data / "run"), "--test", str(out), "--json",
                 "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metric"] == "span-f1" and result["score"] == pytest.approx(100.0)


def test_a_toy_kind_is_scored_only_by_its_metrics(toy_data):
    with pytest.raises(ElmoError, match="--task entities is scored by --metric span-f1, not "
                       "accuracy"):
        TaskConfig(task=TOY.name, train="t.conll", dev="d.conll", out="o", metric="accuracy")


def test_a_toy_kind_reads_only_formats_of_its_examples(toy_data):
    with pytest.raises(ElmoError, match="--task entities reads --format conll or conllu"):
        TaskConfig(task=TOY.name, train="t.txt", dev="d.txt", out="o", format="label-text",
                   scheme=None)


def test_label_kinds_decide_per_token_outputs_by_their_records():
    labels = ["x", "y"]
    assert TASKS["tagging"].decode(None, [1, 0], labels) == ["y", "x"]
    assert TASKS["classification"].decode(None, 1, labels) == "y"
    assert [k.name for k in TASKS.values() if getattr(k, "per_token", False)] == ["tagging"]


def test_default_metric_is_the_kinds_own():
    """span-f1 with --scheme for a kind scored by it; a label per sentence is scored by
    accuracy whatever --scheme says (it was refused as not scored by span-f1)."""
    def config(task, fmt, scheme):
        return TaskConfig(task=task, train="t", dev="d", out="o", format=fmt, scheme=scheme)

    assert config("tagging", "conll", "iob2").metric == "span-f1"
    assert config("tagging", "conll", None).metric == "accuracy"
    assert config("classification", "label-text", "iob2").metric == "accuracy"


def test_elmo_goes_where_the_kinds_record_says_unless_given(monkeypatch):
    """Without --elmo-at, span and pair models mix ELMo at the input and output (the paper's
    SQuAD and SNLI models), the others at the input; a toy kind's record decides its own."""
    def config(task, fmt, **options):
        return TaskConfig(task=task, train="t", dev="d", out="o", format=fmt, **options)

    assert config("span", "squad").elmo_at == "both"
    assert config("pair", "nli").elmo_at == "both"
    assert config("tagging", "conll").elmo_at == "input"
    assert config("srl", "conll2012").elmo_at == "input"
    assert config("span", "squad", elmo_at="input").elmo_at == "input"
    monkeypatch.setitem(TASKS, "outputs", LabelTask("outputs", Tagger, TaggerConfig,
                                                    TaggedSentence, elmo_at="output"))
    assert config("outputs", "conll").elmo_at == "output"
