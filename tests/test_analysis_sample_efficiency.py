"""`elmo analyze sample-efficiency`: the plan, nested samples, aggregation over seeds, the
plot, and a tiny real study through `elmo task`'s recipe."""

from __future__ import annotations

import json

import pytest

from elmo import save_pretrained
from elmo.analysis.sample_efficiency import (
    BASELINE,
    plan_runs,
    plot_sample_efficiency,
    run_study,
    summarize,
)
from elmo.cli import main
from elmo.errors import ElmoError
from elmo.tasks.config import TaskConfig
from elmo.tasks.data import nested_sample
from tests.conftest import random_bilm
from tests.helpers.plots import check_png


def test_plan_covers_every_system_fraction_and_seed():
    specs = plan_runs([1.0, 0.01, 0.1], [0, 1, 2], "default")
    assert len(specs) == 3 * 2 * 3
    assert [s.fraction for s in specs[:6]] == [0.01] * 6  # smallest first
    assert {(s.system, s.elmo) for s in specs} == {(BASELINE, None), ("+ELMo", "default")}
    assert len({s.name for s in specs}) == len(specs)  # one directory each
    with pytest.raises(ElmoError, match=r"fractions must be in \(0, 1\]"):
        plan_runs([0.0, 1.0], [0], "default")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_samples_are_nested_and_fixed_by_the_seed(seed):
    n = 5000
    samples = [set(nested_sample(n, f, seed)) for f in (0.001, 0.01, 0.1, 1.0)]
    assert [len(s) for s in samples] == [5, 50, 500, 5000]
    for small, large in zip(samples, samples[1:], strict=False):
        assert small < large  # the 1% sample lies inside the 10% one
    assert set(nested_sample(n, 0.01, seed)) == samples[1]  # the same seed: the same sample
    assert set(nested_sample(n, 0.01, seed + 10)) != samples[1]


def test_study_rows_and_summary_over_seeds(tmp_path):
    calls = []

    def fake_train(config):
        calls.append(config)
        score = 50 + 40 * config.train_fraction + (10 if config.elmo else 0) + config.seed
        return {"metric": "accuracy", "dev": 0.0, "test": score, "n_train":
                round(1000 * config.train_fraction)}

    base = TaskConfig(task="tagging", train="t.conll", dev="d.conll", test="x.conll",
                      out="unused", format="conll", epochs=2)
    specs = plan_runs([0.1, 1.0], [0, 1, 2], "mymodel")
    rows = run_study(base, specs, tmp_path, train=fake_train)
    assert {(c.elmo, c.train_fraction, c.seed) for c in calls} == \
        {(e, f, s) for e in (None, "mymodel") for f in (0.1, 1.0) for s in (0, 1, 2)}
    assert all(c.epochs == 2 and c.out == str(tmp_path / s.name)
               for c, s in zip(calls, specs, strict=True))
    assert rows[0]["split"] == "test"
    summary = summarize(rows)
    assert [(r["system"], r["fraction"]) for r in summary] == [
        (BASELINE, 0.1), (BASELINE, 1.0), ("+ELMo", 0.1), ("+ELMo", 1.0)]
    elmo_small = summary[2]
    assert elmo_small["mean"] == pytest.approx(50 + 4 + 10 + 1)  # seeds 0, 1, 2 -> +1 mean
    assert elmo_small["std"] == pytest.approx(1.0)  # sample std of 0, 1, 2
    assert elmo_small["n_train"] == 100 and elmo_small["seeds"] == 3
    one_seed = summarize([r for r in rows if r["seed"] == 0])
    assert all(r["std"] == 0 for r in one_seed)


def test_plot_is_an_image_with_labelled_axes(tmp_path, labelled_figures):
    summary = [{"system": BASELINE, "fraction": f, "n_train": n, "mean": m, "std": 1.5}
               for f, n, m in ((0.01, 10, 40.0), (0.1, 100, 60.0), (1.0, 1000, 80.0))]
    summary += [{**r, "system": "+ELMo", "mean": r["mean"] + 10} for r in summary]
    check_png(plot_sample_efficiency(summary, tmp_path / "se.png", "accuracy", "test"))
    assert labelled_figures == [("Sample efficiency: task model alone vs +ELMo",
                                 "training examples (log scale)",
                                 "test accuracy (mean ± std over seeds)")]


CONLL = ["the DT", "cat NN", "sat VB", "", "a DT", "dog NN", "ran VB", "",
         "the DT", "bird NN", "sang VB", "", "a DT", "fish NN", "swam VB"]


def test_tiny_real_study_resumes_and_reports(tmp_path, capsys, monkeypatch):
    data = tmp_path / "toy.conll"
    data.write_text("\n".join(CONLL) + "\n", encoding="utf-8")
    model = save_pretrained(random_bilm(seed=8), tmp_path / "model")
    args = ["analyze", "sample-efficiency", "--out", str(tmp_path / "runs"), "--model",
            str(model), "--fractions", "0.5,1", "--seeds", "0,1", "--plot",
            str(tmp_path / "se.png"), "--quiet", "--json", "--",
            "--task", "tagging", "--train", str(data), "--dev", str(data), "--format", "conll",
            "--epochs", "1", "--hidden-dim", "8", "--embedding-dim", "8",
            "--cache-dir", str(tmp_path / "cache")]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metric"] == "accuracy" and result["split"] == "dev"
    assert len(result["runs"]) == 8 and len(result["summary"]) == 4
    assert {r["n_train"] for r in result["runs"]} == {2, 4}
    assert all(0 <= r["score"] <= 100 for r in result["runs"])
    saved = json.loads((tmp_path / "runs" / "sample_efficiency.json").read_text())
    assert saved["summary"] == result["summary"]
    check_png(tmp_path / "se.png")
    # the +ELMo runs' mix weights, as `elmo task` wrote them, read by layer-weights
    elmo_run = tmp_path / "runs" / "elmo-frac1-seed0"
    assert main(["analyze", "layer-weights", str(elmo_run), "--json"]) == 0
    (mix,) = json.loads(capsys.readouterr().out)["runs"]
    assert mix["placement"] == "input" and sum(mix["weights"]) == pytest.approx(1.0)

    # run again: every run is finished, nothing is trained (the plot exists: --overwrite)
    trained = []
    monkeypatch.setattr("elmo.tasks.recipe.fit", lambda *a: trained.append(a))
    assert main(args) == 1
    assert "se.png already exists" in capsys.readouterr().err
    args.insert(args.index("--"), "--overwrite")
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == result["runs"] and trained == []


def test_options_it_sets_itself_are_refused(tmp_path, capsys):
    code = main(["analyze", "sample-efficiency", "--out", str(tmp_path), "--", "--task",
                 "tagging", "--seed", "3"])
    assert code == 1 and "--seed: set by sample-efficiency itself" in capsys.readouterr().err
