"""benchmarks/gpu.py and benchmarks/gpu_run.sh run end to end on the CPU (tiny sizes), so the
script a lent GPU's few minutes depend on cannot rot."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture
def gpu_data(tmp_path: Path) -> Path:
    """The layout benchmarks/gpu_data.sh writes, with made-up text."""
    rng = random.Random(0)
    words = "the a bank river money rates raised we sat on by of and in".split()
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 20))) + " ."
             for _ in range(300)]
    data = tmp_path / "data"
    (data / "en-extra").mkdir(parents=True)
    (data / "test.txt").write_text("\n".join(lines[:100]) + "\n")
    (data / "valid.txt").write_text("\n".join(lines[100:130]) + "\n")
    for path in (data / "train.txt.gz", data / "en-extra" / "abc.train.txt.gz"):
        with gzip.open(path, "wt") as f:
            f.write("\n".join(lines) + "\n")
    return data


def _env() -> dict[str, str]:
    src = str(REPO / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.mark.slow
def test_gpu_benchmark_quick_on_the_cpu(gpu_data, tmp_path):
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu.py"), "--device", "cpu",
                    "--quick", "--out", str(out), "--data", str(gpu_data),
                    "--fixtures", str(tmp_path / "none")],
                   check=True, env=_env(), cwd=tmp_path, capture_output=True)
    report = json.loads((out / "gpu.json").read_text())
    assert report["errors"] == []
    assert report["correctness"]["default device vs cpu"]["fp32 eager"]["max_abs"] == [0.0] * 3
    assert report["correctness"]["batch invariance max_abs"] < 1e-5
    assert {(r["precision"], r["graphs"]) for r in report["embedding"]} == \
        {(p, g) for p in ("fp32", "tf32", "bf16") for g in (True, False)}
    assert all(r["tokens_per_s"] > 0 for r in report["embedding"] + report["training"])
    training = report["training"]
    assert {r["precision"] for r in training} == {"fp32", "bf16"}
    assert {(r["lstm"], r["graphs"]) for r in training} == \
        {("reference", True), ("cudnn", True), ("reference", False), ("fused", True)}
    assert all(r["ms_per_step"] > 0 and r["host_ms_per_step"] > 0 and r["graph_replays"] == 0
               and r["gpu_busy"] is None and r["train_loss"] > 0 for r in training)  # CPU
    assert report["memory"]["long_input"]["tokens"] == 200
    assert "| tiny |" in (out / "gpu.md").read_text()
    bert = report["elmo_vs_bert"]  # the device's runtimes, here the CPU's
    assert {(r["model"], r["runtime"]) for r in bert["rows"]} == {
        ("elmo tiny", "elmo"), *(("bert-tiny", r) for r in ("hf eager", "hf sdpa", "onnxruntime"))}
    assert "memory" not in bert and "## ELMo or BERT" in (out / "gpu.md").read_text()


@pytest.mark.slow
def test_gpu_run_script_end_to_end_on_the_cpu(gpu_data, tmp_path):
    out = tmp_path / "out"
    env = {**_env(), "ELMO_DEVICE": "cpu", "ELMO_QUICK": "1", "GPU_BENCH_MINUTES": "0.01",
           "GPU_SKIP_TESTS": "1", "PYTHON": sys.executable}  # the suite runs the tests
    subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_run.sh"), str(out), "3",
                    str(gpu_data)], check=True, env=env, cwd=tmp_path, capture_output=True)
    assert (out / "gpu.json").exists() and (out / "gpu_run.log").exists()
    parts = sorted(out.glob("train.tar.part-*"))
    assert parts and all(p.stat().st_size <= 15 * 2**20 for p in parts)
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    subprocess.run(f"cat {' '.join(map(str, parts))} | tar x -C {unpacked}", shell=True,
                   check=True)
    from elmo.loading import load_model

    assert load_model(unpacked / "weights").bilm.config.lstm_dim == 64  # the tiny preset
    assert (unpacked / "run" / "metrics.jsonl").read_text()


@pytest.mark.slow
def test_gpu_run_script_trains_on_a_prepared_corpus(gpu_data, tmp_path):
    """TRAIN_CORPUS: the run reads the prepared corpus (its shards, its vocabulary) and
    validates on its held-out text, not on DATA_DIR's text."""
    from elmo.cli import main

    corpus = tmp_path / "corpus"
    assert main(["prepare-corpus", "--train", str(gpu_data / "train.txt.gz"), "--out",
                 str(corpus), "--hold-out-every", "10", "--quiet"]) == 0
    out, run = tmp_path / "out", tmp_path / "run" / "run"
    env = {**_env(), "ELMO_DEVICE": "cpu", "ELMO_QUICK": "1", "GPU_BENCH_MINUTES": "0",
           "GPU_SKIP_TESTS": "1", "PYTHON": sys.executable, "TRAIN_CORPUS": str(corpus),
           "TRAIN_RUN_DIR": str(run)}
    subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_run.sh"), str(out), "3",
                    str(gpu_data)], check=True, env=env, cwd=tmp_path, capture_output=True)
    log = (out / "gpu_run.log").read_text()
    assert f"training on {corpus}, validating on {corpus / 'held-out.txt'}" in log
    assert (run / "metrics.jsonl").read_text()
