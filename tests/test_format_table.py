"""A model format is one record in `FORMATS`: a throwaway format added there is resolved,
loaded, described, read for its softmax and written by `elmo export` like the others."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from elmo import batch_to_ids, load_model
from elmo.cli import main
from elmo.errors import ElmoError
from elmo.loading.formats.registry import BILM_TF, FORMATS, ModelFormat
from elmo.loading.resolve import files_read, resolve_model
from elmo.training.model_init import load_language_model
from tests.conftest import random_bilm

TOY_FILE = "model.toy"  # holds the seed of a random biLM; a lone `*.toy` file does too
WORDS_FILE = "words.toy"  # the words of its softmax, when it has one


def _load_toy(files):
    """The biLM of the seed, which it keeps for `_save_toy`, and a random softmax over the
    words of WORDS_FILE when there is one."""
    path = files.directory
    seed = int((path if path.is_file() else path / TOY_FILE).read_text())
    bilm = random_bilm(seed=seed)
    bilm.toy_seed = seed
    if path.is_file() or not (path / WORDS_FILE).is_file():
        return bilm, {}
    rows = len((path / WORDS_FILE).read_text().split())
    weight = torch.randn(rows, bilm.config.projection_dim,
                         generator=torch.Generator().manual_seed(seed))
    return bilm, {"softmax.weight": weight, "softmax.bias": torch.zeros(rows)}


def _save_toy(bilm, directory):
    (directory / TOY_FILE).write_text(str(bilm.toy_seed))


TOY = ModelFormat(
    "toy", f"a toy format: {TOY_FILE}",
    detect=lambda top: TOY_FILE in top,
    files_read=lambda names, where: [TOY_FILE, *(n for n in (WORDS_FILE,) if n in names)],
    load=_load_toy,
    detect_file=lambda path: path.suffix == ".toy" and path.is_file(),
    vocab_name=WORDS_FILE,
    tokenizer_note="toy models split words on dashes",
    save=_save_toy, saved_files=(TOY_FILE,), save_note="a seed, not weights")
# A format read as a pair of files, as bilm-tf is: the biLM of the sum of their seeds.
TOY_PAIR = ModelFormat(
    "toy-pair", "a toy pair: a.seed + b.seed",
    detect=lambda top: {"a.seed", "b.seed"} <= top,
    files_read=lambda names, where: ["a.seed", "b.seed"],
    load=lambda files: (random_bilm(seed=int(files.options.read_text())
                                    + int(files.weights.read_text())), {}),
    pair=lambda names, where: ("a.seed", "b.seed"))
WORDS = ["<S>", "</S>", "<UNK>", "toy", "dashes"]


@pytest.fixture
def toy_model(tmp_path, monkeypatch):
    monkeypatch.setitem(FORMATS, TOY.name, TOY)
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / TOY_FILE).write_text("5")
    return tmp_path / "toy"


def _layers(bilm, sentences=(("a", "toy"),)):
    ids = batch_to_ids([list(s) for s in sentences])
    with torch.inference_mode():
        return bilm(ids).layers


def test_a_format_added_to_the_table_is_resolved_and_loaded(toy_model):
    assert resolve_model(toy_model).format == TOY.name
    loaded = load_model(toy_model)
    assert loaded.format == TOY.name and loaded.files.paths == [toy_model]
    torch.testing.assert_close(_layers(loaded.bilm), _layers(random_bilm(seed=5)))


def test_a_format_read_as_one_file_is_resolved_and_loaded(toy_model, tmp_path):
    (tmp_path / "nine.toy").write_text("9")
    files = resolve_model(tmp_path / "nine.toy")
    assert (files.format, files.paths) == (TOY.name, [tmp_path / "nine.toy"])
    torch.testing.assert_close(_layers(load_model(files).bilm), _layers(random_bilm(seed=9)))


def test_a_format_read_as_a_pair_gets_its_two_files(tmp_path, monkeypatch):
    monkeypatch.setitem(FORMATS, TOY_PAIR.name, TOY_PAIR)
    (tmp_path / "pair").mkdir()
    (tmp_path / "pair" / "a.seed").write_text("2")
    (tmp_path / "pair" / "b.seed").write_text("1")
    files = resolve_model(tmp_path / "pair")
    assert files.format == TOY_PAIR.name
    assert files.paths == [tmp_path / "pair" / "a.seed", tmp_path / "pair" / "b.seed"]
    torch.testing.assert_close(_layers(load_model(files).bilm), _layers(random_bilm(seed=3)))


def test_a_format_added_to_the_table_is_described(toy_model, capsys):
    assert main(["info", str(toy_model), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == TOY.name
    assert main(["info", str(toy_model)]) == 0
    out = capsys.readouterr().out
    assert f"toy (a toy format: {TOY_FILE})" in out
    assert "whitespace unless --tokenizer is given); toy models split words on dashes" in out


def test_a_format_added_to_the_table_is_listed_and_its_files_read(toy_model, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ElmoError, match=r"one of the formats native \(.*or toy \(a toy format"):
        resolve_model(tmp_path / "empty")
    assert files_read(TOY, [TOY_FILE, "card.json", "notes.txt"], "the model") == [
        TOY_FILE, "card.json"]
    with pytest.raises(SystemExit):
        main(["embed", "--help"])
    assert "toy (a toy format: model.toy)" in " ".join(capsys.readouterr().out.split())


def test_the_softmax_of_a_format_that_carries_one_is_read_with_its_words(toy_model,
                                                                          monkeypatch):
    (toy_model / WORDS_FILE).write_text("\n".join(WORDS) + "\n")
    assert resolve_model(toy_model).vocab_file == toy_model / WORDS_FILE
    lm, vocab = load_language_model(toy_model)
    assert vocab.words == WORDS
    torch.testing.assert_close(lm.softmax.weight, _load_toy(load_model(toy_model).files)[1][
        "softmax.weight"])

    def never(files):
        raise AssertionError("a format that carries no softmax is not loaded for one")

    monkeypatch.setitem(FORMATS, TOY.name, dataclasses.replace(TOY, vocab_name=None,
                                                               load=never))
    assert resolve_model(toy_model).vocab_file is None
    with pytest.raises(ElmoError, match="is not a model with a softmax and vocabulary"):
        load_language_model(toy_model)


def test_a_format_that_saves_is_a_target_of_elmo_export(toy_model, tmp_path, capsys,
                                                        monkeypatch):
    (toy_model / WORDS_FILE).write_text("\n".join(WORDS) + "\n")
    out = tmp_path / "exported"
    assert main(["export", str(toy_model), str(out), "--format", "toy"]) == 0
    assert capsys.readouterr().err == f"wrote toy: {out / TOY_FILE}, {out / 'vocab.txt'}\n"
    loaded = load_model(out)
    assert loaded.format == TOY.name
    torch.testing.assert_close(_layers(loaded.bilm), _layers(random_bilm(seed=5)))
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert "--format toy writes model.toy (a seed, not weights)" in " ".join(
        capsys.readouterr().out.split())
    # the format written when neither --format nor OUTDIR says which is the record's to say
    monkeypatch.setitem(FORMATS, BILM_TF.name, dataclasses.replace(BILM_TF,
                                                                   export_default=False))
    monkeypatch.setitem(FORMATS, TOY.name, dataclasses.replace(TOY, export_default=True))
    assert main(["export", str(toy_model), str(tmp_path / "default")]) == 0
    assert capsys.readouterr().err.startswith(
        "wrote toy (the default for an OUTDIR not ending in .onnx; --format bilm-tf or native "
        f"or onnx for another): {tmp_path / 'default' / TOY_FILE}")
