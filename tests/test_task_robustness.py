"""`elmo task` as a new user meets it (issue 23): output rules and locks of `task train`,
checked numbers, a task run where a biLM is expected and the converse, bad rows, unseen
labels, unfinished runs."""

from __future__ import annotations

import json

import pytest

from elmo import save_pretrained
from elmo.cli import main
from elmo.io.atomic import output_lock
from tests.conftest import random_bilm
from tests.helpers.tasks import task_args


def _contents(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# ---- item 2: output rules ----------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["native", "bilm-tf"])
@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_train_never_replaces_a_model_directory(tmp_path, tiny_model, capsys, overwrite, fmt):
    assert main(["export", str(tiny_model), str(tmp_path / "exp"), "--format", fmt]) == 0
    exported = tmp_path / "exp"
    before = _contents(exported)
    args = task_args("classification", tmp_path, str(tiny_model), out="exp", epochs=1)
    assert main(args + overwrite) == 1
    err = capsys.readouterr().err
    assert f"{exported} holds a biLM" in err and "choose another --out" in err
    assert _contents(exported) == before


def test_train_refuses_a_non_empty_directory_without_overwrite(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    args = task_args("classification", tmp_path, "none", epochs=1)
    assert main(args) == 1
    err = capsys.readouterr().err
    assert f"{out} is not empty" in err and "--overwrite" in err
    assert _contents(out) == {"notes.txt": b"mine"}
    assert main(args + ["--overwrite"]) == 0
    assert (out / "result.json").is_file() and (out / "notes.txt").read_text() == "mine"


def test_overwrite_replaces_a_run_of_other_options(tmp_path, capsys):
    args = task_args("classification", tmp_path, "none", epochs=1)
    assert main(args) == 0
    assert main(args + ["--seed", "5"]) == 1
    assert "holds a run with other options" in capsys.readouterr().err
    assert main(args + ["--seed", "5", "--overwrite"]) == 0
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["task"]["seed"] == 5
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 1


def test_out_that_is_a_file_or_under_a_file_is_named(tmp_path, capsys):
    args = task_args("classification", tmp_path, "none", epochs=1)
    (tmp_path / "file").write_text("x")
    for out in ("file", "file/run"):
        args[args.index("--out") + 1] = str(tmp_path / out)
        assert main(args) == 1
        err = capsys.readouterr().err
        assert str(tmp_path / "file") in err and "a file" in err, err


# ---- item 3: one writer at a time --------------------------------------------------------

def test_a_second_train_into_the_same_out_is_refused(tmp_path, capsys):
    args = task_args("classification", tmp_path, "none", epochs=1)
    with output_lock(tmp_path / "run"):  # the first process, still training
        assert main(args) == 1
        assert f"another process is writing {tmp_path / 'run'}" in capsys.readouterr().err
        assert not (tmp_path / "run").exists()
    assert main(args) == 0


# ---- item 4: numbers are checked -----------------------------------------------------------

@pytest.mark.parametrize("option,value,message", [
    ("--epochs", "0", "--epochs must be >= 1"),
    ("--epochs", "-1", "--epochs must be >= 1"),
    ("--patience", "0", "--patience must be >= 1"),
    ("--batch-size", "0", "--batch-size must be >= 1"),
    ("--batch-size", "-5", "--batch-size must be >= 1"),
    ("--lr", "-1", "--lr must be > 0"),
    ("--lr", "0", "--lr must be > 0"),
    ("--l2", "-1", "--l2 must be >= 0"),
    ("--mix-lr", "0", "--mix-lr must be > 0"),
    ("--elmo-dropout", "1", "--elmo-dropout must be in [0, 1)"),
    ("--dropout", "-0.1", "--dropout must be in [0, 1)"),
    ("--hidden-dim", "0", "--hidden-dim must be >= 1"),
    ("--embedding-dim", "0", "--embedding-dim must be >= 1"),
    ("--train-fraction", "0", "--train-fraction must be in (0, 1]"),
    ("--train-fraction", "1.5", "--train-fraction must be in (0, 1]"),
])
def test_bad_numbers_are_refused_before_anything_is_written(tmp_path, capsys, option, value,
                                                            message):
    args = task_args("classification", tmp_path, "none", epochs=1)
    if option in args:
        args[args.index(option) + 1] = value
    else:
        args += [option, value]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


# ---- item 6: a task run is not a biLM, a biLM is not a task run ----------------------------

def test_a_task_run_where_a_bilm_is_expected(tmp_path, tiny_model, capsys):
    args = task_args("classification", tmp_path, "none", epochs=1)
    assert main(args) == 0
    run = tmp_path / "run"
    (tmp_path / "in.txt").write_text("a b c\n", encoding="utf-8")
    expected = f"{run} is a task run (made by elmo task train), not a biLM"
    for argv in (["embed", run, tmp_path / "in.txt", tmp_path / "o.hdf5", "--quiet"],
                 ["perplexity", run, tmp_path / "in.txt", "--quiet"],
                 ["export", run, tmp_path / "exported"],
                 ["train", "--init-from", run, "--train", tmp_path / "in.txt", "--out",
                  tmp_path / "adapted", "--max-steps", "1", "--quiet"],
                 task_args("classification", tmp_path, str(run), out="run2", epochs=1)):
        assert main([str(a) for a in argv]) == 1
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err, (argv[0], err)
    assert main(["task", "evaluate", str(tiny_model), "--test", str(tmp_path / "test")]) == 1
    err = capsys.readouterr().err
    assert f"{tiny_model} is a biLM, not a task run (made by elmo task train)" in err


# ---- item 9: every test example is scored --------------------------------------------------

def _conll(path, sentences):
    path.write_text("\n\n".join("\n".join(f"{w} X {t}" for w, t in s) for s in sentences)
                    + "\n", encoding="utf-8")


def _train_and_evaluate(args, tmp_path, capsys):
    """Train, then `task evaluate --json` the run on its test file: (captured, result)."""
    assert main(args) == 0
    capsys.readouterr()
    assert main(["task", "evaluate", str(tmp_path / "run"), "--test", str(tmp_path / "test"),
                 "--json"]) == 0
    captured = capsys.readouterr()
    return captured, json.loads(captured.out)


def test_evaluate_scores_every_example_and_names_unseen_span_types(tmp_path, capsys):
    args = task_args("tagging", tmp_path, "none", epochs=1)
    # IOB1: B-PER only separates two adjacent PER spans; the type PER is known. GPE is not.
    _conll(tmp_path / "test", [[("anna", "I-PER"), ("bob", "B-PER")],
                               [("rome", "I-GPE"), ("saw", "O"), ("paris", "I-GPE")],
                               [("carl", "I-PER")]])
    captured, result = _train_and_evaluate(args, tmp_path, capsys)
    assert result["n"] == 3
    assert "span type 'GPE' (2 gold spans)" in captured.err
    assert "never occurs in the training file" in captured.err and "PER" not in captured.err
    # the same warning at the end of training, for --test
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["n_test"] == 3


def test_unseen_labels_count_as_errors_in_accuracy(tmp_path, capsys):
    args = task_args("classification", tmp_path, "none", epochs=1)
    (tmp_path / "test").write_text("pos good\nneutral the\nneutral saw\nneg bad\n",
                                   encoding="utf-8")
    captured, result = _train_and_evaluate(args, tmp_path, capsys)
    assert result["n"] == 4 and result["score"] <= 50.0
    assert "label 'neutral' (2 gold labels)" in captured.err


# ---- item 10: unfinished runs ----------------------------------------------------------------

def test_evaluating_an_unfinished_run_warns(tmp_path, monkeypatch, capsys):
    from elmo.tasks import run as task_run

    args = task_args("classification", tmp_path, "none", epochs=3) + ["--patience", "10"]
    real, calls = task_run._train_epoch, []

    def interrupted(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(task_run, "_train_epoch", interrupted)
    assert main(args) == 130
    monkeypatch.setattr(task_run, "_train_epoch", real)
    capsys.readouterr()
    for argv in (["evaluate", str(tmp_path / "run"), "--test", str(tmp_path / "test")],
                 ["predict", str(tmp_path / "run"), str(tmp_path / "test"),
                  str(tmp_path / "pred")]):
        assert main(["task", *argv]) == 0
        err = capsys.readouterr().err
        assert "training is incomplete (1 of 3 epochs)" in err, err
    args.remove("--quiet")
    assert main(args) == 0
    assert f"resuming {tmp_path / 'run'} after epoch 1 of 3" in capsys.readouterr().err
    assert main(["task", "evaluate", str(tmp_path / "run"), "--test",
                 str(tmp_path / "test")]) == 0
    assert "incomplete" not in capsys.readouterr().err


# ---- item 5: rows with a differing column count ---------------------------------------------

def test_a_conll_row_with_a_column_missing_stops_with_file_and_line(tmp_path, capsys):
    args = task_args("tagging", tmp_path, "none", epochs=1)
    rows = (tmp_path / "train").read_text().splitlines()
    rows[3] = "German JJ"  # 2 columns among 3-column rows: the tag would be "JJ"
    (tmp_path / "train").write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert main(args[:args.index("--scheme")] + args[args.index("--scheme") + 2:]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'train'}, line 4: 2 columns" in err and "3 columns" in err, err


def test_predict_refuses_a_conllu_file_for_a_conll_run(tmp_path, capsys):
    assert main(task_args("tagging", tmp_path, "none", epochs=1)) == 0
    conllu = tmp_path / "in.conllu"
    conllu.write_text("# sent_id = 1\n# text = anna saw bob\n"
                      "1\tanna\tanna\tPROPN\tNNP\t_\t2\tnsubj\t_\t_\n"
                      "2\tsaw\tsee\tVERB\tVBD\t_\t0\troot\t_\t_\n"
                      "3\tbob\tbob\tPROPN\tNNP\t_\t2\tobj\t_\t_\n\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["task", "predict", str(tmp_path / "run"), str(conllu),
                 str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"{conllu}, line 2" in err and "--format conllu" in err, err
    assert not (tmp_path / "out").exists()


# ---- items 7-8: the recorded tokenizer ------------------------------------------------------

def _chars_model(path):
    save_pretrained(random_bilm(seed=6), path)
    (path / "card.json").write_text(json.dumps({"tokenizer": "chars"}))
    return path


@pytest.mark.parametrize("fmt", ["native", "bilm-tf"])
def test_export_keeps_the_recorded_tokenizer(tmp_path, fmt):
    from elmo.embed import Embedder

    model = _chars_model(tmp_path / "zh")
    assert main(["export", str(model), str(tmp_path / "exp"), "--format", fmt]) == 0
    embedder = Embedder.from_pretrained(tmp_path / "exp")
    assert embedder.tokenizer == "chars"


def test_task_train_uses_the_recorded_tokenizer_by_default(tmp_path):
    model = _chars_model(tmp_path / "zh")
    (tmp_path / "zh.txt").write_text("pos 北京欢迎你\nneg 不好\n" * 6, encoding="utf-8")
    base = ["task", "train", "--task", "classification", "--format", "label-text",
            "--train", str(tmp_path / "zh.txt"), "--dev", str(tmp_path / "zh.txt"),
            "--elmo", str(model), "--epochs", "1", "--hidden-dim", "8", "--embedding-dim",
            "8", "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    assert main([*base, "--out", str(tmp_path / "b"), "--tokenizer", "whitespace"]) == 0
    vocab_a = (tmp_path / "a" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    vocab_b = (tmp_path / "b" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert "北" in vocab_a and "北京欢迎你" in vocab_b
    saved = json.loads((tmp_path / "a" / "config.json").read_text())
    assert saved["task"]["tokenizer"] == "chars"


# ---- item 11: thread defaults -------------------------------------------------------------

def test_task_commands_default_to_one_thread(tmp_path, monkeypatch):
    import torch

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    task_args("classification", tmp_path, "none")
    text = ["task", "text", "--format", "label-text", str(tmp_path / "train")]
    try:
        torch.set_num_threads(2)
        assert main([*text, str(tmp_path / "a.txt")]) == 0
        assert torch.get_num_threads() == 1
        assert main(["--threads", "2", *text, str(tmp_path / "b.txt")]) == 0
        assert torch.get_num_threads() == 2
        (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
        assert main(["embed", str(save_pretrained(random_bilm(), tmp_path / "m")),
                     str(tmp_path / "in.txt"), str(tmp_path / "o.hdf5"), "--quiet"]) == 0
        assert torch.get_num_threads() == 2  # other commands, idle machine: torch's choice
    finally:
        torch.set_num_threads(1)
