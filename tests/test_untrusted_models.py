"""Model files and configs from anyone: what would read more than the model holds, read other
local files, or end in a traceback is refused with one line naming the file and the field.
Every input here is a small file the test writes: ZIP headers that declare huge members,
HDF5 datasets declared huge but stored empty, stored elsewhere or linked elsewhere, configs
with wrong types, huge sizes or deep nesting."""

from __future__ import annotations

import json
import struct
import tracemalloc
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo import load_model, save_bilm_tf, save_pretrained
from elmo.cli import main
from elmo.config import MAX_PARAMETERS, PRESETS, BiLMConfig
from elmo.errors import ElmoError, ModelFileError
from elmo.loading.formats.efml import load_efml
from elmo.loading.formats.untrusted import MAX_CONFIG_BYTES, MAX_VOCABULARY_BYTES
from elmo.modules.bilm import BiLM
from elmo.simple_elmo import ElmoModel
from tests.conftest import random_bilm
from tests.helpers.model_files import NETWORK, write_allennlp_archive, write_efml_dir

DEEP_JSON = b"[" * 100_000 + b"]" * 100_000


# ---- small hostile files ------------------------------------------------------------------


def bilm_tf_pair(directory: Path) -> tuple[Path, Path]:
    """A tiny random model's options.json and weights.hdf5."""
    return save_bilm_tf(random_bilm(seed=4), directory)


def nlpl_zip(path: Path, options: bytes, weights: bytes) -> Path:
    """An NLPL archive of these member contents (stored: the bytes can be patched)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("options.json", options)
        archive.writestr("model.hdf5", weights)
        archive.writestr("vocab.txt", "the\n")
    return path


def patch_entry(path: Path, member: str, **fields: int) -> None:
    """Rewrite fields of `member`'s local header and central directory entry in place:
    `flags`, `method` or `size` (the uncompressed size it declares)."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        local = archive.getinfo(member).header_offset
    central = data.index(b"PK\x01\x02")  # the central directory's entries, in turn
    while data[central + 46: central + 46 + len(member)] != member.encode():
        central = data.index(b"PK\x01\x02", central + 4)
    # Offsets in the local header (and in the central entry: +2, after "version made by").
    offsets = {"flags": (6, "<H"), "method": (8, "<H"), "size": (22, "<I")}
    for name, value in fields.items():
        offset, fmt = offsets[name]
        struct.pack_into(fmt, data, local + offset, value)
        struct.pack_into(fmt, data, central + offset + 2, value)
    path.write_bytes(bytes(data))


def replace_dataset(weights: Path, name: str, **create) -> None:
    """Delete dataset `name` of an HDF5 file and create it again with `create`'s arguments."""
    with h5py.File(weights, "a") as f:
        del f[name]
        f.create_dataset(name, **create)


def peak_python_bytes(call) -> int:
    """The peak of memory traced while `call()` runs (numpy's arrays included); its
    ElmoError is expected and swallowed."""
    tracemalloc.start()
    try:
        with pytest.raises(ElmoError):
            call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def one_line_error(capsys, argv: list[str]) -> str:
    """Run the CLI, which must fail with one line and no traceback; that line."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("elmo: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


# ---- ZIP archives (NLPL) ------------------------------------------------------------------


@pytest.fixture
def pair(tmp_path) -> tuple[bytes, bytes]:
    options, weights = bilm_tf_pair(tmp_path / "pair")
    return options.read_bytes(), weights.read_bytes()


def test_a_zip_that_declares_a_huge_weights_member_is_refused_before_reading(tmp_path, pair):
    archive = nlpl_zip(tmp_path / "bomb.zip", *pair)
    patch_entry(archive, "model.hdf5", size=1_200_000_000)
    with pytest.raises(ModelFileError) as err:
        load_model(archive)
    message = str(err.value)
    assert "bomb.zip:model.hdf5 declares 1,200,000,000 bytes" in message
    assert "it can hold for this model" in message


def test_a_zip_that_declares_a_huge_options_member_is_refused(tmp_path, pair):
    archive = nlpl_zip(tmp_path / "bomb.zip", *pair)
    patch_entry(archive, "options.json", size=600_000_000)
    with pytest.raises(ModelFileError, match=r"options.json declares 600,000,000 bytes, more "
                                             rf"than the {MAX_CONFIG_BYTES:,}"):
        load_model(archive)


def test_a_deflate_bomb_is_refused_without_inflating_it(tmp_path, pair):
    """100 MB of zeros in a 100 KB member: refused from its header, with a few MB traced."""
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("options.json", pair[0])
        with archive.open("model.hdf5", "w") as member:
            for _ in range(100):
                member.write(bytes(2**20))
    assert path.stat().st_size < 2**20
    assert peak_python_bytes(lambda: load_model(path)) < 10 * 2**20


@pytest.mark.parametrize(("patch", "said"), [
    ({"flags": 0x1}, "model.hdf5 is encrypted"),
    ({"method": 99}, "model.hdf5 is compressed with method 99, which is not read"),
    ({"method": zipfile.ZIP_BZIP2}, "compressed with method 12"),
    ("crc", "model.hdf5 is damaged (Bad CRC-32"),
])
def test_an_encrypted_damaged_or_oddly_compressed_member_gets_one_line(tmp_path, pair, capsys,
                                                                       patch, said):
    archive = nlpl_zip(tmp_path / "odd.zip", *pair)
    if patch == "crc":
        data = bytearray(archive.read_bytes())
        at = data.index(pair[1][-64:])  # a byte inside the stored weights
        data[at] ^= 0xFF
        archive.write_bytes(bytes(data))
    else:
        patch_entry(archive, "model.hdf5", **patch)
    (tmp_path / "in.txt").write_text("a b\n")
    err = one_line_error(capsys, ["embed", str(archive), str(tmp_path / "in.txt"),
                                  str(tmp_path / "out.hdf5")])
    assert said in err
    assert not (tmp_path / "out.hdf5").exists()


def test_options_nested_100000_deep_get_one_line(tmp_path, pair, capsys):
    archive = nlpl_zip(tmp_path / "deep.zip", DEEP_JSON, pair[1])
    (tmp_path / "in.txt").write_text("a b\n")
    err = one_line_error(capsys, ["embed", str(archive), str(tmp_path / "in.txt"),
                                  str(tmp_path / "o.hdf5")])
    assert "deep.zip:options.json nests JSON arrays or objects too deeply" in err


@pytest.mark.parametrize("content", [b"", b"just some text\n", "truncated"])
def test_a_damaged_zip_says_it_is_not_a_complete_archive(tmp_path, pair, capsys, content):
    whole = nlpl_zip(tmp_path / "whole.zip", *pair)
    path = tmp_path / "model.zip"
    path.write_bytes(whole.read_bytes()[:10_000] if content == "truncated" else content)
    said = f"{path} is not a complete ZIP archive (truncated download?)"
    (tmp_path / "in.txt").write_text("a b\n")
    err = one_line_error(capsys, ["embed", str(path), str(tmp_path / "in.txt"),
                                  str(tmp_path / "o.hdf5")])
    assert said in err and "give its directory" not in err
    with pytest.raises(ModelFileError) as raised:
        ElmoModel().load(str(path))
    assert said in str(raised.value)


def test_a_truncated_zip_without_the_suffix_is_told_by_its_first_bytes(tmp_path, pair):
    whole = nlpl_zip(tmp_path / "whole.zip", *pair)
    path = tmp_path / "model.download"
    path.write_bytes(whole.read_bytes()[:10_000])
    with pytest.raises(ModelFileError, match="is not a complete ZIP archive"):
        load_model(path)


# ---- HDF5 datasets ------------------------------------------------------------------------


@pytest.fixture
def weights_pair(tmp_path) -> tuple[Path, Path]:
    return bilm_tf_pair(tmp_path / "model")


def test_a_dataset_declared_huge_is_refused_before_it_is_read(weights_pair):
    """(4000, 4000) floats in a file of a few KB (chunked, never written): 64 MB if read."""
    options, weights = weights_pair
    replace_dataset(weights, "char_embed", shape=(4000, 4000), dtype="f4", chunks=(100, 100))
    assert weights.stat().st_size < 2**20
    peak = peak_python_bytes(lambda: load_model(options.parent))
    assert peak < 16 * 2**20, peak
    with pytest.raises(ModelFileError, match=r"'char_embed' has shape \(4000, 4000\), but the "
                                             r"options describe \(261, 8\)"):
        load_model(options.parent)


@pytest.mark.parametrize("zipped", [False, True])
def test_a_dataset_stored_in_another_file_is_refused(tmp_path, weights_pair, zipped):
    """External storage would load the bytes of any local file as weights."""
    options, weights = weights_pair
    secret = tmp_path / "secret"
    secret.write_bytes(np.full((261, 8), 7.0, dtype=np.float32).tobytes())
    replace_dataset(weights, "char_embed", shape=(261, 8), dtype="f4",
                    external=[(str(secret), 0, secret.stat().st_size)])
    model = nlpl_zip(tmp_path / "m.zip", options.read_bytes(), weights.read_bytes()) \
        if zipped else options.parent
    with pytest.raises(ModelFileError, match=r"'char_embed' stores its data in other files "
                                             rf"\({secret}\)"):
        load_model(model)


def test_an_external_link_is_refused(tmp_path, weights_pair):
    options, weights = weights_pair
    other = tmp_path / "other.h5"
    with h5py.File(weights, "r") as f, h5py.File(other, "w") as o:
        f.copy("CNN_proj", o)
    with h5py.File(weights, "a") as f:
        del f["CNN_proj"]
        f["CNN_proj"] = h5py.ExternalLink(str(other), "/CNN_proj")
    with pytest.raises(ModelFileError, match=r"'CNN_proj' is a link to '/CNN_proj' in another "
                                             "file"):
        load_model(options.parent)


def test_a_virtual_dataset_is_refused(tmp_path, weights_pair):
    options, weights = weights_pair
    source = tmp_path / "source.h5"
    with h5py.File(source, "w") as s:
        s["data"] = np.ones((261, 8), dtype=np.float32)
    layout = h5py.VirtualLayout(shape=(261, 8), dtype="f4")
    layout[...] = h5py.VirtualSource(str(source), "data", shape=(261, 8))
    with h5py.File(weights, "a") as f:
        del f["char_embed"]
        f.create_virtual_dataset("char_embed", layout)
    with pytest.raises(ModelFileError, match="'char_embed' is a virtual dataset"):
        load_model(options.parent)


def test_a_group_or_a_compound_dtype_where_a_tensor_belongs_gets_one_line(weights_pair,
                                                                          capsys):
    options, weights = weights_pair
    with h5py.File(weights, "a") as f:
        del f["CNN_proj/b_proj"]
        f.create_group("CNN_proj/b_proj")
    err = one_line_error(capsys, ["export", str(options.parent), str(options.parent / "x")])
    assert "'CNN_proj/b_proj' is a group where a tensor" in err
    pair = np.dtype([("a", "f4"), ("b", "f4")])
    replace_dataset(weights, "CNN_proj/b_proj", shape=(16,), dtype=pair)
    err = one_line_error(capsys, ["export", str(options.parent), str(options.parent / "x")])
    assert "'CNN_proj/b_proj' holds values of type" in err and "not floating-point" in err


# ---- configs ------------------------------------------------------------------------------


def test_the_parameter_count_is_the_built_models():
    for name in ("tiny", "compact"):
        config = PRESETS[name]
        assert config.n_parameters == sum(p.numel() for p in BiLM(config).parameters())
    vocab = BiLMConfig(token_encoder="vocab", char_vocab=(*"abc", "<bow>", "<eow>", "<bos>",
                                                          "<eos>", "<oov>", "<pad>"),
                       word_vocab=("x", "<oov>", "<pad>"), word_embed_dim=3,
                       filters=((1, 4), (2, 4)), lstm_dim=16, projection_dim=8)
    assert vocab.n_parameters == sum(p.numel() for p in BiLM(vocab).parameters())
    assert PRESETS["original"].n_parameters * 10 < MAX_PARAMETERS + 10**8
    numpy_sized = BiLMConfig.preset("tiny", lstm_dim=np.int64(32))  # as sizes read off arrays
    assert type(numpy_sized.lstm_dim) is int and numpy_sized.lstm_dim == 32


BAD_FIELDS = [
    ("lstm_dim", 1e6, "lstm_dim must be an integer, got 1000000.0 (float)"),
    ("lstm_dim", "1024", "lstm_dim must be an integer, got '1024' (str)"),
    ("lstm_dim", 10**12, "more than the 1,000,000,000 a biLM may have"),
    ("n_layers", -2, "n_layers must be between 1 and 64, got -2"),
    ("n_layers", True, "n_layers must be an integer, got True (bool)"),
    ("max_characters_per_token", 5000, "max_characters_per_token must be between 3 and 1024"),
    ("filters", [[1, 4.5]], "filters' counts must be an integer, got 4.5"),
    ("filters", [[1, 4]] * 65, "filters lists 65 widths, more than 64"),
    ("cell_clip", "3", "cell_clip must be a finite number"),
    ("dropout", 1.5, "dropout must be in [0, 1), got 1.5"),
]


@pytest.mark.parametrize(("field", "value", "said"), BAD_FIELDS)
def test_a_native_config_is_checked_before_any_tensor_is_built(tmp_path, field, value, said):
    model = save_pretrained(random_bilm(), tmp_path / "m")
    config = json.loads((model / "config.json").read_text())
    config[field] = value
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFileError) as raised:
        load_model(model)
    assert said in str(raised.value) and "config.json" in str(raised.value)


@pytest.mark.parametrize(("key", "value", "said"), [
    (("lstm", "dim"), 1e6, "lstm.dim must be an integer, got 1000000.0 (float)"),
    (("lstm", "dim"), 10**12, "more than the 1,000,000,000 a biLM may have"),
    (("lstm", "n_layers"), -1, "lstm.n_layers must be between 1 and 64"),
    (("char_cnn", "max_characters_per_token"), 5000,
     "char_cnn.max_characters_per_token must be between 3 and 1024"),
    (("char_cnn", "embedding"), {"dim": "16"}, "char_cnn.embedding.dim must be an integer"),
    (("char_cnn", "filters"), "wide", "char_cnn.filters must list at least one"),
])
def test_options_json_is_checked_naming_its_key(tmp_path, capsys, key, value, said):
    options, weights = bilm_tf_pair(tmp_path / "m")
    data = json.loads(options.read_text())
    data[key[0]][key[1]] = value
    options.write_text(json.dumps(data))
    (tmp_path / "in.txt").write_text("a b\n")
    for model in (options.parent, nlpl_zip(tmp_path / "m.zip", options.read_bytes(),
                                           weights.read_bytes())):
        err = one_line_error(capsys, ["embed", str(model), str(tmp_path / "in.txt"),
                                      str(tmp_path / "o.hdf5")])
        assert said in err and "options.json" in err


def test_an_efml_network_config_is_checked_naming_its_key(tmp_path):
    model = write_efml_dir(tmp_path / "m")
    network = json.loads(json.dumps(NETWORK))
    network["encoder"]["dim"] = 10**12
    (model / "net.json").write_text(json.dumps(network))
    with pytest.raises(ModelFileError, match=r"parameters \(lstm_dim 1000000000000, .*more than"):
        load_efml(model)
    network["encoder"]["dim"] = "16"
    (model / "net.json").write_text(json.dumps(network))
    with pytest.raises(ModelFileError, match="encoder.dim must be an integer, got '16'"):
        load_efml(model)


@pytest.mark.parametrize("layout", ["native", "bilm-tf", "efml", "allennlp"])
def test_configs_nested_100000_deep_get_one_line(tmp_path, capsys, layout):
    if layout == "native":
        model = save_pretrained(random_bilm(), tmp_path / "m")
        config = model / "config.json"
    elif layout == "bilm-tf":
        config = bilm_tf_pair(tmp_path / "m")[0]
        model = config.parent
    elif layout == "efml":
        model = write_efml_dir(tmp_path / "m")
        config = model / "net.json"
    else:
        model = write_allennlp_archive(tmp_path / "m")
        config = model / "config.json"
    config.write_bytes(DEEP_JSON)
    err = one_line_error(capsys, ["export", str(model), str(tmp_path / "out")])
    assert f"{config} nests JSON arrays or objects too deeply" in err


@pytest.mark.parametrize(("layout", "limit"), [("bilm-tf", MAX_CONFIG_BYTES),
                                               ("native", MAX_VOCABULARY_BYTES),
                                               ("efml", MAX_VOCABULARY_BYTES)])
def test_a_config_or_vocabulary_larger_than_any_is_refused_unread(tmp_path, layout, limit):
    if layout == "bilm-tf":
        path = bilm_tf_pair(tmp_path / "m")[0]
    elif layout == "native":
        path = save_pretrained(random_bilm(), tmp_path / "m") / "config.json"
    else:
        path = write_efml_dir(tmp_path / "m") / "word.dic"
    with path.open("ab") as f:
        f.truncate(limit + 1)  # sparse: nothing written
    with pytest.raises(ModelFileError, match=rf"{path.name} is {limit + 1:,} bytes, more than"):
        load_model(path.parent)


# ---- files named by a config --------------------------------------------------------------


@pytest.fixture
def outside_network(tmp_path) -> Path:
    """A valid network config outside the model's directory."""
    path = tmp_path / "elsewhere" / "outside.json"
    path.parent.mkdir()
    path.write_text(json.dumps(NETWORK))
    return path


@pytest.mark.parametrize("named", ["absolute", "dotdot"])
def test_efml_config_path_never_reads_outside_the_model(tmp_path, outside_network, named):
    model = write_efml_dir(tmp_path / "m", network_file=False)
    given = str(outside_network) if named == "absolute" else "../elsewhere/outside.json"
    (model / "config.json").write_text(json.dumps({"config_path": given}))
    with pytest.raises(ModelFileError) as err:
        load_efml(model)
    assert f"names no file: not {model / 'outside.json'}," in str(err.value)
    (model / "outside.json").write_text(json.dumps(NETWORK))  # its name inside: found there
    assert load_efml(model).config.lstm_dim == NETWORK["encoder"]["dim"]


def test_efml_config_path_through_a_link_out_of_the_model_is_refused(tmp_path,
                                                                     outside_network):
    model = write_efml_dir(tmp_path / "m", network_file=False, config_path="net.json")
    (model / "net.json").symlink_to(outside_network)
    with pytest.raises(ModelFileError, match=r"config_path names 'net.json', a link to .*"
                                             r"outside.json, outside the model's directory"):
        load_efml(model)


@pytest.mark.parametrize("named", ["absolute", "dotdot"])
def test_allennlp_options_file_never_reads_outside_the_archive(tmp_path, named):
    outside = bilm_tf_pair(tmp_path / "elsewhere")[0].rename(tmp_path / "elsewhere" / "mine.json")
    given = str(outside) if named == "absolute" else "../elsewhere/mine.json"
    archive = write_allennlp_archive(tmp_path / "archive", options_file=given, options=None)
    with pytest.raises(ElmoError, match="which is neither in"):
        load_model(archive)


# ---- torch files ----------------------------------------------------------------------------


def deflated(path: Path) -> None:
    """Rewrite a `torch.save` ZIP file with its records deflated (torch reads them so)."""
    with zipfile.ZipFile(path) as source:
        records = [(info.filename, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as target:
        for name, data in records:
            target.writestr(name, data)


def test_a_torch_file_with_compressed_records_is_refused(tmp_path):
    """torch inflates a record whole before checking it: a bomb's size is the inflated one."""
    model = write_efml_dir(tmp_path / "efml")
    state = torch.load(model / "encoder.pkl", weights_only=True)
    torch.save(state, model / "encoder.pkl")  # the ZIP layout
    deflated(model / "encoder.pkl")
    with pytest.raises(ModelFileError, match="encoder.pkl: its record .* is compressed"):
        load_efml(model)
    archive = write_allennlp_archive(tmp_path / "allennlp")
    deflated(archive / "weights.th")
    with pytest.raises(ModelFileError, match="weights.th: its record .* is compressed"):
        load_model(archive)


def test_the_hardening_leaves_good_models_loading(tmp_path, pair):
    """The checks refuse nothing a model of ours, the Hub's links or a plain archive holds."""
    archive = nlpl_zip(tmp_path / "good.zip", *pair)
    deflated_copy = tmp_path / "deflated.zip"
    with zipfile.ZipFile(archive) as src, \
            zipfile.ZipFile(deflated_copy, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    a, b = load_model(archive).bilm, load_model(deflated_copy).bilm
    for name, tensor in a.state_dict().items():
        torch.testing.assert_close(tensor, b.state_dict()[name], atol=0, rtol=0)
