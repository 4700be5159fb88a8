"""The fp32 and int8 kernel candidates of torch 2.13 on the CPU, timed on `original`'s products.

Shapes (rows M x inner K x columns N, one direction): the LSTM state product (M = 32, 64
sentences per step, 512 x 16384), the projection (64 x 4096 x 512), the input product over
a chunk of steps (512 x 512 x 16384) and a highway layer (256 distinct tokens x 2048 x 2048).
Each candidate gets fp32 input and must return fp32 output (activation quantization included):

- fp32: `torch.mm` (MKL), the yardstick;
- onednn fp32: elmo's fp32 inference path (`elmo.modules.onednn`): oneDNN's inner product
  with the weight reordered once;
- int_mm: elmo's path elsewhere (`elmo.modules.quantize.int8_matmul`): per-row dynamic
  activation scales, per-column int8 weights, `torch._int_mm`;
- fbgemm: `torch.ops.quantized.linear_dynamic` (per-tensor activation scale; its weights need
  the deprecated `torch.qint8` dtype);
- onednn u8s8: elmo's int8 path where the CPU has VNNI (`int8_matmul` with `packed`):
  `torch.ops.onednn.qlinear_pointwise` over rows quantized with their own scales (shifted to
  uint8, zero point 128), the row scales applied to its fp32 output;
- int8pack: `torch._weight_int8pack_mm` (weight-only int8, fp32 activations);
- torchao: `Int8DynamicActivationInt8WeightConfig` applied to an `nn.Linear`, eager (only if
  torchao is importable).

    python benchmarks/int8_kernels.py [--threads 1 2] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from common import RESULTS

from elmo.modules import onednn, quantize
from elmo.modules.quantize import int8_matmul, quantize_columns

SHAPES = {"state M=32": (32, 512, 16384), "state M=64": (64, 512, 16384),
          "projection": (64, 4096, 512), "input chunk": (512, 512, 16384),
          "highway": (256, 2048, 2048)}


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


def candidates(m: int, k: int, n: int) -> dict[str, Callable[[], object]]:
    """name -> a call computing x (m, k) @ w (k, n) in fp32 out."""
    torch.manual_seed(0)
    x, w = torch.randn(m, k), torch.randn(k, n) / k**0.5
    w_int8, w_scale = quantize_columns(w)
    found: dict[str, Callable[[], object]] = {
        "fp32": lambda: torch.mm(x, w),
        "int_mm": lambda: int8_matmul(x, w_int8, w_scale),
    }
    owner = torch.nn.Module()
    w_t = w.t().contiguous()
    found["onednn fp32"] = lambda: onednn.packed_linear(x, owner, "w", w_t)
    int8_owner = torch.nn.Module()
    int8_owner.register_buffer("weight", w_int8)
    u8s8 = quantize.u8s8_packed(int8_owner)  # None where elmo's int8 path does not use it
    if u8s8 is not None:
        found["onednn u8s8"] = lambda: int8_matmul(x, w_int8, w_scale, packed=u8s8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.qint8 tensors are deprecated in 2.13
        qw = torch.quantize_per_channel(w.t().contiguous(), w_scale.flatten().double(),
                                        torch.zeros(n, dtype=torch.long), 0, torch.qint8)
        packed = torch.ops.quantized.linear_prepack(qw, None)
    found["fbgemm"] = lambda: torch.ops.quantized.linear_dynamic(x, packed, True)
    w_rows = w_int8.t().contiguous()
    found["int8pack"] = lambda: torch._weight_int8pack_mm(x, w_rows, w_scale.flatten())
    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except ImportError:
        return found
    linear = torch.nn.Linear(k, n, bias=False)
    with torch.no_grad():
        linear.weight.copy_(w.t())
    quantize_(linear, Int8DynamicActivationInt8WeightConfig())
    found["torchao"] = lambda: linear(x)
    return found


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
                times = {name: seconds(fn) for name, fn in candidates(m, k, n).items()}
                rows.append({"threads": threads, "shape": shape_name, "m": m, "k": k, "n": n,
                             "ms": {name: 1000 * t for name, t in times.items()}})
    names = list(rows[0]["ms"])
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"CPU capability {torch.backends.cpu.get_cpu_capability()}; ms per product "
          "(speed-up over fp32)")
    print(f"{'threads':>7} {'shape':12}{'':>18}" + "".join(f"{n:>16}" for n in names))
    for r in rows:
        fp32 = r["ms"]["fp32"]
        cells = "".join(f"{t:9.2f} ({fp32 / t:4.1f})" for t in r["ms"].values())
        print(f"{r['threads']:7} {r['shape']:12}{r['m']:>6}x{r['k']:>5}x{r['n']:>5}{cells}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"torch": torch.__version__, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
