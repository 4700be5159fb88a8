"""Official format and our safetensors format: round trips and clear errors on bad files."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from elmo import batch_to_ids, load_bilm_tf, load_pretrained, save_bilm_tf, save_pretrained
from elmo.errors import ModelFileError, ModelNotFoundError
from elmo.loading.formats import WeightsMismatchError, load_native
from tests.conftest import random_bilm, require_shared

BATCH = [["Deep", "contextualized", "word", "representations"], ["北京", "欢迎", "你", "!"], ["a"]]


def _outputs(model):
    with torch.inference_mode():
        return model(batch_to_ids(BATCH)).layers


def _assert_identical(a, b):
    torch.testing.assert_close(_outputs(a), _outputs(b), atol=0, rtol=0)


@pytest.mark.parametrize("overrides", [{}, {"use_skip_connections": False, "n_layers": 3},
                                       {"activation": "tanh", "n_highway": 2}])
def test_random_model_round_trips_through_both_formats(tmp_path, overrides):
    model = random_bilm(seed=7, **overrides)
    save_bilm_tf(model, tmp_path / "official")
    official = load_bilm_tf(tmp_path / "official/options.json", tmp_path / "official/weights.hdf5")
    _assert_identical(model, official)
    save_pretrained(official, tmp_path / "ours")
    ours, extra = load_pretrained(tmp_path / "ours")
    assert extra == {}
    _assert_identical(model, ours)
    save_bilm_tf(ours, tmp_path / "again")
    again = load_bilm_tf(tmp_path / "again/options.json", tmp_path / "again/weights.hdf5")
    _assert_identical(model, again)
    assert not list(tmp_path.rglob("*.tmp")), "temporary files left behind"


def test_official_fixture_round_trips_with_identical_outputs_and_bytes(tmp_path):
    root = require_shared("fixtures", "bilm-tf", "allennlp_test_fixtures_elmo")
    model = load_bilm_tf(root / "options.json", root / "lm_weights.hdf5")
    save_pretrained(model, tmp_path / "ours")
    ours, _ = load_pretrained(tmp_path / "ours")
    _, weights = save_bilm_tf(ours, tmp_path / "official")
    again = load_bilm_tf(tmp_path / "official/options.json", weights)
    _assert_identical(model, again)
    with h5py.File(root / "lm_weights.hdf5", "r") as a, h5py.File(weights, "r") as b:
        names = []
        a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        cfg = model.config
        assert len(names) == 1 + 2 * len(cfg.filters) + 4 * cfg.n_highway + 2 + 6 * cfg.n_layers
        for name in names:
            np.testing.assert_array_equal(a[name][...], b[name][...], err_msg=name)


def test_written_file_has_the_layout_an_allennlp_reader_walks(tmp_path):
    """AllenNLP's loader indexes groups step by step; check those exact paths and shapes."""
    model = random_bilm(seed=8)
    options_path, weights_path = save_bilm_tf(model, tmp_path)
    options = json.loads(options_path.read_text())
    assert options["char_cnn"]["n_characters"] == 262
    cfg = model.config
    with h5py.File(weights_path, "r") as f:
        assert f["char_embed"].shape == (261, cfg.char_embed_dim)
        for i, (width, count) in enumerate(cfg.filters):
            assert f["CNN"][f"W_cnn_{i}"].shape == (1, width, cfg.char_embed_dim, count)
        assert f["CNN_high_0"]["W_carry"].shape == (cfg.n_filters, cfg.n_filters)
        assert f["CNN_proj"]["W_proj"].shape == (cfg.n_filters, cfg.projection_dim)
        for d in (0, 1):
            for k in range(cfg.n_layers):
                cell = f[f"RNN_{d}"]["RNN"]["MultiRNNCell"][f"Cell{k}"]["LSTMCell"]
                assert cell["W_0"].shape == (2 * cfg.projection_dim, 4 * cfg.lstm_dim)
                assert cell["W_P_0"].shape == (cfg.lstm_dim, cfg.projection_dim)
                assert cell["B"].dtype == np.float32


def _official_pair(tmp_path):
    return save_bilm_tf(random_bilm(seed=9), tmp_path)


def test_wrong_shape_names_the_tensor_and_both_shapes(tmp_path):
    options_path, weights_path = _official_pair(tmp_path)
    options = json.loads(options_path.read_text())
    options["lstm"]["dim"] = 32
    options_path.write_text(json.dumps(options))
    with pytest.raises(WeightsMismatchError) as err:
        load_bilm_tf(options_path, weights_path)
    message = str(err.value)
    assert "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0" in message
    assert "(32, 256)" in message and "(32, 128)" in message


def test_missing_tensor_is_named(tmp_path):
    options_path, weights_path = _official_pair(tmp_path)
    with h5py.File(weights_path, "a") as f:
        del f["CNN_proj/b_proj"]
    with pytest.raises(WeightsMismatchError, match="CNN_proj/b_proj"):
        load_bilm_tf(options_path, weights_path)


def test_bad_options_and_missing_files_get_clear_errors(tmp_path):
    """ElmoErrors (printed by the CLI without a traceback), and ValueError / FileNotFoundError."""
    options_path, weights_path = _official_pair(tmp_path)
    with pytest.raises(ModelNotFoundError, match="nope.hdf5"):
        load_bilm_tf(options_path, tmp_path / "nope.hdf5")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ModelFileError, match="bad.json"):
        load_bilm_tf(bad, weights_path)
    bad.write_text(json.dumps({"lstm": {"dim": 4}}))
    with pytest.raises(ModelFileError, match="missing a required field"):
        load_bilm_tf(bad, weights_path)
    not_hdf5 = tmp_path / "w.hdf5"
    not_hdf5.write_text("hello")
    with pytest.raises(ModelFileError, match="not a readable HDF5"):
        load_bilm_tf(options_path, not_hdf5)


def test_native_shape_mismatch_and_missing_dir(tmp_path):
    save_pretrained(random_bilm(), tmp_path / "m")
    config = json.loads((tmp_path / "m/config.json").read_text())
    config["projection_dim"] = 8
    (tmp_path / "m/config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match="token_encoder.projection.weight"):
        load_pretrained(tmp_path / "m")
    with pytest.raises(ModelNotFoundError, match="config.json"):
        load_native(tmp_path / "empty")
    (tmp_path / "m/config.json").write_text("{not json")
    with pytest.raises(ModelFileError, match="config.json is not valid JSON"):
        load_pretrained(tmp_path / "m")


def test_native_fp16_storage_stays_close(tmp_path):
    model = random_bilm(seed=10)
    save_pretrained(model, tmp_path / "half", dtype=torch.float16)
    half, _ = load_pretrained(tmp_path / "half")
    assert (_outputs(half) - _outputs(model)).abs().max() < 1e-2
    assert (tmp_path / "half/model.safetensors").stat().st_size < (
        save_pretrained(model, tmp_path / "full") / "model.safetensors"
    ).stat().st_size * 0.6


def test_written_files_get_ordinary_permissions(tmp_path):
    import os
    import stat

    mask = os.umask(0o022)
    try:
        options, weights = save_bilm_tf(random_bilm(), tmp_path / "m")
    finally:
        os.umask(mask)
    for path in (options, weights):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_native_files_get_ordinary_permissions(tmp_path):
    import os
    import stat

    mask = os.umask(0o022)
    try:
        save_pretrained(random_bilm(), tmp_path / "m")
    finally:
        os.umask(mask)
    for name in ("config.json", "model.safetensors"):
        assert stat.S_IMODE((tmp_path / "m" / name).stat().st_mode) == 0o644, name


def test_native_shards_round_trip_within_their_size_and_replace_the_other_layout(tmp_path):
    """Shards of at most `max_shard_bytes` (headers counted) with Hugging Face's index load as
    the single file does; saving either layout deletes the other's weight files."""
    model, directory = random_bilm(seed=4), tmp_path / "m"
    softmax = {"softmax.weight": torch.randn(30, 16), "softmax.bias": torch.randn(30)}
    save_pretrained(model, directory, extra_tensors=softmax)
    limit = 40_000  # the largest tensor is 32 KiB
    save_pretrained(model, directory, extra_tensors=softmax, max_shard_bytes=limit)
    shards = sorted(directory.glob("model-*.safetensors"))
    assert len(shards) >= 3 and not (directory / "model.safetensors").exists()
    assert [p.name for p in shards][-1] == f"model-{len(shards):05d}-of-{len(shards):05d}" \
        ".safetensors"
    assert all(p.stat().st_size <= limit for p in shards)
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {p.name for p in shards}
    assert index["metadata"]["total_size"] == sum(
        t.nbytes for t in (*model.state_dict().values(), *softmax.values()))
    loaded, extra = load_pretrained(directory)
    _assert_identical(loaded, model)
    assert all(torch.equal(extra[k], v) for k, v in softmax.items())

    save_pretrained(model, directory, max_shard_bytes=10**9)  # fewer shards: one
    assert sorted(p.name for p in directory.iterdir()) == [
        "config.json", "model-00001-of-00001.safetensors", "model.safetensors.index.json"]
    save_pretrained(model, directory)
    assert sorted(p.name for p in directory.iterdir()) == ["config.json", "model.safetensors"]


def test_native_shards_that_are_missing_or_misnamed_get_clear_errors(tmp_path):
    directory = save_pretrained(random_bilm(), tmp_path / "m", max_shard_bytes=40_000)
    index_path = directory / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    shard = sorted(directory.glob("model-*.safetensors"))[1]
    shard.unlink()
    with pytest.raises(ModelFileError, match=f"{shard.name}, which is missing"):
        load_native(directory)
    index["weight_map"] = {k: "../elsewhere.safetensors" for k in index["weight_map"]}
    index_path.write_text(json.dumps(index))
    with pytest.raises(ModelFileError, match="shards must be files beside it"):
        load_native(directory)
    index_path.write_text("[]")
    with pytest.raises(ModelFileError, match="not a valid shard index"):
        load_native(directory)
