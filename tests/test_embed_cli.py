"""`elmo embed` and the Embedder: output layout, bad input, atomic and resumable output."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from elmo import embed as embed_module
from elmo import save_bilm_tf, save_pretrained
from elmo.cli import main
from elmo.embed import Embedder
from elmo.errors import ElmoError
from tests.conftest import random_bilm, require_shared

LINES = ["the cat sat on the mat .", "北京 欢迎 你", "a", "bank of the river", "money in the bank"]


@pytest.fixture
def model_dir(tmp_path):
    return save_pretrained(random_bilm(seed=11), tmp_path / "model")


def _write(path, lines, raw: bytes | None = None):
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run(*args) -> int:
    return main([str(a) for a in args])


def test_output_layout_matches_allennlp_elmo_command(tmp_path, model_dir):
    src = _write(tmp_path / "in.txt", LINES)
    assert _run("embed", model_dir, src, tmp_path / "out.hdf5", "--quiet") == 0
    embedder = Embedder.from_pretrained(model_dir)
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert sorted(k for k in f if k != "sentence_to_index") == [str(i) for i in range(5)]
        index = json.loads(f["sentence_to_index"][0])
        assert index == {line: str(i) for i, line in enumerate(LINES)}
        for i, line in enumerate(LINES):
            data = f[str(i)][...]
            assert data.dtype == np.float32 and data.shape == (3, len(line.split()), 32)
            np.testing.assert_allclose(data, embedder.embed_sentence(line.split()), atol=1e-6)
        # the settings that keep a writer's memory flat (see hdf5_output.NEW_FILE)
        assert f.id.get_create_plist().get_version()[0] == 2  # HDF5 1.8's superblock
        assert f.id.get_create_plist().get_file_space_strategy()[0] == h5py.h5f.FSPACE_STRATEGY_AGGR
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("mode", ["top", "average"])
def test_layer_modes(tmp_path, model_dir, mode):
    src = _write(tmp_path / "in.txt", LINES)
    _run("embed", model_dir, src, tmp_path / "out.hdf5", "--layers", mode, "--quiet")
    full = Embedder.from_pretrained(model_dir).embed_sentence(LINES[0].split())
    expected = full[-1] if mode == "top" else full.mean(axis=0)
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        np.testing.assert_allclose(f["0"][...], expected, atol=1e-6)


def test_empty_line_warns_and_keeps_numbering(tmp_path, model_dir, capsys):
    src = _write(tmp_path / "in.txt", ["one two", "", "   ", "three"])
    assert _run("embed", model_dir, src, tmp_path / "out.hdf5", "--quiet") == 0
    err = capsys.readouterr().err
    assert "2 empty lines (the first: line 2)" in err and err.count("warning") == 1
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert f["1"].shape == (3, 0, 32) and f["2"].shape == (3, 0, 32)
        assert f["3"].shape == (3, 1, 32)


def test_tokenless_line_with_sentence_keys_warns_with_its_number(tmp_path, model_dir):
    """With sentence keys a line that tokenizes to nothing (here: any line holding "x") is
    named by its line number in the warning, found from its text."""
    src = _write(tmp_path / "in.txt", ["one two", "three", "x y", "four", "x"])
    embedder = Embedder.from_pretrained(
        model_dir, tokenizer=lambda text: [] if "x" in text else text.split())
    with pytest.warns(UserWarning, match=r"2 empty lines \(the first: line 3\)"):
        embedder.embed_file(src, tmp_path / "out.hdf5", use_sentence_keys=True, progress=False)
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert f["x y"].shape == (3, 0, 32) and f["four"].shape == (3, 1, 32)


def test_invalid_utf8_names_file_and_line_and_leaves_nothing(tmp_path, model_dir, capsys):
    src = _write(tmp_path / "in.txt", [], raw=b"fine line\nstill fine\nbad \xff\xfe byte\n")
    out = tmp_path / "out.hdf5"
    assert _run("embed", model_dir, src, out, "--quiet", "--batch-size", "1") == 1
    err = capsys.readouterr().err
    assert "in.txt, line 3: not valid UTF-8" in err and "--encoding-errors replace" in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == [model_dir, src] or sorted(tmp_path.iterdir()) == sorted(
        [model_dir, src])
    assert _run("embed", model_dir, src, out, "--quiet", "--encoding-errors", "replace") == 0
    with h5py.File(out, "r") as f:
        assert "bad \ufffd\ufffd byte" in json.loads(f["sentence_to_index"][0])


@pytest.mark.parametrize(
    "args, message",
    [
        (["embed", "MODEL", "missing.txt", "out.hdf5"], "input file not found"),
        (["embed", "no-such-model", "in.txt", "out.hdf5"], "neither a Hugging Face Hub model"),
        (["embed", "EMPTYDIR", "in.txt", "out.hdf5"], "holds no model: a model is in one of"),
        (["embed", "--options", "OPTS", "in.txt", "out.hdf5"],
         "pair: --options and --weights in a command"),
    ],
)
def test_user_mistakes_get_one_line_errors(tmp_path, model_dir, capsys, args, message):
    _write(tmp_path / "in.txt", LINES)
    (tmp_path / "EMPTYDIR").mkdir()
    (tmp_path / "OPTS").write_text("{}")
    subst = {"MODEL": model_dir}
    argv = [str(subst.get(a, tmp_path / a if a not in ("embed", "--options") else a))
            for a in args]
    argv[0] = "embed"
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out.hdf5").exists()
    assert not list(tmp_path.glob("*.partial"))


def test_wrong_number_of_paths_is_a_usage_error(tmp_path, model_dir, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _run("embed", model_dir, tmp_path / "in.txt")
    assert exit_info.value.code == 2
    assert "MODEL INPUT OUTPUT" in capsys.readouterr().err


def test_offline_released_model_is_refused_clearly(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    monkeypatch.setenv("ELMO_CACHE", str(tmp_path / "cache"))
    src = _write(tmp_path / "in.txt", LINES)
    assert _run("embed", "small", src, tmp_path / "out.hdf5", "--quiet") == 1
    err = capsys.readouterr().err
    assert "ELMO_OFFLINE" in err and "options.json" in err
    assert not (tmp_path / "out.hdf5").exists()


def test_official_pair_directory_as_model(tmp_path):
    model = random_bilm(seed=12)
    save_bilm_tf(model, tmp_path / "official")
    src = _write(tmp_path / "in.txt", LINES)
    assert _run("embed", tmp_path / "official", src, tmp_path / "out.hdf5", "--quiet") == 0
    expected = Embedder(model).embed_sentence(LINES[1].split())
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        np.testing.assert_allclose(f["1"][...], expected, atol=1e-6)


def test_killed_run_resumes_its_partial_output(tmp_path, model_dir, monkeypatch):
    lines = [f"sentence number {i} with {'some ' * (i % 7)}words" for i in range(100)]
    src = _write(tmp_path / "in.txt", lines)
    out = tmp_path / "out.hdf5"
    calls = []
    real = Embedder.embed_batch

    def dying(self, sentences):
        calls.append(len(sentences))
        if len(calls) == 20:
            raise KeyboardInterrupt  # stands for a kill in the middle of the run
        return real(self, sentences)

    monkeypatch.setattr(Embedder, "embed_batch", dying)
    assert _run("embed", model_dir, src, out, "--quiet", "--batch-size", "2") == 130
    partial = out.with_name("out.hdf5.partial")
    assert not out.exists() and partial.exists()
    done = max(int(p.stem.partition("-")[2]) for p in partial.glob("*.hdf5"))  # saved lines
    assert 0 < done < 100
    monkeypatch.setattr(Embedder, "embed_batch", real)
    computed = []
    monkeypatch.setattr(Embedder, "embed_batch",
                        lambda self, s: computed.append(len(s)) or real(self, s))
    assert _run("embed", model_dir, src, out, "--quiet", "--batch-size", "2") == 0
    assert sum(computed) == 100 - done, "only the lines not yet written are embedded again"
    assert not out.with_name("out.hdf5.partial").exists()
    reference = Embedder.from_pretrained(model_dir)
    with h5py.File(out, "r") as f:
        assert len(json.loads(f["sentence_to_index"][0])) == 100
        for i, line in enumerate(lines):
            np.testing.assert_allclose(f[str(i)][...], reference.embed_sentence(line.split()),
                                       atol=1e-6)


def test_partial_from_another_input_is_not_resumed(tmp_path, model_dir):
    src = _write(tmp_path / "in.txt", LINES)
    out = tmp_path / "out.hdf5"
    with h5py.File(out.with_name("out.hdf5.partial"), "w") as f:
        f.attrs["lines_done"] = 3
        f.attrs["input"] = "somewhere else"
    assert _run("embed", model_dir, src, out, "--quiet") == 0
    with h5py.File(out, "r") as f:
        assert len(f) == len(LINES) + 1


def test_embedder_api_shapes_and_batch_independence(model_dir):
    embedder = Embedder.from_pretrained(model_dir, batch_size=2)
    sentences = [line.split() for line in LINES]
    single = embedder.embed_sentence(sentences[3])
    assert single.shape == (3, 4, 32) and single.dtype == np.float32
    many = embedder.embed_sentences(sentences)
    assert [m.shape[1] for m in many] == [len(s) for s in sentences]
    np.testing.assert_allclose(many[3], single, atol=1e-5)
    assert embedder.embed_batch([]) == []
    assert embedder.embed_sentence([]).shape == (3, 0, 32)


@pytest.mark.parametrize(
    "folder, sentences_file",
    [("allennlp_test_fixtures_elmo", "sentences.json"),
     ("bilm-tf_tests_fixtures/model", "lm_embeddings_sentences.json")],
)
def test_cli_stateful_reproduces_tensorflow(tmp_path, folder, sentences_file):
    root = require_shared("fixtures", "bilm-tf", folder)
    sentences = json.loads((root / sentences_file).read_text())
    order = [sentences[k][i] for i in range(10) for k in range(3)]  # batches of 3, in order
    src = _write(tmp_path / "in.txt", order)
    out = tmp_path / "out.hdf5"
    assert _run("embed", "--options", root / "options.json", "--weights",
                root / "lm_weights.hdf5", src, out, "--stateful", "--batch-size", "3",
                "--layers", "top", "--quiet") == 0
    with h5py.File(out, "r") as f:
        for n in range(30):
            i, k = divmod(n, 3)
            with h5py.File(root / f"lm_embeddings_{k}.hdf5", "r") as e:
                expected = np.concatenate(list(e[str(i)][...]), axis=-1)
            np.testing.assert_allclose(f[str(n)][...], expected, atol=1e-5, rtol=1e-5)


def test_module_reads_lines_lazily(tmp_path):
    src = _write(tmp_path / "in.txt", ["a b", "c"])
    lines = embed_module.read_lines(src)
    first = next(lines)
    assert (first.number, first.tokens) == (0, ["a", "b"])


def _read_all(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][...] for k in f if k != "sentence_to_index"}, \
            json.loads(f["sentence_to_index"][0]), dict(f.attrs)


@pytest.mark.parametrize("num_shards", [2, 3])
def test_shards_merge_into_the_one_process_file(tmp_path, model_dir, monkeypatch, num_shards):
    lines = [f"line {i} " + "word " * (i % 5) for i in range(11)] + ["line 0"]  # a repeat
    src = _write(tmp_path / "in.txt", lines)
    assert _run("embed", model_dir, src, tmp_path / "single.hdf5", "--quiet") == 0
    parts = []
    for rank in reversed(range(num_shards)):  # RANK as torchrun sets it
        monkeypatch.setenv("RANK", str(rank))
        assert _run("embed", model_dir, src, tmp_path / "part{shard}.hdf5", "--quiet",
                    "--num-shards", num_shards) == 0
        parts.append(tmp_path / f"part{rank}.hdf5")
    assert _run("merge", tmp_path / "merged.hdf5", *parts) == 0
    single, single_index, single_attrs = _read_all(tmp_path / "single.hdf5")
    merged, merged_index, merged_attrs = _read_all(tmp_path / "merged.hdf5")
    assert single.keys() == merged.keys() and len(single) == 12
    for name in single:
        np.testing.assert_allclose(merged[name], single[name], atol=1e-6)
    assert list(merged_index.items()) == list(single_index.items())
    assert single_index["line 0"] == "11"
    assert single_attrs == merged_attrs == {}


def test_merge_refuses_missing_or_foreign_shards(tmp_path, model_dir, capsys):
    src = _write(tmp_path / "in.txt", LINES)
    for i in range(2):
        _run("embed", model_dir, src, tmp_path / f"p{i}.hdf5", "--quiet", "--num-shards", "2",
             "--shard-index", i)
    assert _run("merge", tmp_path / "m.hdf5", tmp_path / "p0.hdf5") == 1
    assert "shards 0..1" in capsys.readouterr().err
    _run("embed", model_dir, src, tmp_path / "whole.hdf5", "--quiet")
    assert _run("merge", tmp_path / "m.hdf5", tmp_path / "p0.hdf5", tmp_path / "whole.hdf5") == 1
    assert "not a complete shard" in capsys.readouterr().err
    assert not (tmp_path / "m.hdf5").exists()
    assert _run("embed", model_dir, src, tmp_path / "x.hdf5", "--quiet", "--num-shards", "2",
                "--shard-index", "5") == 1
    assert "--shard-index must be in 0..1" in capsys.readouterr().err


@pytest.mark.parametrize("device, message", [("gpu", "unknown device 'gpu'"),
                                             ("cuda:0", "CUDA is not available")])
def test_bad_device_is_a_clear_error(tmp_path, model_dir, capsys, device, message):
    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    src = _write(tmp_path / "in.txt", LINES)
    assert _run("embed", model_dir, src, tmp_path / "out.hdf5", "--device", device) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_missing_output_directories_are_created(tmp_path, model_dir):
    src = _write(tmp_path / "in.txt", LINES)
    assert _run("embed", model_dir, src, tmp_path / "new/dir/out.hdf5", "--quiet") == 0
    assert _run("merge", tmp_path / "new2/m.hdf5", tmp_path / "new/dir/out.hdf5") == 1  # no shard
    assert _run("vocab", "--train", src, "--out", tmp_path / "new3/vocab.txt", "--quiet") == 0
    assert _run("export", model_dir, tmp_path / "new4/exported") == 0
    assert (tmp_path / "new/dir/out.hdf5").is_file() and (tmp_path / "new3/vocab.txt").is_file()
    assert (tmp_path / "new4/exported/options.json").is_file()


@pytest.mark.parametrize(("flag", "expected"), [([], False), (["--cuda-graphs"], True),
                                                (["--no-cuda-graphs"], False)])
def test_cuda_graphs_flag_reaches_the_model(tmp_path, model_dir, monkeypatch, flag, expected):
    """Off by default (eager measured as fast or faster: docs/speed.md); on CPU no effect."""
    made = []
    from_pretrained = Embedder.from_pretrained.__func__
    monkeypatch.setattr(Embedder, "from_pretrained", classmethod(
        lambda cls, *a, **k: made.append(from_pretrained(cls, *a, **k)) or made[-1]))
    src = _write(tmp_path / "in.txt", LINES)
    assert _run("embed", model_dir, src, tmp_path / "out.hdf5", "--quiet", *flag) == 0
    assert made[0].model.cuda_graphs is expected
    with h5py.File(tmp_path / "out.hdf5", "r") as f:  # the CPU embeds all the same
        np.testing.assert_allclose(f["0"][...], made[0].embed_sentence(LINES[0].split()),
                                   atol=1e-6)


def test_cuda_graphs_with_stateful_is_refused(tmp_path, model_dir, capsys):
    src = _write(tmp_path / "in.txt", LINES)
    assert _run("embed", model_dir, src, tmp_path / "out.hdf5", "--quiet", "--stateful",
                "--cuda-graphs") == 1
    err = capsys.readouterr().err
    assert "CUDA graphs run stateless inference only" in err and "--stateful" in err
    assert "Traceback" not in err


def test_embedder_cuda_graphs_option():
    bilm = random_bilm(seed=3)
    assert not bilm.cuda_graphs  # the default: eager
    assert Embedder(bilm, device="cpu", cuda_graphs=True).model.cuda_graphs
    assert Embedder(bilm, device="cpu").model.cuda_graphs  # None keeps the model's setting
    assert not Embedder(bilm, device="cpu", cuda_graphs=False).model.cuda_graphs
    assert "cuda_graphs" not in Embedder(bilm, device="cpu", cuda_graphs=True).settings()
    with pytest.raises(ElmoError, match="stateless inference only"):
        Embedder(bilm, device="cpu", stateful=True, cuda_graphs=True)
