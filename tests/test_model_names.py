"""Every loader and command takes the same model names: shipped, released, directories."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from elmo import load_model, load_pretrained
from elmo.cli import main
from elmo.errors import ElmoError
from elmo.loading import resolve
from elmo.loading.formats import save_pretrained
from elmo.loading.formats.bilm_tf import load_bilm_tf
from elmo.loading.resolve import (
    ModelNotFoundError,
    resolve_model,
    shipped_model_dir,
    shipped_models,
)
from elmo.training.config import TrainConfig
from elmo.training.model_init import build_language_model, load_language_model
from elmo.vocab import Vocabulary
from tests.conftest import random_bilm

TEXT = "the city is located on the north bank of the river .\nthe bank raised its rates .\n"


@pytest.fixture
def shipped_root(tmp_path, monkeypatch):
    """A package whose shipped models are two tiny ones, `default` and `default-zh`."""
    root = tmp_path / "pretrained"
    for seed, (name, tokenizer) in enumerate([("default", "whitespace"), ("default-zh", "chars")]):
        bilm = random_bilm(seed=seed)
        vocab = Vocabulary(["<S>", "</S>", "<UNK>", "的", "是"])
        softmax = {"softmax.weight": torch.randn(len(vocab), bilm.config.projection_dim),
                   "softmax.bias": torch.randn(len(vocab))}
        save_pretrained(bilm, root / name, extra_tensors=softmax)
        vocab.save(root / name / "vocab.txt")
        (root / name / "card.json").write_text(json.dumps({"tokenizer": tokenizer}))
    (root / "not-a-model").mkdir()  # a stray directory is not listed
    monkeypatch.setattr(resolve, "shipped_root", lambda: root)
    return root


def test_several_shipped_models_are_listed_and_loaded_by_name(shipped_root):
    assert shipped_models() == ["default", "default-zh"]
    zh, extra = load_pretrained("default-zh")
    expected = random_bilm(seed=1).state_dict()
    assert all(torch.equal(zh.state_dict()[k], expected[k]) for k in expected)
    assert set(extra) == {"softmax.weight", "softmax.bias"}
    assert resolve_model("default-zh").directory == shipped_root / "default-zh"
    assert resolve_model(None).directory == resolve_model("default").directory \
        == shipped_root / "default"
    assert load_model("default-zh").tokenizer == "chars"
    assert resolve_model("default").recorded_tokenizer() == "whitespace"
    lm, vocab = load_language_model("default-zh")
    torch.testing.assert_close(lm.softmax.bias, extra["softmax.bias"])
    assert vocab.words[3:] == ["的", "是"]


def test_a_missing_shipped_model_is_a_clear_error(shipped_root, tmp_path, capsys):
    (shipped_root / "default-zh" / "model.safetensors").unlink()
    assert shipped_models() == ["default"]
    with pytest.raises(ModelNotFoundError, match=r"'default-zh'.*shipped model \(default\)"):
        load_model("default-zh")
    with pytest.raises(ModelNotFoundError, match="no shipped model 'default-zh'"):
        shipped_model_dir("default-zh")
    src = tmp_path / "in.txt"
    src.write_text(TEXT, encoding="utf-8")
    for command in (["embed", "default-zh", str(src), str(tmp_path / "o.hdf5")],
                    ["perplexity", "default-zh", str(src)],
                    ["export", "default-zh", str(tmp_path / "exported")]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert err.startswith("elmo: error: model 'default-zh'") and "Traceback" not in err
    assert not (tmp_path / "o.hdf5").exists() and not (tmp_path / "exported").exists()


def test_an_existing_path_wins_over_a_name_and_a_file_is_refused(tmp_path, monkeypatch):
    save_pretrained(random_bilm(seed=5), tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_OFFLINE", "1")  # "small" must not be downloaded
    assert resolve_model("small").directory.resolve() == (tmp_path / "small").resolve()
    assert torch.equal(load_model("small").bilm.token_encoder.projection.weight,
                       random_bilm(seed=5).token_encoder.projection.weight)
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ModelNotFoundError, match="is a file"):
        load_model("file.txt")


def test_a_released_name_resolves_without_downloading_until_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    monkeypatch.setenv("ELMO_CACHE", str(tmp_path / "cache"))
    assert resolve_model("small").paths == []  # nothing local yet
    with pytest.raises(ElmoError, match="softmax"):  # refused before any download
        load_language_model("small")
    assert not (tmp_path / "cache").exists()


def test_perplexity_by_name_equals_perplexity_by_path(tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text(TEXT, encoding="utf-8")
    results = []
    for model in ("default", str(shipped_model_dir())):
        assert main(["perplexity", model, str(src), "--json", "--quiet"]) == 0
        results.append(json.loads(capsys.readouterr().out))
    assert results[0] == results[1]
    assert results[0]["tokens"] == 20 and 1 < results[0]["average"] < 1e5


def test_export_by_name_writes_the_vocabulary(tmp_path):
    assert main(["export", "default", str(tmp_path / "out")]) == 0
    shipped = shipped_model_dir()
    assert (tmp_path / "out/vocab.txt").read_bytes() == (shipped / "vocab.txt").read_bytes()
    exported = load_bilm_tf(tmp_path / "out/options.json", tmp_path / "out/weights.hdf5")
    ours = load_model("default").bilm
    for name, tensor in ours.state_dict().items():
        torch.testing.assert_close(exported.state_dict()[name], tensor, msg=name)


def test_train_init_from_default_keeps_the_shipped_softmax(tmp_path):
    shipped, extra = load_pretrained("default")
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "river", "bank", "zzzunseenzzz"])
    (tmp_path / "t.txt").write_text(TEXT, encoding="utf-8")
    config = TrainConfig(train=[str(tmp_path / "t.txt")], init_from="default", dropout=0.0)
    lm = build_language_model(config, vocab)
    source_vocab = Vocabulary.from_file(shipped_model_dir() / "vocab.txt")
    for i, word in enumerate(vocab.words[:5]):
        j = source_vocab.word_to_id(word)
        torch.testing.assert_close(lm.softmax.weight[i], extra["softmax.weight"][j])
        torch.testing.assert_close(lm.softmax.bias[i], extra["softmax.bias"][j])
    assert torch.equal(lm.bilm.token_encoder.projection.weight,
                       shipped.token_encoder.projection.weight)
    # The command end to end: one step, continuing from the shipped model by name.
    assert main(["train", "--train", str(tmp_path / "t.txt"), "--out", str(tmp_path / "run"),
                 "--init-from", "default", "--max-steps", "1", "--batch-size", "2",
                 "--unroll-steps", "5", "--quiet"]) == 0
    trained = load_model(tmp_path / "run").bilm
    assert trained.config.projection_dim == shipped.config.projection_dim
    assert np.isfinite(trained.token_encoder.projection.weight.detach().numpy()).all()


def test_a_shipped_models_recorded_tokenizer_is_the_default(shipped_root, tmp_path, capsys):
    src = tmp_path / "zh.txt"
    src.write_text("的是的\n是的\n", encoding="utf-8")  # raw text: the chars tokenizer splits it
    assert main(["perplexity", "default-zh", str(src), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == (3 + 1) + (2 + 1)
    assert main(["embed", "default-zh", str(src), str(tmp_path / "zh.hdf5"), "--quiet"]) == 0
    with h5py.File(tmp_path / "zh.hdf5", "r") as f:
        assert f["0"].shape[1] == 3 and f["1"].shape[1] == 2
    assert main(["perplexity", "default-zh", str(src), "--json", "--quiet",
                 "--tokenizer", "whitespace"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == 2 + 2
