"""NLPL models (a ZIP archive of model.hdf5, options.json and vocab.txt, or its extracted
directory) as a MODEL, and elmo.simple_elmo.ElmoModel over them: checked against the
TensorFlow outputs of the official bilm-tf fixture, packed as NLPL packs its models."""

from __future__ import annotations

import gzip
import json
import shutil
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo import batch_to_ids, load_model
from elmo.cli import main
from elmo.errors import ElmoError, ModelFileError
from elmo.simple_elmo import ElmoModel
from tests.conftest import require_shared

FIXTURE = ("fixtures", "bilm-tf", "bilm-tf_tests_fixtures", "model")


@pytest.fixture(scope="module")
def fixture_dir() -> Path:
    return require_shared(*FIXTURE)


@pytest.fixture(scope="module")
def nlpl_zip(fixture_dir, tmp_path_factory) -> Path:
    """The official fixture model as an NLPL archive."""
    path = tmp_path_factory.mktemp("nlpl") / "fixture.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(fixture_dir / "lm_weights.hdf5", "model.hdf5")
        archive.write(fixture_dir / "options.json", "options.json")
        archive.write(fixture_dir / "vocab_test.txt", "vocab.txt")
    return path


@pytest.fixture(scope="module")
def nlpl_dir(fixture_dir, tmp_path_factory) -> Path:
    """The official fixture model as an extracted NLPL archive, its vocabulary gzipped."""
    path = tmp_path_factory.mktemp("nlpl-dir")
    shutil.copy(fixture_dir / "lm_weights.hdf5", path / "model.hdf5")
    shutil.copy(fixture_dir / "options.json", path / "options.json")
    with gzip.open(path / "vocab.txt.gz", "wb") as vocab:
        vocab.write((fixture_dir / "vocab_test.txt").read_bytes())
    return path


def tensorflow_batches(fixture_dir: Path) -> list[tuple[list[list[str]], list[np.ndarray]]]:
    """The fixture's 10 batches of 3 sentences, each with TensorFlow's top layers (n, 2P)."""
    sentences = json.loads((fixture_dir / "lm_embeddings_sentences.json").read_text())
    expected = [h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    return [([sentences[k][i].split() for k in range(3)],
             [np.concatenate(list(expected[k][str(i)][...]), axis=-1) for k in range(3)])
            for i in range(10)]


def test_a_zip_archive_gives_tensorflows_numbers(nlpl_zip, fixture_dir):
    loaded = load_model(nlpl_zip)
    assert loaded.format == "nlpl" and loaded.files.paths == [nlpl_zip]
    model = loaded.bilm
    model.stateful = True  # the fixture's outputs carry the state from batch to batch
    with torch.inference_mode():
        for batch, tops in tensorflow_batches(fixture_dir):
            layers = model(batch_to_ids(batch)).layers
            for k, top in enumerate(tops):
                np.testing.assert_allclose(layers[-1, k, : len(batch[k])].numpy(), top,
                                           atol=1e-5, rtol=1e-5)


def test_the_archive_is_not_unpacked_to_disk(nlpl_zip):
    before = sorted(nlpl_zip.parent.iterdir())
    load_model(nlpl_zip)
    assert sorted(nlpl_zip.parent.iterdir()) == before


def test_an_extracted_directory_loads_the_same_weights(nlpl_zip, nlpl_dir):
    loaded = load_model(nlpl_dir)
    assert loaded.format == "nlpl"
    expected = load_model(nlpl_zip).bilm.state_dict()
    for name, tensor in loaded.bilm.state_dict().items():
        torch.testing.assert_close(tensor, expected[name], atol=0, rtol=0)


def test_elmo_info_names_the_layout(nlpl_zip, capsys):
    assert main(["info", str(nlpl_zip), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "nlpl"


def test_a_zip_without_the_model_names_what_it_lacks(tmp_path):
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("README", "not a model")
    with pytest.raises(ModelFileError, match=r"other.zip holds no NLPL model .*model.hdf5.*"
                                             r"found README"):
        load_model(path)


# ---- simple_elmo ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def simple_elmo(nlpl_zip) -> ElmoModel:
    model = ElmoModel()
    assert model.load(str(nlpl_zip), max_batch_size=2) == "The model is now loaded."
    return model


def test_simple_elmo_top_layer_is_tensorflows_first_batch(simple_elmo, fixture_dir):
    batch, tops = tensorflow_batches(fixture_dir)[0]  # from a zero state, as ours always are
    vectors = simple_elmo.get_elmo_vectors(batch, layers="top")
    longest = max(map(len, batch))
    assert vectors.shape == (3, longest, simple_elmo.vector_size)
    for row, tokens, top in zip(vectors, batch, tops, strict=True):
        np.testing.assert_allclose(row[: len(tokens)], top, atol=1e-5, rtol=1e-5)
        assert not row[len(tokens):].any()


def test_simple_elmo_layers_and_averages(simple_elmo, fixture_dir):
    texts = tensorflow_batches(fixture_dir)[1][0]
    every = simple_elmo.get_elmo_vectors(texts, layers="all")
    assert every.shape == (3, simple_elmo.n_layers, max(map(len, texts)),
                           simple_elmo.vector_size)
    average = simple_elmo.get_elmo_vectors(texts)  # layers="average" by default
    np.testing.assert_allclose(average, every.mean(axis=1), atol=1e-6)
    sentence_vectors = simple_elmo.get_elmo_vector_average(texts)
    for vector, row, tokens in zip(sentence_vectors, average, texts, strict=True):
        mean = row[: len(tokens)].mean(axis=0)
        np.testing.assert_allclose(vector, mean / np.linalg.norm(mean), atol=1e-6)
    assert simple_elmo.get_elmo_vector_average(texts, layers="all").shape == (
        3, simple_elmo.n_layers, simple_elmo.vector_size)


def test_simple_elmo_script_steps(simple_elmo, fixture_dir):
    """What simple_elmo's example get_elmo_vectors.py does: vectors of the first sentences of
    a file, cropped to each sentence, then dot products with one query token."""
    sentences = [s.split()[:100] for s in
                 json.loads((fixture_dir / "lm_embeddings_sentences.json").read_text())[0]]
    vectors = simple_elmo.get_elmo_vectors(sentences, layers="average")
    cropped = [v[: len(s), :] for v, s in zip(vectors, sentences, strict=True)]
    assert [c.shape for c in cropped] == [(len(s), simple_elmo.vector_size) for s in sentences]
    assert all(np.abs(c).sum(axis=1).all() for c in cropped)  # no padding row left
    query = cropped[-2][1, :]
    similarities = [np.dot(query, c[nr, :]) for c in cropped for nr in range(len(c))]
    assert np.isfinite(similarities).all()


def test_simple_elmo_errors_say_the_fix(nlpl_zip):
    model = ElmoModel()
    with pytest.raises(ElmoError, match="call load"):
        model.get_elmo_vectors([["a"]])
    with pytest.raises(ElmoError, match="get_elmo_substitutes"):
        model.load(str(nlpl_zip), full=True)
    model.load(str(nlpl_zip))
    with pytest.raises(ElmoError, match="layers must be one of all, top, average"):
        model.get_elmo_vectors([["a"]], layers="middle")
