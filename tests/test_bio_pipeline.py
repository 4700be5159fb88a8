"""`elmo bio-embeddings CONFIG`: bio_embeddings' configs run unchanged and write its folder;
and `elmo embed --fasta-keys biotrainer`."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo import save_bilm_tf
from elmo.bio import SeqVecEmbedder, embed_stage
from elmo.bio.pipeline import STATE, run_pipeline
from elmo.cli import main
from elmo.embed import Embedder
from elmo.errors import ElmoError
from elmo.io.fasta import read_fasta
from tests.conftest import REPO, random_bilm, require_shared

THEIR_EXAMPLE = """global:
  sequences_file: fasta.fa
  prefix: my_job
seqvec_embeddings:
  type: embed
  protocol: seqvec
  reduce: True
"""
# bio_embeddings downloads SeqVec when no model is named; here the model is a file pair.
MODEL = "  weights_file: model/weights.hdf5\n  options_file: model/options.json\n"
PROJECT = """tsne_projections:
  type: project
  protocol: tsne
  depends_on: seqvec_embeddings
  perplexity: 2
  n_iter: 250
plotly_visualization:
  type: visualize
  protocol: plotly
  depends_on: tsne_projections
"""
LAYOUT = [STATE, "input_parameters_file.yml", "mapping_file.csv", "output_parameters_file.yml",
          "remapped_sequences_file.fasta", "sequences_file.fasta",
          "seqvec_embeddings/embeddings_file.h5", "seqvec_embeddings/input_parameters_file.yml",
          "seqvec_embeddings/output_parameters_file.yml",
          "seqvec_embeddings/reduced_embeddings_file.h5"]


@pytest.fixture(scope="module")
def proteins() -> list:
    """Six real proteins of 40-200 residues (DeepLoc)."""
    path = require_shared("data", "proteins", "deeploc_test_set.fasta")
    short = (r for r in read_fasta(path) if len(r.sequence) <= 200)
    return list(itertools.islice(short, 6))


@pytest.fixture(scope="module")
def model_pair(tmp_path_factory) -> Path:
    """A SeqVec-shaped biLM (3 layers of 1,024 per residue) in the official pair format."""
    directory = tmp_path_factory.mktemp("seqvec")
    save_bilm_tf(random_bilm(seed=48, projection_dim=512), directory)
    return directory


def _prepare(directory: Path, proteins: list, model_pair: Path) -> Path:
    """fasta.fa and model/ in `directory`, as a bio_embeddings user has them."""
    (directory / "model").symlink_to(model_pair)
    (directory / "fasta.fa").write_text(
        "".join(f">{r.id} {r.description}\n{r.sequence}\n" for r in proteins), encoding="utf-8")
    return directory


@pytest.fixture
def job(tmp_path, monkeypatch, proteins, model_pair) -> Path:
    """The working directory of a bio_embeddings user (`_prepare`)."""
    monkeypatch.chdir(tmp_path)
    return _prepare(tmp_path, proteins, model_pair)


def _write_config(directory: Path, text: str) -> Path:
    path = directory / "config.yml"
    path.write_text(text, encoding="utf-8")
    return path


def _files(prefix: Path) -> list[str]:
    return sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.is_file())


def _read_h5(path: Path) -> dict[str, tuple[np.ndarray, str]]:
    with h5py.File(path, "r") as f:
        return {key: (d[...], d.attrs["original_id"]) for key, d in f.items()}


def test_their_example_config_runs_unchanged(job, proteins, model_pair):
    config = _write_config(job, THEIR_EXAMPLE + MODEL)
    assert main(["bio-embeddings", str(config), "--quiet"]) == 0
    prefix = job / "my_job"
    assert _files(prefix) == LAYOUT  # no partial work left
    assert (prefix / "input_parameters_file.yml").read_text() == config.read_text()
    by_length = sorted(proteins, key=lambda r: -len(r.sequence))
    md5 = [hashlib.md5(r.sequence.encode()).hexdigest() for r in by_length]
    assert (prefix / "mapping_file.csv").read_text().splitlines() == [
        ",original_id,sequence_length",
        *(f"{key},{r.id},{len(r.sequence)}" for key, r in zip(md5, by_length, strict=True))]
    remapped = list(read_fasta(prefix / "remapped_sequences_file.fasta"))
    assert [(r.id, r.description, r.sequence) for r in remapped] == [
        (key, f"{r.id} {r.description}", r.sequence) for key, r in zip(md5, by_length,
                                                                        strict=True)]
    assert max(map(len, (prefix / "remapped_sequences_file.fasta").read_text().split())) <= 60
    assert [(r.id, r.sequence) for r in read_fasta(prefix / "sequences_file.fasta")] == \
        [(r.id, r.sequence) for r in proteins]

    seqvec = SeqVecEmbedder(options_file=model_pair / "options.json",
                            weights_file=model_pair / "weights.hdf5", device="cpu")
    embeddings = _read_h5(prefix / "seqvec_embeddings/embeddings_file.h5")
    reduced = _read_h5(prefix / "seqvec_embeddings/reduced_embeddings_file.h5")
    assert sorted(embeddings) == sorted(reduced) == sorted(md5)
    for key, record in zip(md5, by_length, strict=True):
        layers, original_id = embeddings[key]
        assert original_id == reduced[key][1] == record.id
        assert layers.shape == (3, len(record.sequence), 1024) and layers.dtype == np.float32
        expected = seqvec.embed(record.sequence)
        np.testing.assert_allclose(layers, expected, atol=1e-6, rtol=0)
        assert reduced[key][0].shape == (1024,) and reduced[key][0].dtype == np.float32
        np.testing.assert_allclose(reduced[key][0], expected.sum(0).mean(0), atol=1e-6, rtol=0)

    yaml = pytest.importorskip("yaml")
    stage = yaml.safe_load((prefix / "seqvec_embeddings/output_parameters_file.yml").read_text())
    assert stage["embeddings_file"] == "my_job/seqvec_embeddings/embeddings_file.h5"
    assert stage["max_amino_acids"] == 15000 and stage["stage_name"] == "seqvec_embeddings"
    assert {"start_time", "end_time", "elapsed_time", "mapping_file"} <= set(stage)
    whole = yaml.safe_load((prefix / "output_parameters_file.yml").read_text())
    assert list(whole) == ["seqvec_embeddings", "global"]
    assert whole["global"]["remapped_sequences_file"] == "my_job/remapped_sequences_file.fasta"


def test_within_float32_rounding_of_seqvecembedder_with_trained_weights(tmp_path, monkeypatch):
    """The bound docs/proteins.md states: a batch changes the order of the sums, so the
    pipeline's vectors equal `SeqVecEmbedder.embed` up to float32 rounding, within 1e-5
    absolute plus 1e-5 relative; here with trained weights (the shipped `default` model,
    values up to about 4) on 24 DeepLoc proteins batched together."""
    from elmo.loading.resolve import shipped_model_dir

    records = read_fasta(require_shared("data", "proteins", "deeploc_test_set.fasta"))
    proteins = list(itertools.islice((r for r in records if len(r.sequence) <= 400), 24))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fasta.fa").write_text("".join(f">{r.id}\n{r.sequence}\n" for r in proteins))
    run_pipeline(_write_config(tmp_path, THEIR_EXAMPLE + "  model_directory: "
                               f"{shipped_model_dir()}\n"), progress=False)
    seqvec = SeqVecEmbedder("default", device="cpu")
    embeddings = _read_h5(tmp_path / "my_job/seqvec_embeddings/embeddings_file.h5")
    reduced = _read_h5(tmp_path / "my_job/seqvec_embeddings/reduced_embeddings_file.h5")
    for record in proteins:
        key = hashlib.md5(record.sequence.encode()).hexdigest()
        expected = seqvec.embed(record.sequence)
        np.testing.assert_allclose(embeddings[key][0], expected, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(reduced[key][0], SeqVecEmbedder.reduce_per_protein(expected),
                                   atol=1e-5, rtol=1e-5)


def test_simple_remapping_half_precision_and_discarded_residues(job, proteins):
    config = THEIR_EXAMPLE.replace("my_job", "my_job\n  simple_remapping: True") + MODEL + \
        "  half_precision: True\n  discard_per_amino_acid_embeddings: True\n" \
        "  max_amino_acids: 300\n"
    run_pipeline(_write_config(job, config), progress=False)
    prefix = job / "my_job"
    assert not (prefix / "seqvec_embeddings/embeddings_file.h5").exists()
    reduced = _read_h5(prefix / "seqvec_embeddings/reduced_embeddings_file.h5")
    by_length = sorted(proteins, key=lambda r: -len(r.sequence))
    assert {key: original for key, (_, original) in reduced.items()} == \
        {str(n): r.id for n, r in enumerate(by_length)}
    assert all(v.dtype == np.float16 and v.shape == (1024,) for v, _ in reduced.values())


def test_out_of_memory_halves_the_batch_then_computes_the_protein_on_the_cpu(
        job, proteins, model_pair, monkeypatch, caplog):
    """As on a GPU with room for 150 residues: every step is logged, no number changes."""
    compute = Embedder._compute

    def small_memory(self, sentences):
        if not getattr(self, "on_cpu", False) and sum(map(len, sentences)) > 150:
            raise torch.OutOfMemoryError("pretend")
        return compute(self, sentences)

    class CpuEmbedder(Embedder):
        on_cpu = True

    monkeypatch.setattr(Embedder, "_compute", small_memory)
    monkeypatch.setattr(embed_stage, "Embedder", CpuEmbedder)
    run_pipeline(_write_config(job, THEIR_EXAMPLE + MODEL), progress=False)
    assert "computing each half alone" in caplog.text
    longest = max(proteins, key=lambda r: len(r.sequence))
    assert f"({len(longest.sequence)} residues) does not fit" in caplog.text
    assert "computing it on the CPU" in caplog.text
    monkeypatch.undo()
    seqvec = SeqVecEmbedder(options_file=model_pair / "options.json",
                            weights_file=model_pair / "weights.hdf5", device="cpu")
    key = hashlib.md5(longest.sequence.encode()).hexdigest()
    with h5py.File(job / "my_job/seqvec_embeddings/embeddings_file.h5", "r") as f:
        assert len(f) == len(proteins)
        np.testing.assert_allclose(f[key][...], seqvec.embed(longest.sequence), atol=1e-6,
                                   rtol=0)


def _plotted_points(html: str) -> dict[str, int]:
    """The number of points of each trace (by name) of a plotly HTML page."""
    assert "plotly" in html.lower() and "Plotly.newPlot(" in html
    start = html.index("Plotly.newPlot(")
    data_at = html.index("[", html.index(",", start))
    traces, _ = json.JSONDecoder().raw_decode(html[data_at:])
    return {trace["name"]: len(trace["x"]) for trace in traces}


def test_project_and_visualize_write_their_csv_and_a_plotly_page(job, proteins):
    (job / "annotations.csv").write_text(
        "identifier,label\n" + "".join(f"{r.id},{r.description.split('-')[0]}\n"
                                       for r in proteins[:4]) + "NOT_EMBEDDED,Nucleus\n")
    config = THEIR_EXAMPLE + MODEL + PROJECT + "  annotation_file: annotations.csv\n"
    run_pipeline(_write_config(job, config), progress=False)
    prefix = job / "my_job"
    rows = (prefix / "tsne_projections/projected_embeddings_file.csv").read_text().splitlines()
    assert rows[0] == ",original_id,sequence_length,component_0,component_1,component_2"
    assert len(rows) == 7
    assert [r.split(",")[:3] for r in rows[1:]] == [
        r.split(",") for r in (prefix / "mapping_file.csv").read_text().splitlines()[1:]]
    projected = _read_h5(prefix / "tsne_projections/projected_reduced_embeddings_file.h5")
    assert all(v.shape == (3,) for v, _ in projected.values()) and len(projected) == 6
    plot = prefix / "plotly_visualization"
    assert sorted(p.name for p in plot.iterdir()) == [
        "input_annotation_file.csv", "input_parameters_file.yml", "merged_annotation_file.csv",
        "output_parameters_file.yml", "plot_file.html"]
    labels = [r.description.split("-")[0] for r in proteins[:4]]
    points = _plotted_points((plot / "plot_file.html").read_text(encoding="utf-8"))
    assert sum(points.values()) == 6 and points["UNKNOWN"] == 2  # NOT_EMBEDDED: no point
    assert set(points) == {*labels, "UNKNOWN"}
    merged = (plot / "merged_annotation_file.csv").read_text().splitlines()
    assert merged[0] == "identifier,label,component_0,component_1,component_2"
    assert len(merged) == 1 + 6 + 1


@pytest.mark.slow  # umap-learn's first call compiles its numba code: about a minute
def test_umap_in_two_dimensions(job):
    pytest.importorskip("umap")
    config = THEIR_EXAMPLE + MODEL + PROJECT.replace(
        "protocol: tsne\n", "protocol: umap\n  n_components: 2\n  n_neighbors: 3\n").replace(
        "  perplexity: 2\n  n_iter: 250\n", "")
    run_pipeline(_write_config(job, config), progress=False)
    rows = (job / "my_job/tsne_projections/projected_embeddings_file.csv").read_text()
    assert rows.splitlines()[0] == ",original_id,sequence_length,component_0,component_1"
    html = (job / "my_job/plotly_visualization/plot_file.html").read_text(encoding="utf-8")
    assert _plotted_points(html) == {"UNKNOWN": 6}


@pytest.mark.parametrize("stage, message", [
    ("bert:\n  type: embed\n  protocol: prottrans_bert_bfd\n",
     r"config.yml, line \d+ \(section 'bert'\): type 'embed' with protocol "
     r"'prottrans_bert_bfd' does not run here.*embed with protocol seqvec, project with tsne"),
    ("x:\n  type: extract\n  protocol: bindEmbed21DL\n", "type 'extract'.*does not run here"),
    ("x:\n  type: project\n  protocol: tsne\n  depends_on: nothing\n",
     r"line 13 \(option 'depends_on' of 'x'\): 'nothing' is not a stage above"),
    ("x:\n  type: project\n  protocol: tsne\n  perplexity: many\n",
     "perplexity is 'many'; write a number"),
    ("x:\n  type: embed\n  protocol: seqvec\n  weights_file: https://example.org/w.hdf5\n",
     "is a URL"),
    ("x:\n  type: embed\n  protocol: seqvec\n  discard_per_amino_acid_embeddings: True\n",
     "also set 'reduce: True'"),
    ("x:\n  type: embed\n  protocol: seqvec\n  embeddings_transformer_function: 'lambda x: x'\n",
     "not supported here"),
    ("x: [1, 2\n", r"line \d+: not valid YAML"),
])
def test_a_config_that_cannot_run_is_refused_before_anything_is_written(job, stage, message):
    config = _write_config(job, THEIR_EXAMPLE + MODEL + stage)
    with pytest.raises(ElmoError, match=message):
        run_pipeline(config)
    assert not (job / "my_job").exists()
    assert main(["bio-embeddings", str(config)]) == 1


def test_a_bad_fasta_file_names_its_line(job):
    (job / "fasta.fa").write_text(">a\nMKV\n>b\nMK*V\n")
    with pytest.raises(ElmoError, match=r"fasta.fa, line 4, column 3: record 'b' holds '\*'"):
        run_pipeline(_write_config(job, THEIR_EXAMPLE + MODEL))
    (job / "fasta.fa").write_text(">a\nMKV\n>b\nMKV\n")
    with pytest.raises(ElmoError, match=r"line 3: record 'b' has the same sequence as 'a' "
                                        r"\(line 1\).*simple_remapping: True"):
        run_pipeline(_write_config(job, THEIR_EXAMPLE + MODEL))
    assert not (job / "my_job").exists()


def test_an_existing_prefix_needs_overwrite(job, caplog):
    config = _write_config(job, THEIR_EXAMPLE + MODEL)
    run_pipeline(config, progress=False)
    before = _contents(job / "my_job")
    caplog.set_level("INFO", "elmo.bio")
    run_pipeline(config, progress=False)  # the same config again: every stage is kept
    assert "keeping the finished stages seqvec_embeddings" in caplog.text
    assert _contents(job / "my_job") == before
    (job / "my_job" / "mine.txt").write_text("kept")
    (job / "my_job" / "seqvec_embeddings" / "stale.h5").write_text("not the run's")
    with pytest.raises(ElmoError, match="seqvec_embeddings holds stale.h5, which this "
                                        "pipeline did not write there"):
        run_pipeline(config, overwrite=True, progress=False)  # a folder not as recorded
    (job / "my_job" / "seqvec_embeddings" / "stale.h5").unlink()
    run_pipeline(config, overwrite=True, progress=False)
    assert (job / "my_job" / "mine.txt").read_text() == "kept"
    assert _files(job / "my_job") == sorted([*LAYOUT, "mine.txt"])
    (job / "my_job" / STATE).unlink()  # a folder this pipeline did not write
    with pytest.raises(ElmoError, match="my_job already exists and holds no run of this "
                                        "pipeline: pass --overwrite"):
        run_pipeline(config)


# Kill the child when it is about to create its N-th HDF5 dataset; then run the pipeline.
KILLER = """
import os, signal, sys
import h5py, torch
torch.set_num_threads(1)
n, count = int(sys.argv[1]), [0]
real = h5py.Group.create_dataset
def dying(*args, **kwargs):
    count[0] += 1
    if count[0] == n:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
h5py.Group.create_dataset = dying
from elmo.bio.pipeline import run_pipeline
run_pipeline("config.yml", progress=False)
"""


def _run_killed_at(n: int, directory: Path) -> int:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"}
    done = subprocess.run([sys.executable, "-c", KILLER, str(n)], cwd=directory, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == -9, done.stderr[-2000:]
    return done.returncode


def _contents(prefix: Path) -> dict[str, object]:
    """Every file of a run: HDF5 as arrays and attributes, YAML without times, others as text."""
    found: dict[str, object] = {}
    for name in _files(prefix):
        path = prefix / name
        if name.endswith(".h5"):
            found[name] = {k: (v.tobytes(), o) for k, (v, o) in _read_h5(path).items()}
        elif name == STATE:  # the digests of files with times differ: their names
            found[name] = {stage: (entry["identity"], sorted(entry["files"]), entry["dirs"])
                           for stage, entry in json.loads(path.read_text())["stages"].items()}
        else:
            found[name] = [line for line in path.read_text().splitlines()
                           if not line.lstrip().startswith(("start_time", "end_time",
                                                            "elapsed_time"))]
    return found


# max_amino_acids 100: a chunk (a saved segment) of at most 1,600 residues, so 3 segments of
# two datasets per protein; then 6 datasets of the projection.
KILLED_CONFIG = THEIR_EXAMPLE + MODEL + "  max_amino_acids: 100\n" + PROJECT


@pytest.fixture(scope="module")
def never_killed(tmp_path_factory, proteins, model_pair) -> dict[str, object]:
    """The contents of the folder of KILLED_CONFIG run once without a kill."""
    directory = _prepare(tmp_path_factory.mktemp("reference"), proteins, model_pair)
    here = Path.cwd()
    os.chdir(directory)  # paths in a config are relative to the working directory
    try:
        run_pipeline(_write_config(directory, KILLED_CONFIG), progress=False)
    finally:
        os.chdir(here)
    return _contents(directory / "my_job")


@pytest.mark.parametrize("kills", [[1], [5], [9, 3], [13]],
                         ids=["first", "second-segment", "twice", "projecting"])
def test_killed_anywhere_the_rerun_gives_the_same_files(job, never_killed, kills):
    _write_config(job, KILLED_CONFIG)
    for n in kills:
        assert _run_killed_at(n, job) == -9
        assert (job / "my_job" / STATE).exists()
        assert not (job / "my_job" / "output_parameters_file.yml").exists()
    run_pipeline(job / "config.yml", progress=False)
    assert _contents(job / "my_job") == never_killed


def test_the_bio_embeddings_command(job, monkeypatch):
    from elmo.__main__ import bio_embeddings as console_main

    _write_config(job, THEIR_EXAMPLE + MODEL)
    monkeypatch.setattr(sys, "argv", ["bio_embeddings", "config.yml", "--quiet"])
    assert console_main() == 0
    monkeypatch.setattr(sys, "argv", ["bio_embeddings", "-o", "config.yml", "--quiet"])
    assert console_main() == 0
    assert _files(job / "my_job") == LAYOUT


def test_elmo_embed_writes_biotrainers_keys(job, proteins, capsys):
    out = job / "out.h5"
    assert main(["embed", "--options", "model/options.json", "--weights", "model/weights.hdf5",
                 "fasta.fa", str(out), "--layers", "sum", "--pool", "mean", "--quiet",
                 "--fasta-keys", "biotrainer"]) == 0
    with h5py.File(out, "r") as f:
        found = {key: (f[key].attrs["original_id"], f[key].shape) for key in f}
    # biotrainer's calculate_sequence_hash
    assert found == {hashlib.sha256(f"{r.sequence}_{len(r.sequence)}".encode()).hexdigest():
                     (r.id, (1024,)) for r in proteins}
    (job / "twice.fa").write_text(">a\nMKV\n>b\nMKV\n")
    assert main(["embed", "--options", "model/options.json", "--weights", "model/weights.hdf5",
                 "twice.fa", str(job / "twice.h5"), "--fasta-keys", "biotrainer"]) == 1
    assert "line 3: record 'b' has the same sequence as 'a'" in capsys.readouterr().err
