"""A source of models is one record in `SOURCES`: a throwaway source added there is resolved,
brought to this machine, loaded, embedded, described and listed like the others."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo import Embedder, batch_to_ids, load_model, save_pretrained
from elmo.cli import main
from elmo.errors import ModelNotFoundError
from elmo.loading.formats.registry import format_of_files
from elmo.loading.model_files import ModelFiles, ModelSource
from elmo.loading.resolve import SOURCES, resolve_model
from tests.conftest import random_bilm

PREFIX = "toy:"


class ToySource(ModelSource):
    """`toy:NAME`: the model in the folder NAME of `root`, "fetched" when it is needed."""

    name = "toy"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fetched: list[str] = []

    def help(self) -> str:
        return f"a toy model ({PREFIX}NAME)"

    def resolve(self, name: str) -> ModelFiles | None:
        if not name.startswith(PREFIX):
            return None
        names = {p.name for p in (self.root / name.removeprefix(PREFIX)).iterdir()}
        return ModelFiles(name, format_of_files(names, name).name, self)

    def local(self, files: ModelFiles, *, progress: bool) -> ModelFiles:
        self.fetched.append(files.name)
        return dataclasses.replace(files, directory=self.root / files.name.removeprefix(PREFIX))

    def facts(self, files: ModelFiles) -> dict[str, object]:
        return {"toy": {"folder": str(self.root)}}


@pytest.fixture
def toy(tmp_path, monkeypatch):
    save_pretrained(random_bilm(seed=7), tmp_path / "toys" / "seven")
    source = ToySource(tmp_path / "toys")
    monkeypatch.setitem(SOURCES, source.name, source)
    return source


def _layers(bilm, sentences):
    with torch.inference_mode():
        return bilm(batch_to_ids(sentences)).layers


def test_a_source_added_to_the_table_is_resolved_then_brought_here_and_loaded(toy, tmp_path):
    files = resolve_model("toy:seven")
    assert (files.source, files.format, files.paths) == (toy, "native", [])
    assert toy.fetched == []  # resolving fetches nothing
    loaded = load_model("toy:seven")
    assert toy.fetched == ["toy:seven"] and loaded.files.paths == [tmp_path / "toys" / "seven"]
    sentences = [["a", "toy", "source"], ["seven"]]
    torch.testing.assert_close(_layers(loaded.bilm, sentences),
                               _layers(random_bilm(seed=7), sentences))
    embedder = Embedder.from_pretrained("toy:seven")
    np.testing.assert_allclose(embedder.embed_sentence(["seven"]),
                               _layers(random_bilm(seed=7), [["seven"]])[:, 0].numpy(),
                               rtol=1e-5, atol=1e-6)


def test_elmo_embed_reads_a_model_of_the_added_source(toy, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("a toy source\nseven\n", encoding="utf-8")
    by_source, by_path = tmp_path / "source.hdf5", tmp_path / "path.hdf5"
    assert main(["embed", "toy:seven", str(text), str(by_source), "--quiet"]) == 0
    assert main(["embed", str(tmp_path / "toys" / "seven"), str(text), str(by_path),
                 "--quiet"]) == 0
    with h5py.File(by_source) as a, h5py.File(by_path) as b:
        assert sorted(a) == sorted(b) == ["0", "1", "sentence_to_index"]
        for key in ("0", "1"):
            np.testing.assert_array_equal(a[key][()], b[key][()])


def test_elmo_info_describes_a_model_of_the_added_source(toy, tmp_path, capsys):
    assert main(["info", "toy:seven", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "native" and info["toy"] == {"folder": str(tmp_path / "toys")}
    assert info["loaded_from"] == [str(tmp_path / "toys" / "seven")]


def test_the_added_source_is_in_the_model_help_and_the_error_for_an_unknown_model(toy, capsys):
    for command in ("embed", "export", "serve"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "a toy model (toy:NAME)" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(ModelNotFoundError, match=r"'no-such-model' is neither .*; nor a toy "
                       r"model \(toy:NAME\)"):
        resolve_model("no-such-model")
