"""benchmarks/elmo_vs_bert.py: its quick mode runs end to end on the CPU (tiny BERT and ELMo,
made-up sentences) and writes every encoder x precision x threads row with its speed-ups over
BERT-base fp32 and each encoder's memory; BERT's input windows point at each word's first piece."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.helpers.scripts import script_module

WORKLOADS = ("conll2003", "msra")
ENCODERS = {("elmo tiny", "elmo", "fp32"), ("elmo tiny", "elmo", "int8"),
            ("bert-tiny", "hf eager", "fp32"), ("bert-tiny", "hf sdpa", "fp32"),
            ("bert-tiny", "hf sdpa", "int8"), ("bert-tiny", "onnxruntime", "fp32"),
            ("bert-tiny", "onnxruntime", "int8")}
REFERENCE = ("bert-tiny", "hf sdpa", "fp32")


def test_windows_hold_every_piece_and_point_at_each_words_first_piece(monkeypatch):
    bench = script_module(REPO / "benchmarks" / "elmo_vs_bert.py", monkeypatch)
    sentences = [["Germany", "said", "counterproductive", "."],
                 ["interdisciplinary", "rates", "raised", "Peter"] * 5, ["bank"]]
    tokenizer = bench.train_wordpiece([["Germany", "said", "rates", "raised", "bank", "Peter"],
                                       ["counter", "productive", "inter", "disciplinary"]], 80)
    batch = bench.piece_batch(tokenizer, sentences, max_pieces=8)
    flat = batch.input_ids.reshape(-1)
    expected = []
    for words in sentences:
        for word in words:  # the word's pieces alone: its first one is what a tagger reads
            expected.append(tokenizer.encode([word], is_pretokenized=True,
                                             add_special_tokens=False).ids[0])
    assert flat[batch.first_piece].tolist() == expected
    assert batch.words == [4, 20, 1]
    lengths = batch.attention_mask.sum(1)
    assert lengths.max() <= 8 + 2  # windows of <= 8 pieces, with [CLS] and [SEP]
    assert batch.pieces == int(lengths.sum()) - 2 * len(lengths)  # no piece lost or repeated
    assert len(lengths) > 3  # the long sentence was cut into windows
    assert (batch.input_ids[:, 0] == 2).all()  # each window starts with [CLS]


def test_the_help_says_each_options_default_and_what_a_run_needs():
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "elmo_vs_bert.py"),
                           "--help"], capture_output=True, text=True, check=True)
    helps = " ".join(done.stdout.split())
    for option, default in (("--workloads", "default: both"),
                            ("--threads", "default: 1 2"), ("--batch-sizes", "default: 32 64"),
                            ("--sentences", "default 64"), ("--repeats", "default 1")):
        after = helps.split("options:", 1)[1].split(f"{option} ", 1)[1]
        assert default in after.split(" --", 1)[0], option
    for needed in ("pip install -e '.[bench]'", "CoNLL-2003 eng.testb", "ELMO_SHARED/data",
                   "20 minutes", "21 GB"):
        assert needed in helps, needed


def test_a_gpu_runs_elmo_and_hugging_face_bert_in_three_precisions(monkeypatch):
    bench = script_module(REPO / "benchmarks" / "elmo_vs_bert.py", monkeypatch)
    sample, _ = bench.sample_of(bench.WORKLOADS["msra"], 8, 2, "cuda", bench.DATA, quick=True)
    assert {(e.runtime, e.precision) for e in sample.encoders} == {
        (r, p) for r in ("elmo", "hf eager", "hf sdpa") for p in ("fp32", "tf32", "bf16")}
    assert sample.reference in sample.encoders and len(sample.latency) == 2


@pytest.mark.slow
def test_quick_run_writes_every_row_speedups_and_memory(tmp_path):
    out = tmp_path / "elmo_vs_bert.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep
           + os.environ.get("PYTHONPATH", ""),
           "OMP_WAIT_POLICY": "PASSIVE"}  # a shared 2-core machine: no spinning at 2 threads
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "elmo_vs_bert.py"),
                           "--quick", "--out", str(out)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    rows = report["rows"]
    key = {(r["workload"], r["model"], r["runtime"], r["precision"], r["threads"]): r
           for r in rows}
    assert set(key) == {(w, *e, t) for w in WORKLOADS for e in ENCODERS for t in (1, 2)}
    assert len(rows) == len(key)
    for (workload, *_, threads), r in key.items():
        ref = key[(workload, *REFERENCE, threads)]
        speedup = r["speedup_over_bert_base_fp32"]
        assert 0 < r["latency_ms"]["p50"] <= r["latency_ms"]["p99"]
        assert speedup["latency_p50"] == pytest.approx(ref["latency_ms"]["p50"]
                                                       / r["latency_ms"]["p50"])
        for b in ("32", "64"):
            assert r["words_per_s"][b] > 0
            assert speedup[b] == pytest.approx(r["words_per_s"][b] / ref["words_per_s"][b])
    # one model, one answer: the export and SDPA match eager, int8 is near it
    for w in WORKLOADS:
        difference = {e: key[(w, *e, 1)]["mean_relative_difference_from_fp32"] for e in ENCODERS}
        assert difference["bert-tiny", "hf sdpa", "fp32"] < 1e-5
        assert difference["bert-tiny", "onnxruntime", "fp32"] < 1e-5
        assert 0 < difference["bert-tiny", "onnxruntime", "int8"] < 0.1
        assert 0 < difference["elmo tiny", "elmo", "int8"] < 0.1
        stats = report["workloads"][w]
        assert stats["bert_windows"] == stats["sentences"] + 1  # the long one: two windows
    assert report["onnx_fusions"]["bert-tiny"]["Attention"] == 2  # fused, in both layers
    assert report["workloads"]["conll2003"]["wordpieces_per_word"] > 1
    assert report["workloads"]["msra"]["wordpieces_per_word"] == 1  # a piece a character
    memory = {(m["workload"], m["model"], m["runtime"], m["precision"]): m
              for m in report["memory"]}
    assert set(memory) == {(w, *e) for w in WORKLOADS for e in ENCODERS}
    assert all(m["peak_rss_mb"] >= m["baseline_rss_mb"] > 0 for m in memory.values())
    # an ONNX Runtime server imports no torch: its child shows it
    assert memory["msra", "bert-tiny", "onnxruntime", "fp32"]["baseline_rss_mb"] < \
        memory["msra", "elmo tiny", "elmo", "fp32"]["baseline_rss_mb"] / 2
    assert report["host"]["cpu"] and "isa" in report["host"]
    table = out.with_suffix(".md").read_text()
    assert "| bert-tiny | onnxruntime | int8 | 2 |" in table
