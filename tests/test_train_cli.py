"""`elmo train`, `elmo vocab`, `elmo perplexity`, `elmo export`: end to end on a tiny corpus.
(A run killed with SIGKILL and resumed to bit-identical weights: test_determinism.py.)"""

from __future__ import annotations

import argparse
import gzip
import json
import os
from pathlib import Path

import pytest
import torch

from elmo import load_pretrained
from elmo.chars import batch_to_ids
from elmo.cli import build_parser, main
from elmo.embed import Embedder
from elmo.loading.formats.bilm_tf import load_bilm_tf, save_bilm_tf
from elmo.runs import CHECKPOINT_NAME, read_checkpoint_meta
from elmo.runs import folder as run_folder
from elmo.vocab import Vocabulary
from tests.conftest import random_bilm
from tests.helpers.training import train_args, write_corpus

SENTENCES = [["the", "cat", "sees", "a", "ball", "."], ["my", "friend", "helps", "again", "."]]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model trained 150 steps (full softmax) on the template corpus."""
    directory = tmp_path_factory.mktemp("trained")
    train, valid = write_corpus(directory)
    out = directory / "run"
    torch.set_num_threads(1)
    args = train_args(train, valid, out, "--max-steps", "150", "--eval-every", "50",
                      "--checkpoint-every", "50", "--log-every", "25")
    assert main(args) == 0
    return train, valid, out


def test_run_directory_holds_a_loadable_model(trained, tmp_path):
    train, valid, out = trained
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "vocab.txt", "run.json", CHECKPOINT_NAME,
            "metrics.jsonl"} <= names
    assert not [n for n in names if n.endswith(".tmp")]
    bilm, extra = load_pretrained(out)
    vocab = Vocabulary.from_file(out / "vocab.txt")
    assert extra["softmax.weight"].shape == (len(vocab), 16) == (34, 16)
    assert extra["softmax.bias"].shape == (len(vocab),)
    assert bilm.config.vocab_size == len(vocab)

    vectors = Embedder.from_pretrained(out).embed_sentences(SENTENCES)
    assert [v.shape for v in vectors] == [(3, 6, 32), (3, 5, 32)]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n", encoding="utf-8")
    assert main(["embed", str(out), str(src), str(tmp_path / "out.hdf5"), "--quiet"]) == 0

    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train_steps = [r["step"] for r in records if "train_loss" in r]
    evals = [r for r in records if "valid_ppl" in r]
    assert train_steps == [25, 50, 75, 100, 125, 150]
    assert [r["step"] for r in evals] == [50, 100, 150]
    assert evals[-1]["best_valid_ppl"] == min(r["valid_ppl"] for r in evals)
    assert records[-2]["train_loss"] < records[0]["train_loss"]
    meta = read_checkpoint_meta(out / CHECKPOINT_NAME)
    assert meta["finished"] and meta["step"] == 150


def test_perplexity_on_the_training_text_is_far_below_uniform(trained, capsys):
    train, valid, out = trained
    vocab_size = len(Vocabulary.from_file(out / "vocab.txt"))
    capsys.readouterr()
    assert main(["perplexity", str(out), str(train), "--json", "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"forward", "backward", "average", "tokens"}
    n_words = sum(len(line.split()) for line in train.read_text().splitlines())
    assert result["tokens"] == n_words + 200  # + </S> (or <S>) per sentence
    uniform = vocab_size  # perplexity of the uniform distribution over the vocabulary
    assert result["forward"] < uniform / 4 and result["backward"] < uniform / 4
    assert result["average"] == pytest.approx((result["forward"] * result["backward"]) ** 0.5)

    assert main(["perplexity", str(out), str(valid), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "forward perplexity" in text and "average perplexity" in text


def test_perplexity_needs_a_softmax(trained, tmp_path, capsys):
    _, valid, out = trained
    assert main(["export", str(out), str(tmp_path / "tf")]) == 0
    assert main(["perplexity", str(tmp_path / "tf"), str(valid)]) == 1
    assert "not a model with a softmax" in capsys.readouterr().err


def test_export_to_bilm_tf_gives_identical_outputs(trained, tmp_path):
    _, _, out = trained
    assert main(["export", str(out), str(tmp_path / "tf"), "--format", "bilm-tf"]) == 0
    assert {p.name for p in (tmp_path / "tf").iterdir()} == {"options.json", "weights.hdf5",
                                                            "vocab.txt", "card.json"}
    card = json.loads((tmp_path / "tf" / "card.json").read_text())  # the recorded tokenizer
    assert card["tokenizer"] == json.loads((out / "run.json").read_text())["config"]["tokenizer"]
    assert (tmp_path / "tf" / "vocab.txt").read_text() == (out / "vocab.txt").read_text()
    ours, _ = load_pretrained(out)
    theirs = load_bilm_tf(tmp_path / "tf" / "options.json", tmp_path / "tf" / "weights.hdf5")
    options = json.loads((tmp_path / "tf" / "options.json").read_text())
    assert options["n_tokens_vocab"] == 34
    ids = batch_to_ids(SENTENCES)
    with torch.no_grad():
        a, b = ours(ids), theirs(ids)
    assert torch.equal(a.layers, b.layers) and torch.equal(a.mask, b.mask)


def test_vocab_command_matches_the_training_vocabulary(trained, tmp_path):
    train, _, out = trained
    assert main(["vocab", "--train", str(train), "--out", str(tmp_path / "v.txt"),
                 "--quiet"]) == 0
    assert (tmp_path / "v.txt").read_text() == (out / "vocab.txt").read_text()
    assert main(["vocab", "--train", str(train), "--out", str(tmp_path / "v3.txt"),
                 "--max-vocab", "10", "--quiet"]) == 0
    assert len(Vocabulary.from_file(tmp_path / "v3.txt")) == 10


def test_rerun_of_a_finished_run_and_changed_options(trained, capsys):
    train, valid, out = trained
    before = (out / CHECKPOINT_NAME).read_bytes()
    args = train_args(train, valid, out, "--max-steps", "150", "--eval-every", "50",
                      "--checkpoint-every", "50", "--log-every", "25")
    assert main(args) == 0
    assert (out / CHECKPOINT_NAME).read_bytes() == before
    capsys.readouterr()
    assert main(train_args(train, valid, out, "--max-steps", "150", "--unroll-steps", "5")) == 1
    assert "unroll_steps differ" in capsys.readouterr().err


def test_out_dir_with_a_foreign_model_is_refused(trained, tmp_path, capsys):
    train, valid, out = trained
    load_pretrained(out)  # a model directory, but not a run
    foreign = tmp_path / "model"
    foreign.mkdir()
    (foreign / "model.safetensors").write_bytes((out / "model.safetensors").read_bytes())
    assert main(train_args(train, None, foreign, "--max-steps", "2")) == 1
    assert "not a training run directory" in capsys.readouterr().err


def test_gzipped_shards_and_globs(tmp_path):
    train, _ = write_corpus(tmp_path)
    lines = train.read_text().splitlines()
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "part-0.txt").write_text("\n".join(lines[:120]) + "\n")
    with gzip.open(shards / "part-1.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines[120:]) + "\n")
    out = tmp_path / "run"
    assert main(train_args(shards / "part-*", None, out, "--max-steps", "2")) == 0
    info = json.loads((out / "run.json").read_text())
    assert [os.path.basename(p) for p in info["train_files"]] == ["part-0.txt", "part-1.txt.gz"]
    assert info["n_sentences"] == 200
    assert info["n_tokens"] == sum(len(line.split()) + 1 for line in lines)
    built = Vocabulary.build(line.split() for line in lines)
    assert Vocabulary.from_file(out / "vocab.txt") == built


def test_max_minutes_stops_after_the_first_step_past_the_budget(tmp_path):
    train, _ = write_corpus(tmp_path)
    out = tmp_path / "run"
    args = train_args(train, None, out, "--max-steps", "50", "--max-minutes", "1e-6")
    assert main(args) == 0  # every step takes longer than the budget: one step, then stop
    meta = read_checkpoint_meta(out / CHECKPOINT_NAME)
    assert meta["step"] == 1 and not meta["finished"]
    assert (out / "model.safetensors").exists()
    assert json.loads((out / "run.json").read_text())["config"]["max_minutes"] == 1e-6
    assert main(args) == 0  # the same command resumes for another budget
    assert read_checkpoint_meta(out / CHECKPOINT_NAME)["step"] == 2


def test_a_failed_start_leaves_nothing_behind_and_the_corrected_command_runs(
    tmp_path, capsys, monkeypatch
):
    train, valid = write_corpus(tmp_path)
    out = tmp_path / "run"
    pairs = tmp_path / "pairs"  # two official pairs in one folder: which one?
    for name in ("a", "b"):
        options, weights = save_bilm_tf(random_bilm(), tmp_path / name)
        pairs.mkdir(exist_ok=True)
        options.rename(pairs / f"{name}_options.json")
        weights.rename(pairs / f"{name}_weights.hdf5")
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    monkeypatch.setenv("ELMO_CACHE", str(tmp_path / "cache"))
    failing = [
        (["--init-from", "small"], "ELMO_OFFLINE"),  # a released model, offline
        (["--init-from", str(pairs)], "pair you mean in a directory of its own"),
        (["--valid", str(tmp_path / "missing.txt")], "missing.txt"),
    ]
    for extra, message in failing:
        args = ["train", "--train", str(train), "--out", str(out), "--max-steps", "2",
                "--batch-size", "8", "--unroll-steps", "10", "--quiet", *extra]
        capsys.readouterr()
        assert main(args) == 1
        err = capsys.readouterr().err
        assert message in err and "--options" not in err
        assert not out.exists()  # no run.json, no vocab.txt, no empty directory
    assert main(train_args(train, valid, out, "--max-steps", "2")) == 0  # not "other options"
    assert read_checkpoint_meta(out / CHECKPOINT_NAME)["step"] == 2


def test_bad_train_inputs_and_outputs_get_messages_not_tracebacks(tmp_path, capsys, monkeypatch):
    train, _ = write_corpus(tmp_path)
    a_file = tmp_path / "file.txt"
    a_file.write_text("not a directory\n")
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    if os.access(read_only, os.W_OK):  # root writes anyway: report it read-only, as a
        real_access = os.access       # read-only file system would

        def access(path, mode):
            return False if Path(path) == read_only else real_access(path, mode)

        monkeypatch.setattr(run_folder.os, "access", access)
    cases = [
        (train_args(tmp_path, None, tmp_path / "r"), "is a directory, not a text file"),
        (train_args(train, None, a_file), f"--out {a_file} is a file"),
        (train_args(train, None, a_file / "run"), f"{a_file} is a file"),
        (train_args(train, None, read_only / "run"), f"{read_only} is not writable"),
    ]
    for args, message in cases:
        capsys.readouterr()
        assert main(args) == 1
        assert message in capsys.readouterr().err
    assert a_file.read_text() == "not a directory\n"
    assert list(read_only.iterdir()) == [] and not (tmp_path / "r").exists()

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Vocabulary, "save", refuse)  # fails when the directory is written
    capsys.readouterr()
    assert main(train_args(train, None, tmp_path / "late", "--max-steps", "1")) == 1
    assert "cannot write the run directory" in capsys.readouterr().err
    assert not (tmp_path / "late").exists()


def test_every_train_option_has_help_that_states_its_default():
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions = [a for a in commands.choices["train"]._actions if a.dest != "help"]
    assert {"--deterministic", "--checkpoint-minutes"} <= {s for a in actions
                                                            for s in a.option_strings}
    for action in actions:
        text = action.help or ""
        assert "default" in text or (action.required and "required" in text), action.dest
        if isinstance(action, argparse._StoreFalseAction):  # --no-X: on unless given
            assert "default:" in text, action.dest
        elif action.default not in (None, False):  # the number or name shown is the real one
            shown = f"{action.default:g}" if isinstance(action.default, float) else \
                str(action.default)
            assert f"default {shown}" in text, action.dest


@pytest.mark.parametrize("command", ["vocab", "prepare-corpus"])
@pytest.mark.parametrize("option, value", [("--max-vocab", "3"), ("--min-count", "0")])
def test_vocabulary_options_are_checked_alike(command, option, value, tmp_path, capsys):
    """`elmo vocab` and `elmo prepare-corpus` refuse a vocabulary without a word, or a
    minimum count below 1, with one message (as training's config does)."""
    train = tmp_path / "train.txt"
    train.write_text("a b c\n", encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        main([command, "--train", str(train), "--out", str(tmp_path / "out"), option, value])
    assert stop.value.code == 2
    expected = {"--max-vocab": "--max-vocab must be at least 4 (<S>, </S>, <UNK> and a word)",
                "--min-count": "--min-count must be at least 1"}[option]
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
