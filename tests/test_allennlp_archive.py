"""AllenNLP archives (config.json + weights.th) as a MODEL: the ELMo biLM inside a task model's
state dict, with its options found as AllenNLP finds them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from elmo import load_model, save_bilm_tf
from elmo.allennlp import Elmo
from elmo.chars import batch_to_ids
from elmo.cli import main
from elmo.loading.formats.allennlp_archive import released_config
from elmo.loading.resolve import resolve_model
from tests.conftest import random_bilm

PREFIX = "_text_field_embedder.token_embedder_elmo._elmo."
OPTIONS_KEY = "model.text_field_embedder.token_embedders.elmo.options_file"
RELEASED_URL = ("https://allennlp.s3.amazonaws.com/models/elmo/2x4096_512_2048cnn_2xhighway/"
                "elmo_2x4096_512_2048cnn_2xhighway_options.json")


def write_allennlp_archive(path: Path, bilm=None, *, options_file: str = "options.json",
                           options: str | None = "options.json") -> Path:
    """An unpacked AllenNLP archive of a tagger over `bilm` (tiny, random by default): its
    `config.json` names `options_file`, written into the archive as `options` (None: not)."""
    bilm = bilm if bilm is not None else random_bilm(seed=3)
    path.mkdir(parents=True)
    elmo_state = Elmo(None, None, 1, module=bilm).state_dict()  # AllenNLP's keys
    state = {PREFIX + key: value for key, value in elmo_state.items()}
    state["tag_projection_layer._module.weight"] = torch.randn(5, bilm.config.output_dim)
    torch.save(state, path / "weights.th")
    config = {"model": {"type": "crf_tagger", "text_field_embedder": {"token_embedders": {
        "elmo": {"type": "elmo_token_embedder", "options_file": options_file,
                 "weight_file": "weights.hdf5", "do_layer_norm": False, "dropout": 0.5}}}}}
    (path / "config.json").write_text(json.dumps(config))
    if options is not None:
        pair = save_bilm_tf(bilm, path / "pair")
        (path / options).parent.mkdir(parents=True, exist_ok=True)
        pair[0].rename(path / options)
        for leftover in (path / "pair").iterdir():
            leftover.unlink()
        (path / "pair").rmdir()
    return path


def _layers(bilm, sentences=(["The", "bank", "."], ["a"])):
    with torch.no_grad():
        return bilm(batch_to_ids([list(s) for s in sentences])).layers


def test_archive_loads_the_biLM_inside_the_task_model(tmp_path):
    bilm = random_bilm(seed=3)
    archive = write_allennlp_archive(tmp_path / "tagger", bilm)
    files = resolve_model(archive)
    assert files.format == "allennlp" and files.directory == archive
    loaded = load_model(archive)
    torch.testing.assert_close(_layers(loaded.bilm), _layers(bilm))


def test_options_archived_as_fta_by_allennlp_0_9(tmp_path):
    bilm = random_bilm(seed=4)
    archive = write_allennlp_archive(tmp_path / "old", bilm, options_file="/home/x/opts.json",
                                     options=f"fta/{OPTIONS_KEY}")
    (archive / "files_to_archive.json").write_text(json.dumps({OPTIONS_KEY: "/home/x/o.json"}))
    torch.testing.assert_close(_layers(load_model(archive).bilm), _layers(bilm))


def test_released_options_url_needs_no_copy(tmp_path):
    # the released models' settings: ReLU, clipping 3, skip connections; sizes from the weights
    bilm = random_bilm(seed=5, n_highway=2, activation="relu", use_skip_connections=True)
    archive = write_allennlp_archive(tmp_path / "new", bilm, options_file=RELEASED_URL,
                                     options=None)
    loaded = load_model(archive)
    assert loaded.bilm.config.filters == bilm.config.filters
    assert (loaded.bilm.config.n_layers, loaded.bilm.config.lstm_dim) == (2, 64)
    torch.testing.assert_close(_layers(loaded.bilm), _layers(bilm))
    state = {k.removeprefix(PREFIX + "_elmo_lstm."): v
             for k, v in torch.load(archive / "weights.th", weights_only=True).items()
             if k.startswith(PREFIX)}
    assert released_config(state).n_highway == 2


@pytest.mark.parametrize("saved", ["Elmo", "_ElmoBiLm"])
def test_an_elmo_weights_th_alone_has_the_released_architecture(tmp_path, saved):
    bilm = random_bilm(seed=9, n_highway=2, activation="relu", use_skip_connections=True)
    state = Elmo(None, None, 1, module=bilm).state_dict()  # AllenNLP's keys
    if saved == "_ElmoBiLm":  # the biLM inside it, saved on its own
        state = {k.removeprefix("_elmo_lstm."): v for k, v in state.items()
                 if k.startswith("_elmo_lstm.")}
    (tmp_path / "bare").mkdir()
    torch.save(state, tmp_path / "bare" / "weights.th")
    assert resolve_model(tmp_path / "bare").format == "allennlp"
    with pytest.warns(UserWarning, match="came without options: .* clipping at 3"):
        loaded = load_model(tmp_path / "bare")
    torch.testing.assert_close(_layers(loaded.bilm), _layers(bilm))


def test_an_elmo_weights_th_reads_the_options_json_beside_it(tmp_path, recwarn):
    bilm = random_bilm(seed=10)  # tiny's own settings, not the released ones
    archive = write_allennlp_archive(tmp_path / "a", bilm)  # options.json beside weights.th
    (archive / "config.json").unlink()
    torch.testing.assert_close(_layers(load_model(archive).bilm), _layers(bilm))
    assert not [w for w in recwarn if "without options" in str(w.message)]
    save_bilm_tf(bilm, tmp_path / "pair")  # beside an official pair, the pair is the model
    torch.save({}, tmp_path / "pair" / "weights.th")
    assert resolve_model(tmp_path / "pair").format == "bilm-tf"


@pytest.mark.parametrize("change, message", [
    ("unknown-options", "neither in"),
    ("no-elmo", "should hold one ELMo biLM"),
    ("not-torch", "no torch state dict"),
])
def test_archive_errors_name_the_file_and_the_fix(tmp_path, capsys, change, message):
    archive = write_allennlp_archive(tmp_path / "a", options_file="https://x.org/mine.json",
                                     options=None if change == "unknown-options" else
                                     "mine.json")
    if change == "no-elmo":
        torch.save({"layer.weight": torch.zeros(2)}, archive / "weights.th")
    elif change == "not-torch":
        (archive / "weights.th").write_text("<html>not found</html>")
    assert main(["info", str(archive)]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
