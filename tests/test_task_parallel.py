"""`elmo.tasks.parallel.train_tasks`: runs in worker processes give what runs one after
another give, with the feature caches computed once, beforehand; the workers end with the
process that started them."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import time

import pytest

from elmo import save_pretrained
from elmo.errors import ElmoError
from elmo.tasks import parallel
from elmo.tasks.config import TaskConfig
from elmo.tasks.parallel import train_tasks
from tests.conftest import REPO, random_bilm
from tests.helpers.tasks import pair_file, tagging_file


def configs(tmp_path, name: str) -> list[TaskConfig]:
    """Four tagging runs (two seeds, +ELMo and alone) and a pair run, on tiny data."""
    tagging_file(tmp_path / "train.conll", 30, 0)
    tagging_file(tmp_path / "dev.conll", 10, 1)
    pair_file(tmp_path / "pairs.tsv", 30, 2)
    model = tmp_path / "bilm"
    if not model.exists():
        save_pretrained(random_bilm(seed=3), model)
    tagging = TaskConfig(task="tagging", train=str(tmp_path / "train.conll"),
                         dev=str(tmp_path / "dev.conll"), test=str(tmp_path / "dev.conll"),
                         out="", format="conll", scheme="iob1", epochs=2, hidden_dim=8,
                         embedding_dim=8, batch_size=8, cache_dir=str(tmp_path / "cache"),
                         progress=False)
    runs = [dataclasses.replace(tagging, elmo=elmo, seed=seed,
                                out=str(tmp_path / name / f"tag-{bool(elmo)}-{seed}"))
            for elmo in (str(model), None) for seed in (0, 1)]
    runs.append(TaskConfig(task="pair", train=str(tmp_path / "pairs.tsv"), dev=None,
                           dev_fraction=0.3, out=str(tmp_path / name / "pair"), format="tsv",
                           text_columns=["A", "B"], label_column="label", elmo=str(model),
                           epochs=2, hidden_dim=8, embedding_dim=8, batch_size=8,
                           cache_dir=str(tmp_path / "cache"), progress=False))
    return runs


def test_two_worker_processes_give_the_results_of_one_run_after_another(tmp_path,
                                                                         monkeypatch):
    in_order = dict(train_tasks(configs(tmp_path, "sequential"), jobs=1, threads=1))
    assert sorted(in_order) == [0, 1, 2, 3, 4]
    cached = sorted(p.name for p in (tmp_path / "cache").iterdir())
    computed = []
    real = parallel.compute_features
    monkeypatch.setattr(parallel, "compute_features",
                        lambda config: computed.append(config.out) or real(config))
    parallel_runs = configs(tmp_path, "parallel")
    in_workers = dict(train_tasks(parallel_runs, jobs=2, threads=1))
    # one cache computation per distinct (biLM, data): the +ELMo tagging runs share one
    assert computed == [parallel_runs[0].out, parallel_runs[2].out, parallel_runs[4].out]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == cached  # reused
    for i, result in in_order.items():
        got = in_workers[i]
        assert got["wall_seconds"] > 0
        assert {k: v for k, v in got.items() if k not in ("seconds", "wall_seconds")} == \
            {k: v for k, v in result.items() if k not in ("seconds", "wall_seconds")}, i


def test_jobs_must_be_positive(tmp_path):
    with pytest.raises(ElmoError, match="jobs must be at least 1"):
        list(train_tasks(configs(tmp_path, "x"), jobs=0))


def test_workers_end_when_their_parent_is_killed(tmp_path):
    """A benchmark killed while its runs train leaves no worker training on."""
    outs = [str(tmp_path / f"run{i}") for i in (0, 1)]
    script = ("from elmo.tasks.config import TaskConfig\n"
              "from elmo.tasks.parallel import train_tasks\n"
              "from tests.helpers.tasks import pid_then_sleep\n"
              "configs = [TaskConfig(task='tagging', train='t', dev='d', format='conll',"
              f" out=o) for o in {outs}]\n"
              "list(train_tasks(configs, jobs=2, threads=1, train=pid_then_sleep))\n")
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=REPO)
    pid_files = [tmp_path / f"run{i}.pid" for i in (0, 1)]
    deadline = time.monotonic() + 120
    while not all(p.exists() and p.read_text() for p in pid_files):
        assert parent.poll() is None and time.monotonic() < deadline, "the workers never started"
        time.sleep(0.2)
    workers = [int(p.read_text()) for p in pid_files]
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 20
    while (alive := [w for w in workers if _running(w)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive == []


def _running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
