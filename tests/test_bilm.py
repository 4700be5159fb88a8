"""BiLM behaviour: shapes, masks, batch invariance, stateful carrying, long input."""

from __future__ import annotations

import random

import pytest
import torch

from elmo import batch_to_ids
from tests.conftest import random_bilm

WORDS = "the a cat dog sat on mat bank river money 北京 ünïcode , . ! ?".split()


def _sentences(n: int, seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    return [[rng.choice(WORDS) for _ in range(rng.randint(1, 30))] for _ in range(n)]


def _embed(model, batch):
    with torch.inference_mode():
        out = model(batch_to_ids(batch))
    return [out.layers[:, b, : len(s)] for b, s in enumerate(batch)], out


def test_output_shapes_and_mask(tiny_bilm):
    batch = [["a", "b", "c"], ["d"]]
    (first, second), out = _embed(tiny_bilm, batch)
    assert out.layers.shape == (3, 2, 3, 32)
    assert out.mask.tolist() == [[True, True, True], [True, False, False]]
    assert not out.layers[:, 1, 1:].any()
    # layer 0 is the token encoding twice
    torch.testing.assert_close(out.layers[0, :, :, :16], out.layers[0, :, :, 16:])


@pytest.mark.parametrize("skip", [True, False])
def test_stateless_vectors_do_not_depend_on_batch(skip):
    model = random_bilm(seed=1, use_skip_connections=skip)
    pool = _sentences(200, seed=2)
    target = pool[0]
    (alone,), _ = _embed(model, [target])
    for size in (1, 7, 64):
        others = pool[1:size]
        for batch in ([target, *others], [*others, target], list(reversed([target, *others]))):
            vectors, _ = _embed(model, batch)
            got = vectors[batch.index(target)]
            assert (got - alone).abs().max() <= 1e-5, f"batch of {size}"
    # a long neighbour (more padding for the target) changes nothing either
    vectors, _ = _embed(model, [target, ["x"] * 200])
    assert (vectors[0] - alone).abs().max() <= 1e-5


def test_direction_independence(tiny_bilm):
    """The forward half at position t sees only tokens <= t; the backward half only >= t."""
    a = "the cat sat on the mat".split()
    b = "the cat sat on a river bank".split()
    (va, vb), _ = _embed(tiny_bilm, [a, b])
    p = tiny_bilm.config.projection_dim
    # first 4 tokens equal: forward halves equal there, backward halves differ
    torch.testing.assert_close(va[1:, :4, :p], vb[1:, :4, :p])
    assert (va[1:, :4, p:] - vb[1:, :4, p:]).abs().max() > 1e-4


def test_stateful_carries_state_per_row_and_batch_size_changes():
    model = random_bilm(seed=3)
    s = _sentences(5, seed=4)
    model.stateful = True
    _embed(model, s[:3])
    (row0_carried, row1_carried), _ = _embed(model, s[3:5])  # 2 rows; row 2 keeps its state
    model.reset_states()
    (row0_fresh, _), _ = _embed(model, s[3:5])
    assert (row0_carried - row0_fresh).abs().max() > 1e-4
    # row 2's state survived the smaller batch: a 3-row call now uses it
    model.stateful = False
    (stateless_row2,), _ = _embed(model, [s[0]])
    model.stateful = True
    model.reset_states()
    _embed(model, s[:3])
    _embed(model, s[3:5])
    vectors, _ = _embed(model, [s[0], s[0], s[0]])
    assert (vectors[2] - stateless_row2).abs().max() > 1e-4


def test_a_3000_token_sentence_embeds(tiny_bilm):
    sentence = _sentences(1, seed=5)[0] * 200
    sentence = sentence[:3000]
    (vectors,), _ = _embed(tiny_bilm, [sentence])
    assert vectors.shape == (3, 3000, 32)
    assert torch.isfinite(vectors).all()


def test_gradients_flow_in_training_mode(tiny_bilm):
    tiny_bilm.train()
    out = tiny_bilm(batch_to_ids(_sentences(4)))
    out.layers.sum().backward()
    grads = [p.grad for p in tiny_bilm.parameters()]
    assert all(g is not None for g in grads)
