"""The LSTM's two step loops compute one function; the CUDA graphs replay the masked one."""

from __future__ import annotations

import logging

import h5py
import pytest
import torch

from elmo import batch_to_ids
from elmo.modules.cuda_graphs import LSTMGraphs, bucket
from elmo.modules.lstm import STEP_LOOPS
from tests.conftest import random_bilm

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _sentences(n: int, seed: int) -> list[list[str]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 12, (n,), generator=g).tolist()
    return [[f"w{(i * 7 + k) % 23}" for k in range(m)] for i, m in enumerate(lengths)]


def _layers(model, ids, step_loop: str, grad: bool = False) -> torch.Tensor:
    model.lstm.step_loop = step_loop
    with torch.set_grad_enabled(grad):
        return model(ids).layers


@pytest.mark.parametrize("grad", [False, True])
def test_masked_loop_equals_packed_on_every_layer(grad):
    model = random_bilm(seed=3)
    for seed in range(3):
        ids = batch_to_ids(_sentences(9, seed))
        packed = _layers(model, ids, "packed", grad)
        masked = _layers(model, ids, "masked", grad)
        assert masked.shape == packed.shape
        torch.testing.assert_close(masked, packed, atol=1e-6, rtol=0)


@pytest.mark.parametrize("loop", list(STEP_LOOPS))
def test_without_lengths_every_row_runs_through(loop):
    """lengths None (a training batch without padding): the loop's numbers for lengths all
    T, outputs and final states, stateful too, with no mask computed."""
    layer = random_bilm(seed=6).lstm.layers[0]
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 5, 8, 16, generator=g)
    state = (torch.randn(2, 5, 16, generator=g), torch.randn(2, 5, 64, generator=g))
    full = torch.full((5,), 8)
    for given in (None, state):
        got = layer(x, None, given, loop)
        want = layer(x, full, given, loop)
        torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_masked_loop_gradients_equal_packed():
    model = random_bilm(seed=4)
    ids = batch_to_ids(_sentences(6, 1))
    grads = {}
    for loop in STEP_LOOPS:
        model.zero_grad()
        _layers(model, ids, loop, grad=True).square().sum().backward()
        grads[loop] = {n: p.grad.clone() for n, p in model.named_parameters()
                       if p.grad is not None}
    assert grads["masked"].keys() == grads["packed"].keys()
    for name, grad in grads["masked"].items():
        torch.testing.assert_close(grad, grads["packed"][name], atol=1e-5, rtol=1e-5)


def test_masked_loop_carries_state_as_packed():
    """Stateful: the state each row ends a call with starts its next call, in both loops."""
    results = {}
    for loop in STEP_LOOPS:
        model = random_bilm(seed=5)
        model.stateful = True
        model.lstm.step_loop = loop
        with torch.inference_mode():
            out = [model(batch_to_ids(_sentences(5, s))).layers for s in (1, 2, 3)]
        results[loop] = (out, model.carried_states)
    for got, expected in zip(results["masked"][0], results["packed"][0], strict=True):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    for (h, c), (h_p, c_p) in zip(results["masked"][1], results["packed"][1], strict=True):
        torch.testing.assert_close(h, h_p, atol=1e-6, rtol=0)
        torch.testing.assert_close(c, c_p, atol=1e-6, rtol=0)


def test_masked_layer_keeps_finished_rows_state_and_zeroes_their_output():
    layer = random_bilm(seed=6).lstm.layers[0]
    x = torch.randn(2, 3, 5, layer.proj_dim)
    lengths = torch.tensor([5, 2, 0])
    state = (torch.randn(2, 3, layer.proj_dim), torch.randn(2, 3, layer.cell_dim))
    with torch.inference_mode():
        out, (h, c) = layer(x, lengths, state, step_loop="masked")
        packed, (h_p, c_p) = layer(x[:, :2], lengths[:2], (state[0][:, :2], state[1][:, :2]))
    assert not out[:, 1, 2:].any() and not out[:, 2].any()
    torch.testing.assert_close(out[:, :2], packed, atol=1e-6, rtol=0)
    torch.testing.assert_close(h[:, :2], h_p, atol=1e-6, rtol=0)
    torch.testing.assert_close(h[:, 2], state[0][:, 2])  # a row of length 0 keeps its state
    torch.testing.assert_close(c[:, 2], state[1][:, 2])


def test_buckets_pad_by_at_most_a_quarter():
    assert [bucket(n) for n in (1, 7, 8, 9, 11, 16, 17, 100, 1000)] == \
        [1, 7, 8, 10, 12, 16, 20, 112, 1024]
    for n in range(1, 3000):
        assert n <= bucket(n) <= 1.25 * n


def test_graph_capture_failure_falls_back_to_eager_and_says_so_once(caplog):
    """Where a graph cannot be captured (here: no CUDA), the caller gets None and runs the
    eager loop; the reason is logged once."""
    model = random_bilm(seed=7)
    graphs = LSTMGraphs(model.lstm)
    x = torch.randn(2, 3, 4, model.config.projection_dim)
    with caplog.at_level(logging.WARNING, logger="elmo.modules.cuda_graphs"):
        with torch.inference_mode():
            assert graphs(x, torch.tensor([4, 3, 1])) is None
            assert graphs(x, torch.tensor([4, 3, 1])) is None
    assert graphs.failed is not None
    assert len([r for r in caplog.records if "capture" in r.getMessage()]) == 1


@CUDA
def test_cuda_graphs_equal_eager_and_cpu(monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)  # fp32 convolutions
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    model = random_bilm(seed=8)
    cpu_layers = []
    sentence_sets = [_sentences(n, seed) for seed, n in enumerate((9, 4, 9, 1))]
    with torch.inference_mode():
        for sentences in sentence_sets:
            cpu_layers.append(model(batch_to_ids(sentences)).layers)
        model.cuda()
        for graphs in (True, False):
            model.cuda_graphs = graphs
            for sentences, expected in zip(sentence_sets, cpu_layers, strict=True):
                got = model(batch_to_ids(sentences).cuda()).layers.cpu()
                torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    assert model._graphs.failed is None and model._graphs.graphs


def test_embedder_precision_bf16_is_close_to_fp32_and_recorded():
    """`precision` is the arithmetic of an Embedder's batches: fp32 by default, bf16 through
    autocast (close to fp32, not equal); it is one of the settings a file job records."""
    from elmo.embed import Embedder

    sentences = _sentences(6, seed=9)
    fp32 = Embedder(random_bilm(seed=9), device="cpu")
    bf16 = Embedder(random_bilm(seed=9), device="cpu", precision="bf16")
    for got, expected in zip(bf16.embed_sentences(sentences), fp32.embed_sentences(sentences),
                             strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert 0 < abs(got - expected).max() < 0.1
    assert "precision" not in fp32.settings() and bf16.settings()["precision"] == "bf16"
    with pytest.raises(ValueError, match="precision must be one of"):
        Embedder(random_bilm(), device="cpu", precision="fp16")


def test_elmo_embed_precision_option(tmp_path):
    from elmo.cli import main
    from elmo.loading.formats import save_pretrained

    save_pretrained(random_bilm(seed=10), tmp_path / "model")
    (tmp_path / "in.txt").write_text("a b c\nd e\n")
    outputs = {}
    for precision in ("fp32", "tf32", "bf16"):
        out = tmp_path / f"{precision}.hdf5"
        assert main(["embed", str(tmp_path / "model"), str(tmp_path / "in.txt"), str(out),
                     "--device", "cpu", "--precision", precision, "--quiet"]) == 0
        with h5py.File(out) as f:
            outputs[precision] = f["0"][...]
    assert (outputs["tf32"] == outputs["fp32"]).all()  # no TF32 on the CPU
    assert 0 < abs(outputs["bf16"] - outputs["fp32"]).max() < 0.1
