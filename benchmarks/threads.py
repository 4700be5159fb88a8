"""Thread counts on a shared host: wall time of a small task run (CoNLL-2003 NER, the first
`--sentences` training sentences, one epoch over cached layers of the shipped `default` biLM)
and of `elmo embed` (the shipped model, `--lines` lines of WikiText-2), with 1 and 2 torch
threads, alone and beside `--busy` processes that each keep one core busy (as another
user's job does). Each command runs in its own process, `elmo --threads N ...`; the feature
cache is filled first, so the task runs time training only.

    python benchmarks/threads.py [--sentences 500 --lines 500 --busy 0,1 --repeats 2]

Prints a table and writes benchmarks/results/threads.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import DATA, RESULTS


def spin(stop: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    """Keep one core busy until `stop` is set."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def first_sentences(src: Path, n: int, out: Path) -> Path:
    """The first `n` sentences (blank-line-separated blocks) of a CoNLL file."""
    blocks = [b for b in src.read_text(encoding="utf-8").split("\n\n")
              if b.strip() and not b.startswith("-DOCSTART-")]
    out.write_text("\n\n".join(blocks[:n]) + "\n", encoding="utf-8")
    return out


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "elmo", *argv], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--busy", default="0,1", help="numbers of busy processes beside")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "threads.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="elmo-threads-"))
    train = first_sentences(DATA / "conll2003/eng.train", args.sentences, work / "train")
    dev = first_sentences(DATA / "conll2003/eng.testa", 100, work / "dev")
    lines = [line for line in (DATA / "wikitext-2/valid.txt").read_text().splitlines()
             if line.strip()][: args.lines]
    (work / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def task(threads: int, i: int) -> list[str]:
        return ["--threads", str(threads), "task", "train", "--task", "tagging", "--format",
                "conll", "--scheme", "iob1", "--train", str(train), "--dev", str(dev),
                "--elmo", "default", "--epochs", "1", "--cache-dir", str(work / "cache"),
                "--out", str(work / f"run{threads}-{i}-{time.monotonic_ns()}"), "--quiet"]

    def embed(threads: int, i: int) -> list[str]:
        return ["--threads", str(threads), "embed", "default", str(work / "in.txt"),
                str(work / f"out{threads}-{i}-{time.monotonic_ns()}.hdf5"), "--quiet"]

    timed(task(1, -1))  # fills the feature cache
    rows = []
    for busy in [int(b) for b in args.busy.split(",")]:
        stop = multiprocessing.Event()
        spinners = [multiprocessing.Process(target=spin, args=(stop,)) for _ in range(busy)]
        for p in spinners:
            p.start()
        try:
            for name, command in (("task train (1 epoch)", task), ("embed", embed)):
                for threads in (1, 2):
                    times = [timed(command(threads, i)) for i in range(args.repeats)]
                    rows.append({"command": name, "busy": busy, "threads": threads,
                                 "seconds": statistics.median(times), "all": times})
                    print(f"{name:22s} busy {busy}  threads {threads}: "
                          f"{statistics.median(times):7.1f} s  {times}", flush=True)
        finally:
            stop.set()
            for p in spinners:
                p.join()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"sentences": args.sentences, "lines": args.lines,
                                    "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
