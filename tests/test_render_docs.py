"""One figure, one place: the measured tables of the docs are rendered from the results files
under benchmarks/results/ by tools/render_docs.py, and the model cards from their card.json."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REPO
from tests.helpers.scripts import script_module


@pytest.fixture
def tool(monkeypatch):
    """tools/render_docs.py as a module."""
    return script_module(REPO / "tools" / "render_docs.py", monkeypatch)


def test_every_page_and_card_is_what_the_results_render(tool, capsys):
    assert tool.main(["--check"]) == 0, capsys.readouterr().err


def test_every_results_file_says_how_it_was_measured_and_is_shown(tool):
    pages = "".join(p.read_text(encoding="utf-8") for pattern in tool.PAGES
                    for p in REPO.glob(pattern))
    shown = set(re.findall(r"<!-- table: ([\w./-]+) -->", pages))
    files = sorted(tool.RESULTS.glob("*/*.json"))
    assert files
    for path in files:
        result = json.loads(path.read_text(encoding="utf-8"))
        name = path.relative_to(tool.RESULTS).with_suffix("").as_posix()
        for key in ("title", "command", "host", "versions", "measured", "columns", "rows"):
            assert result.get(key), f"{name}: no {key}"
        assert name in shown, f"{name} is on no page"


def _page_with(tool, tmp_path, monkeypatch, result: dict):
    monkeypatch.setattr(tool, "RESULTS", tmp_path / "results")
    (tmp_path / "results" / "g").mkdir(parents=True)
    (tmp_path / "results" / "g" / "t.json").write_text(json.dumps(result), encoding="utf-8")
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text("Intro.\n\n<!-- table: g/t -->\nstale\n<!-- /table -->\n\nAfter.\n",
                    encoding="utf-8")
    return tool, page


def test_a_table_is_rendered_in_its_columns_formats_with_its_source(tool, tmp_path, monkeypatch):
    tool, page = _page_with(tool, tmp_path, monkeypatch, {
        "title": "t", "command": "python bench.py --fast", "host": "2 cores",
        "versions": {"torch": "2.13.0"}, "columns": ["model", "tokens/s", "x fp32"],
        "formats": [None, ",.0f", ".2f"], "rows": [["small", 13435, 1.1], ["original", 961, ""]]})
    assert tool.render_page(page) == (
        "Intro.\n\n<!-- table: g/t -->\n"
        "| model | tokens/s | x fp32 |\n|---|---|---|\n"
        "| small | 13,435 | 1.10 |\n| original | 961 |  |\n\n"
        "Measured with `python bench.py --fast`; 2 cores; torch 2.13.0 "
        "([g/t](../results/g/t.json)).\n<!-- /table -->\n\nAfter.\n")


def test_a_missing_results_file_or_a_short_row_is_named(tool, tmp_path, monkeypatch):
    tool, page = _page_with(tool, tmp_path, monkeypatch, {
        "title": "t", "command": "c", "host": "h", "columns": ["a", "b"], "rows": [["only"]]})
    with pytest.raises(SystemExit, match=r"g/t\.json: a row has 1 cells for 2 columns"):
        tool.render_page(page)
    page.write_text("<!-- table: g/missing -->\n<!-- /table -->\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"no results file .*g/missing\.json"):
        tool.render_page(page)
