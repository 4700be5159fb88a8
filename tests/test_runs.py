"""The run folder shared by `elmo train` and `elmo task train` (`elmo.runs`): the checkpoint of
plain state, the same-run check, the claim (one writer, the kind marker)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time

import pytest
import torch

from elmo.cli import main
from elmo.errors import ElmoError
from elmo.io.atomic import output_lock
from elmo.loading.resolve import is_task_run
from elmo.runs import (
    MARKER_NAME,
    PRETRAINING,
    TASK,
    changed_options,
    claim_run_folder,
    load_checkpoint,
    mark_run_folder,
    read_checkpoint_meta,
    run_kind,
    save_checkpoint,
)
from tests.helpers.tasks import task_args
from tests.helpers.training import train_args, write_corpus

# ---- the checkpoint ---------------------------------------------------------------------


def test_a_checkpoint_gives_back_its_plain_state_exactly(tmp_path):
    state = {
        "model": {"layer.weight": torch.randn(3, 4), "layer.bias": torch.randn(4)},
        "optimizer": {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.randn(3, 4)},
                                1: {}},
                      "param_groups": [{"params": [0, 1], "lr": 0.1, "betas": (0.9, 0.999),
                                        "foreach": None, "name": "task"}]},
        "rng": {"torch": torch.get_rng_state(), "python": [3, [1, 2, 2**32 - 1], None]},
        "progress": {"epoch": 2, "best_score": 1 / 3, "nan": math.nan, "done": False},
        "empty": {}, "ids": torch.arange(5), "half": torch.randn(2).to(torch.bfloat16),
    }
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, state)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
    loaded = load_checkpoint(path)
    assert loaded.keys() == state.keys()
    assert set(loaded["optimizer"]["state"]) == {0, 1}  # integer keys stay integers
    for a, b in ((loaded["model"]["layer.weight"], state["model"]["layer.weight"]),
                 (loaded["optimizer"]["state"][0]["exp_avg"],
                  state["optimizer"]["state"][0]["exp_avg"]),
                 (loaded["rng"]["torch"], state["rng"]["torch"]), (loaded["ids"], state["ids"]),
                 (loaded["half"], state["half"])):
        assert a.dtype == b.dtype and torch.equal(a, b)
    assert loaded["optimizer"]["param_groups"] == [
        {"params": [0, 1], "lr": 0.1, "betas": [0.9, 0.999], "foreach": None, "name": "task"}]
    assert loaded["rng"]["python"] == [3, [1, 2, 2**32 - 1], None]
    progress = loaded["progress"]
    assert (progress["epoch"], progress["best_score"], progress["done"]) == (2, 1 / 3, False)
    assert math.isnan(progress["nan"]) and loaded["empty"] == {}
    meta = read_checkpoint_meta(path)  # the state without loading a tensor
    assert meta["progress"]["epoch"] == 2 and meta["ids"] == {"$tensor": "ids"}


def test_what_is_not_plain_state_is_refused(tmp_path):
    path = tmp_path / "c.safetensors"
    for state, error in (({"x": {1, 2}}, TypeError), ({"x": {"a": 1, 2: 3}}, TypeError),
                         ({"x": {"$tensor": "y"}}, TypeError),
                         ({"a.b": torch.ones(1), "a": {"b": torch.ones(1)}}, ValueError)):
        with pytest.raises(error):
            save_checkpoint(path, state)
    assert not list(tmp_path.iterdir())
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ElmoError, match="not a readable checkpoint of an elmo run"):
        load_checkpoint(path)


# ---- the same-run check -----------------------------------------------------------------


def test_changed_options_are_split_by_what_may_change_on_resume():
    saved = {"epochs": 3, "lr": 0.1, "seed": 0, "old": 1}
    current = {"epochs": 5, "lr": 0.1, "seed": 1, "new": 2}
    assert changed_options(saved, current, ("epochs", "new")) == (["epochs", "new"],
                                                                  ["old", "seed"])
    assert changed_options(saved, dict(saved), ()) == ([], [])


# ---- the claim ------------------------------------------------------------------------------


def test_a_claim_holds_the_folder_removes_stale_temporaries_and_keeps_to_its_kind(tmp_path):
    out = tmp_path / "a" / "run"
    with claim_run_folder(out, TASK) as ours:
        assert not ours and not out.exists()  # nothing written for a new run
        with pytest.raises(ElmoError, match=f"another process is writing {out}"):
            with claim_run_folder(out, TASK):
                pass
        mark_run_folder(out, TASK)
        (out / ".model.safetensors.x1y2.tmp").write_bytes(b"half")
    assert not (tmp_path / "a" / "run.lock").exists()
    assert run_kind(out) == TASK
    with claim_run_folder(out, TASK) as ours:
        assert ours and [p.name for p in out.iterdir()] == [MARKER_NAME]
    with pytest.raises(ElmoError, match=f"{out} holds a task run .made by elmo task train"):
        with claim_run_folder(out, PRETRAINING):
            pass
    (out / MARKER_NAME).write_text("{\"kind\": \"something else\"}")
    assert run_kind(out) is None and run_kind(tmp_path / "missing") is None


def test_each_command_refuses_the_others_run_and_the_marker_tells_them_apart(tmp_path,
                                                                             capsys):
    train, _ = write_corpus(tmp_path / "corpus")
    pretraining = tmp_path / "pretraining"
    train_command = train_args(train, None, pretraining, "--max-steps", "1")
    assert main(train_command) == 0
    task_command = task_args("classification", tmp_path, "none", out="task", epochs=1)
    assert main(task_command) == 0
    task = tmp_path / "task"
    assert (run_kind(pretraining), run_kind(task)) == (PRETRAINING, TASK)
    assert json.loads((task / MARKER_NAME).read_text()) == {"kind": "task"}
    assert is_task_run(task) and not is_task_run(pretraining)

    capsys.readouterr()
    task_command[task_command.index("--out") + 1] = str(pretraining)
    assert main(task_command + ["--overwrite"]) == 1
    assert (f"{pretraining} holds a pretraining run (made by elmo train), not a task run"
            in capsys.readouterr().err)
    assert main(train_args(train, None, task, "--max-steps", "1")) == 1
    assert f"{task} holds a task run (made by elmo task train)" in capsys.readouterr().err

    with output_lock(pretraining):  # `elmo train` is one writer too
        assert main(train_command) == 1
        assert f"another process is writing {pretraining}" in capsys.readouterr().err

    copy = tmp_path / "copy"  # a task run's files without the marker: no task run
    shutil.copytree(task, copy)
    (copy / MARKER_NAME).unlink()
    assert not is_task_run(copy)


WRITER = """
import sys, time
from pathlib import Path
import torch
from elmo.runs import save_checkpoint
end = time.monotonic() + float(sys.argv[2])
step = 0
while time.monotonic() < end:  # checkpoints of differing sizes, renamed into place
    step += 1
    save_checkpoint(Path(sys.argv[1]), {"step": step, "pad": "x" * (step % 37),
                                        "weights": torch.zeros(1000)})
"""


def test_a_checkpoint_read_while_a_run_replaces_it_is_never_half_seen(tmp_path):
    """A reader polling the checkpoint (`elmo info`, a test waiting for a step) while a run
    renames new ones into place: safetensors' safe_open read the header of one file and mapped
    the next by its name ("size ... is smaller than the required mapping size")."""
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, {"step": 0, "weights": torch.zeros(1000)})
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "4"],
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        while read_checkpoint_meta(path)["step"] == 0:  # the writer has started
            assert writer.poll() is None
        end, steps = time.monotonic() + 2, set()
        while time.monotonic() < end:
            steps.add(read_checkpoint_meta(path)["step"])
    finally:
        writer.wait()
    assert writer.returncode == 0 and len(steps) > 10
