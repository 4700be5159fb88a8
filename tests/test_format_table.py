"""A model format is one record in `FORMATS`: a throwaway format added there is resolved,
loaded and described like the others."""

from __future__ import annotations

import json

import pytest
import torch

from elmo import batch_to_ids, load_model
from elmo.cli import main
from elmo.errors import ElmoError
from elmo.loading.formats.registry import FORMATS, ModelFormat
from elmo.loading.resolve import files_read, resolve_model
from tests.conftest import random_bilm

TOY_FILE = "model.toy"  # holds the seed of a random biLM
TOY = ModelFormat(
    "toy", f"a toy format: {TOY_FILE}",
    detect=lambda top: TOY_FILE in top,
    files_read=lambda names, where: [TOY_FILE],
    load=lambda files: (random_bilm(seed=int((files.directory / TOY_FILE).read_text())), {}))


@pytest.fixture
def toy_model(tmp_path, monkeypatch):
    monkeypatch.setitem(FORMATS, TOY.name, TOY)
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / TOY_FILE).write_text("5")
    return tmp_path / "toy"


def test_a_format_added_to_the_table_is_resolved_and_loaded(toy_model):
    assert resolve_model(toy_model).format == TOY.name
    loaded = load_model(toy_model)
    assert loaded.format == TOY.name and loaded.files.paths == [toy_model]
    ids = batch_to_ids([["a", "toy"]])
    with torch.inference_mode():
        torch.testing.assert_close(loaded.bilm(ids).layers, random_bilm(seed=5)(ids).layers)


def test_a_format_added_to_the_table_is_described(toy_model, capsys):
    assert main(["info", str(toy_model), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == TOY.name
    assert main(["info", str(toy_model)]) == 0
    assert f"toy (a toy format: {TOY_FILE})" in capsys.readouterr().out


def test_a_format_added_to_the_table_is_listed_and_its_files_read(toy_model, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ElmoError, match=r"one of the formats native \(.*or toy \(a toy format"):
        resolve_model(tmp_path / "empty")
    assert files_read(TOY, [TOY_FILE, "card.json", "notes.txt"], "the model") == [
        TOY_FILE, "card.json"]
