"""The spaCy pipe "elmo" (elmo.spacy): doc.tensor and vectors from the Embedder, batching,
similarity, saving and loading a pipeline, Chinese."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from elmo.embed import Embedder
from elmo.errors import ElmoError
from tests.conftest import REPO

spacy = pytest.importorskip("spacy")

TEXTS = ["We sat on the bank of the river .", "The bank raised its rates .", "Hello"]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder.from_pretrained("default")


def elmo_pipeline(**config):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config=config)
    return nlp


def test_the_factory_is_found_without_importing_elmo():
    code = ("import spacy, sys; nlp = spacy.blank('en'); nlp.add_pipe('elmo'); "
            "print(nlp('a b c').tensor.shape)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[-2] == "(3, 256)"


@pytest.mark.parametrize("layers", ["average", "top", "all", 1])
def test_doc_tensor_is_the_embedders_layers(layers, embedder):
    nlp = elmo_pipeline(layers=layers)
    docs = list(nlp.pipe(TEXTS, batch_size=2))
    # the pipe embeds each batch of docs at once: so does the Embedder here (a sentence's
    # vectors alone or in a batch differ by float rounding, ~1e-6 on some CPUs' kernels)
    batches = [docs[i:i + 2] for i in range(0, len(docs), 2)]
    expected_all = [layers_of_doc for batch in batches for layers_of_doc in
                    embedder.embed_sentences([[t.text for t in doc] for doc in batch])]
    for doc, expected in zip(docs, expected_all, strict=True):
        want = {"average": expected.mean(axis=0), "top": expected[-1], 1: expected[1],
                "all": np.concatenate(list(expected), axis=-1)}[layers]
        np.testing.assert_allclose(doc.tensor, want, atol=1e-6, rtol=0)


def test_vectors_and_similarity_of_tokens_spans_and_docs():
    doc = elmo_pipeline()(TEXTS[0])
    assert doc.tensor.shape == (len(doc), 256)
    np.testing.assert_array_equal(doc[3].vector, doc.tensor[3])
    np.testing.assert_allclose(doc[2:5].vector, doc.tensor[2:5].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(doc.vector, doc.tensor.mean(axis=0), rtol=1e-6)
    assert doc.has_vector and doc[0].has_vector
    assert 0 < doc[3].similarity(doc[7]) < 1
    assert doc.similarity(doc) == pytest.approx(1.0)


def test_a_river_bank_is_closer_to_a_river_bank_than_to_a_money_bank():
    """With the shipped model `default`, in parallel contexts (see docs/spacy.md: it tells
    the senses apart only weakly)."""
    nlp = elmo_pipeline()

    def bank(text):
        doc = nlp(text)
        return doc[[t.text for t in doc].index("bank")]

    river = bank("we sat on the bank of the river .")
    other_river = bank("the boat drifted towards the bank of the stream .")
    for money in ("the bank raised its interest rates .", "she deposited the money at the bank .",
                  "the bank lent money to the company .", "he opened an account at the bank ."):
        assert river.similarity(other_river) > river.similarity(bank(money))


def test_a_saved_pipeline_loads_with_the_same_vectors(tmp_path):
    nlp = elmo_pipeline(layers="top", batch_size=8)
    nlp.to_disk(tmp_path / "pipeline")
    assert not list((tmp_path / "pipeline").rglob("*.safetensors"))  # referenced, not copied
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.get_pipe_config("elmo") == {"factory": "elmo", "model": "default",
                                              "layers": "top", "device": None, "batch_size": 8}
    for text in TEXTS:
        np.testing.assert_array_equal(loaded(text).tensor, nlp(text).tensor)


def test_a_learned_mix_weighs_the_layers(tmp_path, embedder):
    (tmp_path / "layer_weights.json").write_text(json.dumps({"input": [0.5, 0.25, 0.25]}))
    doc = elmo_pipeline(layers=str(tmp_path / "layer_weights.json"))(TEXTS[1])
    layers = embedder.embed_sentence([t.text for t in doc])
    np.testing.assert_allclose(doc.tensor, 0.5 * layers[0] + 0.25 * (layers[1] + layers[2]),
                               atol=1e-6)


@pytest.mark.parametrize("layers, message", [(3, "layers 0 to 2"),
                                             ("middle", "layers must be one of all, top")])
def test_a_wrong_layer_choice_is_named(layers, message):
    with pytest.raises(ElmoError, match=message):
        elmo_pipeline(layers=layers)


def test_cuda_without_cuda_names_the_config_key(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(ElmoError) as caught:
        elmo_pipeline(device="cuda")
    assert str(caught.value).endswith('CUDA is not available; use config={"device": "cpu"}')


def test_a_doc_without_tokens():
    doc = elmo_pipeline()("")
    assert doc.tensor.shape == (0, 256) and not doc.vector.any()


@pytest.mark.parametrize("segmenter", ["char", "jieba"])
def test_a_chinese_pipeline(segmenter):
    if segmenter == "jieba":
        pytest.importorskip("jieba")
    nlp = spacy.blank("zh", config={"nlp": {"tokenizer": {"segmenter": segmenter}}})
    nlp.add_pipe("elmo", config={"model": "default-zh"})
    doc = nlp("我们在河边坐着。")
    width = Embedder.from_pretrained("default-zh").model.config.output_dim
    assert doc.tensor.shape == (len(doc), width) and np.isfinite(doc.tensor).all()
