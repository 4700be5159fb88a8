"""`elmo serve` under load, against the in-process Embedder on the same sentences.

1. In this process: `Embedder.embed_sentences` on the sentences of
   ../shared/bench/wikitext2_test_1000.txt, all in one call (sorted by length into full
   batches), and on the one-sentence requests of the load below, 32 at a time in the order
   they are sent (the batches a service with 32 one-sentence clients could make at best);
   both with a warm token cache, as the service's, and each the median of --repeats runs.
2. `python -m elmo serve MODEL --port 0` in a child process (same --threads); the first
   answer of each format is checked against the in-process vectors. Then the median latency
   of one 10-token sentence in process and over HTTP (one client, JSON and binary answers),
   the calls interleaved so that all see the same load on the machine.
3. A load generator (threads, one keep-alive connection each) at concurrency 1, 8 and 32
   with one sentence a request, and at 32 with 8 sentences a request (--bulk): requests to
   `/embed_all` (all layers), as JSON or as safetensors bytes (`Accept:
   application/octet-stream`); each level stops after --requests requests or --seconds
   seconds, whichever comes first. Reports tokens/s, its ratios to the in-process figures,
   and p50/p95/p99 latency. The load generator reads every answer whole but does not decode
   it (its CPU is taken from the same machine). At the highest concurrency the target's
   in-process figure is measured again just before and after the load, and the target is
   judged on the ratio to their mean ("x paired"): the machine's speed drifts by 30% or more
   over the minutes between the first measurement and the last load.

Targets, each answer format:
- 32 clients, one sentence a request: >= 0.9 of the in-process Embedder given the same
  requests 32 at a time (the same batch composition);
- 32 clients, 8 sentences a request: >= 0.8 of one in-process call on the whole file;
- one client: the p50 latency of a 10-token sentence within 5 ms of the in-process call.
Prints a table, writes JSON.

    python benchmarks/serve.py [--model default] [--threads 1] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from common import REPO, SHARED, machine_info, results_file, write_json
from safetensors.numpy import load as load_safetensors

from elmo.embed import Embedder

TEN_TOKENS = "the quick brown fox jumps over the lazy dog .".split()
FORMATS = {"json": "application/json", "binary": "application/octet-stream"}


class InProcess:
    """The Embedder's throughput (tokens/s of one run) on all sentences in one call, and on
    the one-sentence `requests` `group` at a time in the order they are sent (what a service
    with `group` clients can batch at best: it never sees more sentences at once to sort by
    length)."""

    def __init__(self, model: str, sentences: list[list[str]], requests: list[list[str]],
                 group: int) -> None:
        self.embedder = Embedder.from_pretrained(model)
        self.sentences, self.requests, self.group = sentences, requests, group
        self.embedder.embed_sentences(sentences)  # warm up; fill the token cache as served

    def one_call(self) -> float:
        start = time.perf_counter()
        self.embedder.embed_sentences(self.sentences)
        return sum(map(len, self.sentences)) / (time.perf_counter() - start)

    def grouped(self) -> float:
        start = time.perf_counter()
        for i in range(0, len(self.requests), self.group):
            self.embedder.embed_sentences(self.requests[i: i + self.group])
        return sum(map(len, self.requests)) / (time.perf_counter() - start)

    def medians(self, repeats: int) -> dict[str, Any]:
        """Both figures, each the median of `repeats` runs, alternated (single runs on a
        shared machine vary by 10% or more)."""
        runs = [(self.one_call(), self.grouped()) for _ in range(repeats)]
        one_call, grouped = (list(r) for r in zip(*runs, strict=True))
        return {"tokens_per_s": statistics.median(one_call), "runs_tokens_per_s": one_call,
                "group": self.group, "grouped_tokens_per_s": statistics.median(grouped),
                "grouped_runs_tokens_per_s": grouped}


class Server:
    """`elmo serve` in a child process on a free port of 127.0.0.1."""

    def __init__(self, model: str, threads: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "elmo", "serve", model, "--port", "0", "--threads",
             str(threads)], stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stderr.readline()
        match = re.search(r"on http://([\d.]+):(\d+)", line)
        if not match:
            self.proc.kill()
            sys.exit(f"elmo serve did not start: {line}{self.proc.stderr.read()}")
        self.host, self.port = match.group(1), int(match.group(2))
        # drain its log, so that a full pipe never blocks it
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()
        deadline = time.monotonic() + 120
        while self.request("GET", "/health")[0] != 200:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                sys.exit("elmo serve did not become ready within 120 s")
            time.sleep(0.1)

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=120)

    def request(self, method: str, path: str) -> tuple[int, bytes]:
        conn = self.connect()
        try:
            conn.request(method, path)
            response = conn.getresponse()
            return response.status, response.read()
        except OSError:
            return 0, b""
        finally:
            conn.close()

    def stop(self) -> int:
        """SIGTERM, and its exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


def post(conn: http.client.HTTPConnection, inputs: list[list[str]], accept: str) -> bytes:
    body = json.dumps({"inputs": inputs})
    conn.request("POST", "/embed_all", body, {"Content-Type": "application/json",
                                              "Accept": accept})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"/embed_all answered {response.status}: {data[:200]!r}")
    return data


def decode(data: bytes, fmt: str) -> np.ndarray:
    if fmt == "binary":
        return load_safetensors(data)["0"]
    return np.array(json.loads(data)[0], dtype=np.float32)


def load(server: Server, sentences: list[list[str]], fmt: str, concurrency: int,
         max_requests: int, max_seconds: float, per_request: int = 1) -> dict[str, Any]:
    """`concurrency` clients sending `per_request` sentences per request until either bound
    is hit."""
    lock = threading.Lock()
    next_index = 0
    latencies: list[float] = []
    tokens = 0
    start = time.perf_counter()

    def client() -> None:
        nonlocal next_index, tokens
        conn = server.connect()
        while True:
            with lock:
                if next_index >= max_requests or time.perf_counter() - start > max_seconds:
                    break
                first = next_index * per_request
                inputs = [sentences[(first + i) % len(sentences)] for i in range(per_request)]
                next_index += 1
            t = time.perf_counter()
            post(conn, inputs, FORMATS[fmt])
            elapsed = time.perf_counter() - t
            with lock:
                latencies.append(elapsed)
                tokens += sum(map(len, inputs))
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    p50, p95, p99 = (1000 * float(np.percentile(latencies, q)) for q in (50, 95, 99))
    return {"format": fmt, "concurrency": concurrency, "inputs_per_request": per_request,
            "requests": len(latencies),
            "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds,
            "p50_ms": p50, "p95_ms": p95, "p99_ms": p99}


def latency_10_tokens(server: Server, embedder: Embedder, repeats: int = 50) -> dict[str, float]:
    """Median ms of one 10-token sentence in process and over HTTP (one client, each answer
    format), the calls interleaved so that all see the same load on the machine."""
    calls = {"in_process": lambda: embedder.embed_sentence(TEN_TOKENS)}
    for fmt, accept in FORMATS.items():
        conn = server.connect()
        calls[fmt] = lambda conn=conn, accept=accept: post(conn, [TEN_TOKENS], accept)
    latencies: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(repeats + 5):
        for name, call in calls.items():
            t = time.perf_counter()
            call()
            if i >= 5:  # warm-up
                latencies[name].append(time.perf_counter() - t)
    return {name: 1000 * statistics.median(values) for name, values in latencies.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="what `elmo serve` serves")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of the service and of the in-process run "
                        "(default 1: the other core runs the event loop and the clients)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32],
                        help="levels with one sentence a request (default 1 8 32)")
    parser.add_argument("--bulk", type=int, default=8, metavar="N",
                        help="sentences a request of the bulk level, at the highest "
                        "--concurrency (default 8; 0: no bulk level)")
    parser.add_argument("--requests", type=int, default=1000, help="per level (default 1000)")
    parser.add_argument("--seconds", type=float, default=30, help="per level (default 30)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="in-process runs, of which the median is taken (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 200 sentences, 150 requests or 5 s per level")
    parser.add_argument("--out", type=Path, help="JSON results (default: benchmarks/results/)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.bulk < 0:
        parser.error(f"--bulk must be 0 or more, got {args.bulk}")
    text = SHARED / "bench" / "wikitext2_test_1000.txt"
    if not text.is_file():
        sys.exit(f"benchmark workload not found at {text} (set ELMO_SHARED)")
    if args.quick:
        args.requests, args.seconds = 150, 5
    out = args.out or results_file("serve.json", args.quick)
    sentences = [line.split() for line in text.open(encoding="utf-8") if line.split()]
    sentences = sentences[:200] if args.quick else sentences

    torch.set_num_threads(args.threads)
    machine = machine_info()
    top = max(args.concurrency)
    # the one-sentence requests of each level, in the order load() sends them
    requests = [sentences[i % len(sentences)] for i in range(args.requests)]
    yardstick = InProcess(args.model, sentences, requests, top)
    local = yardstick.medians(1 if args.quick else args.repeats)
    embedder = yardstick.embedder
    reference = embedder.embed_sentence(sentences[0])
    print(f"in process: {local['tokens_per_s']:.0f} tokens/s on {len(sentences)} sentences in "
          f"one call, {local['grouped_tokens_per_s']:.0f} on the requests {top} at a time "
          f"(medians of {len(local['runs_tokens_per_s'])} runs; torch threads: {args.threads})")

    levels = [(c, 1) for c in args.concurrency] + ([(top, args.bulk)] if args.bulk else [])
    server = Server(args.model, args.threads)
    rows = []
    try:
        conn = server.connect()
        for i in range(0, len(sentences), 32):  # fill its token cache as the in-process one's
            post(conn, sentences[i: i + 32], FORMATS["binary"])
        conn.close()
        for fmt in FORMATS:
            conn = server.connect()
            got = decode(post(conn, [sentences[0]], FORMATS[fmt]), fmt)
            conn.close()
            error = float(np.abs(got - reference).max())
            if error > 1e-5:
                sys.exit(f"{fmt} answer differs from the in-process vectors by {error:g}")
        latency_10 = latency_10_tokens(server, embedder)
        for fmt in FORMATS:
            for concurrency, per_request in levels:
                # a target's yardstick is also measured just before and after its load
                paired = (yardstick.grouped if per_request == 1 else yardstick.one_call) \
                    if concurrency == top else None
                before = paired() if paired else 0.0
                row = load(server, sentences, fmt, concurrency, args.requests, args.seconds,
                           per_request)
                row["fraction_of_one_call"] = row["tokens_per_s"] / local["tokens_per_s"]
                row[f"fraction_of_{top}_at_a_time"] = \
                    row["tokens_per_s"] / local["grouped_tokens_per_s"]
                if paired:
                    row["paired_in_process_tokens_per_s"] = [before, paired()]
                    row["paired_fraction"] = \
                        row["tokens_per_s"] / statistics.mean(row["paired_in_process_tokens_per_s"])
                rows.append(row)
                print(f"  {fmt:6} x{concurrency:<3} {per_request} a request "
                      f"{row['tokens_per_s']:8.0f} tokens/s")
    finally:
        exit_status = server.stop()

    at_a_time = f"x {top} at once"
    print(f"\n{'answer':8}{'clients':>8}{'inputs':>7}{'requests':>10}{'tok/s':>9}"
          f"{'x 1 call':>10}{at_a_time:>13}{'x paired':>10}{'p50 ms':>9}{'p95 ms':>9}"
          f"{'p99 ms':>9}")
    print(f"{'local':8}{'all':>8}{'all':>7}{1:>10}{local['tokens_per_s']:9.0f}{1:10.2f}")
    print(f"{'local':8}{top:>8}{1:>7}{-(-len(requests) // top):>10}"
          f"{local['grouped_tokens_per_s']:9.0f}"
          f"{local['grouped_tokens_per_s'] / local['tokens_per_s']:10.2f}{1:13.2f}")
    for r in rows:
        print(f"{r['format']:8}{r['concurrency']:>8}{r['inputs_per_request']:>7}"
              f"{r['requests']:>10}{r['tokens_per_s']:9.0f}{r['fraction_of_one_call']:10.2f}"
              f"{r[f'fraction_of_{top}_at_a_time']:13.2f}"
              f"{format(r['paired_fraction'], '10.2f') if 'paired_fraction' in r else '':>10}"
              f"{r['p50_ms']:9.1f}{r['p95_ms']:9.1f}{r['p99_ms']:9.1f}")
    local_ms = latency_10.pop("in_process")
    local["latency_10_tokens_ms"] = local_ms
    print(f"10-token sentence, p50: in process {local_ms:.1f} ms, over HTTP "
          + ", ".join(f"{fmt} {ms:.1f} ms (+{ms - local_ms:.1f})"
                      for fmt, ms in latency_10.items()))

    def paired(fmt: str, per_request: int) -> float:
        return next(r["paired_fraction"] for r in rows if r["format"] == fmt
                    and r["concurrency"] == top and r["inputs_per_request"] == per_request)

    targets = {
        f"{top}_clients_one_sentence_over_0.9_of_in_process_{top}_at_a_time": {
            fmt: paired(fmt, 1) >= 0.9 for fmt in FORMATS},
        "latency_10_tokens_within_5_ms": {
            fmt: ms - local_ms <= 5 for fmt, ms in latency_10.items()},
    }
    if args.bulk:
        targets[f"{top}_clients_{args.bulk}_sentences_over_0.8_of_one_call"] = {
            fmt: paired(fmt, args.bulk) >= 0.8 for fmt in FORMATS}
    print(f"targets: {json.dumps(targets)}; service exit status on SIGTERM: {exit_status}")
    write_json(out, {"model": args.model, "threads": args.threads, "machine": machine,
                     "bulk_inputs_per_request": args.bulk, "sentences": len(sentences),
                     "in_process": local, "rows": rows, "latency_10_tokens_ms": latency_10,
                     "targets": targets, "exit_status": exit_status, "quick": args.quick})


if __name__ == "__main__":
    main()
