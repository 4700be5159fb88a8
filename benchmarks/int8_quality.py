"""How far int8 vectors are from fp32, per layer, on real text.

Embeds the first N sentences (5 to 60 tokens, cut at " . ") of WikiText-2's test split with
MODEL in fp32 and with `quantize="int8"`, and reports per layer: the mean relative error
(mean |int8 - fp32| / mean |fp32| over every coordinate of every token), the mean per-token
relative L2 error (||int8 - fp32|| / ||fp32||) and the mean cosine similarity.

    python benchmarks/int8_quality.py [--model default] [--sentences 1000] [--out FILE]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from common import DATA, RESULTS, write_json

from elmo.embed import Embedder


def wikitext_sentences(n: int) -> list[list[str]]:
    """The first `n` sentences of 5-60 tokens of WikiText-2 test, headings skipped."""
    sentences = []
    with (DATA / "wikitext-2" / "test.txt").open(encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.strip().startswith("="):
                continue
            for part in line.strip().split(" . "):
                tokens = [*part.split(), "."]
                if 5 <= len(tokens) <= 60:
                    sentences.append(tokens)
                    if len(sentences) == n:
                        return sentences
    return sentences


def layer_errors(fp32: list[np.ndarray], int8: list[np.ndarray]) -> list[dict[str, float]]:
    """Per layer of (L+1, n, 2P) arrays: mean relative error, per-token L2 error, cosine."""
    a = np.concatenate(fp32, axis=1).astype(np.float64)  # (L+1, tokens, 2P)
    b = np.concatenate(int8, axis=1).astype(np.float64)
    norm_a, norm_b = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    return [{"layer": k,
             "mean_relative_error": float(np.abs(b[k] - a[k]).mean() / np.abs(a[k]).mean()),
             "token_l2_error": float((np.linalg.norm(b[k] - a[k], axis=-1) / norm_a[k]).mean()),
             "cosine": float(((a[k] * b[k]).sum(-1) / (norm_a[k] * norm_b[k])).mean())}
            for k in range(a.shape[0])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "int8_quality.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sentences = wikitext_sentences(args.sentences)
    results = {}
    for mode in ("fp32", "int8"):
        embedder = Embedder.from_pretrained(args.model, quantize=None if mode == "fp32" else mode)
        start = time.perf_counter()
        results[mode] = embedder.embed_sentences(sentences)
        print(f"{mode}: {time.perf_counter() - start:.1f} s")
    rows = layer_errors(results["fp32"], results["int8"])
    tokens = sum(len(s) for s in sentences)
    print(f"{args.model}: {len(sentences)} WikiText-2 test sentences, {tokens} tokens")
    print(f"{'layer':>5}{'mean rel. error':>17}{'token L2 error':>16}{'cosine':>9}")
    for r in rows:
        print(f"{r['layer']:5}{r['mean_relative_error']:17.4f}{r['token_l2_error']:16.4f}"
              f"{r['cosine']:9.5f}")
    write_json(args.out, {"model": args.model, "sentences": len(sentences), "tokens": tokens,
                          "layers": rows})


if __name__ == "__main__":
    main()
