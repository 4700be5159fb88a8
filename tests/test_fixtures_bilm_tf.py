"""Conformance with the original TensorFlow outputs in ../shared/fixtures/bilm-tf."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from elmo import batch_to_ids, load_bilm_tf
from tests.conftest import require_shared
from tests.helpers.model_files import FIXTURES


def _load(name: str):
    folder, sentences_file, _, _ = FIXTURES[name]
    root = require_shared("fixtures", "bilm-tf", folder)
    model = load_bilm_tf(root / "options.json", root / "lm_weights.hdf5")
    sentences = json.loads((root / sentences_file).read_text())
    expected = [h5py.File(root / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    return model, sentences, expected


def _expected_top(expected, k: int, i: int) -> np.ndarray:
    data = expected[k][str(i)][...]  # (2, n, P): forward, backward
    return np.concatenate([data[0], data[1]], axis=-1)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_stateful_matches_tensorflow_all_sentences(name):
    model, sentences, expected = _load(name)
    model.stateful = True
    model.reset_states()
    checked = 0
    with torch.inference_mode():
        for i in range(10):
            batch = [sentences[k][i].split() for k in range(3)]
            out = model(batch_to_ids(batch))
            for k, tokens in enumerate(batch):
                got = out.layers[-1, k, : len(tokens)].numpy()
                np.testing.assert_allclose(got, _expected_top(expected, k, i), atol=1e-5, rtol=1e-5)
                assert not out.layers[:, k, len(tokens) :].any(), "padding must be zero"
                checked += 1
    assert checked == 30


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_stateless_first_batch_matches_and_later_ones_differ(name):
    model, sentences, expected = _load(name)
    with torch.inference_mode():
        for i in (0, 1):
            batch = [sentences[k][i].split() for k in range(3)]
            out = model(batch_to_ids(batch))
            for k, tokens in enumerate(batch):
                got = out.layers[-1, k, : len(tokens)].numpy()
                if i == 0:
                    np.testing.assert_allclose(got, _expected_top(expected, k, 0), atol=1e-5,
                                               rtol=1e-5)
                else:  # the expected values carry state from batch 0; stateless must not
                    assert np.abs(got - _expected_top(expected, k, i)).max() > 0.1


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_token_embeddings_match_tensorflow(name):
    model, _, _ = _load(name)
    _, _, embeddings_file, vocab_file = FIXTURES[name]
    root = require_shared("fixtures", "bilm-tf")
    words = (root / vocab_file).read_text(encoding="utf-8").split("\n")
    words = [w for w in words if w]
    expected = h5py.File(root / embeddings_file, "r")["embedding"][...]
    assert len(words) == expected.shape[0]
    with torch.inference_mode():
        got = model.token_encoder(batch_to_ids([words])[0]).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_stateful_reset_restarts_from_zero():
    model, sentences, expected = _load("allennlp")
    model.stateful = True
    batch = [sentences[k][0].split() for k in range(3)]
    with torch.inference_mode():
        first = model(batch_to_ids(batch)).layers
        carried = model(batch_to_ids(batch)).layers
        model.reset_states()
        again = model(batch_to_ids(batch)).layers
    assert (first - carried).abs().max() > 0.1
    torch.testing.assert_close(first, again, atol=0, rtol=0)
