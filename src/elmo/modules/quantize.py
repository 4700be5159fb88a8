"""int8 inference on the CPU: int8 weights, activations quantized as they arrive.

Weights are quantized once, symmetrically per output column (scale = max |w| / 127);
activations are quantized per row at every product (dynamic quantization), and the product
of the two int8 matrices is summed exactly in int32 by `torch._int_mm` (oneDNN's VNNI /
AVX-512 kernels on x86), then scaled back to fp32. Because a row's scale is its own and integer
sums are exact, a sentence's vectors still do not depend on the other rows of its batch.

Why this kernel path (torch 2.13, measured on the shapes of the `original` preset, see
docs/speed.md): `torch.ops.quantized.linear_dynamic` (fbgemm) is as fast but needs weights of
the `torch.qint8` dtype, which torch 2.13 deprecates, and quantizes activations per tensor,
which would tie a sentence's vectors to its batch; torchao's int8 dynamic-activation tensor
runs eagerly on the CPU several times slower than fp32 (it is fast only under torch.compile);
`torch._weight_int8pack_mm` keeps fp32 activations and is slower still.
"""

from __future__ import annotations

import functools
import platform
import warnings

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
    """int8 runs without VNNI, but through `torch._int_mm`'s generic kernel: many times slower
    than fp32 (0.03x on a 2-core AVX2 host, docs/speed.md). Say so once per model."""
    if not torch.cpu._is_vnni_supported():
        warnings.warn("this CPU has no VNNI (AVX-512 VNNI or AVX-VNNI): int8 products run "
                      "through torch._int_mm's generic kernel, measured about 30x slower than "
                      "fp32 on such a CPU (docs/speed.md); fp32 is faster here (drop "
                      "--quantize int8 / quantize=)", stacklevel=3)


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


@functools.cache
def _u8s8_kernel_works() -> bool:
    """Whether oneDNN's u8 x s8 inner product runs here: it needs VNNI, without which x86
    sums u8 x s8 pairs in saturating int16."""
    if not torch.cpu._is_vnni_supported():
        return False
    try:
        _u8s8_product(torch.ones(1, 8), _u8s8_pack(torch.ones(8, 8, dtype=torch.int8)),
                      torch.ones(8))
    except (AttributeError, RuntimeError):  # an op missing from this build
        return False
    return True


def _u8s8_pack(weight: torch.Tensor) -> torch.Tensor:
    """int8 weight (K, N) -> oneDNN's reordered copy."""
    return torch.ops.onednn.qlinear_prepack(weight.t().contiguous(), None)


_ONE, _SHIFT = torch.tensor(1.0), torch.tensor(128, dtype=torch.int32)


@functools.cache
def _zero_points(n: int) -> torch.Tensor:
    """The N weight zero points of a symmetric quantization (made once per N, read-only)."""
    return torch.zeros(n, dtype=torch.int32)


def _u8s8_product(x_int8: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor
                  ) -> torch.Tensor:
    """int8-valued x (M, K) (any dtype) @ the packed int8 weight, times the column scales
    (N,) -> fp32 (M, N). x is shifted to uint8 with zero point 128; the sums are exact."""
    x_u8 = (x_int8 + 128).to(torch.uint8)
    return torch.ops.onednn.qlinear_pointwise.tensor(
        x_u8, _ONE, _SHIFT, packed, scale, _zero_points(scale.numel()), None, 1.0, 0,
        torch.float32, "none", [], "")


def int8_matmul(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    add: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    packed: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """x (M, K) or (D, M, K) fp32 @ int8 weight (K, N) or (D, K, N) with column scales
    (1, N) or (D, 1, N), plus `add` (broadcast to the result) -> fp32 (M, N) or (D, M, N).

    Each row of x is quantized with its own scale. With `packed` (the weights reordered by
    `_u8s8_pack`, one per leading index), oneDNN's u8 x s8 kernel computes the product and
    applies the column scales; otherwise `torch._int_mm`. Written into `out` if given, which
    may be `add` itself.
    """
    row_scale = x.abs().amax(dim=-1, keepdim=True).clamp_min_(1e-12).div_(INT8_MAX)  # (.., M, 1)
    x_int8 = x.div(row_scale).round_()
    if packed is not None:
        if out is None:
            out = x.new_empty(*x.shape[:-1], weight.shape[-1])
        batched = x.dim() == 3  # else one product, seen as a batch of one
        for k, p in enumerate(packed):
            x_k, r_k = (x_int8[k], row_scale[k]) if batched else (x_int8, row_scale)
            out_k = out[k] if batched else out
            product = _u8s8_product(x_k, p, scale[k].flatten() if batched else scale.flatten())
            if add is None:
                torch.mul(product, r_k, out=out_k)
            else:
                torch.addcmul(add[k] if batched and add.dim() == 3 else add, product, r_k,
                              out=out_k)
        return out
    x_int8 = x_int8.to(torch.int8)
    if x.dim() == 2:
        product = torch._int_mm(x_int8, weight)  # (M, N) int32, exact
    else:  # one product per leading index (torch._int_mm is 2-D only)
        product = x.new_empty(*x.shape[:-1], weight.shape[-1], dtype=torch.int32)
        for k in range(x.shape[0]):
            torch._int_mm(x_int8[k], weight[k], out=product[k])
    # Converted first: multiplying the int32 tensor by a float one directly is ~4x slower.
    product = product.to(torch.float32).mul_(row_scale)
    if add is None:
        return torch.mul(product, scale, out=out)
    return torch.addcmul(add, product, scale, out=out)


def u8s8_packed(module: nn.Module) -> list[torch.Tensor] | None:
    """The oneDNN copies of `module.weight` (int8 (K, N) or (D, K, N)), made on first use and
    kept on the module; None where that kernel does not run here (or `ELMO_ONEDNN=0`)."""
    if not onednn.switched_on() or not _u8s8_kernel_works():
        return None
    if "_u8s8" not in module.__dict__:
        weights = module.weight.view(-1, *module.weight.shape[-2:])
        module.__dict__["_u8s8"] = [_u8s8_pack(w) for w in weights]
    return module.__dict__["_u8s8"]


class Int8Matrices(nn.Module):
    """D int8 weight matrices (D, K, N), one per LSTM direction, for batched products."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        quantized, scale = quantize_columns(weight.detach())
        self.register_buffer("weight", quantized, persistent=True)  # (D, K, N) int8
        self.register_buffer("scale", scale, persistent=True)  # (D, 1, N)

    def forward(
        self, x: torch.Tensor, add: torch.Tensor | None = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x (D, M, K) [+ add (D, M or 1, N)] -> (D, M, N), into `out` if given (may be add)."""
        return int8_matmul(x, self.weight, self.scale, add, out, u8s8_packed(self))


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
        y = int8_matmul(flat, self.weight, self.scale, self.bias, packed=u8s8_packed(self))
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
