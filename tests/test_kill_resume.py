"""A process killed (SIGKILL) at any moment loses at most the work since its last save, and
the same command resumes or restarts by itself: `elmo embed`'s output and the task feature
cache. The kill is real: a child process kills itself when it is about to create its N-th
HDF5 dataset (before the first save, mid-way, while the output is assembled), to copy its N-th
segment into the output, or to write its N-th safetensors file (tests/helpers/killing.py)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo import save_pretrained
from elmo.cli import main
from elmo.embed import Embedder
from elmo.tasks.features import cached_layers
from tests.conftest import random_bilm
from tests.helpers.killing import killed_at
from tests.helpers.tasks import task_args

LINES = [f"line {i} {'with some words ' * (i % 5)}end" for i in range(70)]


@pytest.fixture
def model_dir(tmp_path):
    return save_pretrained(random_bilm(seed=3), tmp_path / "model")


def _embed_argv(model_dir: Path, src: Path, out: Path) -> list[str]:
    return ["--threads", "1", "embed", str(model_dir), str(src), str(out), "--quiet",
            "--batch-size", "2"]  # a save every 32 lines


def _read(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {name: f[name][...] for name in f}


# 70 lines, a save every 32: datasets 1-32 come before the first save, 71 is the index
# (the output is being assembled); a run resumed at line 32 creates 38 + 1.
@pytest.mark.parametrize("kills", [[1], [3], [40], [3, 40, 5], [71], [40, 39]],
                         ids=["first-dataset", "before-first-save", "mid-way",
                              "three-times", "assembling", "resumed-then-assembling"])
def test_embed_killed_anywhere_resumes_to_the_same_file(tmp_path, model_dir, kills):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    reference = tmp_path / "ref.hdf5"
    assert main(_embed_argv(model_dir, src, reference)) == 0
    out = tmp_path / "out.hdf5"
    for n in kills:
        assert killed_at("dataset", n, "elmo.cli:main", _embed_argv(model_dir, src, out)) \
            == -signal.SIGKILL
        assert not out.exists()
    assert main(_embed_argv(model_dir, src, out)) == 0
    got, want = _read(out), _read(reference)
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    with h5py.File(out, "r") as f, h5py.File(reference, "r") as g:
        assert dict(f.attrs) == dict(g.attrs) == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "model", "out.hdf5",
                                                         "ref.hdf5"]


def test_embed_resumes_after_a_kill_past_the_first_save(tmp_path, model_dir, capsys):
    """A kill loses at most the work since the last save: the next run says it resumes."""
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert killed_at("dataset", 40, "elmo.cli:main", _embed_argv(model_dir, src, out)) \
        == -signal.SIGKILL
    argv = _embed_argv(model_dir, src, out)
    argv.remove("--quiet")
    assert main(argv) == 0
    assert "32 of 70 lines were embedded before" in capsys.readouterr().err


# (keys, moment, n) per kill; a save every 32 lines as above. A copy kills the child while
# OUTPUT is assembled from the segments (with sentence keys no index is written, so no
# dataset is created then).
@pytest.mark.parametrize("kills", [
    [("sentence", "dataset", 40)],
    [("sentence", "dataset", 3), ("sentence", "dataset", 40)],
    [("sentence", "dataset", 40), ("sentence", "copy", 20)],
    [("line", "dataset", 40)],
], ids=["mid-way", "twice", "resumed-then-assembling", "partial-of-line-keys"])
def test_embed_file_with_sentence_keys_killed_resumes_to_the_same_file(tmp_path, model_dir,
                                                                      kills, capsys):
    """`embed_file(..., use_sentence_keys=True)` killed at any moment: the same call writes
    the file one uninterrupted call writes (datasets named by the sentences, no index); a
    partial left by a run with line-number keys is not resumed (the keys are part of the
    run's identity)."""
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    embedder = Embedder.from_pretrained(model_dir, batch_size=2)
    reference = embedder.embed_file(src, tmp_path / "ref.hdf5", use_sentence_keys=True,
                                    progress=False)
    out = tmp_path / "out.hdf5"
    for keys, moment, n in kills:
        assert killed_at(moment, n, "tests.helpers.killing:embed_file", str(model_dir),
                         str(src), str(out), keys == "sentence") == -signal.SIGKILL
        assert not out.exists() and out.with_name("out.hdf5.partial").is_dir()
    capsys.readouterr()
    embedder.embed_file(src, out, use_sentence_keys=True)
    err = capsys.readouterr().err
    if kills[-1][0] == "sentence":  # killed mid-way, or after every segment was saved
        done = 70 if kills[-1][1] == "copy" else 32
        assert f"{done} of 70 lines were embedded before" in err, err
    else:
        assert "starting anew" in err and "resuming" not in err, err
    got, want = _read(out), _read(reference)
    assert sorted(got) == sorted(want) == sorted(LINES)  # no sentence_to_index
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    with h5py.File(out, "r") as f:
        assert dict(f.attrs) == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "model", "out.hdf5",
                                                         "ref.hdf5"]


SENTENCES = [line.split() for line in LINES] * 3


@pytest.mark.parametrize("kills", [[1], [5], [100], [5, 100], [211]],
                         ids=["first-dataset", "before-first-save", "mid-way", "twice",
                              "assembling"])
def test_feature_cache_killed_anywhere_is_completed_by_the_next_run(tmp_path, model_dir,
                                                                   kills):
    cache = tmp_path / "cache"
    for n in kills:
        assert killed_at("dataset", n, "elmo.tasks.features:cached_layers", model_dir,
                         SENTENCES, cache, batch_size=2, progress=False) == -signal.SIGKILL
    store = cached_layers(model_dir, SENTENCES, cache, batch_size=2, progress=False)
    reference = cached_layers(model_dir, SENTENCES, tmp_path / "ref", batch_size=2,
                              progress=False)
    assert len(store) == len(SENTENCES)
    for i in range(len(SENTENCES)):
        np.testing.assert_array_equal(store[i], reference[i])
    assert store.layer_rms == reference.layer_rms
    assert [p.suffix for p in cache.iterdir()] == [".hdf5"]


# Tagging, 40 training sentences, batch size 8: the cache saves every 16 x 64 sentences, so
# each split is one save; datasets 1-40 are the training file's layers. Each epoch writes
# model.safetensors (when dev improves) and checkpoint.safetensors.
@pytest.mark.parametrize("kills", [
    [("dataset", 3)], [("save", 1)], [("save", 4)], [("dataset", 20), ("save", 2), ("save", 3)],
], ids=["caching", "first-epoch-saved", "mid-run", "three-times"])
def test_task_train_killed_anywhere_resumes_to_the_same_run(tmp_path, model_dir, kills,
                                                           capsys):
    args = task_args("tagging", tmp_path, str(model_dir), epochs=3) + ["--patience", "10",
                                                                         "--threads", "1"]
    straight = [*args]
    straight[straight.index("--out") + 1] = str(tmp_path / "straight")
    straight[straight.index("--cache-dir") + 1] = str(tmp_path / "cache2")
    assert main(straight) == 0
    for moment, n in kills:
        assert killed_at(moment, n, "elmo.cli:main", args) == -signal.SIGKILL
    args.remove("--quiet")
    assert main(args) == 0
    err = capsys.readouterr().err
    if any(moment == "save" and n > 2 for moment, n in kills):
        assert "resuming" in err
    run, want = tmp_path / "run", tmp_path / "straight"
    got = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    expected = [json.loads(line) for line in (want / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in got] == [1, 2, 3]
    for a, b in zip(got, expected, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-6)
    result = json.loads((run / "result.json").read_text())
    assert result["test"] == json.loads((want / "result.json").read_text())["test"]
