"""Every speed path computes the same numbers as the plain one (atol 1e-5)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from elmo import batch_to_ids
from elmo.embed import Embedder
from elmo.modules import onednn
from elmo.modules.bilm import add_boundaries
from elmo.modules.lstm_backends import LSTMBackend
from tests.conftest import random_bilm

WORDS = "the of bank river money deposit 北京 , . a an is was loan fish water".split()


def _corpus(n: int, seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    return [[rng.choice(WORDS) for _ in range(rng.randint(0, 40))] for _ in range(n)]


def _plain(model, sentences):
    """One sentence at a time, char-CNN on every position, no cache, no sorting."""
    out = []
    with torch.inference_mode():
        for s in sentences:
            ids = batch_to_ids([s])
            wrapped = add_boundaries(ids, torch.tensor([len(s)]), model.bos_ids, model.eos_ids)
            tokens = model.token_encoder(wrapped)
            out.append(model.contextualize(tokens, torch.tensor([len(s) + 2])).layers[:, 0].numpy())
    return out


def test_embedder_defaults_equal_the_plain_path():
    model = random_bilm(seed=21)
    sentences = _corpus(150)
    expected = _plain(model, sentences)
    embedder = Embedder(model, batch_size=16, max_tokens=300, token_cache_size=8)  # tiny cache
    got = embedder.embed_sentences(sentences)
    assert len(embedder.token_cache) <= 8
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-5)
    uncached = Embedder(model, token_cache_size=0).embed_sentences(sentences)
    for e, g in zip(expected, uncached, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-5)


def test_distinct_token_encoding_equals_per_position():
    model = random_bilm(seed=22)
    ids = batch_to_ids(_corpus(20, seed=1))
    with torch.inference_mode():
        np.testing.assert_allclose(model.encode_tokens(ids), model.token_encoder(ids), atol=1e-6)
        # chunked char-CNN equals one pass
        np.testing.assert_allclose(model.token_encoder(ids, chunk_size=7),
                                   model.token_encoder(ids, chunk_size=100000), atol=1e-6)


@pytest.mark.filterwarnings("ignore:tokens longer than 48")
def test_char_cnn_on_the_longest_tokens_width_equals_all_positions():
    """Each chunk is cut to its longest token + the widest filter: the same as all 50."""
    model = random_bilm(seed=25)
    words = [*WORDS, "x" * 47, "é" * 24, "y" * 60, "<S>", "</S>", "antidisestablishment"]
    ids = batch_to_ids([words, words[::-1][:5]])  # the second row has absent tokens
    flat = ids.reshape(-1, ids.shape[-1])
    encoder = model.token_encoder
    with torch.inference_mode():
        full = encoder._encode(flat, flat.shape[1])  # every position, one pass
        for chunk_size in (1, 3, 1000):
            got = encoder(ids, chunk_size=chunk_size).reshape(full.shape)
            torch.testing.assert_close(got, full, atol=1e-6, rtol=0)


def test_inference_cell_and_zero_start_equal_the_autograd_path():
    """Without autograd the LSTM cell works in place and the first step skips h @ W."""
    model = random_bilm(seed=26)
    layer = model.lstm.layers[0]
    x = torch.randn(2, 4, 7, layer.input_weight.shape[1])
    lengths = torch.tensor([7, 5, 4, 2])
    with torch.enable_grad():
        expected, (h, c) = layer(x, lengths, layer.zero_state(4, x))  # no skipped step
    with torch.inference_mode():
        got, (got_h, got_c) = layer(x, lengths)
    for g, e in ((got, expected), (got_h, h), (got_c, c)):
        torch.testing.assert_close(g, e.detach(), atol=1e-6, rtol=0)


def test_skipping_the_last_boundary_step_changes_nothing():
    """Stateless: the forward stack stops before </S>, the backward before <S>."""
    model = random_bilm(seed=24)
    ids = batch_to_ids(_corpus(8, seed=4))
    with torch.inference_mode():
        inner = model(ids)
        full = model(ids, keep_boundaries=True)
    expected = full.layers[:, :, 1:-1] * inner.mask[None, :, :, None]
    torch.testing.assert_close(inner.layers, expected, atol=1e-6, rtol=0)


def test_time_chunked_gates_equal_one_chunk(monkeypatch):
    model = random_bilm(seed=23)
    ids = batch_to_ids(_corpus(6, seed=2))
    with torch.inference_mode():
        reference = model(ids).layers
        # One time step per input-gate matmul, in every back end.
        monkeypatch.setattr(LSTMBackend, "gate_chunk_bytes", 1)
        chunked = model(ids).layers
    torch.testing.assert_close(chunked, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("gate_chunk_bytes", [1, 64 * 2**20])
def test_in_place_inference_path_equals_the_autograd_path(gate_chunk_bytes, monkeypatch):
    """Inference reuses one gate buffer and adds the state product into it in place; the
    autograd path allocates every tensor anew. Both from zero state and from a given one."""
    model = random_bilm(seed=24)
    monkeypatch.setattr(LSTMBackend, "gate_chunk_bytes", gate_chunk_bytes)
    ids = batch_to_ids(_corpus(7, seed=5))
    with torch.inference_mode():
        fast = model(ids).layers
    with torch.enable_grad():
        plain = model(ids).layers.detach()
    torch.testing.assert_close(fast, plain, atol=1e-6, rtol=0)
    layer = model.lstm.layers[0]
    x = torch.randn(2, 3, 5, layer.proj_dim)  # (D, B, T, P): the input size is P
    state = (torch.randn(2, 3, layer.proj_dim), torch.randn(2, 3, layer.cell_dim))
    lengths = torch.tensor([5, 3, 2])
    with torch.inference_mode():
        fast_out, (fast_h, fast_c) = layer(x, lengths, state)
    with torch.enable_grad():
        plain_out, (plain_h, plain_c) = layer(x, lengths, state)
    for a, b in ((fast_out, plain_out), (fast_h, plain_h), (fast_c, plain_c)):
        torch.testing.assert_close(a, b.detach(), atol=1e-6, rtol=0)


def test_batches_respect_the_budget_and_cover_every_sentence():
    embedder = Embedder(random_bilm(), batch_size=5, max_tokens=60)
    lengths = [len(s) for s in _corpus(200, seed=3)]
    batches = embedder._plan_batches(lengths)
    assert sorted(i for b in batches for i in b) == list(range(200))
    for batch in batches:
        assert len(batch) <= 5
        assert len(batch) == 1 or len(batch) * (max(lengths[i] for i in batch) + 2) <= 60


@pytest.mark.skipif(not onednn._kernel_works(), reason="this torch build has no oneDNN kernels")
def test_onednn_inference_path_equals_the_default_kernels(monkeypatch):
    """fp32 inference takes oneDNN's prepacked products, repacks after a weight changes, and
    gives the numbers of torch's default kernels (ELMO_ONEDNN=0)."""
    monkeypatch.setattr(onednn, "MIN_MULTIPLY_ADDS", 0)  # the tiny model's products are small
    model = random_bilm(seed=27)
    ids = batch_to_ids(_corpus(9, seed=6))
    with torch.inference_mode():
        fast = model(ids).layers
    packed = model.lstm.layers[0].__dict__.get("_onednn_packed", {})
    assert set(packed) == {"input0", "input1", "state0", "state1", "proj0", "proj1"}
    assert "weight" in model.token_encoder.projection.__dict__["_onednn_packed"]
    monkeypatch.setenv("ELMO_ONEDNN", "0")
    with torch.inference_mode():
        default = model(ids).layers
    torch.testing.assert_close(fast, default, atol=1e-6, rtol=0)
    with torch.no_grad():  # a changed weight must not be served from the old packed copy
        model.lstm.layers[1].state_weight.mul_(0.5)
        model.token_encoder.projection.weight.mul_(2.0)
        changed_default = model(ids).layers
    monkeypatch.delenv("ELMO_ONEDNN")
    with torch.inference_mode():
        changed_fast = model(ids).layers
    assert not torch.allclose(changed_default, default, atol=1e-3)
    torch.testing.assert_close(changed_fast, changed_default, atol=1e-6, rtol=0)


@pytest.mark.skipif(not onednn._kernel_works(), reason="this torch build has no oneDNN kernels")
def test_onednn_path_takes_a_model_made_under_inference_mode(monkeypatch):
    """Inference tensors have no version counter; their packed copy is keyed without one."""
    monkeypatch.setattr(onednn, "MIN_MULTIPLY_ADDS", 0)
    with torch.inference_mode():
        model = random_bilm(seed=28)
        ids = batch_to_ids(_corpus(4, seed=7))
        fast = model(ids).layers
    with torch.enable_grad():
        plain = random_bilm(seed=28)(ids).layers.detach()
    torch.testing.assert_close(fast, plain, atol=1e-6, rtol=0)


def test_small_products_keep_the_default_kernel():
    """Below MIN_MULTIPLY_ADDS (a single row through a small matrix) oneDNN's call costs more."""
    weight = torch.empty(128, 4096)
    with torch.inference_mode():
        assert not onednn.enabled_for(torch.empty(1, 128), weight)
        assert onednn.enabled_for(torch.empty(2, 128), weight) == onednn._kernel_works()
        assert onednn.enabled_for(torch.empty(2, 3, 128), weight.t()) == onednn._kernel_works()
        assert not onednn.enabled_for(torch.empty(2, 1, 128), weight)  # (D, M, K): M = 1
    assert not onednn.enabled_for(torch.empty(64, 128), weight)  # autograd on
