"""benchmarks/serve_soak.py runs end to end in its quick mode: every kind of request is sent,
every answer is right, and the server's memory is sampled."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytest.importorskip("fastapi")  # the serve extra


@pytest.mark.slow
def test_serve_soak_quick_sends_every_kind_and_every_answer_is_right(tmp_path):
    out = tmp_path / "soak.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "serve_soak.py"), "--quick",
                          "--clients", "4", "--check-every", "1", "--out", str(out)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(out.read_text())
    assert report["correct"] and report["wrong_answers"] == 0 and report["status_5xx"] == 0
    assert report["server_exit_status"] == 0
    kinds = set(report["by_kind"])
    assert {"embed_all", "embed", "openai", "tokenize"} <= kinds
    assert any(kind.startswith("bad: ") for kind in kinds)
    assert report["requests"] == sum(report["by_kind"].values()) > 0
    assert len(report["rss_samples"]) >= 3 and report["rss_end_mib"] > 0
