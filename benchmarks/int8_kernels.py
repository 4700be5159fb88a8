"""The fp32 and int8 kernel candidates of torch 2.13 on the CPU, timed on the LSTM's products.

Shapes (rows M x inner K x columns N, one direction), of `original`: the LSTM state and input
products (M = 16 and 64 sentences per step, 512 x 16384), the projection (64 x 4096 x 512) and
a highway layer (256 distinct tokens x 2048 x 4096); of `small`: its input and state products
(128 and 64 x 128 x 4096) and projection (64 x 1024 x 128). Each candidate gets fp32 input
and must return fp32 output (activation quantization included):

- fp32: `torch.mm` (MKL), the yardstick;
- onednn fp32: elmo's fp32 inference path (`elmo.modules.onednn`): oneDNN's inner product
  with the weight reordered once;
- every int8 kernel of `elmo.modules.quantize.INT8_KERNELS` that sums exactly here, through
  `int8_matmul` (per-row activation scales, per-column int8 weights), in 8 bits and, for the
  kernels used without VNNI ("...-no-vnni"), in 7 bits: "int8 NAME/8" and "int8 NAME/7"
  (int_mm only on a CPU with VNNI: elsewhere its generic kernel takes ~100x fp32's time);
- fbgemm per tensor: `torch.ops.quantized.linear_dynamic` with `reduce_range` (one activation
  scale per tensor, which would tie a sentence's vectors to its batch; for comparison);
- int8pack: `torch._weight_int8pack_mm` (weight-only int8, fp32 activations);
- torchao: `Int8DynamicActivationInt8WeightConfig` applied to an `nn.Linear`, eager (only if
  torchao is importable).

Before timing, each int8 kernel's result is checked against the exact integer product of the
same quantized operands (float64): "exact" lists the largest relative difference, which is
fp32 rounding (~1e-7) unless a kernel's sums saturate.

    python benchmarks/int8_kernels.py [--threads 1 2] [--out results.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from common import RESULTS

from elmo.modules import onednn
from elmo.modules.quantize import INT8_KERNELS, int8_matmul, quantize_columns

SHAPES = {"state M=16": (16, 512, 16384), "state M=64": (64, 512, 16384),
          "projection": (64, 4096, 512), "highway": (256, 2048, 4096),
          "small input": (128, 128, 4096), "small state": (64, 128, 4096),
          "small proj": (64, 1024, 128)}


def seconds(fn: Callable[[], object], budget: float = 0.5) -> float:
    """Best time of one call over repeats that take about `budget` seconds in all."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-6)
    best = float("inf")
    for _ in range(max(3, int(budget / once))):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def int8_candidates(x: torch.Tensor, w: torch.Tensor
                    ) -> tuple[dict[str, Callable[[], object]], dict[str, float]]:
    """name -> a call of elmo's int8 product with each kernel (and bits) that runs here, and
    name -> its largest relative difference from the exact product of its integers."""
    w_int8, w_scale = quantize_columns(w)
    found, exact = {}, {}
    # Without VNNI, int_mm's generic kernel takes seconds per product (~100x fp32): left out.
    vnni = torch.cpu._is_vnni_supported()
    for kernel in INT8_KERNELS.values():
        if not kernel.runs_here() or (kernel.name == "int_mm" and not vnni):
            continue
        operands = [kernel.pack(w_int8, w_scale)]
        for bits in (8, 7) if kernel.saturating else (8,):
            name = f"int8 {kernel.name}/{bits}"
            found[name] = functools.partial(int8_matmul, x, kernel, operands, bits=bits)
            levels = 63 if bits == 7 else 127
            row_scale = x.abs().amax(1, keepdim=True).double() / levels
            integers = torch.round(x.double() / row_scale) @ w_int8.double()
            expected = integers * w_scale.double() * row_scale
            exact[name] = ((found[name]().double() - expected).abs().max()
                           / expected.abs().max()).item()
    return found, exact


def candidates(m: int, k: int, n: int
               ) -> tuple[dict[str, Callable[[], object]], dict[str, float]]:
    """name -> a call computing x (m, k) @ w (k, n) in fp32 out; the int8 ones' exactness."""
    torch.manual_seed(0)
    x, w = torch.randn(m, k), torch.randn(k, n) / k**0.5
    owner = torch.nn.Module()
    w_t = w.t().contiguous()
    found: dict[str, Callable[[], object]] = {
        "fp32": lambda: torch.mm(x, w),
        "onednn fp32": lambda: onednn.packed_linear(x, owner, "w", w_t),
    }
    int8, exact = int8_candidates(x, w)
    found |= int8
    w_int8, w_scale = quantize_columns(w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.qint8 tensors are deprecated in 2.13
        qw = torch.quantize_per_channel(w_t, w_scale.flatten().double(),
                                        torch.zeros(n, dtype=torch.long), 0, torch.qint8)
        packed = torch.ops.quantized.linear_prepack(qw, None)
    found["fbgemm per tensor"] = lambda: torch.ops.quantized.linear_dynamic(x, packed, True)
    w_rows = w_int8.t().contiguous()
    found["int8pack"] = lambda: torch._weight_int8pack_mm(x, w_rows, w_scale.flatten())
    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except ImportError:
        return found, exact
    linear = torch.nn.Linear(k, n, bias=False)
    with torch.no_grad():
        linear.weight.copy_(w.t())
    quantize_(linear, Int8DynamicActivationInt8WeightConfig())
    found["torchao"] = lambda: linear(x)
    return found, exact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, default=RESULTS / "int8_kernels.json")
    args = parser.parse_args()
    rows = []
    with torch.inference_mode():
        for threads in args.threads:
            torch.set_num_threads(threads)
            for shape_name, (m, k, n) in SHAPES.items():
                found, exact = candidates(m, k, n)
                times = {name: seconds(fn) for name, fn in found.items()}
                rows.append({"threads": threads, "shape": shape_name, "m": m, "k": k, "n": n,
                             "ms": {name: 1000 * t for name, t in times.items()},
                             "exact": exact})
    names = list(rows[0]["ms"])
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"CPU capability {torch.backends.cpu.get_cpu_capability()}; ms per product "
          "(speed-up over fp32)")
    width = max(16, *map(len, names))
    print(f"{'threads':>7} {'shape':12}{'':>18}" + "".join(f"{n:>{width + 1}}" for n in names))
    for r in rows:
        fp32 = r["ms"]["fp32"]
        cells = "".join(f"{f'{t:.3f} ({fp32 / t:.1f})':>{width + 1}}" for t in r["ms"].values())
        print(f"{r['threads']:7} {r['shape']:12}{r['m']:>6}x{r['k']:>5}x{r['n']:>5}{cells}")
    print("exact: " + ", ".join(f"{name} {max(r['exact'][name] for r in rows):.1e}"
                                for name in rows[0]["exact"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"torch": torch.__version__, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
