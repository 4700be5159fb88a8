"""A dataset format of `elmo task` is one record in `FORMATS`: a throwaway format added there
is told by its file names, trained on, evaluated, written back with predictions and exported as
text, and read only by the task types that take its examples."""

from __future__ import annotations

import json

import pytest

from elmo.cli import main
from elmo.tasks.readers import (
    FORMATS,
    DatasetFormat,
    TaggedSentence,
    format_of_name,
    numbered_lines,
    read_conll,
)
from tests.helpers.tasks import tagging_file


def read_tags_jsonl(path, encoding_errors: str = "strict") -> list[TaggedSentence]:
    """A toy format: one JSON object per line, {"tokens": [...], "tags": [...]}."""
    return [TaggedSentence(**json.loads(text), line=number)
            for number, text in numbered_lines(path, encoding_errors) if text.strip()]


def write_tags_jsonl(examples, predictions, options) -> list[str]:
    return [json.dumps({"tokens": e.tokens, "tags": tags})
            for e, tags in zip(examples, predictions, strict=True)]


TOY = DatasetFormat("tags-jsonl", "a toy: JSON lines of tokens and tags", read_tags_jsonl, (),
                    (TaggedSentence,), (".jsonl",), write_tags_jsonl)


@pytest.fixture
def toy_data(tmp_path, monkeypatch):
    """train/dev/test .jsonl files of the generated tagging data, with the toy format added."""
    monkeypatch.setitem(FORMATS, TOY.name, TOY)
    for split, n, seed in (("train", 40, 0), ("dev", 12, 1), ("test", 12, 2)):
        tagging_file(tmp_path / split, n, seed)
        lines = [json.dumps({"tokens": s.tokens, "tags": s.tags})
                 for s in read_conll(tmp_path / split)]
        (tmp_path / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def train_args(data, task: str = "tagging", *extra: str) -> list[str]:
    return ["task", "train", "--task", task, "--train", str(data / "train.jsonl"),
            "--dev", str(data / "dev.jsonl"), "--test", str(data / "test.jsonl"),
            "--elmo", "none", "--out", str(data / "run"), "--epochs", "1", "--hidden-dim", "8",
            "--embedding-dim", "8", "--batch-size", "8", "--quiet", *extra]


def test_a_toy_format_is_told_by_its_name_and_trained_on(toy_data, capsys):
    assert format_of_name(toy_data / "train.jsonl.gz") == TOY.name
    assert main(train_args(toy_data)) == 0
    saved = json.loads((toy_data / "run" / "config.json").read_text())
    assert saved["task"]["format"] == TOY.name

    out = toy_data / "predicted.jsonl"
    assert main(["task", "predict", str(toy_data / "run"), str(toy_data / "test.jsonl"),
                 str(out), "--quiet"]) == 0
    gold = read_tags_jsonl(toy_data / "test.jsonl")
    predicted = read_tags_jsonl(out)
    assert [s.tokens for s in predicted] == [s.tokens for s in gold]
    assert all(len(s.tags) == len(s.tokens) for s in predicted)
    capsys.readouterr()
    assert main(["task", "evaluate", str(toy_data / "run"), "--test", str(out), "--json",
                 "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == pytest.approx(100.0)


def test_a_toy_format_is_exported_as_text(toy_data):
    assert main(["task", "text", str(toy_data / "test.jsonl"), str(toy_data / "test.txt")]) == 0
    assert (toy_data / "test.txt").read_text(encoding="utf-8").splitlines() == [
        " ".join(s.tokens) for s in read_tags_jsonl(toy_data / "test.jsonl")]


def test_a_toy_format_is_read_only_by_the_task_types_of_its_examples(toy_data, capsys):
    assert main(train_args(toy_data, "classification", "--format", TOY.name)) == 1
    assert (f"--task classification reads --format label-text or tsv, not {TOY.name}"
            in capsys.readouterr().err)


def test_without_the_record_the_format_is_unknown(tmp_path, capsys):
    (tmp_path / "train.jsonl").write_text("{}\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["task", "text", str(tmp_path / "train.jsonl"), str(tmp_path / "out"),
              "--format", TOY.name])
    assert main(["task", "train", "--task", "tagging", "--train", str(tmp_path / "train.jsonl"),
                 "--dev-fraction", "0.5", "--elmo", "none", "--out", str(tmp_path / "run"),
                 "--quiet"]) == 1
    assert "does not tell its format; give --format conll or conllu" in capsys.readouterr().err
