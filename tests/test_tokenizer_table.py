"""A tokenizer is one record in `TOKENIZERS`: a throwaway tokenizer added there is taken by
`elmo embed --tokenizer`, `elmo train --tokenizer` (and a model recording it), `elmo task`,
the model card of `push_to_hub`, and the span task's reader and scores."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

from elmo import load_model, save_pretrained
from elmo.cli import main
from elmo.embed import Embedder
from elmo.loading.hf_hub import parse_hub_name
from elmo.tasks.span import SpanTask
from elmo.tasks.squad import read_squad
from elmo.tokenize import TOKENIZERS, TokenizerKind, get_tokenizer
from tests.conftest import random_bilm
from tests.helpers.training import train_args, write_corpus

LINES = ["a well-known ice-cream shop", "twenty-one", "no dashes here"]


class Dashes:
    """A toy tokenizer: white space splits, and each dash is a token of its own."""

    def __call__(self, text: str) -> list[str]:
        return re.findall(r"[^\s-]+|-", text)


# It claims jieba's extra (to see it on the model card) and scores answers by characters.
TOY = TokenizerKind("dashes", "a toy: dashes are tokens", Dashes, needs="jieba",
                    characters=True)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(TOKENIZERS, TOY.name, TOY)


def test_a_toy_tokenizer_is_found_by_name(toy):
    assert get_tokenizer("dashes")("ice-cream  shop") == ["ice", "-", "cream", "shop"]
    assert TOY.extra == "zh"


def test_a_toy_tokenizer_reaches_elmo_embed(toy, tmp_path):
    bilm = random_bilm(seed=5)
    model = save_pretrained(bilm, tmp_path / "model")
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert main(["embed", str(model), str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"),
                 "--tokenizer", "dashes", "--quiet", "--device", "cpu"]) == 0
    embedder = Embedder(bilm, device="cpu")
    with h5py.File(tmp_path / "out.hdf5") as f:
        for i, line in enumerate(LINES):
            np.testing.assert_allclose(f[str(i)][()],
                                       embedder.embed_sentence(Dashes()(line)), atol=1e-6)


def test_a_toy_tokenizer_reaches_elmo_train_and_the_model_it_records(toy, tmp_path):
    train, _ = write_corpus(tmp_path)
    train.write_text("\n".join(f"{line} well-known" for line in
                               train.read_text(encoding="utf-8").splitlines()) + "\n")
    out = tmp_path / "run"
    assert main(train_args(train, None, out, "--max-steps", "2", "--tokenizer", "dashes")) == 0
    assert json.loads((out / "run.json").read_text())["config"]["tokenizer"] == "dashes"
    assert "-" in (out / "vocab.txt").read_text(encoding="utf-8").split()
    assert Embedder.from_pretrained(out, device="cpu").tokenizer == "dashes"


@pytest.mark.parametrize("command", [["vocab", "--out"], ["prepare-corpus", "--out"]])
def test_a_toy_tokenizer_reaches_the_commands_that_read_a_corpus(toy, tmp_path, command):
    (tmp_path / "train.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main([command[0], "--train", str(tmp_path / "train.txt"), command[1], str(out),
                 "--tokenizer", "dashes", "--quiet"]) == 0
    written = out if out.is_file() else out / "manifest.json"
    assert written.is_file()
    if command[0] == "vocab":
        assert "-" in out.read_text(encoding="utf-8").split()


def test_a_toy_tokenizer_reaches_the_model_card(toy, tmp_path):
    pytest.importorskip("huggingface_hub")
    from elmo.loading.publish import model_card

    model = save_pretrained(random_bilm(), tmp_path / "model")
    (model / "card.json").write_text(json.dumps({"tokenizer": "dashes"}))
    card = model_card(load_model(model), parse_hub_name("hf:me/toy"))
    assert "pip install 'elmo-bilm[hub,zh]'" in card
    assert "the `dashes` tokenizer, as in training" in card
    assert 'get_tokenizer("dashes")' in card


def test_a_toy_tokenizer_reaches_elmo_task(toy, tmp_path):
    (tmp_path / "in").write_text("pos a well-known shop\n", encoding="utf-8")
    assert main(["task", "text", str(tmp_path / "in"), str(tmp_path / "out"),
                 "--format", "label-text", "--tokenizer", "dashes"]) == 0
    assert (tmp_path / "out").read_text(encoding="utf-8") == "a well - known shop\n"


def test_a_toy_tokenizer_reaches_the_span_task(toy, tmp_path):
    context = "The ice-cream shop opened."
    (tmp_path / "d.json").write_text(json.dumps({"data": [{"title": "T", "paragraphs": [{
        "context": context, "qas": [{"id": "q", "question": "What opened?",
                                     "answers": [{"text": "cream", "answer_start": 8}]}]}]}]}))
    question, = read_squad(tmp_path / "d.json", tokenizer="dashes")
    assert question.passage.tokens == ["The", "ice", "-", "cream", "shop", "opened."]
    assert question.spans == [(3, 3)]
    # its answers are scored by characters: "creak" shares 4 of 5 with "cream"
    config = SimpleNamespace(tokenizer="dashes", metric="squad-f1")
    score = SpanTask().evaluate([question], ["creak"], config)["score"]
    assert score == pytest.approx(80.0)


def test_without_the_record_the_tokenizer_is_unknown(tmp_path):
    with pytest.raises(ValueError, match="unknown tokenizer 'dashes'"):
        get_tokenizer("dashes")
    with pytest.raises(SystemExit):
        main(["embed", "default", "in.txt", "out.hdf5", "--tokenizer", "dashes"])
