"""Embedding memory: flat over a long file, bounded for `original`, and one very long sentence.

1. `elmo embed` (the CLI, in a child process) on a file of `--lines` short lines made from
   WikiText-2 words, with a `tiny` random model: the child's RSS sampled every 0.2 s, reported
   at 10%, 25%, 50%, 75% and 90% of the run time (flat means no growth with the lines done; the
   last seconds build the `sentence_to_index` JSON, which the peak includes).
2. `original` (random weights, official format): peak RSS embedding wikitext2_test_1000.txt,
   against 1.5x the weights, and a single 5,000-token sentence (target: within 2 GB).
Prints a table and writes JSON.

    python benchmarks/embed_memory.py [--lines 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from common import REPO, SHARED

from elmo.config import BiLMConfig
from elmo.loading.formats import save_bilm_tf
from elmo.modules.bilm import BiLM


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_sampled(cmd: list[str]) -> tuple[list[tuple[float, float]], float]:
    """Run cmd; return (seconds, RSS MB) samples and its peak RSS (from wait4)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start, samples = time.perf_counter(), []
    while True:  # wait4 with WNOHANG reaps the child and returns its peak RSS when it ends
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        samples.append((time.perf_counter() - start, rss_mb(proc.pid)))
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed with exit status {proc.returncode}")
    return samples, usage.ru_maxrss / 1024


FRACTIONS = (0.1, 0.25, 0.5, 0.75, 0.9)


def rss_at(samples: list[tuple[float, float]], fraction: float) -> float:
    end = samples[-1][0]
    return next(r for t, r in samples if t >= fraction * end)


def make_long_file(path: Path, n_lines: int) -> int:
    words = (SHARED / "bench/wikitext2_test_1000.txt").read_text(encoding="utf-8").split()
    rng = random.Random(0)
    tokens = 0
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n_lines):
            k = rng.randint(3, 8)
            start = rng.randrange(len(words) - k)
            f.write(" ".join(words[start : start + k]) + "\n")
            tokens += k
    return tokens


CHILD_ORIGINAL = r"""
import resource, sys
from elmo.embed import Embedder
e = Embedder.from_pretrained(sys.argv[1])
if sys.argv[2] == "file":
    e.embed_file(sys.argv[3], sys.argv[4], progress=False)
else:
    e.embed_sentence(["word%d" % (i % 500) for i in range(5000)])
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/embed_memory.json")
    args = parser.parse_args()
    result: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        torch.manual_seed(0)
        save_bilm_tf(BiLM(BiLMConfig.preset("tiny")), tmp / "tiny")
        tokens = make_long_file(tmp / "long.txt", args.lines)
        elmo = [sys.executable, "-m", "elmo", "embed"]
        samples, peak = run_sampled([*elmo, str(tmp / "tiny"), str(tmp / "long.txt"),
                                     str(tmp / "long.hdf5"), "--layers", "top", "--quiet"])
        result["long_file"] = {
            "lines": args.lines, "tokens": tokens, "seconds": samples[-1][0],
            "rss_mb_at": {f"{q:.0%}": rss_at(samples, q) for q in FRACTIONS},
            "peak_rss_mb": peak,
        }
        (tmp / "long.hdf5").unlink(missing_ok=True)
        torch.manual_seed(0)
        save_bilm_tf(BiLM(BiLMConfig.preset("original")), tmp / "original")
        weights_mb = (tmp / "original/weights.hdf5").stat().st_size / 2**20
        child = [sys.executable, "-c", CHILD_ORIGINAL, str(tmp / "original")]
        _, peak_file = run_sampled([*child, "file", str(SHARED / "bench/wikitext2_test_1000.txt"),
                                    str(tmp / "o.hdf5")])
        _, peak_long = run_sampled([*child, "sentence"])
        result["original"] = {"weights_mb": weights_mb, "peak_rss_mb_file": peak_file,
                              "peak_rss_mb_5000_token_sentence": peak_long,
                              "ratio_to_weights": peak_file / weights_mb}
    lf, o = result["long_file"], result["original"]
    at = ", ".join(f"{q} {mb:.1f}" for q, mb in lf["rss_mb_at"].items())
    print(f"long file: {lf['lines']} lines, {lf['tokens']} tokens, {lf['seconds']:.0f} s; RSS MB "
          f"at {at} of the run; peak {lf['peak_rss_mb']:.0f}")
    print(f"original: weights {o['weights_mb']:.0f} MB, peak RSS on a file "
          f"{o['peak_rss_mb_file']:.0f} MB ({o['ratio_to_weights']:.2f}x weights), "
          f"5,000-token sentence {o['peak_rss_mb_5000_token_sentence']:.0f} MB")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
