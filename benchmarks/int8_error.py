"""Where int8's error comes from: each product quantized alone, per layer, on real text.

For each MODEL, embeds N real sentences in fp32 and with products in int8, and reports per
layer the mean relative error against fp32 (mean |int8 - fp32| / mean |fp32|, as
`int8_quality.py`): with every product in int8 (the projections too), as `quantize="int8"`
quantizes (all but the projections), with every product in int8 and the projections' inputs
scaled per channel (scales from the largest values of the next `--calibration` sentences,
moved into the weights, as SmoothQuant does), and with one product (or the char-CNN's
highways) alone in int8, the rest fp32. The kernel is the one chosen here (8-bit activations
with VNNI); the first two rows are measured again with `fbgemm-no-vnni` (7-bit activations for
the LSTM's input and state products) where it runs.

Text: the first N sentences of WikiText-2 test (English models) or of the SIGHAN 2005 MSR gold
test set, spaces removed (a model that records the `chars` tokenizer, `default-zh`). A MODEL
named after a preset (`original`) is that architecture with random weights (seed 0), on fewer
sentences (`--preset-sentences`): it is slower, and random weights are only a rough guide.

    python benchmarks/int8_error.py [--models default default-zh original] [--sentences 200]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from datetime import date
from pathlib import Path

import numpy as np
import torch
from common import DATA, RESULTS, cpu_info, write_json
from int8_quality import layer_errors, wikitext_sentences
from torch import nn

from elmo.config import PRESETS, BiLMConfig
from elmo.embed import Embedder
from elmo.loading import load_model
from elmo.modules import quantize
from elmo.modules.bilm import BiLM
from elmo.modules.lstm_backends import INT8_PRODUCTS, WEIGHT_NAMES
from elmo.tokenize import get_tokenizer

NO_VNNI = "fbgemm-no-vnni"
PRODUCT_NAMES = {"input": "input", "state": "state", "proj": "projection"}


def msr_sentences(n: int) -> list[list[str]]:
    """The first `n` sentences of 5-60 characters of SIGHAN 2005's MSR gold test set, spaces
    removed, as characters (the `chars` tokenizer)."""
    tokenize = get_tokenizer("chars")
    sentences = []
    with (DATA / "zh-raw-text" / "sighan2005_msr_test_gold.utf8").open(encoding="utf-8") as f:
        for line in f:
            tokens = tokenize("".join(line.split()))
            if 5 <= len(tokens) <= 60:
                sentences.append(tokens)
                if len(sentences) == n:
                    break
    return sentences


def fresh_model(name: str) -> tuple[BiLM, str | None]:
    """A new fp32 copy of MODEL `name` (a preset: random weights, seed 0) and its tokenizer."""
    if name in PRESETS:
        torch.manual_seed(0)
        return BiLM(BiLMConfig.preset(name)).eval(), None
    loaded = load_model(name, progress=False)
    return loaded.bilm, loaded.tokenizer


class ChannelMax(nn.Module):
    """The fp32 product x @ W (+ add), called as a layer's int8 matrices are, recording the
    largest |x| of each input channel: (D, 1, K)."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = weight.detach()  # (D, K, N)
        self.largest = torch.zeros(weight.shape[0], 1, weight.shape[1])

    def forward(self, x: torch.Tensor, add: torch.Tensor | None = None,
                out: torch.Tensor | None = None, bits: int = 8) -> torch.Tensor:
        self.largest = torch.maximum(self.largest, x.abs().amax(dim=1, keepdim=True))
        if add is None:
            return torch.bmm(x, self.weight, out=out)
        return torch.baddbmm(add, x, self.weight, out=out)


class LinearChannelMax(nn.Module):
    """`linear`, recording the largest |x| of each input channel: (K,)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.linear, self.weight = linear, linear.weight  # the Embedder reads weight's device
        self.largest = torch.zeros(linear.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.largest = torch.maximum(self.largest, x.abs().reshape(-1, x.shape[-1]).amax(0))
        return self.linear(x)


class Smoothed(nn.Module):
    """x @ W computed as (x / s) @ (s W) in int8: per-channel activation scales s (D, 1, K),
    calibrated on text, moved into the weight's rows (SmoothQuant's, alpha 0.5)."""

    def __init__(self, weight: torch.Tensor, largest: torch.Tensor) -> None:
        super().__init__()
        weight = weight.detach()  # (D, K, N)
        w_largest = weight.abs().amax(dim=-1).unsqueeze(1)  # (D, 1, K)
        self.s = (largest.clamp_min(1e-5) / w_largest.clamp_min(1e-5)).sqrt()
        self.matrices = quantize.Int8Matrices(weight * self.s.transpose(1, 2))

    def forward(self, x: torch.Tensor, add: torch.Tensor | None = None,
                out: torch.Tensor | None = None, bits: int = 8) -> torch.Tensor:
        return self.matrices(x / self.s, add, out, bits)


class SmoothedLinear(nn.Module):
    """An `nn.Linear` as a `Smoothed` product (x (..., K) -> (..., N))."""

    def __init__(self, linear: nn.Linear, largest: torch.Tensor) -> None:
        super().__init__()
        self.product = Smoothed(linear.weight.t()[None], largest.view(1, 1, -1))
        self.bias = linear.bias.detach()
        self.weight = self.product.matrices.weight  # where the Embedder looks for the device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.product(x.reshape(1, -1, x.shape[-1]), self.bias)
        return y.reshape(*x.shape[:-1], y.shape[-1])


def smoothed_projections(calibration: list[list[str]]) -> Callable[[BiLM], None]:
    """Every product in int8, the projections with activation scales per channel from the
    largest values of `calibration`'s sentences."""
    def choose(bilm: BiLM) -> None:
        encoder, layers = bilm.token_encoder, bilm.lstm.layers
        recorders = [ChannelMax(layer.proj_weight) for layer in layers]
        for layer, recorder in zip(layers, recorders, strict=True):
            layer.int8 = nn.ModuleDict({"proj": recorder})  # the rest fp32
        cnn = encoder.projection = LinearChannelMax(encoder.projection)
        Embedder(bilm, device="cpu").embed_sentences(calibration)
        with torch.no_grad():
            for layer, recorder in zip(layers, recorders, strict=True):
                layer.int8 = None
                layer.quantize_int8_(INT8_PRODUCTS)
                layer.int8["proj"] = Smoothed(layer.proj_weight, recorder.largest)
            highways(bilm)
            encoder.projection = SmoothedLinear(cnn.linear, cnn.largest)
    return choose


def every_product(bilm: BiLM) -> None:
    for layer in bilm.lstm.layers:
        layer.quantize_int8_(WEIGHT_NAMES)
    quantize.quantize_linears_(bilm.token_encoder)


def highways(bilm: BiLM) -> None:
    for highway in bilm.token_encoder.highways:
        quantize.quantize_linears_(highway)


def cnn_projection(bilm: BiLM) -> None:
    bilm.token_encoder.projection = quantize.Int8Linear(bilm.token_encoder.projection)


def lstm_product(layer: int, name: str) -> Callable[[BiLM], None]:
    return lambda bilm: bilm.lstm.layers[layer].quantize_int8_((name,))


def selections(n_layers: int, calibration: list[list[str]]
               ) -> dict[str, Callable[[BiLM], None]]:
    """What is put in int8, by its row's name: the whole model three ways, then each product."""
    rows = {"every product (the projections too)": every_product,
            "`quantize=\"int8\"` (all but the projections)": lambda bilm: bilm.quantize_("int8"),
            "every product, the projections with calibrated channel scales":
                smoothed_projections(calibration),
            "char-CNN highways alone": highways, "char-CNN projection alone": cnn_projection}
    for layer in range(n_layers):
        for name in WEIGHT_NAMES:
            rows[f"LSTM {layer + 1} {PRODUCT_NAMES[name]} alone"] = lstm_product(layer, name)
    return rows


def errors(model: str, choose: Callable[[BiLM], None], sentences: list[list[str]],
           fp32: list[np.ndarray]) -> list[float]:
    """Per layer, the mean relative error of `model` with `choose`'s products in int8."""
    bilm = fresh_model(model)[0]
    choose(bilm)
    got = Embedder(bilm, device="cpu").embed_sentences(sentences)
    return [row["mean_relative_error"] for row in layer_errors(fp32, got)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["default", "default-zh", "original"])
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--preset-sentences", type=int, default=50)
    parser.add_argument("--calibration", type=int, default=100,
                        help="the sentences after those measured that calibrate channel scales")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "speed" / "int8-products.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kernel = quantize.choose_int8_kernel().name
    no_vnni = kernel != NO_VNNI and quantize.INT8_KERNELS[NO_VNNI].runs_here()
    cpu = cpu_info()
    table: dict[str, dict[str, list[float]]] = {}
    for model in args.models:
        bilm, tokenizer = fresh_model(model)
        chars = tokenizer == "chars"
        n = args.preset_sentences if model in PRESETS else args.sentences
        text = (msr_sentences if chars else wikitext_sentences)(n + args.calibration)
        sentences, calibration = text[:n], text[n:]
        fp32 = Embedder(bilm, device="cpu").embed_sentences(sentences)
        rows = {}
        for label, choose in selections(bilm.config.n_layers, calibration).items():
            rows[label] = errors(model, choose, sentences, fp32)
            print(f"{model:12}{label:64}" + "".join(f"{100 * e:7.2f}" for e in rows[label]),
                  flush=True)
        if no_vnni:
            os.environ[quantize.KERNEL_ENV] = NO_VNNI
            for label, choose in list(selections(bilm.config.n_layers, calibration).items())[:2]:
                rows[f"{label}, without VNNI"] = errors(model, choose, sentences, fp32)
            del os.environ[quantize.KERNEL_ENV]
        table[model] = rows
    write_json(args.out, {
        "title": f"int8 against fp32: mean relative error per layer (0 / 1 / 2, %) with the "
                 f"products named in int8, the rest fp32; {args.sentences} sentences (presets: "
                 f"random weights, {args.preset_sentences})",
        "command": "python benchmarks/int8_error.py",
        "host": f"{os.cpu_count()}-core {cpu['cpu']}, {', '.join(cpu['isa'])}; kernel {kernel}"
                + (f" (rows without VNNI: {NO_VNNI}, 7-bit input and state products)"
                   if no_vnni else ""),
        "versions": {"torch": torch.__version__},
        "measured": date.today().isoformat(),
        "columns": ["in int8", *(f"{m} (random weights)" if m in PRESETS else m
                                 for m in args.models)],
        "note": f"{args.sentences} sentences of WikiText-2 test ({args.preset_sentences} for "
                "random weights); a model of Chinese characters: of the SIGHAN 2005 MSR test set.",
        "rows": [[label, *(" / ".join(f"{100 * e:.2f}" for e in table[m][label])
                           for m in args.models)] for label in table[args.models[0]]],
    })


if __name__ == "__main__":
    main()
