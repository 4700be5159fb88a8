"""The file job (`elmo.embed_file`): one options object, layer sums and pooling, chunks under a
token budget, and a tokenizer checked before anything is written."""

from __future__ import annotations

import sys

import h5py
import numpy as np
import pytest

from elmo import save_pretrained
from elmo.cli import main
from elmo.embed import CHUNK_BATCHES, Embedder
from elmo.embed_file import EmbedFileOptions, embed_file
from elmo.extras import MissingExtraError
from tests.conftest import random_bilm

LINES = ["the cat sat on the mat .", "a", "", "bank of the river", "money in the bank"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_pretrained(random_bilm(seed=5), tmp_path_factory.mktemp("m") / "model")


@pytest.fixture(scope="module")
def embedder(model_dir):
    return Embedder.from_pretrained(model_dir, batch_size=2)


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_missing_tokenizer_package_fails_before_anything_is_written(tmp_path, model_dir,
                                                                    monkeypatch, capsys):
    """Issue 39 (9): `--tokenizer jieba` without jieba failed after the progress bar and left
    a partial output that the next run called "another input, model or setting"."""
    monkeypatch.setitem(sys.modules, "jieba", None)  # `import jieba` raises ImportError
    src, out = _write(tmp_path / "in.txt", ["北京 欢迎 你"]), tmp_path / "out.hdf5"
    assert main(["embed", str(model_dir), str(src), str(out), "--tokenizer", "jieba"]) == 1
    captured = capsys.readouterr()
    assert "pip install 'elmo-bilm[zh]'" in captured.err and "Traceback" not in captured.err
    assert "embedding" not in captured.err  # no progress bar was started
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]
    with pytest.raises(MissingExtraError):
        Embedder.from_pretrained(model_dir, tokenizer="jieba").embed_file(src, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_options_object_and_keywords_are_the_same_job(tmp_path, embedder):
    src = _write(tmp_path / "in.txt", [line for line in LINES if line])
    options = EmbedFileOptions(layers="top", dtype="float16", progress=False)
    a = embed_file(embedder, src, tmp_path / "a.hdf5", options)
    b = embedder.embed_file(src, tmp_path / "b.hdf5", layers="top", dtype="float16",
                            progress=False)
    c = embedder.embed_file(src, tmp_path / "c.hdf5", options)
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb, h5py.File(c, "r") as fc:
        assert set(fa) == set(fb) == set(fc)
        for name in fa:
            np.testing.assert_array_equal(fa[name][...], fb[name][...])
            np.testing.assert_array_equal(fa[name][...], fc[name][...])
        assert fa["0"].dtype == np.float16 and fa["0"].shape == (7, 32)
    with pytest.raises(TypeError, match="not both"):
        embedder.embed_file(src, tmp_path / "d.hdf5", options, layers="all")
    with pytest.raises(ValueError, match="pool must be one of"):
        EmbedFileOptions(pool="max")


@pytest.mark.parametrize("layers, pool, shape", [
    ("sum", None, (7, 32)), ("sum", "mean", (32,)), ("all", "mean", (3, 32)),
    ("top", "mean", (32,)),
])
def test_layer_sum_and_mean_pooling(tmp_path, model_dir, embedder, layers, pool, shape,
                                    capsys):
    src, out = _write(tmp_path / "in.txt", LINES), tmp_path / "out.hdf5"
    argv = ["embed", str(model_dir), str(src), str(out), "--quiet", "--layers", layers]
    assert main(argv + (["--pool", pool] if pool else [])) == 0
    assert "1 empty line (the first: line 3)" in capsys.readouterr().err
    full = embedder.embed_sentence(LINES[3].split())  # (3, 4, 32)
    chosen = full.sum(axis=0) if layers == "sum" else full[-1] if layers == "top" else full
    expected = chosen.mean(axis=-2) if pool else chosen
    with h5py.File(out, "r") as f:
        assert f["3"].shape == expected.shape
        np.testing.assert_allclose(f["3"][...], expected, rtol=1e-5, atol=1e-5)
        assert f["0"].shape == shape
        if pool:  # a line without tokens has no mean
            assert np.isnan(f["2"][...]).all()


def test_chunks_keep_to_the_token_budget_and_the_chunk_grid(model_dir):
    embedder = Embedder.from_pretrained(model_dir, batch_size=32 // CHUNK_BATCHES,
                                        max_tokens=128 // CHUNK_BATCHES)
    # chunk_size 32 sentences, a budget of 128 tokens
    lengths = [50, 50, 50, 200, 3] + [1] * 40
    chunks = list(embedder.chunks([["x"] * n for n in lengths]))
    sizes = [[len(s) for s in chunk] for chunk in chunks]
    assert sizes[:4] == [[50, 50], [50], [200], [3] + [1] * 27]  # 32 sentences: the grid
    assert sum(map(len, sizes)) == len(lengths)
    assert all(sum(c) <= 128 or len(c) == 1 for c in sizes)
    resumed = list(embedder.chunks([["x"] * n for n in lengths[3:]], start=3))
    assert [[len(s) for s in c] for c in resumed] == sizes[2:]


def test_results_do_not_depend_on_the_token_budget(tmp_path, model_dir):
    """Stateless: a sentence's vectors are the same in whatever chunk and batch it lands."""
    lines = [" ".join(["w"] * (i % 9 + 1) + [str(i)]) for i in range(30)]
    src = _write(tmp_path / "in.txt", lines)
    outs = []
    for max_tokens in (8, 4096):
        embedder = Embedder.from_pretrained(model_dir, batch_size=3, max_tokens=max_tokens)
        outs.append(embedder.embed_file(src, tmp_path / f"{max_tokens}.hdf5", progress=False))
    with h5py.File(outs[0], "r") as a, h5py.File(outs[1], "r") as b:
        for i in range(30):
            np.testing.assert_allclose(a[str(i)][...], b[str(i)][...], atol=1e-5)
