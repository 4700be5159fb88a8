"""Every LSTM back end, over either step loop, computes what the reference does."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from elmo.device import tf32_allowed
from elmo.errors import ElmoError
from elmo.modules import onednn, quantize
from elmo.modules.lstm import STEP_LOOPS, ProjectedLSTM, StepLoopKind
from elmo.modules.lstm_backends import (
    BACKENDS,
    INT8_PRODUCTS,
    REFERENCE_OPS,
    WEIGHT_NAMES,
    LSTMBackend,
    choose_backend,
)
from tests.helpers.int8 import EXACT_INT8
from tests.helpers.lstm import clipped_layer, layer_inputs, with_gradients

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
INT8 = pytest.mark.skipif(quantize.int8_unavailable_reason() is not None,
                          reason=f"no int8 here: {quantize.int8_unavailable_reason()}")
def _plain(backend: type[LSTMBackend]) -> type[LSTMBackend]:
    """`backend`'s products with the reference's cell ops (new tensors, no reused buffer)."""
    return type(f"Plain{backend.__name__}", (backend,), {"ops": REFERENCE_OPS})


def _run(layer, backend: type[LSTMBackend], loop: str, x, lengths, state):
    with torch.inference_mode():
        return STEP_LOOPS[loop].run(layer, backend(layer), x, lengths, state)


def _assert_equal(got, expected, atol=1e-6):
    (out, (h, c)), (e_out, (e_h, e_c)) = got, expected
    for a, b in ((out, e_out), (h, e_h), (c, e_c)):
        torch.testing.assert_close(a, b, atol=atol, rtol=0)


@pytest.mark.parametrize("stateful", [False, True])
@pytest.mark.parametrize("loop", list(STEP_LOOPS))
@pytest.mark.parametrize("gate_chunk_bytes", [1, 4 * 2**20])  # a step per chunk, all in one
def test_cpu_backend_equals_the_reference(loop, stateful, gate_chunk_bytes, monkeypatch):
    """In place, one reused gate buffer, oneDNN's products (even the tiny ones here): the
    reference's numbers, and the state given is left as it was."""
    monkeypatch.setattr(onednn, "MIN_MULTIPLY_ADDS", 0)
    monkeypatch.setattr(LSTMBackend, "gate_chunk_bytes", gate_chunk_bytes)
    layer = clipped_layer(seed=1)
    x, lengths, state = layer_inputs(layer, stateful, seed=2)
    kept = copy.deepcopy((x, state))
    expected = _run(layer, BACKENDS["reference"], "packed", x, lengths, state)
    got = _run(layer, BACKENDS["cpu"], loop, x, lengths, state)
    _assert_equal(got, expected)
    assert got[0][:, 3, 3:].abs().sum() == 0 and got[0][:, 5].abs().sum() == 0  # padding
    torch.testing.assert_close((x, state), kept, atol=0, rtol=0)
    if onednn._kernel_works():
        assert {"input0", "input1", "state0", "state1", "proj0", "proj1"} <= set(
            layer.__dict__["_onednn_packed"])


@INT8
@pytest.mark.parametrize("stateful", [False, True])
@pytest.mark.parametrize("loop", list(STEP_LOOPS))
def test_int8_backend_equals_the_reference_cell_on_its_products(loop, stateful):
    """The int8 back end's in-place cell computes what the reference cell does on the same
    int8 products; those are close to the fp32 reference (each operand rounded to 8 bits)."""
    fp32 = clipped_layer(seed=3)
    layer = clipped_layer(seed=3, quantized=True)
    x, lengths, state = layer_inputs(layer, stateful, seed=4)
    expected = _run(layer, _plain(BACKENDS["int8"]), "packed", x, lengths, state)
    got = _run(layer, BACKENDS["int8"], loop, x, lengths, state)
    _assert_equal(got, expected)
    out, reference = got[0], _run(fp32, BACKENDS["reference"], "packed", x, lengths, state)[0]
    assert 0 < (out - reference).abs().mean() / reference.abs().mean() < 0.03


def test_reference_gradients_are_equal_over_both_loops():
    layer = clipped_layer(seed=5)
    x, lengths, state = layer_inputs(layer, stateful=True, seed=6)
    grads = []
    for loop in STEP_LOOPS:
        layer.zero_grad()
        out, (h, c) = layer(x, lengths, state, step_loop=loop)
        (out.square().sum() + h.sum() + c.sum()).backward()
        grads.append([p.grad.clone() for p in layer.parameters()])
    for got, expected in zip(*grads, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_a_backend_is_chosen_by_autograd_clipping_device_and_quantization():
    x = torch.zeros(2, 1, 1, 16)
    clipped, unclipped = clipped_layer(seed=0), _unclipped(seed=0)
    quantized = SimpleNamespace(int8=object(), clipped=True)  # what choose_backend reads
    with torch.enable_grad():
        assert choose_backend(clipped, x) == "reference"
        assert choose_backend(unclipped, x) == "cudnn"
        assert choose_backend(unclipped, x.to("meta")) == "cudnn"
    with torch.inference_mode():
        assert choose_backend(clipped, x) == choose_backend(unclipped, x) == "cpu"
        assert choose_backend(quantized, x) == "int8"
        assert choose_backend(clipped, x.to("meta")) == "reference"  # off the CPU


def _first_in(table: dict, name: str, entry) -> dict:
    """`table` with `entry` put first, in place (restore it with the returned copy)."""
    saved = dict(table)
    table.clear()
    table.update({name: entry, **saved})
    return saved


def test_a_toy_backend_or_step_loop_first_in_its_table_runs_where_it_applies():
    """A back end says itself whether it serves a call, a step loop where it is the default:
    one entry first in the table is all a new kind needs."""
    calls = []

    class Toy(LSTMBackend):  # the reference, for layers that ask for it
        @classmethod
        def applies(cls, layer, x):
            return getattr(layer, "toy", False)

        def run(self, loop, x, lengths, state):
            calls.append(("backend", loop))
            return super().run(loop, x, lengths, state)

    def toy_loop(layer, backend, x, lengths, state):
        calls.append(("loop", type(backend).__name__))
        return STEP_LOOPS["packed"].run(layer, backend, x, lengths, state)

    layer = clipped_layer(seed=3)
    x, lengths, _ = layer_inputs(layer, stateful=False, seed=4)
    with torch.inference_mode():
        expected = layer(x, lengths)
    saved_backends = _first_in(BACKENDS, "toy", Toy)
    saved_loops = _first_in(STEP_LOOPS, "toy", StepLoopKind(toy_loop, ("cpu",)))
    try:
        with torch.inference_mode():
            plain = layer(x, lengths)  # the toy loop, the "cpu" back end: no toy asked
            layer.toy = True
            got = layer(x, lengths)
    finally:
        for table, saved in ((BACKENDS, saved_backends), (STEP_LOOPS, saved_loops)):
            table.clear()
            table.update(saved)
    assert calls == [("loop", "CPUBackend"), ("backend", toy_loop), ("loop", "Toy")]
    for out in (plain, got):
        torch.testing.assert_close(out[0], expected[0], atol=1e-5, rtol=1e-5)


def _unclipped(seed: int) -> ProjectedLSTM:
    layer = clipped_layer(seed)
    layer.cell_clip = layer.proj_clip = None
    return layer


@pytest.mark.parametrize("stateful", [False, True])
@pytest.mark.parametrize("lengths", ["mixed", "all"])
def test_cudnn_backend_equals_the_reference_without_clipping(stateful, lengths):
    """torch's LSTM (its CPU kernel here; cuDNN's on a GPU) computes the reference's cell
    without clips: outputs (zero at padding), final states taken at each row's own end, and
    every gradient, for rows of mixed lengths (packed) or all of T (as they are)."""
    layer = _unclipped(seed=11)
    x, mixed, state = layer_inputs(layer, stateful, seed=12)
    with torch.no_grad():  # a bias, so that the bias's reordering is checked too
        layer.bias.uniform_(-0.5, 0.5)
    given = mixed if lengths == "mixed" else None
    got = with_gradients(layer, "cudnn", x, given, state)
    expected = with_gradients(layer, "reference", x, given, state)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    if lengths == "mixed":
        assert got[0][:, 3, 3:].abs().sum() == 0 and got[0][:, 5].abs().sum() == 0  # padding
        if stateful:  # a row that never runs keeps its state
            assert torch.equal(got[1][:, 5], state[0][:, 5])
    assert (got[2].abs() > 1.0).any()  # the cell goes where a clip at 1 would have cut it


def test_cudnn_backend_hands_torch_contiguous_tensors(monkeypatch):
    """cuDNN views the input and weights it is given: a transposed weight fails there (a view
    error), though the CPU's kernel takes it."""
    real, contiguous = torch.lstm, []

    def checking(*args):  # type: ignore[no-untyped-def]
        for arg in args:
            for t in arg if isinstance(arg, list | tuple) else [arg]:
                if isinstance(t, torch.Tensor):
                    contiguous.append(t.is_contiguous())
        return real(*args)

    monkeypatch.setattr(torch, "lstm", checking)
    layer = _unclipped(seed=14)
    x, _, state = layer_inputs(layer, True, seed=15)
    with_gradients(layer, "cudnn", x[:, :, 2:], None, state)  # a window of the time axis
    assert contiguous and all(contiguous)


def test_cudnn_backend_refuses_a_clipped_layer():
    with pytest.raises(ValueError, match="cannot clip"):
        BACKENDS["cudnn"](clipped_layer(seed=13))


@CUDA
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_cudnn_backend_on_the_gpu_equals_the_reference(precision):
    """cuDNN itself, fp32 with TF32 off within 1e-5 of the reference on the same GPU; under
    bf16 autocast both run and stay within bf16's error of the fp32 reference."""
    layer = _unclipped(seed=14).cuda()
    x, lengths, state = layer_inputs(layer, True, seed=15)
    x, lengths = x.cuda(), lengths.cuda()
    state = tuple(s.cuda() for s in state)
    with tf32_allowed(False):
        expected = with_gradients(layer, "reference", x, lengths, state)
        with torch.autocast("cuda", torch.bfloat16, enabled=precision == "bf16"):
            got = with_gradients(layer, "cudnn", x, lengths, state)
            full = with_gradients(layer, "cudnn", x, None, state)  # fixed shapes
    for a, b in zip(got, expected, strict=True):
        if precision == "fp32":
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        else:  # relative to the norm: bf16 keeps 8 bits
            assert (a.float() - b).norm() <= 2e-2 * b.norm()
    assert all(torch.isfinite(t).all() for t in full)


@INT8
def test_int8_backend_refuses_autograd():
    layer = clipped_layer(seed=7, quantized=True)
    x, lengths, _ = layer_inputs(layer, stateful=False, seed=8)
    with torch.enable_grad(), pytest.raises(ElmoError, match="inference only"):
        layer(x, lengths)


@INT8
@pytest.mark.parametrize("name", list(quantize.INT8_KERNELS))
def test_int8_backend_products_take_their_activation_bits(name, monkeypatch):
    """Whichever kernel the CPU gets (each forced here, the no-VNNI ones even on a VNNI host):
    the input and state products may take 7-bit activations where the kernel saturates in 8,
    the projection, where it is quantized, always 8 (exactly the 8-bit integer product)."""
    kernel = quantize.INT8_KERNELS[name]
    if not kernel.runs_here():
        pytest.skip(f"the int8 kernel {name} does not run here")
    monkeypatch.setenv(quantize.KERNEL_ENV, name)
    layer = clipped_layer(seed=9, quantized=True, products=WEIGHT_NAMES)
    with torch.inference_mode():
        backend = BACKENDS["int8"](layer)
    torch.manual_seed(10)
    for product, bits in backend.activation_bits.items():
        matrices = layer.int8[product]
        x = torch.randn(2, 5, matrices.weight.shape[1])
        with torch.inference_mode():
            got = backend.product(product, x)
        operands = [EXACT_INT8.pack(w, s) for w, s in zip(matrices.weight, matrices.scale,
                                                          strict=True)]
        expected = quantize.int8_matmul(x, EXACT_INT8, operands)  # 8 bits
        levels = 63 if kernel.saturating and bits == 7 else 127
        if levels == 127:
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        else:
            assert not torch.allclose(got, expected, atol=1e-5)  # 7 bits: other integers
            assert (got - expected).norm() / expected.norm() < 0.03
    assert backend.activation_bits["proj"] == 8


@INT8
def test_int8_backend_keeps_the_projection_in_fp32():
    """A layer quantized as `quantize_int8_` does by default: its input and state products in
    int8, its projection the fp32 product of the "cpu" back end, on the same weight."""
    fp32, layer = clipped_layer(seed=11), clipped_layer(seed=11, quantized=True)
    assert set(layer.int8) == set(INT8_PRODUCTS) == {"input", "state"}
    x = torch.randn(2, 5, layer.cell_dim)
    with torch.inference_mode():
        got = BACKENDS["int8"](layer).product("proj", x)
        expected = BACKENDS["cpu"](fp32).product("proj", x)
        int8_input = BACKENDS["int8"](layer).product("input", torch.randn(2, 5, 16))
    torch.testing.assert_close(got, expected, atol=0, rtol=0)
    assert int8_input.shape == (2, 5, 4 * layer.cell_dim)
