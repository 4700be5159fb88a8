"""`elmo task train|evaluate|predict` end to end on tiny generated data and a random biLM."""

from __future__ import annotations

import json
import random

import pytest

from elmo.cli import _actions_of, build_parser, main
from tests.helpers.tasks import PEOPLE, PLACES, WORDS, task_args


@pytest.mark.parametrize("kind,elmo_at", [("tagging", "both"), ("classification", "input"),
                                          ("pair", "output")])
def test_train_evaluate_predict(kind, elmo_at, tmp_path, tiny_model, capsys):
    args = task_args(kind, tmp_path, str(tiny_model)) + ["--elmo-at", elmo_at]
    assert main(args) == 0
    run = tmp_path / "run"
    result = json.loads((run / "result.json").read_text())
    weights = json.loads((run / "layer_weights.json").read_text())
    mixes = ["input", "output"] if elmo_at == "both" else [elmo_at]
    assert sorted(weights) == mixes
    for w in weights.values():
        assert len(w) == 3 and sum(w) == pytest.approx(1.0)
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["epoch"] for line in lines] == list(range(1, result["epochs"] + 1))
    assert result["dev"] == max(line[f"dev_{result['metric']}"] for line in lines)
    assert result["metric"] == ("span-f1" if kind == "tagging" else "accuracy")

    capsys.readouterr()
    assert main(["task", "evaluate", str(run), "--test", str(tmp_path / "test"), "--json",
                 "--cache-dir", str(tmp_path / "cache"), "--quiet"]) == 0
    evaluation = json.loads(capsys.readouterr().out)
    assert evaluation["n"] == 12 and evaluation["metric"] == result["metric"]
    assert evaluation["score"] == pytest.approx(result["test"])
    assert 0 <= evaluation["score"] <= 100

    # predictions come back in the input's format, and score as evaluate says
    out = tmp_path / "predicted"
    assert main(["task", "predict", str(run), str(tmp_path / "test"), str(out), "--quiet",
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    capsys.readouterr()
    assert main(["task", "evaluate", str(run), "--test", str(out), "--json", "--quiet",
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == pytest.approx(100.0)
    # writing predictions over the gold file, or over an earlier output, is refused
    assert main(["task", "predict", str(run), str(out), str(out), "--quiet",
                 "--cache-dir", str(tmp_path / "cache"), "--overwrite"]) == 1
    assert "is also an input" in capsys.readouterr().err
    assert main(["task", "predict", str(run), str(tmp_path / "test"), str(out), "--quiet",
                 "--cache-dir", str(tmp_path / "cache")]) == 1
    assert "already exists: pass --overwrite" in capsys.readouterr().err


def test_fine_tuned_bilm_is_saved_and_used(tmp_path, tiny_model, capsys):
    from safetensors.torch import load_file

    from elmo import load_model

    args = task_args("classification", tmp_path, str(tiny_model), epochs=2) + ["--fine-tune"]
    assert main(args) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    saved = load_file(str(tmp_path / "run" / "model.safetensors"))
    original = load_model(tiny_model).bilm.state_dict()
    # epochs 1-2 train the top one, then two biLM groups: the top LSTM layer moved, the
    # token encoder not yet
    top = [k for k in original if k.startswith("lstm.layers.1.")]
    assert top and any(not saved[f"elmo._elmo_lstm.{k}"].equal(original[k]) for k in top)
    encoder = [k for k in original if k.startswith("token_encoder.")]
    assert encoder and all(saved[f"elmo._elmo_lstm.{k}"].equal(original[k]) for k in encoder)
    # no feature cache (the layers' RMS for --scale-layers is computed as they are
    # embedded), and evaluating adds none: the fine-tuned biLM runs on every batch
    assert not list((tmp_path / "cache").glob("*.hdf5"))
    capsys.readouterr()
    assert main(["task", "evaluate", str(tmp_path / "run"), "--test", str(tmp_path / "test"),
                 "--json", "--quiet", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == pytest.approx(result["test"])
    assert not list((tmp_path / "cache").glob("*.hdf5"))


def test_task_model_alone_learns(tmp_path):
    assert main(task_args("classification", tmp_path, "none", epochs=8)) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["layer_weights"] == {}
    assert result["test"] >= 90.0  # the label is one word: the model alone must find it


def test_resume_continues_from_last_epoch(tmp_path, tiny_model, capsys):
    args = task_args("tagging", tmp_path, str(tiny_model), epochs=2) + ["--patience", "10"]
    assert main(args) == 0
    first = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(first) == 2
    args[args.index("--epochs") + 1] = "3"
    assert main(args) == 0
    after = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert after[:2] == first and len(after) == 3  # epochs 1-2 not redone

    # an uninterrupted 3-epoch run gives the same third epoch
    straight = task_args("tagging", tmp_path, str(tiny_model), out="straight", epochs=3)
    assert main(straight + ["--patience", "10"]) == 0
    third = json.loads((tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()[2])
    assert json.loads(after[2])["train_loss"] == pytest.approx(third["train_loss"], rel=1e-5)

    # other options into the same directory are refused
    assert main(args + ["--seed", "5"]) == 1
    assert "holds a run with other options (--seed: see its config.json)" in (
        capsys.readouterr().err)


def test_train_fraction_samples_are_nested():
    from elmo.tasks.data import nested_sample

    small, large = nested_sample(1000, 0.01, 3), nested_sample(1000, 0.1, 3)
    assert len(small) == 10 and len(large) == 100 and set(small) <= set(large)
    assert nested_sample(1000, 0.1, 4) != large


def test_dev_held_out_from_train(tmp_path):
    args = task_args("classification", tmp_path, "none", epochs=1)
    dev = args.index("--dev")
    args[dev: dev + 2] = ["--dev-fraction", "0.25"]
    assert main(args) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["n_train"] == 30  # 40 - 10 held out
    assert main(args + ["--dev", str(tmp_path / "dev")]) == 1


def test_bad_inputs_are_clear_errors(tmp_path, tiny_model, capsys):
    first = task_args("tagging", tmp_path, "none", out="run0", epochs=1)
    (tmp_path / "dev").write_text("anna I-ORG\n", encoding="utf-8")
    assert main(first) == 0
    err = capsys.readouterr().err  # scored, with a warning (an error the model cannot avoid)
    assert "dev: span type 'ORG' (1 gold span) never occurs in the training file" in err
    args = task_args("tagging", tmp_path, "none")

    (tmp_path / "test").write_bytes(b"anna I-PER\n\xff\xfe O\n")
    (tmp_path / "dev").write_text("anna I-PER\n", encoding="utf-8")
    assert main(args) == 1
    assert "test, line 2: not valid UTF-8" in capsys.readouterr().err

    (tmp_path / "test").write_text("anna\n", encoding="utf-8")  # tokens only
    assert main(args) == 1
    assert "test, line 1: no tag column" in capsys.readouterr().err

    (tmp_path / "train").write_text("", encoding="utf-8")
    assert main(args) == 1
    assert "train holds no sentences" in capsys.readouterr().err

    bad_format = task_args("pair", tmp_path, "none")
    bad_format[bad_format.index("A,B")] = "A"
    assert main(bad_format) == 1
    assert "needs --text-columns with 2 column name(s)" in capsys.readouterr().err
    assert main(task_args("tagging", tmp_path, "none") + ["--elmo-mix", "best"]) == 1
    assert "mix mode must be one of" in capsys.readouterr().err

    assert main(["task", "evaluate", str(tmp_path / "nothing"), "--test", "x"]) == 1
    assert "holds no trained task model" in capsys.readouterr().err


def test_domain_adaptation_recipe(tmp_path, tiny_model, capsys):
    """The task's text -> `elmo train --init-from` -> a task model on the adapted biLM."""
    args = task_args("tagging", tmp_path, "none", epochs=1)
    assert main(["task", "text", "--format", "conll", str(tmp_path / "train"),
                 str(tmp_path / "train.txt")]) == 0
    text = (tmp_path / "train.txt").read_text().splitlines()
    assert len(text) == 40 and all(line.split()[0] in PEOPLE + PLACES + WORDS for line in text)
    assert main(["train", "--init-from", str(tiny_model), "--train", str(tmp_path / "train.txt"),
                 "--out", str(tmp_path / "adapted"), "--max-steps", "1", "--batch-size", "4",
                 "--quiet"]) == 0
    args[args.index("--elmo") + 1] = str(tmp_path / "adapted")
    assert main(args) == 0
    assert len(json.loads((tmp_path / "run" / "result.json").read_text())["layer_weights"]) == 1


def test_layers_scaled_by_their_rms_over_the_training_file(tmp_path, tiny_model):
    from safetensors.torch import load_file

    from elmo.tasks.data import flat_sentences
    from elmo.tasks.features import cached_layers
    from elmo.tasks.readers import read_conll

    assert main(task_args("tagging", tmp_path, str(tiny_model), epochs=1)) == 0
    store = cached_layers(str(tiny_model), flat_sentences(read_conll(tmp_path / "train")),
                          tmp_path / "cache", progress=False)
    saved = load_file(str(tmp_path / "run" / "model.safetensors"))
    expected = [1 / r for r in store.layer_rms]
    assert saved["elmo.scalar_mix_0.layer_scales"].tolist() == pytest.approx(expected)
    assert len(set(expected)) == 3  # the layers' scales differ: the test can tell

    args = task_args("tagging", tmp_path, str(tiny_model), out="plain", epochs=1)
    assert main(args + ["--no-scale-layers"]) == 0
    saved = load_file(str(tmp_path / "plain" / "model.safetensors"))
    assert "elmo.scalar_mix_0.layer_scales" not in saved  # the default: left out, as AllenNLP
    assert "elmo.scalar_mix_0.scalar_parameters.2" in saved


def test_chinese_character_level_ner(tmp_path, tiny_model, capsys):
    """MSRA's layout: one character and its IOB2 tag per line, tab-separated."""
    rng = random.Random(0)
    names, other = ["王", "李", "张"], ["在", "北", "京", "工", "作"]
    for split, n in (("train", 30), ("dev", 8)):
        lines = []
        for _ in range(n):
            for char in rng.choices(names + other, k=rng.randint(2, 6)):
                lines.append(f"{char}\t{'B-PER' if char in names else 'O'}")
            lines.append("")
        (tmp_path / split).write_text("\n".join(lines), encoding="utf-8")
    args = ["task", "train", "--task", "tagging", "--format", "conll", "--scheme", "iob2",
            "--train", str(tmp_path / "train"), "--dev", str(tmp_path / "dev"), "--elmo",
            str(tiny_model), "--out", str(tmp_path / "run"), "--epochs", "2", "--quiet",
            "--cache-dir", str(tmp_path / "cache"), "--hidden-dim", "16"]
    assert main(args) == 0
    assert main(["task", "predict", str(tmp_path / "run"), str(tmp_path / "dev"),
                 str(tmp_path / "out"), "--quiet", "--cache-dir", str(tmp_path / "cache")]) == 0
    out = [line.split("\t") for line in (tmp_path / "out").read_text().splitlines() if line]
    gold = [line.split("\t") for line in (tmp_path / "dev").read_text().splitlines() if line]
    assert [o[0] for o in out] == [g[0] for g in gold]  # the characters, tab-separated still
    assert all(o[1] in ("B-PER", "O") for o in out)


def test_threads_option_after_the_action(tmp_path, capsys):
    args = task_args("classification", tmp_path, "none", epochs=1)
    assert main(args + ["--threads", "1"]) == 0
    with pytest.raises(SystemExit):
        main(["task", "evaluate", str(tmp_path / "run"), "--test", "x", "--threads", "0"])
    err = capsys.readouterr().err
    assert "usage: elmo task evaluate" in err and "--threads must be at least 1" in err


def test_every_action_of_every_command_takes_threads_after_it():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    actions = [a for c in commands.values() for a in _actions_of(c)]
    assert {a.prog for a in actions} >= {"elmo task text", "elmo analyze probe",
                                        "elmo analyze sample-efficiency"}
    assert all("--threads" in a._option_string_actions for a in actions)
    args = parser.parse_args(["analyze", "probe", "--train", "a", "--test", "b", "--threads",
                              "2"])
    assert args.threads == 2 and args.command_parser.prog == "elmo analyze probe"
    before = parser.parse_args(["analyze", "--threads", "3", "probe", "--train", "a", "--test",
                                "b"])
    assert before.threads == 3  # not hidden by the action's own option


def test_run_with_a_relative_model_path_evaluates_from_elsewhere(tmp_path, tiny_model,
                                                                monkeypatch, capsys):
    import shutil

    shutil.copytree(tiny_model, tmp_path / "bilm")
    monkeypatch.chdir(tmp_path)
    assert main(task_args("classification", tmp_path, "bilm", epochs=1)) == 0
    monkeypatch.chdir(tmp_path / "run")
    capsys.readouterr()
    assert main(["task", "evaluate", ".", "--test", str(tmp_path / "test"), "--json",
                 "--quiet", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 12
