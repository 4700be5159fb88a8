"""Embedding with Ray Data on a local Ray (2 CPUs, one session for the module): `Embed` in
`map_batches`, and `elmo embed --ray` (Parquet blocks, resuming, `elmo merge`; text and
FASTA)."""

from __future__ import annotations

import gzip
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import ray

from elmo import save_pretrained
from elmo.cli import main
from elmo.embed import CHUNK_BATCHES, Embedder, select_layers
from elmo.errors import ElmoError, InputFileError
from elmo.io.fasta import dataset_name, scan_fasta
from elmo.io.parquet_output import MANIFEST, embedding_arrays, parquet_to_hdf5, write_block
from elmo.ray import Embed
from elmo.ray.files import BlockWriter, _check_resources
from tests.conftest import REPO, random_bilm

BLOCK_BATCH = 16 // CHUNK_BATCHES  # --batch-size that makes blocks of 16 lines

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
    with pytest.raises(Exception, match=r"'.*no-such-model' is neither a Hugging Face Hub model"):
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
                           (tmp_path / "gone", "gone' is neither a Hugging Face Hub model")):
        done = BlockWriter(str(tmp_path), str(model), {})(block)
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


def _settled_blocks(partial: Path, quiet_seconds: float = 5.0) -> dict[str, int]:
    """The block files in `partial` (name -> mtime) once none has appeared or changed for
    `quiet_seconds`: an actor of a killed driver may finish writing the block it holds before
    Ray ends it."""
    deadline = time.monotonic() + 120
    seen: dict[str, int] = {}
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        now = {p.name: p.stat().st_mtime_ns for p in partial.glob("part-*.parquet")}
        if now != seen:
            seen, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_seconds:
            return seen
        time.sleep(0.1)
    raise AssertionError(f"the block files in {partial} kept changing for 120 s")


def test_a_killed_ray_run_resumes(ray_session, model_dir, tmp_path, capsys):
    lines = [" ".join([f"line {i} of the corpus ."] * (1 + i % 3)) for i in range(48)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, partial = tmp_path / "out", tmp_path / "out.partial"
    command = ["embed", str(model_dir), str(tmp_path / "in.txt"), str(out), "--ray",
               "--workers", "1", "--batch-size", str(BLOCK_BATCH)]  # blocks of 16 lines
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
    before = _settled_blocks(partial)
    assert 1 <= len(before) < 3 and not (out / "_manifest.json").exists()

    capsys.readouterr()
    assert main(command) == 0  # the same command, in this process (this Ray)
    assert f"resuming {partial}: {len(before)} of 3 blocks were embedded before" in \
        capsys.readouterr().err
    assert not partial.exists() and len(list(out.glob("part-*.parquet"))) == 3
    assert all((out / name).stat().st_mtime_ns == mtime for name, mtime in before.items())
    assert _run("embed", model_dir, tmp_path / "in.txt", tmp_path / "ref.hdf5", "--batch-size",
                BLOCK_BATCH, "--quiet") == 0
    assert _run("merge", tmp_path / "merged.hdf5", out) == 0
    # one input file, blocks of CHUNK_BATCHES x --batch-size lines (the default): every line
    # has the neighbours it has in `elmo embed`, so the vectors are the same bit for bit
    _assert_same_hdf5(tmp_path / "merged.hdf5", tmp_path / "ref.hdf5", atol=0)


def _fasta(records, width=7):
    """FASTA text of (id, description, sequence): sequences wrapped at `width`, a blank line
    after every other record."""
    return "".join(f">{ident} {description}\n" + "".join(
        seq[i:i + width] + "\n" for i in range(0, len(seq), width)) + "\n" * (n % 2)
        for n, (ident, description, seq) in enumerate(records))


PROTEINS = [(f"sp|P{n:05d}|PROT{n}" if n % 5 else f"tr/{n}%x", f"protein {n}  of a" * (n % 3),
             "ACDEFGHIKLMNPQRSTVWY"[n % 7:] + "MKV" * (n % 4)) for n in range(25)]


def test_ray_command_on_fasta_equals_embed(ray_session, model_dir, tmp_path):
    """Two FASTA files, one gzipped, read by their names: 16 records a block (--batch-size
    BLOCK_BATCH), the first file cut in two; merged, the file of `elmo embed` on each, bit
    for bit."""
    corpus, out, merged = tmp_path / "corpus", tmp_path / "out", tmp_path / "merged.hdf5"
    corpus.mkdir()
    (corpus / "a.fasta").write_text(_fasta(PROTEINS[:20]), encoding="utf-8")
    with gzip.open(corpus / "b.fa.gz", "wt", encoding="utf-8") as f:
        f.write(_fasta(PROTEINS[20:], width=5))
    assert _run("embed", model_dir, corpus, out, "--ray", "--workers", 2, "--batch-size",
                BLOCK_BATCH, "--quiet") == 0
    manifest = json.loads((out / MANIFEST).read_text())
    assert (manifest["version"], manifest["input_format"], manifest["tokenizer"]) == \
        (2, "fasta", "chars")
    assert [(b["source"], b["start"], b["stop"]) for b in manifest["blocks"]] == \
        [(0, 0, 16), (0, 16, 20), (1, 0, 5)]
    table = pq.read_table(out)
    assert table.column_names == ["source", "line", "id", "description", "text", "tokens",
                                  "embedding"]
    rows = table.to_pylist()
    assert [(os.path.basename(r["source"]), r["line"]) for r in rows] == \
        [("a.fasta", i) for i in range(20)] + [("b.fa.gz", i) for i in range(5)]
    assert [(r["id"], r["description"], r["text"]) for r in rows] == \
        [(i, d.strip(), s) for i, d, s in PROTEINS]
    assert [r["tokens"] for r in rows] == [list(s) for _, _, s in PROTEINS]

    assert _run("merge", merged, out) == 0
    for name in ("a.fasta", "b.fa.gz"):
        assert _run("embed", model_dir, corpus / name, tmp_path / f"{name}.hdf5",
                    "--batch-size", BLOCK_BATCH, "--quiet") == 0
    with h5py.File(merged, "r") as f, h5py.File(tmp_path / "a.fasta.hdf5", "r") as a, \
            h5py.File(tmp_path / "b.fa.gz.hdf5", "r") as b:
        assert sorted(f) == sorted([*a, *b]) == sorted(dataset_name(i) for i, _, _ in PROTEINS)
        assert dict(f.attrs) == dict(a.attrs) == {}  # no sentence_to_index either
        for ref in (a, b):
            for name in ref:
                assert dict(f[name].attrs) == dict(ref[name].attrs)
                assert f[name].dtype == ref[name].dtype
                np.testing.assert_array_equal(f[name][...], ref[name][...])


def test_fasta_input_is_checked_before_ray_starts(model_dir, tmp_path, capsys):
    """A bad record stops the run with the reader's message and leaves no output; a mix of
    FASTA and text is refused, unless --format says how to read them all."""
    corpus, out = tmp_path / "corpus", tmp_path / "out"
    corpus.mkdir()
    (corpus / "a.fasta").write_text(_fasta(PROTEINS[:3]), encoding="utf-8")
    (corpus / "b.fasta").write_text(">p1\nMKV\n>p2 bad\nMK*V\n", encoding="utf-8")
    with pytest.raises(InputFileError) as reader:
        scan_fasta(corpus / "b.fasta")
    assert "b.fasta, line 4, column 3: record 'p2' holds '*'" in str(reader.value)
    capsys.readouterr()
    assert _run("embed", model_dir, corpus, out, "--ray", "--quiet") == 1
    assert str(reader.value) in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]  # nothing written

    (corpus / "b.fasta").unlink()
    (corpus / "c.txt").write_text("a sentence\n", encoding="utf-8")
    assert _run("embed", model_dir, corpus, out, "--ray", "--quiet") == 1
    assert f"mixes fasta and text files ({corpus / 'a.fasta'}, {corpus / 'c.txt'})" in \
        capsys.readouterr().err
    assert _run("embed", model_dir, corpus, out, "--ray", "--format", "fasta", "--quiet") == 1
    assert "c.txt, line 1: sequence before any header" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]
    with pytest.raises(SystemExit):
        _run("embed", model_dir, corpus / "a.fasta", out, "--ray", "--pool", "mean")
    assert "--pool: not with --ray" in capsys.readouterr().err


@pytest.mark.parametrize("lead", [(), (3,)])  # layers "top" or "average"; "all"
def test_embedding_arrays_takes_what_pyarrow_and_pandas_read(tmp_path, lead):
    rng = np.random.default_rng(0)
    blocks = [[rng.random((*lead, n, 4), dtype=np.float32) for n in lengths]
              for lengths in ((2, 0, 5), (1,), (0,))]  # a file each: pyarrow reads chunks
    for i, arrays in enumerate(blocks):
        lines = list(range(len(arrays)))
        write_block(tmp_path / f"part-00000{i}.parquet", "in.txt", lines, ["x"] * len(lines),
                    [["x"]] * len(lines), arrays)
    columns = {"pyarrow": pq.read_table(tmp_path)["embedding"],
               "pyarrow, combined": pq.read_table(tmp_path)["embedding"].combine_chunks(),
               "pandas": pd.read_parquet(tmp_path)["embedding"],
               "pandas, arrow types": pd.read_parquet(tmp_path, dtype_backend="pyarrow")[
                   "embedding"]}
    for how, column in columns.items():
        got = embedding_arrays(column)
        assert [a.shape for a in got] == [a.shape for a in sum(blocks, [])], how
        for a, b in zip(got, sum(blocks, []), strict=True):
            assert a.dtype == np.float32 and np.array_equal(a, b), how


def test_embedding_arrays_refuses_a_column_of_something_else():
    with pytest.raises(ElmoError, match="not an embedding column: its rows are double"):
        embedding_arrays(pd.Series([1.0, 2.0]))


def test_merge_refuses_an_id_of_two_fasta_files(tmp_path):
    """Each file's ids are checked when read; the same id in two files stops `elmo merge`."""
    out = tmp_path / "out"
    out.mkdir()
    for n, source in enumerate(("a.fasta", "b.fasta")):
        write_block(out / f"part-00000{n}.parquet", source, [0], ["MKV"], [list("MKV")],
                    [np.zeros((3, 4), np.float32)], {"id": ["P1"], "description": [""]})
    (out / MANIFEST).write_text(json.dumps({
        "version": 2, "input_format": "fasta", "inputs": [{"lines": 1}, {"lines": 1}],
        "blocks": [{"name": f"part-00000{n}.parquet", "source": n} for n in (0, 1)]}))
    with pytest.raises(ElmoError, match=r"b.fasta: record 'P1' \(record 1 of the file\) has "
                       "the id of a record of an earlier input file"):
        parquet_to_hdf5(out, tmp_path / "merged.hdf5")
    assert not (tmp_path / "merged.hdf5").exists()


def test_without_ray_the_extra_is_named(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    for name in [n for n in sys.modules if n == "elmo.ray" or n.startswith("elmo.ray.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ElmoError, match=r"needs ray: pip install 'elmo-bilm\[ray\]'"):
        importlib.import_module("elmo.ray")
    assert _run("embed", "default", tmp_path / "in.txt", tmp_path / "out", "--ray") == 1
    assert "needs ray: pip install 'elmo-bilm[ray]'" in capsys.readouterr().err
