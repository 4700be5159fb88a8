"""Embedding with Ray Data on a local Ray (2 CPUs, one session for the module): `Embed` in
`map_batches`, and `elmo embed --ray` (Parquet blocks, resuming, `elmo merge`)."""

from __future__ import annotations

import gzip
import importlib
import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest
import ray

from elmo import save_pretrained
from elmo.cli import main
from elmo.embed import Embedder, select_layers
from elmo.errors import ElmoError
from elmo.ray import Embed
from elmo.ray.files import BlockWriter, _check_resources
from tests.conftest import REPO, random_bilm

LINES = ["the bank raised rates .", "", "we sat on the river bank .", "   ", "a", "北京 欢迎 你",
         "money in the bank", "the cat sat on the mat .", "b c d e f g h", "a b"]


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_pretrained(random_bilm(seed=5), tmp_path_factory.mktemp("ray") / "model")


def _run(*args) -> int:
    return main([str(a) for a in args])


@pytest.mark.parametrize("layers", ["average", "all"])
def test_embed_rows_equal_the_embedder(ray_session, model_dir, layers):
    rows = [{"id": i, "text": text} for i, text in enumerate(LINES)]
    out = ray.data.from_items(rows, override_num_blocks=3).map_batches(
        Embed, fn_constructor_kwargs={"model": str(model_dir), "layers": layers},
        compute=ray.data.ActorPoolStrategy(size=1), batch_size=4).take_all()
    expected = Embedder.from_pretrained(model_dir).embed_sentences([t.split() for t in LINES])
    assert sorted(row["id"] for row in out) == list(range(len(LINES)))
    for row in out:  # every row keeps its columns, with its own tokens and vectors
        i = row["id"]
        assert row["text"] == LINES[i] and list(row["tokens"]) == LINES[i].split()
        want = select_layers(expected[i], layers)
        assert row["embedding"].dtype == np.float32 and row["embedding"].shape == want.shape
        np.testing.assert_allclose(row["embedding"], want, atol=1e-5, rtol=0)
    blank = next(row for row in out if row["id"] == 3)  # a blank line keeps its row
    assert blank["embedding"].shape == ((0, 32) if layers == "average" else (3, 0, 32))


def test_a_model_that_cannot_be_loaded_fails_the_actor_naming_it(ray_session, tmp_path):
    missing = tmp_path / "no-such-model"
    data = ray.data.from_items([{"text": "a b"}])
    with pytest.raises(Exception, match=r"model '.*no-such-model' is neither a released name"):
        data.map_batches(Embed, fn_constructor_kwargs={"model": str(missing)},
                         compute=ray.data.ActorPoolStrategy(size=1)).materialize()


def test_a_block_reports_what_stopped_it(model_dir, tmp_path):
    """The actor of `elmo embed --ray` returns the message (the driver raises it), writes
    nothing: a line that is not UTF-8, a model that this node cannot load."""
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a fine line\n\xff\xfe\n")
    block = {"name": np.array(["part-000000.parquet"]), "source": np.array([str(bad)]),
             "start": np.array([0]), "stop": np.array([2])}
    for model, message in ((model_dir, "bad.txt, line 2: not valid UTF-8"),
                           (tmp_path / "gone", "gone' is neither a released name")):
        done = BlockWriter(str(tmp_path), {"model": str(model)}, "strict", "float32")(block)
        assert message in done["error"][0] and done["lines"][0] == 0
    assert not list(tmp_path.glob("*part-*"))


def test_actors_that_cannot_be_placed_are_refused(ray_session):
    with pytest.raises(ElmoError, match="3 workers of 2 thread.s. need 6 CPUs; this Ray has 2"):
        _check_resources(3, 2, 0)


def _write_inputs(directory):
    """Two files of LINES, the second gzipped: the --ray input, and their concatenation."""
    directory.mkdir()
    (directory / "a.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    with gzip.open(directory / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(reversed(LINES)) + "\n")
    joined = directory.parent / "joined.txt"
    joined.write_text("\n".join(LINES + LINES[::-1]) + "\n", encoding="utf-8")
    return joined


def _assert_same_hdf5(path, reference, atol=1e-5):
    with h5py.File(path, "r") as f, h5py.File(reference, "r") as ref:
        assert sorted(f) == sorted(ref)
        assert json.loads(f["sentence_to_index"][0]) == json.loads(ref["sentence_to_index"][0])
        for name in ref:
            if name != "sentence_to_index":
                np.testing.assert_allclose(f[name][...], ref[name][...], atol=atol, rtol=0)


def test_ray_command_equals_embed(ray_session, model_dir, tmp_path, capsys):
    joined = _write_inputs(tmp_path / "corpus")
    out, merged = tmp_path / "out", tmp_path / "merged.hdf5"
    assert _run("embed", model_dir, joined, tmp_path / "ref.hdf5", "--quiet") == 0
    command = ("embed", model_dir, tmp_path / "corpus", out, "--ray", "--workers", 2,
               "--block-lines", 4, "--quiet")
    assert _run(*command) == 0
    assert sorted(p.name for p in out.iterdir()) == ["_manifest.json"] + \
        [f"part-{i:06d}.parquet" for i in range(6)]  # 10 lines per file: 3 blocks each
    table = pq.read_table(out)  # the directory reads as one table
    assert table.column_names == ["source", "line", "text", "tokens", "embedding"]
    rows = table.to_pylist()
    assert [(os.path.basename(r["source"]), r["line"]) for r in rows] == \
        [("a.txt", i) for i in range(10)] + [("b.txt.gz", i) for i in range(10)]
    assert [r["text"] for r in rows] == [t.strip() for t in LINES + LINES[::-1]]
    assert [r["tokens"] for r in rows] == [t.split() for t in LINES + LINES[::-1]]

    assert _run("merge", merged, out) == 0
    _assert_same_hdf5(merged, tmp_path / "ref.hdf5")

    capsys.readouterr()
    assert _run(*command) == 1  # an existing output is not replaced without --overwrite
    assert "already exists: pass --overwrite" in capsys.readouterr().err


def test_a_killed_ray_run_resumes(ray_session, model_dir, tmp_path, capsys):
    lines = [" ".join([f"line {i} of the corpus ."] * (1 + i % 3)) for i in range(48)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, partial = tmp_path / "out", tmp_path / "out.partial"
    command = ["embed", str(model_dir), str(tmp_path / "in.txt"), str(out), "--ray",
               "--workers", "1", "--batch-size", "1"]  # blocks of 16 x 1 lines
    address = ray.get_runtime_context().gcs_address  # the child joins this test's Ray
    with open(tmp_path / "child.log", "wb") as log:
        child = subprocess.Popen([sys.executable, "-m", "elmo", *command, "--quiet",
                                  "--address", address], cwd=REPO, stderr=log)
    deadline = time.monotonic() + 120
    while not list(partial.glob("part-*.parquet")) and time.monotonic() < deadline:
        assert child.poll() is None, (tmp_path / "child.log").read_text()
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    before = {p.name: p.stat().st_mtime_ns for p in partial.glob("part-*.parquet")}
    assert 1 <= len(before) < 3 and not (out / "_manifest.json").exists()

    capsys.readouterr()
    assert main(command) == 0  # the same command, in this process (this Ray)
    assert f"resuming {partial}: {len(before)} of 3 blocks were embedded before" in \
        capsys.readouterr().err
    assert not partial.exists() and len(list(out.glob("part-*.parquet"))) == 3
    assert all((out / name).stat().st_mtime_ns == mtime for name, mtime in before.items())
    assert _run("embed", model_dir, tmp_path / "in.txt", tmp_path / "ref.hdf5", "--batch-size", 1,
                "--quiet") == 0
    assert _run("merge", tmp_path / "merged.hdf5", out) == 0
    # one input file, blocks of 16 x --batch-size lines (the default): every line has the
    # neighbours it has in `elmo embed`, so the vectors are the same bit for bit
    _assert_same_hdf5(tmp_path / "merged.hdf5", tmp_path / "ref.hdf5", atol=0)


def test_without_ray_the_extra_is_named(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    for name in [n for n in sys.modules if n == "elmo.ray" or n.startswith("elmo.ray.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ElmoError, match=r"needs ray: pip install 'elmo-bilm\[ray\]'"):
        importlib.import_module("elmo.ray")
    assert _run("embed", "default", tmp_path / "in.txt", tmp_path / "out", "--ray") == 1
    assert "needs ray: pip install 'elmo-bilm[ray]'" in capsys.readouterr().err
