"""Embedding speed and memory against this machine's matmul-bound limit.

For each preset (random weights written in the official format, no download; `efml`: the
released ELMoForManyLangs architecture, cnn_50_100_512_4096, in our format) and each workload
in ../shared/bench, a child process loads the model and runs `Embedder.embed_file` with the CLI's
defaults, in fp32 and with int8 quantization (`--quantize int8`); we report tokens/s, achieved
GFLOP/s, the fraction of the fp32 matmul-bound limit, int8's speed-up over fp32, the child's
peak RSS, and the median latency of one 10-token sentence. Prints a table, writes JSON.
With `--profile`, each child also times the parts of the run (the shares table below it).

The limit is the square fp32 matmul rate of `torch.mm` (MKL) divided by a token's FLOPs with no
word cache; "frac oneDNN" is the same against the rate of oneDNN's prepacked product, which
elmo's fp32 inference uses and which on some CPUs is twice MKL's.

    python benchmarks/embed_speed.py [--presets small medium original] [--modes fp32 int8]
        [--workloads sentences_256.txt] [--threads N] [--batch-size N] [--max-tokens N]
        [--profile] [--out results.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from common import REPO, SHARED, forward_flops_per_token, matmul_gflops

from elmo.config import BiLMConfig
from elmo.modules.quantize import QUANTIZE_MODES

WORKLOADS = ("wikitext2_test_1000.txt", "sentences_256.txt")


CHILD = r"""
import json, statistics, sys, time
import torch
from elmo.embed import Embedder
from elmo.loading import load_model
model_dir, text, out, mode, threads, profile, batching = sys.argv[1:8]
if int(threads):
    torch.set_num_threads(int(threads))
embedder = Embedder(load_model(model_dir).bilm, quantize=None if mode == "fp32" else mode,
                    **json.loads(batching))
spent = PROFILE_PARTS(embedder) if int(profile) else {}
start = time.perf_counter()
embedder.embed_file(text, out, progress=False, overwrite=True)
seconds = time.perf_counter() - start
profiled = {part: t / seconds for part, t in spent.items()}
spent.clear()
sentence = "the quick brown fox jumps over the lazy dog .".split()
for _ in range(3):
    embedder.embed_sentence(sentence)
latencies = []
for _ in range(30):
    t = time.perf_counter()
    embedder.embed_sentence(sentence)
    latencies.append(time.perf_counter() - t)
print(json.dumps({"seconds": seconds, "latency_ms": 1000 * statistics.median(latencies),
                  "shares": profiled}))
"""

# Wraps the parts of an embedding run (in the child) so that each adds its seconds to `spent`:
# the model's call (`Embedder._compute`), the char-CNN, the LSTM layers, and inside them each
# named product (input, state, proj). What the LSTM spends outside its products is the cell's
# elementwise work (gate activations, clipping, state updates, buffers); what the run spends
# outside the model is reading, tokenizing, batching and writing HDF5.
PROFILE_PARTS = r"""
def PROFILE_PARTS(embedder):
    import collections, functools
    from elmo.embed import Embedder
    from elmo.modules import char_cnn, lstm, lstm_backends
    spent = collections.defaultdict(float)

    def timed(cls, method, part):
        inner = getattr(cls, method)

        @functools.wraps(inner)
        def wrapper(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(self, *args, **kwargs)
            finally:
                spent[part(args) if callable(part) else part] += time.perf_counter() - start
        setattr(cls, method, wrapper)

    timed(Embedder, "_compute", "model")
    timed(char_cnn.CharCNNEncoder, "forward", "char-CNN")
    timed(lstm.ProjectedLSTM, "forward", "LSTM")
    for backend in {*lstm_backends.BACKENDS.values()}:
        if "product" in vars(backend):
            timed(backend, "product", lambda args: f"{args[0]} products")
    return spent
"""


def efml_config(bench: Path) -> BiLMConfig:
    """The released EfML architecture over the workloads' characters and words."""
    from elmo.loading.formats.efml import released_config

    text = " ".join((bench / w).read_text(encoding="utf-8") for w in WORKLOADS)
    specials = ["<oov>", "<bos>", "<eos>", "<pad>"]
    chars = sorted(set(text) - set(" \n")) + specials + ["<bow>", "<eow>"]
    return released_config(chars, specials + sorted(set(text.split())))


def run_child(model_dir: Path, text: Path, out: Path, mode: str = "fp32", threads: int = 0,
              profile: bool = False, batching: dict | None = None) -> dict:
    """One child's run (see CHILD); `batching`: the Embedder's batch_size and max_tokens, if
    not its defaults."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PROFILE_PARTS + CHILD, str(model_dir), str(text), str(out), mode,
         str(threads), str(int(profile)), json.dumps(batching or {})],
        stdout=subprocess.PIPE,
    )
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"embedding child failed for {model_dir.name} on {text.name}")
    result = json.loads(stdout)
    result["peak_rss_mb"] = usage.ru_maxrss / 1024
    return result


# The parts of a run --profile reports: the char-CNN; the LSTM's input, state and projection
# products; its cell's elementwise work; the model's other work (char ids, word cache, the
# layers' unpadding); what runs outside the model (reading, tokenizing, batching, writing).
PARTS = ("char-CNN", "input", "state", "proj", "cell", "other model", "outside")


def shares(timed: dict[str, float]) -> dict[str, float]:
    """The child's timed fractions of its run (nested) -> the PARTS' fractions (disjoint);
    empty without --profile."""
    if not timed:
        return {}
    parts = {"char-CNN": timed.get("char-CNN", 0.0)}
    parts |= {name: timed.get(f"{name} products", 0.0) for name in ("input", "state", "proj")}
    parts["cell"] = timed.get("LSTM", 0.0) - sum(parts[name] for name in ("input", "state", "proj"))
    parts["other model"] = timed["model"] - parts["char-CNN"] - timed.get("LSTM", 0.0)
    parts["outside"] = 1.0 - timed["model"]
    return parts


def print_shares(rows: list[dict]) -> None:
    print("share of each run's time, % (input, state, proj: the LSTM's products; cell: the rest "
          "of the LSTM; outside: reading, tokenizing, batching, writing)")
    print(f"{'preset':9}{'workload':26}{'mode':5}" + "".join(f"{p:>12}" for p in PARTS))
    for r in rows:
        print(f"{r['preset']:9}{r['workload']:26}{r['mode']:5}"
              + "".join(f"{100 * r['shares'][p]:12.1f}" for p in PARTS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["small", "medium", "original"],
                        help="presets, or efml (the released ELMoForManyLangs architecture)")
    parser.add_argument("--modes", nargs="+", default=["fp32", "int8"],
                        choices=["fp32", *QUANTIZE_MODES], help="fp32 and/or quantized")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS,
                        help="files of ../shared/bench to embed (default: both)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads in the embedding child (default: torch's own)")
    parser.add_argument("--batch-size", type=int, help="sentences per batch (default: elmo's)")
    parser.add_argument("--max-tokens", type=int, help="padded tokens per batch (default: elmo's)")
    parser.add_argument("--profile", action="store_true",
                        help="also time the run's parts (char-CNN, LSTM products, cell, rest)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/embed_speed.json")
    args = parser.parse_args()
    bench = SHARED / "bench"
    if not bench.is_dir():
        sys.exit(f"benchmark workloads not found at {bench} (set ELMO_SHARED)")
    from elmo.loading.formats import save_bilm_tf, save_pretrained
    from elmo.modules.bilm import BiLM

    if args.threads:
        torch.set_num_threads(args.threads)  # the limit at the children's thread count
    gflops, onednn_gflops = matmul_gflops(), matmul_gflops(kernel="onednn")
    print(f"fp32 matmul: {gflops:.0f} GFLOP/s (torch.mm), {onednn_gflops:.0f} (oneDNN), "
          f"torch threads: {torch.get_num_threads()}")
    batching = {key: value for key, value in (("batch_size", args.batch_size),
                                              ("max_tokens", args.max_tokens)) if value}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets:
            config = efml_config(bench) if preset == "efml" else BiLMConfig.preset(preset)
            torch.manual_seed(0)
            model_dir = Path(tmp) / preset
            if preset == "efml":
                save_pretrained(BiLM(config), model_dir)
            else:
                save_bilm_tf(BiLM(config), model_dir)
            flops = forward_flops_per_token(config)
            weights_mb = sum(f.stat().st_size for f in model_dir.iterdir()) / 2**20
            for workload, mode in itertools.product(args.workloads, args.modes):
                text = bench / workload
                tokens = sum(len(line.split()) for line in text.open(encoding="utf-8"))
                result = run_child(model_dir, text, Path(tmp) / "out.hdf5", mode, args.threads,
                                   args.profile, batching)
                tps = tokens / result["seconds"]
                fp32 = next((r["tokens_per_s"] for r in rows if r["mode"] == "fp32"
                             and (r["preset"], r["workload"]) == (preset, workload)), None)
                rows.append({
                    "preset": preset, "workload": workload, "mode": mode, "tokens": tokens,
                    "speedup_over_fp32": tps / fp32 if fp32 else None,
                    "tokens_per_s": tps, "gflops_achieved": tps * flops / 1e9,
                    "fraction_of_limit": tps * flops / (gflops * 1e9),
                    "fraction_of_onednn_limit": tps * flops / (onednn_gflops * 1e9),
                    "limit_tokens_per_s": gflops * 1e9 / flops,
                    "peak_rss_mb": result["peak_rss_mb"], "weights_mb": weights_mb,
                    "latency_10_tokens_ms": result["latency_ms"],
                    "mflop_per_token": flops / 1e6, "shares": shares(result["shares"]),
                })
    header = (f"{'preset':9}{'workload':26}{'mode':5}{'tok/s':>8}{'limit':>8}{'frac':>7}"
              f"{'oneDNN':>7}"
              f"{'x fp32':>7}{'GFLOP/s':>9}{'RSS MB':>8}{'wts MB':>8}{'10-tok ms':>10}")
    print(header)
    for r in rows:
        speedup = f"{r['speedup_over_fp32']:7.2f}" if r["speedup_over_fp32"] else f"{'':7}"
        print(f"{r['preset']:9}{r['workload']:26}{r['mode']:5}{r['tokens_per_s']:8.0f}"
              f"{r['limit_tokens_per_s']:8.0f}{r['fraction_of_limit']:7.2f}"
              f"{r['fraction_of_onednn_limit']:7.2f}{speedup}"
              f"{r['gflops_achieved']:9.1f}{r['peak_rss_mb']:8.0f}{r['weights_mb']:8.0f}"
              f"{r['latency_10_tokens_ms']:10.1f}")
    if args.profile:
        print_shares(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"matmul_gflops": gflops, "onednn_matmul_gflops": onednn_gflops,
                                    "threads": args.threads or None, "batching": batching,
                                    "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
