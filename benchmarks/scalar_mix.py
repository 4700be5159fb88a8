"""Does the learned scalar mix learn? UD EWT POS tagging on cached layers of a biLM.

The layers of the shipped model differ in scale (mean token norm ~31 / 6 / 12), and with one
Adam learning rate of 1e-3 for everything the s_j barely move. This compares, on the same
cached layers and head, the fixed mixes (each single layer, the average) with learned mixes:
one learning rate for all; a separate larger learning rate for s and gamma
(`elmo.modules.scalar_mix.parameter_groups`); layer norm (bilm-tf's); both.

    python benchmarks/scalar_mix.py [--train 500 --dev 300 --steps 1000 --seeds 3 --head linear]

Prints a table (dev accuracy, the learned weights, how far s moved) and writes
benchmarks/results/scalar_mix.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from common import DATA, add_run_options, results_file, write_json
from torch import nn

from elmo.modules.scalar_mix import ScalarMix, parameter_groups
from elmo.tasks.features import cached_layers
from elmo.tasks.readers import read_conllu

EWT = DATA / "ud-english-ewt"


class Head(nn.Module):
    """A mix of the cached layers and a linear or one-layer BiLSTM tagger on top."""

    def __init__(self, mix: ScalarMix, dim: int, n_tags: int, kind: str,
                 scales: torch.Tensor | None = None) -> None:
        super().__init__()
        self.mix = mix
        self.scales = scales  # (L+1,): each layer times a constant, or None
        self.lstm = nn.LSTM(dim, 64, batch_first=True, bidirectional=True) \
            if kind == "bilstm" else None
        self.out = nn.Linear(128 if self.lstm is not None else dim, n_tags)

    def forward(self, layers: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.scales is not None:
            layers = layers * self.scales[:, None, None, None]
        x = self.mix(layers, mask)  # (B, T, D)
        if self.lstm is not None:
            x = self.lstm(x)[0]
        return self.out(x)  # (B, T, n_tags)


# The fixed mixes still learn gamma: at the mix learning rate, as the learned ones.
VARIANTS: dict[str, dict[str, Any]] = {
    "layer 0, mix lr 0.1": {"mode": "layer:0", "mix_lr": 0.1},
    "layer 1, mix lr 0.1": {"mode": "layer:1", "mix_lr": 0.1},
    "layer 2, mix lr 0.1": {"mode": "layer:2", "mix_lr": 0.1},
    "average, lr 1e-3": {"mode": "average"},
    "average, mix lr 0.1": {"mode": "average", "mix_lr": 0.1},
    "learned, lr 1e-3": {"mix_lr": None},
    "learned, mix lr 0.01": {"mix_lr": 0.01},
    "learned, mix lr 0.1": {"mix_lr": 0.1},
    "learned, layer norm": {"mix_lr": None, "layer_norm": True},
    "learned, scaled layers, mix lr 0.01": {"mix_lr": 0.01, "scaled": True},
    "learned, scaled layers, mix lr 0.1": {"mix_lr": 0.1, "scaled": True},
    "learned, layer norm, mix lr 0.1": {"mix_lr": 0.1, "layer_norm": True},
}


def batches(store, tags, indices, batch_size):
    out = []
    for start in range(0, len(indices), batch_size):
        chunk = indices[start : start + batch_size]
        layers, mask = store.batch(chunk)
        gold = torch.full(mask.shape, -100, dtype=torch.long)
        for b, i in enumerate(chunk):
            gold[b, : len(tags[i])] = torch.tensor(tags[i])
        out.append((layers, mask, gold))
    return out


def run(variant: dict[str, Any], data, n_tags: int, dim: int, args, seed: int) -> dict:
    torch.manual_seed(seed)
    train, dev = data
    mix = ScalarMix(3, do_layer_norm=variant.get("layer_norm", False),
                    mode=variant.get("mode", "learned"))
    scales = 1 / torch.tensor(args.layer_rms) if variant.get("scaled") else None
    model = Head(mix, dim, n_tags, args.head, scales)
    optimizer = torch.optim.Adam(parameter_groups(model, args.lr, variant.get("mix_lr")))
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    start = time.perf_counter()
    while step < args.steps:
        for k in torch.randperm(len(train)).tolist():
            layers, mask, gold = train[k]
            loss = loss_fn(model(layers, mask).flatten(0, 1), gold.flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step == args.steps:
                break
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for layers, mask, gold in dev:
            pred = model(layers, mask).argmax(-1)
            correct += int(((pred == gold) & mask).sum())
            total += int(mask.sum())
    return {"dev_accuracy": 100 * correct / total, "weights": mix.weights(),
            "s": mix.scalar_parameters_tensor().detach().tolist(), "gamma": mix.gamma.item(),
            "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="biLM (default: the shipped one)")
    parser.add_argument("--train", type=int, default=500, help="training sentences (500)")
    parser.add_argument("--dev", type=int, default=300, help="dev sentences (300)")
    parser.add_argument("--steps", type=int, default=1000, help="Adam steps per run (1000)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per step (32)")
    parser.add_argument("--lr", type=float, default=1e-3, help="the head's Adam lr (1e-3)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per variant (3)")
    parser.add_argument("--head", choices=("linear", "bilstm"), default="linear",
                        help="tagger on top of the mix (linear)")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), metavar="NAME",
                        help="run only these variants (default: all)")
    parser.add_argument("--cache-dir", type=Path, help="feature cache (default: the user's)")
    add_run_options(parser, "smoke run: 100 sentences, 100 steps, 1 seed")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny steps: one thread is faster on a shared machine
    if args.quick:
        args.train, args.dev, args.steps, args.seeds = 100, 100, 100, 1

    train = read_conllu(EWT / "en_ewt-ud-train.conllu.gz")[: args.train]
    dev = read_conllu(EWT / "en_ewt-ud-dev.conllu")[: args.dev]
    tagset = sorted({t for s in train + dev for t in s.tags})
    tag_id = {t: i for i, t in enumerate(tagset)}
    sentences = [s.tokens for s in train + dev]
    tags = [[tag_id[t] for t in s.tags] for s in train + dev]
    store = cached_layers(args.model, sentences, args.cache_dir)
    train_layers = [store[i] for i in range(len(train))]  # (L+1, n_i, D) each
    norms = [statistics.fmean(float(np.linalg.norm(a[j], axis=-1).mean()) for a in train_layers)
             for j in range(store.num_layers)]
    # "scaled layers": each layer divided by its root mean square element over the training
    # set: fixed constants, so (unlike layer norm) a sentence does not depend on its batch
    args.layer_rms = [float(sum((a[j] ** 2).sum() for a in train_layers)
                            / sum(a[j].size for a in train_layers)) ** 0.5
                      for j in range(store.num_layers)]
    data = (batches(store, tags, list(range(len(train))), args.batch_size),
            batches(store, tags, list(range(len(train), len(sentences))), args.batch_size))

    results: dict[str, Any] = {}
    print(f"{'variant':34s} {'dev acc':>14s}  {'weights (seed 0)':24s} {'max |s|':>7s} "
          f"{'gamma':>6s}")
    for name, variant in VARIANTS.items():
        if args.variants and name not in args.variants:
            continue
        runs = [run(variant, data, len(tagset), store.dim, args, seed)
                for seed in range(args.seeds)]
        accs = [r["dev_accuracy"] for r in runs]
        std = statistics.stdev(accs) if len(accs) > 1 else 0.0
        results[name] = {"variant": variant, "runs": runs, "mean": statistics.fmean(accs),
                         "std": std}
        w = " ".join(f"{x:.2f}" for x in runs[0]["weights"])
        print(f"{name:34s} {statistics.fmean(accs):7.2f} ± {std:4.2f}  {w:24s} "
              f"{max(abs(x) for x in runs[0]['s']):7.2f} {runs[0]['gamma']:6.2f}", flush=True)
    write_json(args.out or results_file("scalar_mix.json", args.quick), {
        "model": args.model, "head": args.head, "train_sentences": len(train),
        "dev_sentences": len(dev), "steps": args.steps, "batch_size": args.batch_size,
        "lr": args.lr, "mean_token_norm_per_layer": norms, "layer_rms": args.layer_rms,
        "results": results})


if __name__ == "__main__":
    main()
