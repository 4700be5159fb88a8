"""The model that ships inside the package: present, small, loadable offline, and sensible."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from elmo.cli import main
from elmo.embed import Embedder
from elmo.pretrained import shipped_model_dir
from elmo.training.model_init import load_language_model
from tests.conftest import require_shared


def test_default_model_ships_with_a_card_and_stays_small():
    directory = shipped_model_dir()
    for name in ("config.json", "model.safetensors", "vocab.txt", "MODEL_CARD.md", "card.json"):
        assert (directory / name).is_file(), name
    assert (directory / "model.safetensors").stat().st_size < 30 * 2**20
    card = json.loads((directory / "card.json").read_text())
    assert card["perplexity"]["wikitext-2 test"]["average"] < 1000


def test_embedder_and_cli_use_it_with_no_network(tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    embedder = Embedder.from_pretrained()
    layers = embedder.embed_sentence("The river bank was muddy .".split())
    assert layers.shape == (3, 6, 256) and np.isfinite(layers).all()
    src = tmp_path / "in.txt"
    src.write_text("The river bank was muddy .\n", encoding="utf-8")
    assert main(["embed", "default", str(src), str(tmp_path / "out.hdf5"), "--quiet"]) == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        np.testing.assert_allclose(f["0"][...], layers, atol=1e-5)


def test_its_softmax_prefers_real_text_to_shuffled_text():
    lm, vocab = load_language_model(shipped_model_dir())
    from elmo.training.evaluate import evaluate_perplexity

    text = "the city is located on the north bank of the river .".split()
    real = evaluate_perplexity(lm, [text], vocab, 8).average
    shuffled = evaluate_perplexity(lm, [sorted(text)], vocab, 8).average
    assert real < shuffled


@pytest.mark.slow
def test_perplexity_command_on_wikitext2_test_prints_the_cards_figures(capsys):
    """The acceptance command: `elmo perplexity default ../shared/.../test.txt --json`."""
    test_file = require_shared("data", "wikitext-2", "test.txt")
    card = json.loads((shipped_model_dir() / "card.json").read_text())
    expected = card["perplexity"]["wikitext-2 test"]
    assert main(["perplexity", "default", str(test_file), "--json", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["tokens"] == expected["tokens"]
    for direction in ("forward", "backward", "average"):
        assert printed[direction] == pytest.approx(expected[direction], rel=1e-4), direction
