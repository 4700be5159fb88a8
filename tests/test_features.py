"""The feature cache: computed once, reused, invalidated, never trusted when incomplete."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from elmo import batch_to_ids
from elmo.embed import CHUNK_BATCHES, Embedder
from elmo.errors import ElmoError
from elmo.tasks.features import cache_key, cached_layers
from tests.conftest import random_bilm

SENTENCES = [["The", "cat", "sat"], ["Dogs", "bark", "loudly", "at", "night"], [], ["A"]]


class CountingEmbeds:
    """Counts the sentences the Embedder computes; optionally fails after `fail_after`."""

    def __init__(self, monkeypatch, fail_after: int | None = None) -> None:
        self.count, self.fail_after = 0, fail_after
        original = Embedder.iter_embeddings

        def counting(embedder, sentences, start=0):
            for item in original(embedder, sentences, start):
                if self.fail_after is not None and self.count == self.fail_after:
                    raise KeyboardInterrupt  # a killed run
                self.count += 1
                yield item

        monkeypatch.setattr(Embedder, "iter_embeddings", counting)


def expected_layers(bilm, sentence):
    return bilm(batch_to_ids([sentence])).layers[:, 0].detach().numpy()


def test_layers_are_the_bilm_layers_and_read_per_batch(tmp_path):
    bilm = random_bilm()
    store = cached_layers(bilm, SENTENCES, tmp_path, progress=False)
    assert len(store) == 4 and store.num_layers == 3 and store.dim == bilm.config.output_dim
    for i, sentence in enumerate(SENTENCES):
        assert store[i].shape == (3, len(sentence), store.dim)
        assert store.length(i) == len(sentence)
        if sentence:
            np.testing.assert_allclose(store[i], expected_layers(bilm, sentence), atol=1e-5)
    layers, mask = store.batch([1, 0, 2])
    assert layers.shape == (3, 3, 5, store.dim)
    assert mask.sum(1).tolist() == [5, 3, 0]
    torch.testing.assert_close(layers[:, 1, :3], torch.from_numpy(store[0]))
    assert layers[:, 1, 3:].abs().sum() == 0
    with pytest.raises(IndexError):
        store[4]
    every = np.concatenate([store[i] for i in range(4)], axis=1)  # (L+1, all tokens, 2P)
    np.testing.assert_allclose(store.layer_rms, np.sqrt((every**2).mean(axis=(1, 2))),
                               rtol=1e-5)


def test_second_call_computes_nothing(tmp_path, monkeypatch):
    counter = CountingEmbeds(monkeypatch)
    bilm = random_bilm()
    first = cached_layers(bilm, SENTENCES, tmp_path, progress=False)
    assert counter.count == 4
    second = cached_layers(random_bilm(), SENTENCES, tmp_path, progress=False)  # equal weights
    assert counter.count == 4
    assert second.path == first.path
    np.testing.assert_array_equal(second[1], first[1])


def test_invalidated_when_the_model_or_the_sentences_change(tmp_path, monkeypatch):
    counter = CountingEmbeds(monkeypatch)
    cached_layers(random_bilm(0), SENTENCES, tmp_path, progress=False)
    other = cached_layers(random_bilm(1), SENTENCES, tmp_path, progress=False)
    assert counter.count == 8
    np.testing.assert_allclose(other[0], expected_layers(random_bilm(1), SENTENCES[0]),
                               atol=1e-5)
    changed = [["The", "cat", "sat"], ["Dogs", "bark", "loudly", "at", "noon"], [], ["A"]]
    cached_layers(random_bilm(0), changed, tmp_path, progress=False)
    assert counter.count == 12
    cached_layers(random_bilm(0), SENTENCES, tmp_path, dtype="float16", progress=False)
    assert counter.count == 16
    assert len({cache_key(random_bilm(0), SENTENCES, "float32"),
                cache_key(random_bilm(0), changed, "float32"),
                cache_key(random_bilm(1), SENTENCES, "float32")}) == 3


def test_a_killed_run_leaves_no_trusted_entry_and_resumes(tmp_path, monkeypatch):
    counter = CountingEmbeds(monkeypatch, fail_after=100)
    bilm, batch_size = random_bilm(), 64 // CHUNK_BATCHES
    with pytest.raises(KeyboardInterrupt):
        cached_layers(bilm, SENTENCES * 300, tmp_path, batch_size=batch_size, progress=False)
    assert not list(tmp_path.glob("*.hdf5"))  # only the .partial
    assert list(tmp_path.glob("*.hdf5.partial"))
    counter.fail_after, computed_before = None, counter.count
    store = cached_layers(bilm, SENTENCES * 300, tmp_path, batch_size=batch_size, progress=False)
    assert len(store) == 1200
    np.testing.assert_allclose(store[1], expected_layers(bilm, SENTENCES[1]), atol=1e-5)
    assert not list(tmp_path.glob("*.partial"))
    # progress is recorded every CHUNK_BATCHES batches (64 sentences here): the rest is recomputed
    assert computed_before == 100 and counter.count == 100 + 1200 - 64


def test_a_corrupt_or_foreign_entry_is_recomputed(tmp_path, monkeypatch):
    counter = CountingEmbeds(monkeypatch)
    bilm = random_bilm()
    path = tmp_path / f"{cache_key(bilm, SENTENCES, 'float32')}.hdf5"
    path.write_bytes(b"not hdf5, a file cut short")
    store = cached_layers(bilm, SENTENCES, tmp_path, progress=False)
    assert counter.count == 4 and len(store) == 4
    store.close()
    with h5py.File(path, "a") as f:  # an entry whose key does not match
        f.attrs["key"] = "something else"
    cached_layers(bilm, SENTENCES, tmp_path, progress=False)
    assert counter.count == 8


def test_float16_storage_is_read_back_as_float32(tmp_path):
    bilm = random_bilm()
    store = cached_layers(bilm, SENTENCES, tmp_path, dtype="float16", progress=False)
    assert store[1].dtype == np.float32
    np.testing.assert_allclose(store[1], expected_layers(bilm, SENTENCES[1]), rtol=2e-3,
                               atol=2e-3)
    with pytest.raises(ElmoError, match="dtype"):
        cached_layers(bilm, SENTENCES, tmp_path, dtype="int8")
