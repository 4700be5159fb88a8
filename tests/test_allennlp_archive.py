"""AllenNLP archives (config.json + weights.th) as a MODEL: the ELMo biLM inside a task model's
state dict, with its options found as AllenNLP finds them."""

from __future__ import annotations

import json

import pytest
import torch

from elmo import load_model, save_bilm_tf
from elmo.allennlp import Elmo
from elmo.chars import batch_to_ids
from elmo.cli import main
from elmo.loading.formats.allennlp_archive import released_config
from elmo.loading.resolve import resolve_model
from tests.conftest import random_bilm
from tests.helpers.model_files import OPTIONS_KEY, PREFIX, RELEASED_URL, write_allennlp_archive


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
