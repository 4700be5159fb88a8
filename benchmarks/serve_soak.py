"""A soak of `elmo serve`: mixed requests from many clients for minutes, every answer checked,
the server's resident memory sampled.

Starts `python -m elmo serve MODEL --port 0` on 127.0.0.1 (as benchmarks/serve.py does), then
--clients threads, each on one keep-alive connection, send requests drawn at random from a
mix until --minutes have passed (or --max-requests were sent): TEI's `/embed_all` (JSON and
safetensors answers), `/embed` and `/`, OpenAI's `/v1/embeddings` (floats and base64),
`/tokenize`, and bad requests that must get a given 4xx. Every answer's status and shape is
checked; one in --check-every has its vectors compared with the in-process `Embedder`'s
(within 1e-5 plus 1e-5 of the value) and its tokens with the model's tokenizer. The server's
resident memory (VmRSS of /proc/PID/status) is sampled every --sample-seconds.

Passes when no answer was wrong, none was a 5xx, and the resident memory at the end is less
than 5% above its value after the first minute. Prints a summary, writes JSON.

    python benchmarks/serve_soak.py [--minutes 10] [--clients 16] [--quick]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from common import results_file, write_json
from safetensors.numpy import load as load_safetensors
from serve import Server

from elmo.embed import Embedder, select_layers
from elmo.tokenize import get_tokenizer

TOLERANCE = 1e-5  # absolute, plus the same relative to the value: batches sum in other orders
MAX_GROWTH = 0.05  # of the resident memory, from the end of the warm-up to the end
WORDS = ("the bank of river money rates raised we sat on a play children actors stage "
         "interest loan water , . ; ' ( ) 1984 naïve café über Zürich are is was be it "
         "quickly slowly very long-term state-of-the-art e-mail U.S. Dr. ?").split()


def make_sentences(n: int, seed: int = 0) -> list[list[str]]:
    """`n` sentences of 1 to 40 tokens drawn from WORDS."""
    rng = random.Random(seed)
    return [rng.choices(WORDS, k=rng.randint(1, 40)) for _ in range(n)]


def rss_bytes(pid: int) -> int:
    """The resident memory of process `pid` (Linux: VmRSS in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


class Expected:
    """What the in-process Embedder gives for the sentences: layers and pooled vectors."""

    def __init__(self, model: str, sentences: list[list[str]]) -> None:
        embedder = Embedder.from_pretrained(model)
        self.tokenize = embedder.tokenizer if callable(embedder.tokenizer) \
            else get_tokenizer(embedder.tokenizer)
        self.sentences = sentences
        self.texts = [" ".join(s) for s in sentences]
        self.text_tokens = [list(self.tokenize(t)) for t in self.texts]
        self.layers = embedder.embed_sentences(sentences)
        self.text_layers = embedder.embed_sentences(self.text_tokens)
        self.dims = self.layers[0].shape[-1]

    def pooled(self, i: int) -> np.ndarray:
        """`/embed`'s default vector of text `i`: the layer average's mean, normalized."""
        v = select_layers(self.text_layers[i], "average").mean(axis=0)
        return v / np.linalg.norm(v)


def _apart(got: np.ndarray, want: np.ndarray) -> str | None:
    """Why `got` is not `want` within TOLERANCE (absolute plus relative), or None."""
    if np.allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE):
        return None
    return f"vectors differ by {np.abs(got - want).max():.2e}"


class Mix:
    """The requests: each kind builds a body from sentence indices and checks the answer
    (`check(status, body, full)` returns what was wrong, or None)."""

    BAD = {  # name: (method, path, body, content type, the status it must get)
        "empty inputs": ("POST", "/embed", b'{"inputs": []}', "application/json", 422),
        "empty token": ("POST", "/embed_all", b'{"inputs": [["a", ""]]}', "application/json",
                        422),
        "normalize not a boolean": ("POST", "/embed", b'{"inputs": "a", "normalize": "yes"}',
                                    "application/json", 422),
        "not JSON": ("POST", "/embed", b'{"inputs": ', "application/json", 422),
        "wrong type": ("POST", "/embed", b'{"inputs": 5}', "application/json", 422),
        "too many inputs": ("POST", "/embed",
                            json.dumps({"inputs": ["a"] * 33}).encode(), "application/json",
                            413),
        "too long": ("POST", "/embed_all",
                     json.dumps({"inputs": [["a"] * 1025]}).encode(), "application/json", 413),
        "token ids": ("POST", "/v1/embeddings", b'{"input": [1, 2, 3]}', "application/json",
                      422),
        "dimensions": ("POST", "/v1/embeddings", b'{"input": "a", "dimensions": 7}',
                       "application/json", 422),
        "GET /embed": ("GET", "/embed", b"", "application/json", 405),
        "no route": ("POST", "/nowhere", b"{}", "application/json", 404),
    }

    def __init__(self, expected: Expected) -> None:
        self.x = expected

    def draw(self, rng: random.Random) -> tuple[str, str, str, bytes, dict[str, str],
                                                Callable[..., str | None]]:
        """(kind, method, path, body, headers, check) of one request."""
        x = self.x
        picks = rng.sample(range(len(x.sentences)), rng.randint(1, 4))
        json_type = {"Content-Type": "application/json"}
        kind = rng.choice(("embed_all", "embed_all binary", "embed", "/", "openai",
                           "openai base64", "tokenize", "bad"))
        if kind.startswith("embed_all"):
            binary = kind.endswith("binary")
            headers = {**json_type, "Accept": "application/octet-stream"} if binary \
                else json_type
            body = {"inputs": [x.sentences[i] for i in picks]}
            return kind, "POST", "/embed_all", _dumps(body), headers, \
                lambda s, b, full: self._layers(s, b, picks, binary, full)
        if kind in ("embed", "/"):
            body = {"inputs": [x.texts[i] for i in picks]}
            path = "/embed" if kind == "embed" else "/"
            return kind, "POST", path, _dumps(body), json_type, \
                lambda s, b, full: self._embed(s, b, picks, full)
        if kind.startswith("openai"):
            fmt = "base64" if kind.endswith("base64") else "float"
            body = {"input": [x.texts[i] for i in picks], "model": "x", "encoding_format": fmt}
            return kind, "POST", "/v1/embeddings", _dumps(body), json_type, \
                lambda s, b, full: self._openai(s, b, picks, fmt, full)
        if kind == "tokenize":
            body = {"inputs": [x.texts[i] for i in picks]}
            return kind, "POST", "/tokenize", _dumps(body), json_type, \
                lambda s, b, full: self._tokens(s, b, picks)
        name = rng.choice(sorted(self.BAD))
        method, path, raw, content_type, want = self.BAD[name]
        return f"bad: {name}", method, path, raw, {"Content-Type": content_type}, \
            lambda s, b, full: None if s == want else f"status {s}, not {want}"

    def _layers(self, status: int, body: bytes, picks: list[int], binary: bool,
                full: bool) -> str | None:
        if status != 200:
            return f"status {status}"
        got = [load_safetensors(body)[str(k)] for k in range(len(picks))] if binary \
            else [np.asarray(a, dtype=np.float32) for a in json.loads(body)]
        for a, i in zip(got, picks, strict=True):
            want = self.x.layers[i]
            if a.shape != want.shape:
                return f"shape {a.shape}, not {want.shape}"
            if full and (why := _apart(a, want)):
                return why
        return None

    def _embed(self, status: int, body: bytes, picks: list[int], full: bool) -> str | None:
        return f"status {status}" if status != 200 else \
            self._vectors(json.loads(body), picks, full)

    def _vectors(self, vectors: list[Any], picks: list[int], full: bool) -> str | None:
        if len(vectors) != len(picks):
            return f"{len(vectors)} vectors for {len(picks)} inputs"
        for v, i in zip(vectors, picks, strict=True):
            v = np.asarray(v, dtype=np.float32)
            if v.shape != (self.x.dims,):
                return f"shape {v.shape}, not ({self.x.dims},)"
            if full and (why := _apart(v, self.x.pooled(i))):
                return why
        return None

    def _openai(self, status: int, body: bytes, picks: list[int], fmt: str,
                full: bool) -> str | None:
        if status != 200:
            return f"status {status}"
        data = json.loads(body)["data"]
        vectors = [np.frombuffer(base64.b64decode(d["embedding"]), "<f4") if fmt == "base64"
                   else d["embedding"] for d in data]
        return self._vectors(vectors, picks, full)

    def _tokens(self, status: int, body: bytes, picks: list[int]) -> str | None:
        if status != 200:
            return f"status {status}"
        got = [[t["text"] for t in tokens] for tokens in json.loads(body)]
        want = [self.x.text_tokens[i] for i in picks]
        return None if got == want else f"tokens {got}, not {want}"


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode()


def soak(server: Server, mix: Mix, clients: int, seconds: float, max_requests: int,
         check_every: int, sample_seconds: float) -> dict[str, Any]:
    """Run the clients and the memory sampler until `seconds` pass or `max_requests` were
    sent; the counts, the failures (first 20) and the RSS samples."""
    lock = threading.Lock()
    counts: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    sent = 0
    start = time.monotonic()
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def client(seed: int) -> None:
        nonlocal sent
        rng = random.Random(seed)
        conn = server.connect()
        while time.monotonic() - start < seconds:
            with lock:
                if sent >= max_requests:
                    break
                sent += 1
                full = sent % check_every == 0
            kind, method, path, body, headers, check = mix.draw(rng)
            try:
                conn.request(method, path, body or None, headers)
                response = conn.getresponse()
                status, data = response.status, response.read()
                if response.getheader("connection", "").lower() == "close":
                    conn.close()  # the server closes after some errors; reconnect
                    conn = server.connect()
                wrong = check(status, data, full)
            except (OSError, http.client.HTTPException, ValueError, KeyError) as err:
                status, wrong = 0, f"{type(err).__name__}: {err}"
                conn.close()
                conn = server.connect()
            with lock:
                counts[kind] += 1
                statuses[status] += 1
                if wrong and len(failures) < 20:
                    failures.append(f"{kind} ({method} {path}): {wrong}")
                counts["wrong"] += bool(wrong)
        conn.close()

    def sampler() -> None:
        while True:
            samples.append((time.monotonic() - start, rss_bytes(server.proc.pid)))
            if done.wait(sample_seconds):
                return

    watcher = threading.Thread(target=sampler)
    watcher.start()
    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    done.set()
    watcher.join()
    samples.append((elapsed, rss_bytes(server.proc.pid)))
    wrong = counts.pop("wrong", 0)
    return {"seconds": elapsed, "requests": sum(counts.values()), "wrong_answers": wrong,
            "status_5xx": sum(n for s, n in statuses.items() if s >= 500),
            "by_kind": dict(sorted(counts.items())),
            "by_status": {str(s): n for s, n in sorted(statuses.items())},
            "failures": failures, "rss_samples": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="what `elmo serve` serves")
    parser.add_argument("--minutes", type=float, default=10, help="how long (default 10)")
    parser.add_argument("--clients", type=int, default=16, help="client threads (default 16)")
    parser.add_argument("--threads", type=int, default=1, help="the service's torch threads")
    parser.add_argument("--max-requests", type=int, default=1_000_000,
                        help="stop after this many requests even before --minutes")
    parser.add_argument("--check-every", type=int, default=10, metavar="N",
                        help="compare the vectors of one answer in N (default 10)")
    parser.add_argument("--sample-seconds", type=float, default=10,
                        help="seconds between memory samples (default 10)")
    parser.add_argument("--warmup-seconds", type=float, default=60,
                        help="the memory growth is measured from the first sample after "
                        "this (default 60)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 10 s, samples every 1 s after a 3 s warm-up; the "
                        "memory growth is reported, not judged")
    parser.add_argument("--out", type=Path, help="JSON results (default: benchmarks/results/)")
    args = parser.parse_args()
    if args.quick:
        args.minutes, args.sample_seconds, args.warmup_seconds = 10 / 60, 1, 3
    seconds = 60 * args.minutes
    if not 0 < args.warmup_seconds < seconds:
        parser.error(f"--warmup-seconds must be between 0 and the run's {seconds:g} s")
    expected = Expected(args.model, make_sentences(200))
    server = Server(args.model, args.threads)
    print(f"elmo serve {args.model} on {server.host}:{server.port} (pid {server.proc.pid}); "
          f"{args.clients} clients for {seconds:g} s")
    try:
        result = soak(server, Mix(expected), args.clients, seconds, args.max_requests,
                      args.check_every, args.sample_seconds)
    finally:
        exit_status = server.stop()
    after_warmup = next(rss for t, rss in result["rss_samples"] if t >= args.warmup_seconds)
    end = result["rss_samples"][-1][1]
    growth = end / after_warmup - 1
    correct = result["wrong_answers"] == 0 and result["status_5xx"] == 0
    result.update(model=args.model, clients=args.clients, threads=args.threads,
                  quick=args.quick, started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(
                      time.time() - result["seconds"])),
                  rss_after_warmup_mib=after_warmup / 2**20, rss_end_mib=end / 2**20,
                  rss_growth=growth, rss_growth_ok=growth < MAX_GROWTH, correct=correct,
                  server_exit_status=exit_status)
    for failure in result["failures"]:
        print(f"  wrong: {failure}")
    print(f"{result['requests']:,} requests in {result['seconds']:.0f} s "
          f"({result['requests'] / result['seconds']:.1f}/s); wrong answers "
          f"{result['wrong_answers']}, 5xx {result['status_5xx']}; statuses "
          f"{result['by_status']}")
    print(f"resident memory: {after_warmup / 2**20:.1f} MiB after {args.warmup_seconds:g} s, "
          f"{end / 2**20:.1f} MiB at the end ({100 * growth:+.2f}%, target < "
          f"{100 * MAX_GROWTH:.0f}%)")
    write_json(args.out or results_file("serve_soak.json", args.quick), result)
    judged = args.quick or growth < MAX_GROWTH
    raise SystemExit(0 if correct and judged and exit_status == 0 else 1)


if __name__ == "__main__":
    main()
