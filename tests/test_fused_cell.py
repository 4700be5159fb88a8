"""The "fused" LSTM back end: the cell's pointwise parts compiled by inductor (here its CPU
back end, C++) train a clipped layer to the reference's numbers, compiled once for every
batch size and row count, and only where `ELMO_FUSED_CELL=1` asks for it."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

from elmo.device import tf32_allowed
from elmo.errors import ElmoError
from elmo.modules import fused_cell
from elmo.modules.lstm_backends import choose_backend
from tests.helpers.lstm import clipped_layer, layer_inputs, with_gradients

REASON = fused_cell.unavailable_reason("cpu")
COMPILES = pytest.mark.skipif(REASON is not None, reason=f"inductor cannot compile: {REASON}")


@pytest.fixture(scope="module")
def layer():
    """One layer for the module: its compiled cell is the process's (each compile takes
    tens of seconds on the CPU)."""
    return clipped_layer(seed=21)


def _compiled_graphs() -> int:
    return counters["stats"]["unique_graphs"]


@COMPILES
@pytest.mark.slow
@pytest.mark.parametrize(("loop", "stateful"),
                         [("packed", False), ("packed", True), ("masked", True)])
def test_fused_cell_trains_to_the_references_numbers(layer, loop, stateful):
    """Outputs (zero at padding), final states and the gradients of every weight, the input
    and the initial state, for rows that end at different steps in both directions. Within
    1e-5: the compiled kernels round sigmoid, tanh and the fused multiply-adds differently from
    torch's eager ones (a few float32 ulps a step), over 11 steps forward and back."""
    x, lengths, state = layer_inputs(layer, stateful, seed=22)
    got = with_gradients(layer, "fused", x, lengths, state, loop)
    expected = with_gradients(layer, "reference", x, lengths, state, loop)
    assert _compiled_graphs() > 0  # through inductor
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert got[0][:, 3, 3:].abs().sum() == 0 and got[0][:, 5].abs().sum() == 0  # padding
    assert (got[2].abs() == 1.0).any() and (got[0].abs() == 0.5).any()  # both clips bite


@COMPILES
@pytest.mark.slow
def test_fused_cell_is_not_recompiled_per_step_or_batch(layer):
    """Rows that drop out step after step, other batch sizes and lengths: the compiled parts
    are reused. A single row left is a variant of its own (inductor specializes sizes of 1),
    compiled once too."""
    for lengths, steps in (([9, 9, 6, 3, 1, 0], 11), ([13, 12, 7, 7, 4, 2, 2, 0], 13)):
        x, lengths, _ = layer_inputs(layer, False, seed=23, lengths=lengths, steps=steps)
        with_gradients(layer, "fused", x, lengths, None)  # compiled here if not before
    before = _compiled_graphs()
    assert before > 0
    x, lengths, _ = layer_inputs(layer, False, seed=24, lengths=[10, 8, 8, 5, 3, 0, 0],
                                 steps=12)  # 7 rows, down to 1
    with_gradients(layer, "fused", x, lengths, None)
    assert _compiled_graphs() == before


def test_fused_cell_is_chosen_only_where_switched_on_and_for_training_clipped_layers(
        monkeypatch):
    clipped, unclipped = clipped_layer(seed=0), clipped_layer(seed=0)
    unclipped.cell_clip = unclipped.proj_clip = None
    x = torch.zeros(2, 1, 1, 16)
    for value, expected in ((None, "reference"), ("0", "reference"), ("1", "fused")):
        if value is None:
            monkeypatch.delenv(fused_cell.ENV, raising=False)
        else:
            monkeypatch.setenv(fused_cell.ENV, value)
        with torch.enable_grad():
            assert choose_backend(clipped, x) == expected
            assert choose_backend(unclipped, x) == "cudnn"
        with torch.inference_mode():
            assert choose_backend(clipped, x) == "cpu"


def test_fused_cell_where_inductor_cannot_compile_says_how_to_train_without(monkeypatch):
    """Switched on for a device inductor does not compile for: one line naming the variable,
    before anything runs."""
    monkeypatch.setenv(fused_cell.ENV, "1")
    layer = clipped_layer(seed=0)
    x, lengths, _ = layer_inputs(layer, False, seed=1)
    with pytest.raises(ElmoError, match=f"unset {fused_cell.ENV}"):
        layer(x.to("meta"), lengths)


@pytest.mark.skipif(not torch.cuda.is_available() or fused_cell.unavailable_reason("cuda"),
                    reason="needs a CUDA GPU and Triton")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_fused_cell_on_the_gpu_trains_to_the_references_numbers(precision):
    """Triton's kernels on both loops: fp32 with TF32 off within 1e-5 of the reference on the
    same GPU; under bf16 autocast within bf16's error of the fp32 reference."""
    layer = clipped_layer(seed=25).cuda()
    x, lengths, state = layer_inputs(layer, True, seed=26)
    x, lengths, state = x.cuda(), lengths.cuda(), tuple(s.cuda() for s in state)
    with tf32_allowed(False):
        for loop in ("masked", "packed"):
            expected = with_gradients(layer, "reference", x, lengths, state, loop)
            with torch.autocast("cuda", torch.bfloat16, enabled=precision == "bf16"):
                got = with_gradients(layer, "fused", x, lengths, state, loop)
            for a, b in zip(got, expected, strict=True):
                if precision == "fp32":
                    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
                else:  # relative to the norm: bf16 keeps 8 bits
                    assert (a.float() - b).norm() <= 2e-2 * b.norm()
