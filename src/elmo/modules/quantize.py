"""int8 inference on the CPU: int8 weights, activations quantized as they arrive.

Weights are quantized once, symmetrically per output column (scale = max |w| / 127);
activations are quantized per row at every product (dynamic quantization), and the product
of the two int8 matrices is summed exactly in int32, then scaled back to fp32. Because a row's
scale is its own and integer sums are exact, a sentence's vectors do not depend on the other
rows of its batch.

Which kernel sums the products is chosen once per weight, the first of `INT8_KERNELS` that
runs here and sums exactly (`choose_int8_kernel`). x86 multiplies uint8 by int8 in pairs whose
sums saturate in int16 unless the CPU has VNNI (AVX-512 VNNI or AVX-VNNI):

- "onednn" (VNNI): oneDNN's u8 x s8 inner product (`torch.ops.onednn.qlinear_pointwise`),
  activations in 8 bits (levels +-127) shifted to uint8 by a zero point of 128.
- "fbgemm-no-vnni" (e.g. AVX2 alone): fbgemm's prepacked kernel, what torch's dynamic
  quantization uses, with uint8 activations kept within 0..127, so a pair sums at most
  2 x 127 x 127 = 32,258 < 32,767: either 7 bits (levels +-63, zero point 64), for the
  products that tolerate them, or 8 bits split by sign, max(x, 0) and max(-x, 0), as two
  halves of one product (one where no value is negative: the char-CNN's). fbgemm quantizes
  its input with one scale per tensor: elmo divides each row by its own scale and passes 1.
- "onednn-no-vnni": oneDNN's kernel used the same way, where fbgemm is missing (its weights
  are packed from `torch.qint8` tensors, which torch deprecates).
- "int_mm": `torch._int_mm`, exact everywhere; without VNNI its generic kernel is ~100x
  slower than fp32.

`ELMO_INT8_KERNEL=NAME` forces one (it must sum exactly here); `ELMO_ONEDNN=0` leaves out the
oneDNN ones. Rejected (torch 2.13): torchao's int8 dynamic-activation tensor runs eagerly
several times slower than fp32 (it is fast only under torch.compile);
`torch._weight_int8pack_mm` keeps fp32 activations and is slower still.
"""

from __future__ import annotations

import functools
import os
import platform
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from elmo.errors import ElmoError
from elmo.modules import onednn

QUANTIZE_MODES = ("int8",)
INT8_MAX = 127.0


@functools.cache
def int8_unavailable_reason() -> str | None:
    """Why int8 inference cannot run on this machine, or None if it can."""
    if not hasattr(torch, "_int_mm"):
        return f"torch {torch.__version__} has no torch._int_mm"
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        return (f"its int8 kernels need an x86-64 CPU with AVX2 or AVX-512; this one is "
                f"{platform.machine()} with {capability}")
    try:
        torch._int_mm(torch.ones(1, 8, dtype=torch.int8), torch.ones(8, 8, dtype=torch.int8))
    except RuntimeError as err:
        return f"torch._int_mm fails on this CPU ({err})"
    return None


def check_quantize(mode: str | None, device: torch.device | str = "cpu") -> None:
    """Raise ElmoError unless `mode` (None or one of QUANTIZE_MODES) can run on `device`."""
    if mode is None:
        return
    if mode not in QUANTIZE_MODES:
        raise ElmoError(f"quantize must be one of {QUANTIZE_MODES} or None, got {mode!r}")
    if torch.device(device).type != "cpu":
        raise ElmoError(f"int8 inference runs on the CPU only, not on {device}: drop "
                        "--quantize int8 on a GPU (use --device cpu to quantize)")
    reason = int8_unavailable_reason()
    if reason is not None:
        raise ElmoError(f"int8 inference is not available here: {reason}. Run in fp32 "
                        "(without --quantize / quantize=)")


def warn_if_int8_is_slow() -> None:
    """Warn (once per model) where int8 products would run through `torch._int_mm`'s generic
    kernel: without VNNI it is about 100x slower than fp32 (benchmarks/README.md)."""
    if choose_int8_kernel().name == "int_mm" and not torch.cpu._is_vnni_supported():
        warnings.warn("int8 products run here through torch._int_mm's generic kernel, which "
                      "on a CPU without VNNI was measured about 100x slower than fp32 "
                      "(benchmarks/README.md); fp32 is faster here "
                      "(drop --quantize int8 / quantize=)",
                      stacklevel=3)


def check_savable(quantization: str | None) -> None:
    """Refuse to save a quantized biLM: its fp32 weights are gone."""
    if quantization is not None:
        raise ElmoError(f"an {quantization}-quantized biLM cannot be saved: its fp32 weights "
                        "were dropped when it was quantized. Save the model loaded without "
                        "quantize= (quantization is an option of loading)")


def check_inference() -> None:
    """int8 modules have no gradient: refuse to run them where autograd records."""
    if torch.is_grad_enabled():
        raise ElmoError("an int8-quantized biLM is for inference only; load it without "
                        "quantize to train or fine-tune it")


def quantize_columns(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """weight (..., K, N) -> int8 (..., K, N) and fp32 scales (..., 1, N), one per column."""
    scale = weight.abs().amax(dim=-2, keepdim=True).clamp_min(1e-12) / INT8_MAX
    return torch.round(weight / scale).to(torch.int8), scale.float()


@dataclass(frozen=True)
class Int8Kernel:
    """An op summing the products of int8 weights and quantized activations in int32.

    `pack` turns an int8 weight (K, N) and its column scales (1, N) into the kernel's operand
    (made once per weight); `multiply(x, operand, zero_point)` rounds x (M, K), fp32, to
    integers, adds `zero_point` (uint8 kernels) and returns the product with the weight times
    the column scales, fp32 (M, N). A `saturating` kernel is used where x86 sums uint8 x int8
    pairs in int16 (no VNNI): its activations are kept within 0..127 (`int8_matmul`).
    """

    name: str
    pack: Callable[[torch.Tensor, torch.Tensor], Any]
    multiply: Callable[[torch.Tensor, Any, int], torch.Tensor]
    zero_point: int  # of 8-bit activations, where pairs do not saturate
    saturating: bool
    uses_onednn: bool = False

    def runs_here(self) -> bool:
        """Whether this kernel's ops run here and sum its largest products exactly."""
        return (not self.uses_onednn or onednn.switched_on()) and _sums_exactly(self)


@functools.cache
def _sums_exactly(kernel: Int8Kernel) -> bool:
    """Whether `kernel` computes, here, the exact products of the largest activations (of
    one sign and of both) and weights; a kernel whose pair sums saturate does not."""
    weight = torch.full((64, 16), 127, dtype=torch.int8)
    weight[:, ::2] = -127
    try:
        operands = [kernel.pack(weight, torch.ones(1, 16))]
        for bits in (7, 8):
            levels = 63 if kernel.saturating and bits == 7 else 127
            for signs in (torch.tensor([1.0, 1, 1, 1]), torch.tensor([1.0, -1, -1, 1])):
                x = torch.full((4, 64), float(levels)) * signs[:, None]
                if not torch.equal(int8_matmul(x, kernel, operands, bits=bits),
                                   x @ weight.float()):
                    return False
    except (AttributeError, RuntimeError):  # an op missing from this build or platform
        return False
    return True


def _onednn_pack(weight: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 weight (K, N), scales (1, N) -> oneDNN's reordered weight and the scales (N,)."""
    return (torch.ops.onednn.qlinear_prepack(weight.t().contiguous(), None),
            scale.flatten().contiguous())


_ONE = torch.tensor(1.0)


@functools.cache
def _int32(value: int) -> torch.Tensor:
    """A zero point as the int32 scalar tensor oneDNN's op takes (made once per value)."""
    return torch.tensor(value, dtype=torch.int32)


@functools.cache
def _zero_points(n: int) -> torch.Tensor:
    """The N weight zero points of a symmetric quantization (made once per N, read-only)."""
    return torch.zeros(n, dtype=torch.int32)


def _onednn_multiply(x: torch.Tensor, operand: tuple[torch.Tensor, torch.Tensor],
                     zero_point: int) -> torch.Tensor:
    """oneDNN's u8 x s8 inner product (`torch.ops.onednn.qlinear_pointwise`)."""
    weight, scale = operand
    x_u8 = x.add(zero_point).round_().to(torch.uint8)
    return torch.ops.onednn.qlinear_pointwise.tensor(
        x_u8, _ONE, _int32(zero_point), weight, scale, _zero_points(scale.numel()), None, 1.0,
        0, torch.float32, "none", [], "")


def _fbgemm_pack(weight: torch.Tensor, scale: torch.Tensor) -> Any:
    """int8 weight (K, N), scales (1, N) -> fbgemm's packed weight, scales included."""
    with warnings.catch_warnings():
        # torch deprecates qint8 tensors; this one lives only until fbgemm has packed it.
        warnings.simplefilter("ignore", UserWarning)
        qweight = torch._make_per_channel_quantized_tensor(
            weight.t().contiguous(), scale.flatten().double(),
            torch.zeros(scale.numel(), dtype=torch.long), 0)
        return torch.ops.quantized.linear_prepack(qweight, None)


def _fbgemm_multiply(x: torch.Tensor, packed: Any, zero_point: int) -> torch.Tensor:
    """fbgemm's product (torch's dynamic quantization kernel) over x quantized with scale 1."""
    return torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(
        x, 1.0, zero_point, packed)


def _int_mm_multiply(x: torch.Tensor, operand: tuple[torch.Tensor, torch.Tensor],
                     zero_point: int) -> torch.Tensor:
    """`torch._int_mm` over signed int8 x (zero point 0)."""
    weight, scale = operand
    # Converted first: multiplying the int32 tensor by a float one directly is ~4x slower.
    return torch._int_mm(x.round().to(torch.int8), weight).to(torch.float32).mul_(scale)


# In order of preference: the first that `runs_here` is chosen.
INT8_KERNELS: dict[str, Int8Kernel] = {k.name: k for k in (
    Int8Kernel("onednn", _onednn_pack, _onednn_multiply, 128, saturating=False,
               uses_onednn=True),
    Int8Kernel("fbgemm-no-vnni", _fbgemm_pack, _fbgemm_multiply, 0, saturating=True),
    Int8Kernel("onednn-no-vnni", _onednn_pack, _onednn_multiply, 0, saturating=True,
               uses_onednn=True),
    Int8Kernel("int_mm", lambda weight, scale: (weight, scale), _int_mm_multiply, 0,
               saturating=False),
)}
KERNEL_ENV = "ELMO_INT8_KERNEL"


def choose_int8_kernel() -> Int8Kernel:
    """The kernel named by `ELMO_INT8_KERNEL`, else the first of `INT8_KERNELS` that runs
    here (`int_mm` where int8 runs at all)."""
    forced = os.environ.get(KERNEL_ENV)
    if not forced:
        exact = next((k for k in INT8_KERNELS.values() if k.runs_here()), None)
        if exact is None:
            raise ElmoError("no int8 kernel sums exactly on this machine (are oneDNN or fbgemm "
                            "held to another instruction set?); embed in fp32 (no --quantize)")
        return exact
    if forced not in INT8_KERNELS:
        raise ElmoError(f"{KERNEL_ENV}={forced!r} is not an int8 kernel; choose one of "
                        f"{list(INT8_KERNELS)}")
    if not INT8_KERNELS[forced].runs_here():
        raise ElmoError(f"{KERNEL_ENV}={forced!r}: that kernel does not run exactly on this "
                        "machine; unset it to let elmo choose")
    return INT8_KERNELS[forced]


def int8_matmul(
    x: torch.Tensor,
    kernel: Int8Kernel,
    operands: list[Any],
    add: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    bits: int = 8,
) -> torch.Tensor:
    """x (M, K) or (D, M, K) fp32 @ the int8 weights (K, N) that `operands` hold (made by
    `kernel.pack`, one per leading index), plus `add` (broadcast to the result) -> fp32 (M, N)
    or (D, M, N), written into `out` if given (which may be `add` itself).

    Each row of x is quantized with its own scale, max |row| / 127, or / 63 where `bits` is 7
    and the kernel is saturating (a uint8 row then spans 1..127 with zero point 64).
    """
    levels = 63 if kernel.saturating and bits == 7 else 127
    # (..., M, 1); abs().amax() is ~15x faster than the inf-norm of torch.linalg.vector_norm.
    row_scale = x.abs().amax(dim=-1, keepdim=True).clamp_min_(1e-12).div_(levels)
    x_scaled = x.div(row_scale)
    if x.dim() == 2:
        product = _integer_product(kernel, x_scaled, operands[0], levels)
        return _scale_rows(product, row_scale, add, out)
    for k, operand in enumerate(operands):  # one product per leading index
        product = _integer_product(kernel, x_scaled[k], operand, levels)
        if out is None:
            out = product.new_empty(len(operands), *product.shape)
        _scale_rows(product, row_scale[k], add if add is None or add.dim() < 3 else add[k],
                    out[k])
    return out


def _integer_product(kernel: Int8Kernel, x: torch.Tensor, operand: Any, levels: int
                     ) -> torch.Tensor:
    """x (M, K), |values| <= levels, rounded, @ the operand's weight, times its column scales."""
    if not kernel.saturating:
        return kernel.multiply(x, operand, kernel.zero_point)
    if levels == 63:
        return kernel.multiply(x, operand, 64)  # uint8 1..127
    # 8 bits in uint8 0..127: x = max(x, 0) - max(-x, 0), one product of both halves' rows.
    if x.min() >= 0:
        return kernel.multiply(x, operand, 0)
    both = kernel.multiply(torch.cat([x, x.neg()]).clamp_min_(0), operand, 0)
    positive, negative = both.split(x.shape[0])
    return positive.sub_(negative)


def _scale_rows(product: torch.Tensor, row_scale: torch.Tensor, add: torch.Tensor | None,
                out: torch.Tensor | None) -> torch.Tensor:
    """product * row_scale (+ add), into `out` if given."""
    if add is None:
        return torch.mul(product, row_scale, out=out)
    return torch.addcmul(add, product, row_scale, out=out)


def packed_operands(module: nn.Module) -> tuple[Int8Kernel, list[Any]]:
    """The kernel chosen for `module`'s int8 `weight` ((K, N) or (D, K, N)) with `scale`, and
    its operands, one per leading index: made on first use and kept on the module."""
    if "_int8_operands" not in module.__dict__:
        kernel = choose_int8_kernel()
        k, n = module.weight.shape[-2:]
        pairs = zip(module.weight.view(-1, k, n), module.scale.view(-1, 1, n), strict=True)
        module.__dict__["_int8_operands"] = (kernel, [kernel.pack(w, s) for w, s in pairs])
    return module.__dict__["_int8_operands"]


class Int8Matrices(nn.Module):
    """D int8 weight matrices (D, K, N), one per LSTM direction, for batched products."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        quantized, scale = quantize_columns(weight.detach())
        self.register_buffer("weight", quantized, persistent=True)  # (D, K, N) int8
        self.register_buffer("scale", scale, persistent=True)  # (D, 1, N)

    def forward(
        self, x: torch.Tensor, add: torch.Tensor | None = None, out: torch.Tensor | None = None,
        bits: int = 8,
    ) -> torch.Tensor:
        """x (D, M, K) [+ add (D, M or 1, N)] -> (D, M, N), into `out` if given (may be add);
        `bits`: the fewest activation bits the product tolerates (`int8_matmul`)."""
        return int8_matmul(x, *packed_operands(self), add, out, bits)


class Int8Linear(nn.Module):
    """An `nn.Linear` with int8 weights and dynamically quantized inputs (inference only)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        quantized, scale = quantize_columns(linear.weight.detach().t())
        self.register_buffer("weight", quantized.contiguous(), persistent=True)  # (K, N) int8
        self.register_buffer("scale", scale, persistent=True)  # (1, N)
        bias = linear.bias.detach().clone() if linear.bias is not None else None
        self.register_buffer("bias", bias, persistent=True)  # (N,) or None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., K) -> (..., N)."""
        check_inference()
        flat = x.reshape(-1, self.in_features).contiguous()
        y = int8_matmul(flat, *packed_operands(self), self.bias)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_linears_(module: nn.Module) -> None:
    """Replace every `nn.Linear` inside `module` by an `Int8Linear`, in place."""
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, Int8Linear(child))
        else:
            quantize_linears_(child)
