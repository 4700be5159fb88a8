"""`elmo.bio.SeqVecEmbedder`: bio_embeddings' names and shapes, on any biLM."""

from __future__ import annotations

import numpy as np
import pytest

from elmo import save_bilm_tf, save_pretrained
from elmo.bio import SeqVecEmbedder
from elmo.embed import Embedder
from elmo.errors import ElmoError
from tests.conftest import random_bilm

PROTEINS = ["MKVLAAGIVG", "MSTNPKPQRKTKRNTNRRPQDVKFPGG", "AC", "MKVLAAGIVG" * 30]


@pytest.fixture(scope="module")
def bilm():
    return random_bilm(seed=23)


def test_shapes_names_and_per_protein_vectors(bilm):
    seqvec = SeqVecEmbedder(bilm)
    assert seqvec.name == "seqvec"
    assert (seqvec.number_of_layers, seqvec.embedding_dimension) == (3, 32)
    one = seqvec.embed(PROTEINS[1])
    assert one.shape == (3, len(PROTEINS[1]), 32) and one.dtype == np.float32
    np.testing.assert_array_equal(one, Embedder(bilm).embed_sentence(list(PROTEINS[1])))
    per_protein = SeqVecEmbedder.reduce_per_protein(one)
    assert per_protein.shape == (32,)
    np.testing.assert_allclose(per_protein, one.sum(axis=0).mean(axis=0))


@pytest.mark.parametrize("batch_size", [None, 12, 15000])
def test_embed_many_is_in_input_order_and_stateless(bilm, batch_size):
    seqvec = SeqVecEmbedder(bilm)
    alone = [seqvec.embed(p) for p in PROTEINS]
    many = list(seqvec.embed_many(iter(PROTEINS), batch_size))
    assert [m.shape for m in many] == [a.shape for a in alone]
    for m, a in zip(many, alone, strict=True):
        np.testing.assert_allclose(m, a, atol=1e-5)
    batch = list(seqvec.embed_batch(PROTEINS[:2]))
    np.testing.assert_allclose(batch[1], alone[1], atol=1e-5)


def test_the_files_bio_embeddings_users_pass(bilm, tmp_path):
    options, weights = save_bilm_tf(bilm, tmp_path / "pair")
    by_files = SeqVecEmbedder(options_file=options, weights_file=weights)
    by_directory = SeqVecEmbedder(model_directory=tmp_path / "pair")
    by_ours = SeqVecEmbedder(save_pretrained(bilm, tmp_path / "ours"))
    expected = SeqVecEmbedder(bilm).embed(PROTEINS[0])
    for embedder in (by_files, by_directory, by_ours):
        np.testing.assert_allclose(embedder.embed(PROTEINS[0]), expected, atol=1e-6)


def test_what_is_not_a_sequence_is_refused(bilm):
    seqvec = SeqVecEmbedder(bilm)
    with pytest.raises(ElmoError, match="empty protein"):
        seqvec.embed("")
    with pytest.raises(TypeError, match="str of residue letters"):
        seqvec.embed(list("MKV"))
