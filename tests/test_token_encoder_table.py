"""A token encoder is one record in `elmo.token_encoders.TOKEN_ENCODERS`: the config's checks,
the character embedding, the char-CNN and its indexer, bilm-tf's options.json, `elmo info` and
a model card read it. A throwaway record added there is taken by all of them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from elmo import save_pretrained
from elmo.chars import ByteIndexer, VocabIndexer, token_indexer
from elmo.cli import main
from elmo.config import BiLMConfig
from elmo.embedding import Embedder
from elmo.loading.describe import architecture
from elmo.modules.bilm import BiLM
from elmo.token_encoders import TOKEN_ENCODERS
from tests.conftest import random_bilm

# A toy: UTF-8 bytes, as `bytes` reads them, that bilm-tf's options.json cannot describe and
# that `elmo info` and a model card name otherwise.
TOY = replace(TOKEN_ENCODERS["bytes"], name="toy-bytes", options_json=False,
              facts=lambda config: {"characters": "bytes, the toy's way"},
              summary=lambda facts: f"toy: {facts['characters']}",
              phrase=lambda config: "bytes read by a toy")


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(TOKEN_ENCODERS, TOY.name, TOY)


def test_an_unknown_encoder_is_refused_naming_the_table(toy):
    with pytest.raises(ValueError, match="token_encoder must be 'bytes' or 'vocab' or "
                       "'toy-bytes', got 'chars'"):
        BiLMConfig.preset("tiny", token_encoder="chars")


def test_a_toy_encoder_builds_and_embeds_as_its_record_says(toy, tmp_path, capsys):
    bytes_model = random_bilm(seed=4)
    config = BiLMConfig.from_dict({**bytes_model.config.to_dict(), "token_encoder": TOY.name})
    assert config.n_char_ids == 262 and isinstance(token_indexer(config), ByteIndexer)
    model = BiLM(config).eval()
    model.load_state_dict(bytes_model.state_dict())
    sentences = [["the", "cat"], ["a"]]
    for got, want in zip(Embedder(model, device="cpu").embed_sentences(sentences),
                         Embedder(bytes_model, device="cpu").embed_sentences(sentences),
                         strict=True):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="options.json describes byte-level"):
        config.to_options()
    facts = architecture(model)["token_encoder"]
    assert facts == {"kind": TOY.name, "max_characters_per_token": 50,
                     "characters": "bytes, the toy's way"}
    save_pretrained(model, tmp_path / "toy")
    assert main(["info", str(tmp_path / "toy")]) == 0
    assert "toy: bytes, the toy's way; words cut to 48 bytes" in capsys.readouterr().out


def test_the_vocabulary_encoder_reads_its_own_characters():
    chars = ("<bow>", "<eow>", "<bos>", "<eos>", "<oov>", "<pad>", "a")
    config = BiLMConfig.preset("tiny", token_encoder="vocab", char_vocab=chars)
    assert config.n_char_ids == len(chars) + 1
    assert isinstance(token_indexer(config), VocabIndexer)
    assert BiLM(config).token_encoder.pad_id == chars.index("<pad>") + 1
    assert torch.equal(token_indexer(config).batch_to_ids([["a"]])[0, 0, :3],
                       torch.tensor([2, 7, 1]))
