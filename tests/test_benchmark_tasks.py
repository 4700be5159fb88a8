"""benchmarks/tasks.py: a row whose data file comes from an option is skipped, and said so,
without that option, and is split by its articles with it; its adapted biLM starts from the
row's own (Chinese) biLM and reads the training split's text."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.conftest import REPO
from tests.helpers.scripts import script_module


def _squad_file(path, n_articles):
    """A SQuAD-layout file of n_articles articles of one question each."""
    articles = [{"title": f"a{k}", "paragraphs": [{"context": "北京是首都。", "qas": [
        {"id": f"q{k}", "question": "首都？", "answers": [{"text": "北京", "answer_start": 0}]}]}]}
        for k in range(n_articles)]
    path.write_text(json.dumps({"version": "v1", "data": articles}, ensure_ascii=False),
                    encoding="utf-8")
    return path


def test_cmrc_dev_row_needs_its_file_and_splits_it_by_article(tmp_path, capsys, monkeypatch):
    bench = script_module(REPO / "benchmarks" / "tasks.py", monkeypatch)
    task = next(t for t in bench.TASKS if t.file_option == "cmrc_dev")
    args = argparse.Namespace(cmrc_dev=None, model="default", zh_model="default-zh",
                              columns={"alone": bench.COLUMNS["alone"]}, full=False,
                              train_size=2000, dev_size=1000, test_size=None)
    skipped, cells = bench.plan([task], args, tmp_path)
    assert cells == [] and skipped == {task.name: {"skipped": "no --cmrc-dev"}}
    assert "give --cmrc-dev" in capsys.readouterr().out

    args.cmrc_dev = _squad_file(tmp_path / "dev.json", 610)
    skipped, cells = bench.plan([task], args, tmp_path / "work")
    assert skipped == {} and len(cells) == 1
    files = cells[0][3]
    first, last = task.articles
    assert (files["train_questions"], files["dev_questions"], files["test_questions"]) == (
        first, last - first, 610 - last)
    test_ids = [a["paragraphs"][0]["qas"][0]["id"]
                for a in json.loads(files["test"].read_text(encoding="utf-8"))["data"]]
    assert test_ids[0] == f"q{last}"


def test_cmrc_adapted_column_adapts_the_chinese_bilm_on_the_training_split(tmp_path,
                                                                           monkeypatch):
    bench = script_module(REPO / "benchmarks" / "tasks.py", monkeypatch)
    task = next(t for t in bench.TASKS if t.file_option == "cmrc_dev")
    trained = []
    monkeypatch.setattr(sys.modules["common"], "run_training",
                        lambda config, out: trained.append(config) or SimpleNamespace(steps=0))
    args = argparse.Namespace(cmrc_dev=_squad_file(tmp_path / "dev.json", 610), model="default",
                              zh_model="default-zh", full=False, train_size=2000,
                              dev_size=1000, test_size=None, adapt_steps=5, adapt_minutes=1.0,
                              columns={"adapted biLM": bench.COLUMNS["adapted biLM"]})
    _, cells = bench.plan([task], args, tmp_path / "work")
    [config] = trained
    assert config.init_from == "default-zh"
    assert cells[0][2] == str(tmp_path / "work" / "adapted" / "CMRC_2018_dev_set_default-zh")
    lines = Path(config.train[0]).read_text(encoding="utf-8").splitlines()
    # the training split's passage and question of each article, in character tokens
    first, _ = task.articles
    assert len(lines) == 2 * first and set(lines) == {"北 京 是 首 都 。", "首 都 ？"}


def test_a_rows_columns_are_the_tables_and_name_their_placement(tmp_path, monkeypatch):
    """Every row's columns are columns of the table; a column that names no placement puts
    ELMo at the input, also for a span task, whose model would otherwise take both."""
    bench = script_module(REPO / "benchmarks" / "tasks.py", monkeypatch)
    assert all(set(task.columns) <= set(bench.COLUMNS) for task in bench.TASKS)
    squad = next(t for t in bench.TASKS if t.task == "span")
    args = argparse.Namespace(columns=bench.COLUMNS, epochs=1, patience=1, cache_dir=tmp_path,
                              device="cpu")
    files = {split: tmp_path / f"{split}.json" for split in ("train", "dev", "test")}
    placement = {column: bench.cell_config(squad, column, "default", files, 0, args,
                                           tmp_path).elmo_at for column in squad.columns}
    assert placement == {"alone": "input", "layer 0": "input", "learned, l2 0.001": "input",
                         "input & output": "both"}
