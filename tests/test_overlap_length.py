"""benchmarks/overlap_length.py on a tiny corpus and test set: the test files read as
`--exclude-overlap` reads them, a news item and a law quoting a test sentence left out at the
run lengths it reaches, the DLC/ folder's laws not read."""

from __future__ import annotations

import importlib.util
import json
import sys

from tests.conftest import REPO
from tests.test_exclude_overlap import CLEAN, QUOTED, TEST, news, sighan, squad


def _benchmark(monkeypatch):
    """The benchmark script as a module, its `common` importable."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        "overlap_length", REPO / "benchmarks" / "overlap_length.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_counts_what_exclude_overlap_leaves_out(tmp_path, monkeypatch, capsys):
    bench = _benchmark(monkeypatch)
    data = tmp_path / "data"
    data.mkdir()
    (data / "gold.utf8").write_text(sighan(TEST), encoding="utf-8")
    (data / "trial.json").write_text(squad("这段文章讲的是别的事情。", "谁会见了谁？"),
                                     encoding="utf-8")
    (tmp_path / "xwlb" / "assets" / "2012").mkdir(parents=True)
    news(tmp_path / "xwlb" / "assets" / "2012", QUOTED, CLEAN)
    for folder, text in (("宪法", CLEAN), ("行政法", QUOTED), ("DLC/地方", QUOTED)):
        (tmp_path / "Laws" / folder).mkdir(parents=True)
        (tmp_path / "Laws" / folder / "法.md").write_text(f"# 法\n\n{text}\n", encoding="utf-8")
    monkeypatch.setattr(bench, "DATA", data)
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(bench, "TEST_FILES", ("gold.utf8", "trial.json"))
    monkeypatch.setattr(sys, "argv", [
        "overlap_length.py", "--xwlb", str(tmp_path / "xwlb"), "--laws", str(tmp_path / "Laws"),
        "--years", "2012", "--lengths", "25", "33"])
    bench.main()
    result = json.loads((tmp_path / "results" / "training" / "zh-overlap-length.json")
                        .read_text(encoding="utf-8"))
    # TEST is 32 characters, quoted whole: it shares a run of 25, none of 33
    assert result["rows"] == [["25 characters", 1, 1], ["33 characters", 0, 0]]
    assert "(2 items)" in result["title"] and "(2 laws)" in result["title"]
    assert "1 news items,     1 laws left out" in capsys.readouterr().out
