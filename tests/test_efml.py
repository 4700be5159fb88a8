"""ELMoForManyLangs model directories: equal to the reference package on the fixture, safe and
strict loading, every command that takes a MODEL, and `efml:<lang>` names."""

from __future__ import annotations

import hashlib
import io
import json
import warnings
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo import Elmo, Embedder, load_pretrained
from elmo.cli import main
from elmo.errors import ElmoError
from elmo.loading.formats import efml
from elmo.loading.formats.efml import EfmlFormatError, load_efml, read_dic, read_network_config
from elmo.loading.formats.native import load_native
from elmo.loading.releases import EFML_RELEASES
from tests.conftest import require_shared
from tests.helpers.file_server import FileServer
from tests.helpers.model_files import CHARS, NETWORK, WORDS, write_efml_dir
from tests.helpers.tasks import task_args
from tests.helpers.training import write_corpus


@pytest.fixture
def tiny_efml(tmp_path) -> Path:
    return write_efml_dir(tmp_path / "tiny.model")


def fixture_dir() -> Path:
    return require_shared("fixtures", "efml")


def fixture_sentences() -> list[list[str]]:
    lines = (fixture_dir() / "sentences.txt").read_text(encoding="utf-8").splitlines()
    return [line.split(" ") for line in lines]


# ---- equality with the reference -------------------------------------------------------------


@pytest.mark.parametrize("batch_size,cache", [(64, 0), (3, 0), (5, 1000)])
def test_fixture_layers_equal_the_reference(batch_size, cache):
    root = fixture_dir()
    expected = np.load(root / "expected_a.npz")
    embedder = Embedder.from_pretrained(root / "model_a", batch_size=batch_size,
                                        token_cache_size=cache)
    got = embedder.embed_sentences(fixture_sentences())
    assert len(got) == len(expected.files) == 25
    for i, layers in enumerate(got):
        assert layers.shape == expected[str(i)].shape  # (3, n, 32)
        np.testing.assert_allclose(layers, expected[str(i)], atol=1e-5, rtol=1e-4,
                                   err_msg=f"sentence {i}")


def test_fixture_sentences_alone_equal_the_reference():
    """Stateless: each sentence alone gives the vectors it gets in the reference's batch."""
    root = fixture_dir()
    expected = np.load(root / "expected_a.npz")
    embedder = Embedder.from_pretrained(root / "model_a", token_cache_size=0)
    for i in (0, 5, 8, 14, 20):
        layers = embedder.embed_sentence(fixture_sentences()[i])
        np.testing.assert_allclose(layers, expected[str(i)], atol=1e-5, rtol=1e-4)


def test_embed_command_average_equals_the_reference(tmp_path):
    root = fixture_dir()
    expected = np.load(root / "expected_a_average.npz")
    lines = (root / "sentences.txt").read_text(encoding="utf-8").splitlines()[:6]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["embed", str(root / "model_a"), str(src), str(out), "--layers", "average",
                 "--quiet"]) == 0
    with h5py.File(out, "r") as f:
        for i in range(len(lines)):
            np.testing.assert_allclose(f[str(i)][...], expected[str(i)], atol=1e-5, rtol=1e-4)


def test_elmo_module_from_pretrained_gives_the_reference_layers():
    root = fixture_dir()
    expected = np.load(root / "expected_a.npz")
    elmo = Elmo.from_pretrained(root / "model_a", 1, dropout=0.0, mode="average")
    sentences = fixture_sentences()[:4]
    out = elmo(elmo.bilm.batch_to_ids(sentences))
    rep = out["elmo_representations"][0].detach().numpy()
    for b, tokens in enumerate(sentences):
        np.testing.assert_allclose(rep[b, : len(tokens)], expected[str(b)].mean(axis=0),
                                   atol=1e-5, rtol=1e-4)


def test_a_vocabulary_model_pickles(tiny_efml):
    import pickle

    bilm = load_efml(tiny_efml)
    copy = pickle.loads(pickle.dumps(bilm))
    assert torch.equal(copy.batch_to_ids([["abc", "x"]]), bilm.batch_to_ids([["abc", "x"]]))


def test_byte_ids_given_to_a_vocabulary_model_are_refused(tiny_efml):
    from elmo import batch_to_ids

    with pytest.raises(ValueError, match="bilm.batch_to_ids"):
        load_efml(tiny_efml)(batch_to_ids([["abc"]], 10))


def test_the_original_quirks_hold_in_the_ids(tiny_efml):
    """<eow> first and <bow> last (the original's swap), truncation before the word look-up,
    exact-case words, and the word id in the last column."""
    bilm = load_efml(tiny_efml)
    ids = bilm.batch_to_ids([["abc", "Abc", "abcdefghijk"]])[0].tolist()  # (3, 10 + 1)
    char = {c: i + 1 for i, c in enumerate(CHARS)}
    word = {w: i + 1 for i, w in enumerate(WORDS)}
    assert ids[0] == [char["<eow>"], char["a"], char["b"], char["c"], char["<bow>"],
                      *[char["<pad>"]] * 5, word["abc"]]
    assert ids[1][1] == char["<oov>"] and ids[1][-1] == word["<oov>"]
    assert ids[2][1:9] == [char[c] for c in "abcdefgh"] and ids[2][9] == char["<bow>"]
    assert bilm.bos_ids.tolist()[:3] == [char["<eow>"], char["<bos>"], char["<bow>"]]
    assert bilm.bos_ids.tolist()[-1] == word["<bos>"]


# ---- reading the directory ---------------------------------------------------------------------


def test_one_field_dic_line_is_the_ideographic_space(tiny_efml):
    chars = read_dic(tiny_efml / "char.dic")
    assert chars == CHARS and chars[10] == "\u3000"


def test_absolute_config_path_falls_back_to_the_model_directory(tmp_path):
    model = write_efml_dir(tmp_path / "m", config_path="/home/someone/elmo/configs/net.json")
    network, where = read_network_config(model)
    assert network == NETWORK and where == str(model / "net.json")
    assert load_efml(model).config.projection_dim == 8


def test_bundled_configs_are_used_when_the_directory_lacks_the_file(tmp_path):
    model = write_efml_dir(tmp_path / "m", network_file=False,
                           config_path="/users/x/configs/cnn_50_100_512_4096_sample.json")
    network, where = read_network_config(model)
    assert where == "bundled cnn_50_100_512_4096_sample.json"
    assert network["encoder"]["dim"] == 4096 and network["token_embedder"]["word_dim"] == 100
    assert read_network_config(model)[0] is efml.BUNDLED_CONFIGS[
        "cnn_0_100_512_4096_sample.json"]  # the same values under both names
    (model / "config.json").write_text(json.dumps({"config_path": "/x/other.json"}))
    with pytest.raises(EfmlFormatError, match="other.json") as err:
        read_network_config(model)
    assert str(model / "config.json") in str(err.value)


def test_a_pickle_that_would_run_code_is_refused(tiny_efml, tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    state = torch.load(tiny_efml / "encoder.pkl", weights_only=True)
    state["evil"] = Payload()
    bad = tiny_efml / "encoder.pkl"
    torch.save(state, bad, _use_new_zipfile_serialization=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning from torch before the refusal
        with pytest.raises(EfmlFormatError, match="refused") as err:
            load_efml(tiny_efml)
    assert str(bad) in str(err.value) and "getattr" in str(err.value)
    assert "weights_only" not in str(err.value)  # never a hint toward unsafe loading
    assert not marker.exists()
    torch.load(bad, weights_only=False)  # the file is a real attack: plain loading runs it
    assert marker.exists()


LFS_POINTER = b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 1234\n"


@pytest.mark.parametrize(("content", "said"), [
    (b"hello\n", "not a torch file"),
    (b"a\nb\n", "not a torch file"),
    (b"", "is empty, not a torch file"),
    (b"\x80", "truncated"),
    (bytes(range(256)) * 4, "not a torch file"),
    (b"<!DOCTYPE html><html><body>404 Not Found</body></html>", "HTML"),
    (LFS_POINTER, "Git LFS pointer"),
    ("half", "truncated"),
])
def test_a_file_that_is_no_torch_state_dict_is_named_as_such(tiny_efml, tmp_path, capsys,
                                                              content, said):
    pickle_file = tiny_efml / "token_embedder.pkl"
    if content == "half":
        content = pickle_file.read_bytes()[: pickle_file.stat().st_size // 2]
    pickle_file.write_bytes(content)
    (tmp_path / "in.txt").write_text("abc bad\n", encoding="utf-8")
    for command in (["info", str(tiny_efml)],
                    ["embed", str(tiny_efml), str(tmp_path / "in.txt"), str(tmp_path / "o.h5")]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"elmo: error: {pickle_file}") and said in err, err
        assert "download or copy the model again" in err
        for wrong in ("Traceback", "weights_only", "run code", "warning"):
            assert wrong not in err, err
    assert not (tmp_path / "o.h5").exists()


def test_a_missing_network_config_is_named_once(tmp_path):
    model = write_efml_dir(tmp_path / "m", config_path="cnn.json", network_file=False)
    with pytest.raises(EfmlFormatError) as err:
        load_efml(model)
    assert str(err.value).count(str(model / "cnn.json")) == 1


def test_missing_or_inconsistent_files_are_named(tiny_efml):
    (tiny_efml / "char.dic").rename(tiny_efml / "chars.bak")
    with pytest.raises(EfmlFormatError, match="char.dic is missing"):
        load_efml(tiny_efml)
    (tiny_efml / "chars.bak").rename(tiny_efml / "char.dic")
    with (tiny_efml / "word.dic").open("a", encoding="utf-8") as f:
        f.write("extra\t7\n")  # one word more than the embedding has rows
    with pytest.raises(EfmlFormatError) as err:
        load_efml(tiny_efml)
    message = str(err.value)
    assert "token_embedder.pkl" in message and "word_emb_layer.embedding.weight" in message
    (tiny_efml / "word.dic").write_text("a\t0\nb\t2\n", encoding="utf-8")
    with pytest.raises(EfmlFormatError, match="word.dic: the ids"):
        load_efml(tiny_efml)
    (tiny_efml / "word.dic").write_text("".join(f"{w}\t{i}\n" for i, w in enumerate(WORDS)),
                                        encoding="utf-8")
    (tiny_efml / "encoder.pkl").unlink()
    with pytest.raises(ElmoError, match="encoder.pkl is missing"):
        load_pretrained(tiny_efml)


def test_a_directory_of_no_format_names_what_each_needs(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["info", str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err
    for needed in ("model.safetensors", "char.dic", "encoder.pkl", "options .json"):
        assert needed in err


# ---- commands on the fixture model --------------------------------------------------------------


def test_export_native_round_trip_and_bilm_tf_refusal(tmp_path, capsys):
    model = fixture_dir() / "model_a"
    assert main(["export", str(model), str(tmp_path / "native"), "--format", "native"]) == 0
    ours, extra = load_native(tmp_path / "native")
    assert extra == {} and ours.config.token_encoder == "vocab"
    sentence = fixture_sentences()[4]
    a = Embedder(ours).embed_sentence(sentence)
    b = Embedder.from_pretrained(model).embed_sentence(sentence)
    assert np.array_equal(a, b)
    capsys.readouterr()
    assert main(["export", str(model), str(tmp_path / "tf"), "--format", "bilm-tf"]) == 1
    err = capsys.readouterr().err
    assert "byte-level" in err and "--format native" in err
    assert not (tmp_path / "tf" / "weights.hdf5").exists()


def test_info_describes_the_fixture(capsys):
    model = fixture_dir() / "model_a"
    assert main(["info", str(model), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "efml" and info["loaded_from"] == [str(model)]
    arch = info["architecture"]
    assert arch["token_encoder"] == {"kind": "vocab", "max_characters_per_token": 20,
                                     "characters": 351, "words": 561, "word_embed_dim": 12}
    assert (arch["lstm_layers"], arch["lstm_dim"], arch["projection_dim"]) == (2, 32, 16)
    assert info["softmax_rows"] is None
    assert main(["info", str(model)]) == 0
    assert "ELMoForManyLangs" in capsys.readouterr().out


def test_analyze_neighbours_runs_on_the_fixture(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank of the river\nmoney in the bank\n", encoding="utf-8")
    assert main(["analyze", "neighbours", "--model", str(fixture_dir() / "model_a"),
                 "--corpus", str(corpus), "--sentence", "the bank", "--word", "bank",
                 "--index-dir", str(tmp_path / "index"), "--quiet", "--json"]) == 0
    assert "bank" in capsys.readouterr().out


def test_task_train_with_the_fixture_elmo(tmp_path):
    args = task_args("classification", tmp_path, str(fixture_dir() / "model_a"), epochs=1)
    assert main(args) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["metric"] == "accuracy"


def test_train_init_from_the_fixture_continues_it(tmp_path):
    train, _ = write_corpus(tmp_path / "corpus", n_train=40, n_valid=5)
    out = tmp_path / "run"
    assert main(["train", "--train", str(train), "--out", str(out), "--init-from",
                 str(fixture_dir() / "model_a"), "--batch-size", "4", "--unroll-steps", "5",
                 "--max-steps", "2", "--quiet"]) == 0
    trained, extra = load_native(out)
    source = load_efml(fixture_dir() / "model_a")
    assert trained.config.char_vocab == source.config.char_vocab
    assert trained.config.word_vocab == source.config.word_vocab
    assert extra["softmax.weight"].shape[1] == 16
    changed = [name for name, t in source.state_dict().items()
               if not torch.equal(t, trained.state_dict()[name])]
    assert changed  # it trained


# ---- released names --------------------------------------------------------------------------


def test_efml_release_table():
    assert len(EFML_RELEASES) == 45  # 44 languages on NLPL + simplified Chinese
    assert EFML_RELEASES["efml:en"].url == "http://vectors.nlpl.eu/repository/11/144.zip"
    assert EFML_RELEASES["efml:zht"].url == "http://vectors.nlpl.eu/repository/11/179.zip"
    assert EFML_RELEASES["efml:zhs"].url.endswith("/zhs.model.tar.bz2")
    assert EFML_RELEASES["efml:nb"].url.endswith("/165.zip")


def _zip_of(model: Path, prefix: str = "") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for path in sorted(model.iterdir()):
            z.write(path, prefix + path.name)
    return buffer.getvalue()


def _tar_bz2_of(model: Path, prefix: str) -> bytes:
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:bz2") as t:
        for path in sorted(model.iterdir()):
            t.add(path, prefix + path.name)
    return buffer.getvalue()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ELMO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ELMO_OFFLINE", raising=False)
    return tmp_path / "cache"


def test_efml_name_downloads_unpacks_and_embeds(tmp_path, cache, monkeypatch):
    model = write_efml_dir(tmp_path / "made", config_path="/abs/path/of/authors/net.json")
    archive = _zip_of(model)  # files at the archive's top level, as on NLPL
    server = FileServer()
    try:
        server.files["/mirror/efml/144.zip"] = archive
        monkeypatch.setenv("ELMO_RELEASE_BASE_URL", server.url("/mirror"))
        embedder = Embedder.from_pretrained("efml:en")
        got = embedder.embed_sentence(["abc", "cafe", "x"])
        assert np.array_equal(got, Embedder(load_efml(model)).embed_sentence(["abc", "cafe",
                                                                              "x"]))
        assert (cache / "efml" / "en" / "encoder.pkl").is_file()
        digest = (cache / "efml" / "144.zip.sha256").read_text().strip()
        assert digest == hashlib.sha256(archive).hexdigest()
        assert [p for p, _ in server.requests] == ["/mirror/efml/144.zip"]
        assert not [p for p in (cache / "efml").iterdir() if p.name.startswith(".")]
    finally:
        server.close()
    monkeypatch.setenv("ELMO_OFFLINE", "1")  # cached: no server needed
    assert load_pretrained("efml:en")[0].config.token_encoder == "vocab"


def test_efml_tar_archive_with_a_folder_and_a_resumed_download(tmp_path, cache, monkeypatch):
    model = write_efml_dir(tmp_path / "made", seed=3)
    archive = _tar_bz2_of(model, "zhs.model/")
    part = cache / "efml" / "zhs.model.tar.bz2.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(archive[:1000])  # a download killed earlier
    server = FileServer()
    try:
        server.files["/m/efml/zhs.model.tar.bz2"] = archive
        monkeypatch.setenv("ELMO_RELEASE_BASE_URL", server.url("/m"))
        bilm, _ = load_pretrained("efml:zhs", progress=False)
        assert server.requests == [("/m/efml/zhs.model.tar.bz2", "bytes=1000-")]
    finally:
        server.close()
    sentence = ["bad", "abc"]
    assert np.array_equal(Embedder(bilm).embed_sentence(sentence),
                          Embedder(load_efml(model)).embed_sentence(sentence))


def test_efml_name_offline_and_unknown(cache, monkeypatch, capsys):
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    assert main(["info", "efml:de"]) == 1
    err = capsys.readouterr().err
    assert "ELMO_OFFLINE" in err and "142.zip" in err
    assert main(["info", "efml:xx"]) == 1
    assert "efml:zhs" in capsys.readouterr().err


def test_vocab_configs_are_checked_and_round_trip():
    from elmo.config import BiLMConfig

    with pytest.raises(ValueError, match="lacks the special entries"):
        BiLMConfig(token_encoder="vocab", char_vocab=("a", "b"))
    with pytest.raises(ValueError, match="belong to"):
        BiLMConfig(word_embed_dim=4)
    config = load_efml(fixture_dir() / "model_a").config
    assert BiLMConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert "char_vocab" not in repr(config)  # thousands of entries stay out of reprs


def test_unsupported_networks_are_refused(tmp_path):
    model = write_efml_dir(tmp_path / "m")
    network = json.loads(json.dumps(NETWORK))
    network["token_embedder"]["name"] = "lstm"
    (model / "net.json").write_text(json.dumps(network))
    with pytest.raises(EfmlFormatError, match="only the 'cnn' token embedder"):
        load_efml(model)
    network["token_embedder"].update(name="cnn", char_dim=0)
    (model / "net.json").write_text(json.dumps(network))
    with pytest.raises(EfmlFormatError, match="without a character CNN"):
        load_efml(model)


def test_model_format_is_told_without_loading(tiny_efml, tmp_path):
    from elmo.loading.resolve import resolve_model
    assert resolve_model(tiny_efml).format == "efml"
    assert resolve_model("efml:zhs").format == "efml"  # a released name: nothing is downloaded
    assert resolve_model("default").format == "native"
    assert resolve_model("original").format == "bilm-tf"


def test_vocab_to_cache_uses_the_models_own_token_ids(tiny_efml):
    elmo = Elmo.from_pretrained(str(tiny_efml), 1, dropout=0.0, vocab_to_cache=["<pad>", "a"])
    words = [["a", "a"]]
    cached = elmo(elmo.bilm.batch_to_ids(words), torch.tensor([[1, 1]]))
    plain = Elmo.from_pretrained(str(tiny_efml), 1, dropout=0.0)(elmo.bilm.batch_to_ids(words))
    torch.testing.assert_close(cached["elmo_representations"][0],
                               plain["elmo_representations"][0], atol=1e-5, rtol=1e-5)
