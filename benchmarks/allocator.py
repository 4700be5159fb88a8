"""Training on a CPU with glibc's malloc and with tcmalloc: elmo's training commands timed as
whole processes, the two allocators in turn (A B A B ...), `--repeats` times each.

glibc serves every allocation over its mmap threshold (at most 32 MiB) with a fresh mapping
and unmaps it when freed, so each such tensor's pages are faulted in and zeroed by the kernel
again at every step, and a training step allocates many (activations, their gradients,
feature batches). tcmalloc (gperftools' `libtcmalloc_minimal`, through `LD_PRELOAD`) keeps
freed pages for the next allocation and returns them to the system gradually. Reported: the
median wall, user and system seconds, the peak RSS, and the ratio of wall times glibc /
tcmalloc (pair by pair, then the median).

Workloads: `elmo task train` of a span model on CMRC 2018's trial set (../shared/data;
character tokens, passages of ~500 characters: 15% of its questions, one epoch, no ELMo, one
thread, the command's default), and `elmo train` continuing `default` for 10 steps on
WikiText-2's validation text (two threads).

    python benchmarks/allocator.py [--repeats 2] [--tcmalloc PATH] [--out results.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from common import DATA, RESULTS, cpu_info, write_json

TCMALLOC_PATHS = tuple(f"{folder}/libtcmalloc_minimal.so.4" for folder in (
    "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"))
ELMO = [sys.executable, "-m", "elmo"]


def workloads(out: Path) -> dict[str, list[str]]:
    """name -> an `elmo` command line writing into `out` (emptied before every run)."""
    return {
        "elmo task train: span, CMRC 2018 trial, 15% of its questions, 1 epoch, 1 thread": [
            *ELMO, "task", "train", "--task", "span", "--format", "squad", "--tokenizer",
            "chars", "--metric", "cmrc", "--max-answer-tokens", "100", "--hidden-dim", "64",
            "--train", str(DATA / "cmrc2018/cmrc2018_trial.json"), "--dev-fraction", "0.1",
            "--train-fraction", "0.15", "--elmo", "none", "--epochs", "1", "--out", str(out),
            "--quiet", "--threads", "1"],
        "elmo train: `default` continued 10 steps on WikiText-2 valid, 2 threads": [
            *ELMO, "train", "--train", str(DATA / "wikitext-2/valid.txt"), "--init-from",
            "default", "--max-steps", "10", "--out", str(out), "--quiet", "--threads", "2"],
    }


def timed(command: list[str], env: dict[str, str], out: Path) -> dict[str, float]:
    """One run: wall, user and system seconds and the peak RSS (MiB) of the child."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)  # this child's own usage
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed (exit {os.waitstatus_to_exitcode(status)})")
    return {"wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime,
            "rss": usage.ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2, choices=range(1, 21), metavar="N",
                        help="counted runs of each allocator (1-20)")
    parser.add_argument("--tcmalloc", type=Path, help="libtcmalloc_minimal.so.4 (default: the "
                        f"first of {', '.join(TCMALLOC_PATHS)} that exists)")
    parser.add_argument("--host", default=f"{os.cpu_count()}-core {cpu_info()['cpu']}",
                        help="the host, as the table names it")
    parser.add_argument("--out", type=Path, default=RESULTS / "speed/allocator.json")
    args = parser.parse_args()
    tcmalloc = args.tcmalloc or next((Path(p) for p in TCMALLOC_PATHS if Path(p).exists()), None)
    if tcmalloc is None or not tcmalloc.exists():
        parser.error("no libtcmalloc_minimal.so.4: install it (Debian/Ubuntu: apt-get install "
                     "libtcmalloc-minimal4) or give --tcmalloc PATH")
    glibc_env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    allocators = {"glibc": glibc_env, "tcmalloc": {**glibc_env, "LD_PRELOAD": str(tcmalloc)}}
    rows = []
    with tempfile.TemporaryDirectory(prefix="elmo-bench-allocator-") as tmp:
        out = Path(tmp) / "run"
        for name, command in workloads(out).items():
            runs: dict[str, list[dict[str, float]]] = {a: [] for a in allocators}
            for _ in range(args.repeats + 1):  # the first pair warms the caches, not counted
                for allocator, env in allocators.items():
                    runs[allocator].append(timed(command, env, out))
            ratio = statistics.median(g["wall"] / t["wall"] for g, t in
                                      zip(runs["glibc"][1:], runs["tcmalloc"][1:], strict=True))
            for allocator, counted in runs.items():
                median = {k: statistics.median(r[k] for r in counted[1:]) for k in counted[0]}
                rows.append([name, allocator, median["wall"], median["user"], median["sys"],
                             median["rss"], ratio if allocator == "tcmalloc" else None])
                print(rows[-1], flush=True)
    write_json(args.out, {
        "title": "Training on a CPU: glibc's malloc against tcmalloc, seconds (median)",
        "command": "python benchmarks/allocator.py",
        "host": args.host, "versions": {"torch": torch.__version__},
        "measured": time.strftime("%Y-%m-%d"),
        "columns": ["command", "allocator", "wall s", "user s", "system s", "peak RSS MiB",
                    "x glibc (wall)"],
        "formats": [None, None, ".1f", ".1f", ".1f", ",.0f", ".2f"],
        "rows": rows,
        "note": f"{args.repeats} runs of each after one of each not counted, in turn; tcmalloc: "
                f"LD_PRELOAD={tcmalloc}.",
    })


if __name__ == "__main__":
    main()
