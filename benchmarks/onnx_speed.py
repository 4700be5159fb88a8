"""ONNX Runtime against our Embedder: tokens/s on the same sentences, batches and threads.

For each model (`default`, the shipped one, or a preset with random weights) and workload of
../shared/bench, the biLM is exported with `elmo.onnx.export_onnx` and both paths embed the
same sentences, fp32, with the same number of threads: ours through `Embedder.embed_sentences`
(the `elmo embed` path, with its token-vector cache), ONNX Runtime's (CPU) through one
`InferenceSession.run` per batch, batches formed by the Embedder's rule (longest first, at most
`batch_size` sentences and `max_tokens` padded positions). Each is timed after one warm-up run,
best of `--repeats`; the largest difference of the layers is reported too.

`--int8` also quantizes the exported graph with ONNX Runtime's dynamic int8 quantization
(`quantize_dynamic`: every MatMul and Gemm, inside the LSTM loop too, weights per output
channel) and reports its speed and its mean relative error per layer against fp32, the measure
of benchmarks/int8_quality.py.

    python benchmarks/onnx_speed.py [--models default original] [--threads 2] [--sentences N]
        [--int8] [--out FILE]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch
from common import RESULTS, SHARED, machine_info, random_model, write_json

from elmo.embed import Embedder
from elmo.extras import import_extra
from elmo.loading import load_model
from elmo.modules.bilm import BiLM
from elmo.onnx import export_onnx, onnx_inputs

ort = import_extra("onnxruntime", "benchmarks/onnx_speed.py")
WORKLOADS = ("wikitext2_test_1000.txt", "sentences_256.txt")


def length_batches(lengths: list[int], batch_size: int, max_tokens: int) -> list[list[int]]:
    """The Embedder's batches: indices longest first, <= batch_size sentences and
    <= max_tokens padded positions (boundaries included) each."""
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if batches and len(batches[-1]) < batch_size \
                and (len(batches[-1]) + 1) * (lengths[batches[-1][0]] + 2) <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def onnx_embed(session, bilm: BiLM, sentences: list[list[str]], batches: list[list[int]]
               ) -> list[np.ndarray]:
    """Per sentence (L+1, n, 2P), in input order, one session call per batch."""
    results: list[np.ndarray] = [np.empty(0)] * len(sentences)
    for batch in batches:
        part = [sentences[i] for i in batch]
        layers = session.run(None, onnx_inputs(bilm, part))[0]  # (L+1, B, T, 2P)
        for b, i in enumerate(batch):
            results[i] = layers[:, b, : len(part[b])]
    return results


def best_time(run: Callable[[], list[np.ndarray]], repeats: int) -> tuple[float, list]:
    """The shortest of `repeats` timed runs after a warm-up, and the warm-up's result."""
    result = run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best, result


def relative_errors(fp32: list[np.ndarray], other: list[np.ndarray]) -> list[float]:
    """Per layer: mean |other - fp32| / mean |fp32| over every token (int8_quality.py)."""
    a, b = np.concatenate(fp32, axis=1), np.concatenate(other, axis=1)
    return [float(np.abs(b[k] - a[k]).mean() / np.abs(a[k]).mean()) for k in range(len(a))]


def session(path: Path, threads: int):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def quantize_int8(source: Path, target: Path) -> Path:
    quantization = import_extra("onnxruntime.quantization", "--int8")
    quantization.quantize_dynamic(source, target, per_channel=True,
                                  op_types_to_quantize=["MatMul", "Gemm"],
                                  extra_options={"EnableSubgraph": True})
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["default", "original"],
                        help="default (the shipped model) or presets with random weights")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=None,
                        help="the first N sentences of each workload (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--int8", action="store_true",
                        help="also ONNX Runtime's dynamic int8 quantization: speed and error")
    parser.add_argument("--out", type=Path, default=RESULTS / "onnx_speed.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            bilm = load_model(name).bilm if name == "default" else random_model(name)
            fp32_path = export_onnx(bilm, Path(tmp) / f"{name}.onnx")
            paths = {"onnx fp32": fp32_path}
            if args.int8:
                paths["onnx int8"] = quantize_int8(fp32_path, Path(tmp) / f"{name}.int8.onnx")
            sessions = {mode: session(path, args.threads) for mode, path in paths.items()}
            embedder = Embedder(bilm, device="cpu")
            for workload in WORKLOADS:
                lines = (SHARED / "bench" / workload).read_text(encoding="utf-8").splitlines()
                sentences = [line.split() for line in lines[: args.sentences]]
                tokens = sum(map(len, sentences))
                batches = length_batches([len(s) for s in sentences], embedder.batch_size,
                                         embedder.max_tokens)
                seconds, ours = best_time(partial(embedder.embed_sentences, sentences),
                                          args.repeats)
                rows.append({"model": name, "workload": workload, "path": "ours fp32",
                             "tokens": tokens, "tokens_per_s": tokens / seconds})
                for mode, sess in sessions.items():
                    seconds, got = best_time(partial(onnx_embed, sess, bilm, sentences,
                                                     batches), args.repeats)
                    errors = relative_errors(ours, got)
                    rows.append({"model": name, "workload": workload, "path": mode,
                                 "tokens": tokens, "tokens_per_s": tokens / seconds,
                                 "max_abs_diff": max(float(np.abs(a - b).max())
                                                     for a, b in zip(ours, got, strict=True)),
                                 "mean_relative_error_per_layer": errors})
    print(f"{'model':10}{'workload':26}{'path':11}{'tok/s':>8}{'x ours':>8}{'max diff':>10}"
          "  mean rel. error per layer")
    for r in rows:
        ours = next(o["tokens_per_s"] for o in rows if o["path"] == "ours fp32"
                    and (o["model"], o["workload"]) == (r["model"], r["workload"]))
        diff = f"{r['max_abs_diff']:10.1e}" if "max_abs_diff" in r else f"{'':10}"
        errors = " ".join(f"{e:.2%}" for e in r.get("mean_relative_error_per_layer", []))
        print(f"{r['model']:10}{r['workload']:26}{r['path']:11}{r['tokens_per_s']:8.0f}"
              f"{r['tokens_per_s'] / ours:8.2f}{diff}  {errors}")
    write_json(args.out, {"machine": machine_info(), "threads": args.threads,
                          "onnxruntime": ort.__version__, "sentences": args.sentences,
                          "rows": rows})


if __name__ == "__main__":
    main()
