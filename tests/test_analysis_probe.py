"""`elmo analyze probe`: the probe's scoring on hand-made features, features gathered once per
sentence for all layers, bad tag columns, and the command's JSON."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from elmo import save_pretrained
from elmo.analysis.probe import (
    TokenFeatures,
    majority_accuracy,
    probe_accuracy,
    probe_layers,
    token_features,
)
from elmo.cli import main
from elmo.embed import Embedder
from elmo.errors import ElmoError
from elmo.tasks.readers import TaggedSentence
from tests.conftest import random_bilm
from tests.helpers.tasks import CONLLU


def hand_made(n: int, seed: int) -> TokenFeatures:
    """Layer 0 is constant (knows nothing), layer 1 places each tag at its own corner,
    layer 2 is noise."""
    rng = np.random.default_rng(seed)
    tags = np.array(["NOUN", "VERB", "DET"])[rng.choice(3, size=n, p=[0.5, 0.3, 0.2])]
    corners = {"NOUN": [4, 0], "VERB": [0, 4], "DET": [-4, -4]}
    layer1 = np.array([corners[t] for t in tags]) + rng.normal(0, 0.3, size=(n, 2))
    layers = np.stack([np.ones((n, 2)), layer1, rng.normal(size=(n, 2))]).astype(np.float32)
    return TokenFeatures(layers, tags)


def test_probe_scores_what_each_layer_knows():
    train, test = hand_made(300, 0), hand_made(200, 1)
    accuracy = probe_layers(train, test)
    assert list(accuracy) == ["0", "1", "2", "average"]
    majority = majority_accuracy(train.tags, test.tags)
    assert majority == pytest.approx(100 * np.mean(test.tags == "NOUN"))
    assert accuracy["0"] == pytest.approx(majority)  # a constant layer: the majority tag
    assert accuracy["1"] == 100.0
    assert accuracy["2"] < 75  # noise: little above the majority tag
    assert accuracy["average"] > 95  # the average keeps layer 1's corners, shrunk


def test_probe_accuracy_counts_test_tags_never_seen_in_training():
    x = np.array([[0.0], [1.0], [0.0], [1.0]])
    y = np.array(["A", "B", "A", "B"])
    test_y = np.array(["A", "B", "C", "C"])  # C cannot be predicted
    assert probe_accuracy(x, y, x, test_y) == 50.0
    with pytest.raises(ElmoError, match="fewer than 2 distinct tags"):
        probe_accuracy(x, np.array(["A"] * 4), x, y)


def test_missing_scikit_learn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.linear_model", None)  # import now fails
    with pytest.raises(ElmoError, match=r"needs scikit-learn: pip install 'elmo-bilm\[analysis\]'"):
        probe_accuracy(np.zeros((2, 1)), np.array(["A", "B"]), np.zeros((1, 1)), np.array(["A"]))


def test_token_features_embed_each_sentence_once_in_order():
    embedder = Embedder(random_bilm(seed=1))
    sentences = [TaggedSentence("the cat sat".split(), ["DET", "NOUN", "VERB"]),
                 TaggedSentence(["runs"], ["VERB"]),
                 TaggedSentence("a dog".split(), ["DET", "NOUN"])]
    calls = []
    original = embedder.embed_batch
    embedder.embed_batch = lambda batch: calls.append(len(batch)) or original(batch)
    features = token_features(embedder, sentences, progress=False)
    assert sum(calls) == 3  # one pass for all layers
    assert features.layers.shape == (3, 6, 32)
    assert features.tags.tolist() == ["DET", "NOUN", "VERB", "VERB", "DET", "NOUN"]
    np.testing.assert_allclose(features.layers[:, 3:4], embedder.embed_sentence(["runs"]),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(features.representation("average"),
                               features.layers.mean(axis=0))


def test_cli_json_and_an_unknown_tag_column(tmp_path, capsys):
    model = save_pretrained(random_bilm(seed=6), tmp_path / "model")
    data = tmp_path / "toy.conllu"
    data.write_text(CONLLU, encoding="utf-8")
    args = ["analyze", "probe", "--model", str(model), "--train", str(data), "--test",
            str(data), "--quiet"]
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result["accuracy"]) == ["0", "1", "2", "average"]
    assert all(0 <= a <= 100 for a in result["accuracy"].values())
    assert result["train_tokens"] == 6 and result["tags"] == 3

    conll = tmp_path / "toy.conll"
    conll.write_text("the DT\ncat NN\n\na DT\ndog NN\n", encoding="utf-8")
    code = main(["analyze", "probe", "--model", str(model), "--train", str(conll), "--test",
                 str(conll), "--format", "conll", "--tag-column", "4", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and "toy.conll, line 1: no tag" in err and "--tag-column" in err
    assert "Traceback" not in err
