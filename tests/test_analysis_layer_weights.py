"""`elmo analyze layer-weights`: run directories read, bad ones named, the heat map rendered
(Agg) and checked as an image with labelled axes."""

from __future__ import annotations

import json

import pytest

from elmo.analysis import plots
from elmo.analysis.layer_weights import plot_layer_weights, read_layer_weights, run_names
from elmo.cli import main
from elmo.errors import ElmoError
from tests.helpers.plots import check_png


def run_dir(root, name, weights):
    path = root / name
    path.mkdir(parents=True)
    (path / "layer_weights.json").write_text(json.dumps(weights), encoding="utf-8")
    return path


def test_heat_map_of_several_runs_and_placements(tmp_path, labelled_figures):
    pos = run_dir(tmp_path, "pos", {"input": [0.2, 0.5, 0.3]})
    ner = run_dir(tmp_path, "ner", {"input": [0.1, 0.3, 0.6], "output": [0.6, 0.2, 0.2]})
    mixes = read_layer_weights(pos) + read_layer_weights(ner)
    assert [m.label for m in mixes] == ["pos (input)", "ner (input)", "ner (output)"]
    assert mixes[2].weights == [0.6, 0.2, 0.2]
    png = plot_layer_weights(mixes, tmp_path / "figs" / "weights.png")
    check_png(png)
    assert labelled_figures == [("Learned ELMo layer weights, softmax(s)", "biLM layer",
                                 "task run (mix placement)")]
    assert [p.name for p in (tmp_path / "figs").iterdir()] == ["weights.png"]  # no temp left


def test_runs_are_named_by_the_shortest_path_end_that_tells_them_apart(tmp_path):
    assert run_names([tmp_path / "pos", tmp_path / "ner"]) == ["pos", "ner"]
    assert run_names([tmp_path / "pos" / "seed0", tmp_path / "ner" / "seed0",
                      tmp_path / "ner" / "seed1"]) == ["pos/seed0", "ner/seed0", "ner/seed1"]
    assert run_names([tmp_path / "a" / "x" / "s", tmp_path / "b" / "x" / "s"]) == [
        "a/x/s", "b/x/s"]


def test_cli_names_runs_of_the_same_seed_apart(tmp_path, capsys):
    pos = run_dir(tmp_path, "pos/seed0", {"input": [0.2, 0.5, 0.3]})
    ner = run_dir(tmp_path, "ner/seed0", {"input": [0.1, 0.3, 0.6]})
    assert main(["analyze", "layer-weights", str(pos), str(ner), "--json"]) == 0
    assert [r["run"] for r in json.loads(capsys.readouterr().out)["runs"]] == [
        "pos/seed0", "ner/seed0"]


def test_unlabelled_axes_are_refused(tmp_path):
    plt = plots._pyplot()
    figure, axes = plt.subplots()
    axes.plot([0, 1], [1, 0])
    axes.set_xlabel("x only")
    with pytest.raises(ValueError, match="unlabelled axes"):
        plots._save(figure, tmp_path / "f.png")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("content, message", [
    (None, "has no layer_weights.json; give run directories"),
    ("{}", "no mixes"),
    ("[1, 2", "not JSON"),
    ('{"input": ["a"]}', "'input' should be a list of layer weights"),
])
def test_bad_run_directories_are_named(tmp_path, content, message):
    run = tmp_path / "run"
    run.mkdir()
    if content is not None:
        (run / "layer_weights.json").write_text(content, encoding="utf-8")
    with pytest.raises(ElmoError, match=message):
        read_layer_weights(run)


def test_cli_table_json_plot_and_mismatched_depths(tmp_path, capsys):
    a = run_dir(tmp_path, "a", {"input": [0.25, 0.5, 0.25]})
    b = run_dir(tmp_path, "b", {"output": [0.5, 0.3, 0.2]})
    assert main(["analyze", "layer-weights", str(a), str(b), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["runs"][1] == {"run": "b", "placement": "output", "weights": [0.5, 0.3, 0.2]}
    assert main(["analyze", "layer-weights", str(a), str(b), "--plot",
                 str(tmp_path / "w.png")]) == 0
    out = capsys.readouterr().out
    assert "a (input)" in out and "0.500" in out and "layer 2" in out
    check_png(tmp_path / "w.png")
    c = run_dir(tmp_path, "c", {"input": [0.5, 0.5]})
    assert main(["analyze", "layer-weights", str(a), str(c)]) == 1
    assert "different numbers of layers" in capsys.readouterr().err
    assert main(["analyze", "layer-weights", str(tmp_path / "none")]) == 1
    assert "is not a directory" in capsys.readouterr().err
