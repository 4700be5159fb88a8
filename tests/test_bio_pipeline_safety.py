"""`elmo bio-embeddings` on configs and folders it must not trust: stage names that leave the
prefix, links in it, malformed YAML; every check done before the first stage runs; and a
rerun of a changed config keeps the stages it did not change."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path

import pytest

from elmo.bio.pipeline import STATE, run_pipeline
from elmo.bio.pipeline_config import STAGE_TYPES
from elmo.errors import ElmoError
from tests.helpers.bio_pipeline import (
    EMBED,
    GLOBAL,
    PLOT,
    TSNE,
    one_line_error,
    write_config,
    write_fasta,
)

pytest.importorskip("yaml")
pytest.importorskip("sklearn")


# --- stage names --------------------------------------------------------------------------

@pytest.mark.parametrize("name, rule", [
    ("{outside}", "has a path separator"),
    ("../elsewhere", "has a path separator"),
    ("'..'", "starts with '.'"),
    ("'.'", "starts with '.'"),
    ("'a\\\\b'", "has a path separator"),
    ("''", "is empty"),
    ("'.embed.partial'", "starts with '.'"),
    ('"a\\0b"', "has a control character"),
    ("' padded'", "starts or ends with a space"),
    ("mapping_file.csv", "is the name of one of the prefix's own files"),
    ("x" * 256, "is longer than 255 bytes"),
    ("5", "is not a text (YAML reads it as int)"),
    ("true", "is not a text (YAML reads it as bool)"),
    ("null", "is not a text (YAML reads it as null)"),
    ("[a]", "is not a text (YAML reads it as seq)"),
])
@pytest.mark.parametrize("overwrite", [False, True], ids=["", "overwrite"])
def test_a_stage_name_is_one_plain_folder_name(bio_job, capsys, name, rule, overwrite):
    outside = bio_job / "elsewhere"
    outside.mkdir()
    (outside / "precious.txt").write_text("mine")
    (bio_job / "my_job").mkdir()
    (bio_job / "my_job" / "precious.txt").write_text("mine")
    stage = f"{name.format(outside=outside)}:"
    config = write_config(bio_job, GLOBAL + EMBED.replace("emb:", stage))
    err = one_line_error(config, capsys, *["--overwrite"] * overwrite)
    assert f"{rule}; a stage's name is its directory in the prefix" in err
    assert "config.yml, line 4" in err
    # nothing written or removed: not the folder it names, not the prefix
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    assert sorted(p.name for p in (bio_job / "my_job").iterdir()) == ["precious.txt"]
    assert not (bio_job / "my_job.lock").exists()


def test_stage_names_written_twice_or_differing_in_case_are_refused(bio_job, capsys):
    err = one_line_error(write_config(bio_job, GLOBAL + EMBED + EMBED), capsys)
    assert "line 10: the section 'emb' is written twice (also on line 4)" in err
    config = write_config(bio_job, GLOBAL + EMBED + EMBED.replace("emb:", "Emb:"))
    err = one_line_error(config, capsys)
    assert "stages 'emb' and 'Emb' differ only in case" in err
    err = one_line_error(write_config(bio_job, GLOBAL + EMBED + "  reduce: False\n"), capsys)
    assert "the option 'reduce' in 'emb' is written twice (also on line 9)" in err
    assert not (bio_job / "my_job").exists()


def test_overwrite_removes_only_a_stages_own_directory(bio_job, capsys):
    """A prefix that holds other folders: --overwrite never removes one no stage wrote."""
    documents = bio_job / "home" / "Documents"
    documents.mkdir(parents=True)
    (documents / "thesis.tex").write_text("years of work")
    config = write_config(bio_job, GLOBAL.replace("my_job", "home")
                          + EMBED.replace("emb:", "Documents:"))
    err = one_line_error(config, capsys)
    assert "home already exists and holds no run of this pipeline" in err
    err = one_line_error(config, capsys, "--overwrite")
    assert "home/Documents was not written by this pipeline (the prefix's .elmo_stages.json " \
           "does not record it): move it away, or rename the stage" in err
    assert (documents / "thesis.tex").read_text() == "years of work"
    (bio_job / "home" / "Documents2").mkdir()  # an empty folder of that name may go
    run_pipeline(write_config(bio_job, GLOBAL.replace("my_job", "home") + EMBED.replace(
        "emb:", "Documents2:")), overwrite=True, progress=False)
    assert (bio_job / "home" / "Documents2" / "reduced_embeddings_file.h5").is_file()


# --- links ----------------------------------------------------------------------------------

def _finished_run(bio_job: Path) -> Path:
    run_pipeline(write_config(bio_job, GLOBAL + EMBED), progress=False)
    return bio_job / "my_job"


def _outside(bio_job: Path) -> Path:
    other = bio_job / "other"
    other.mkdir()
    (other / "reduced_embeddings_file.h5").write_text("precious")
    return other


@pytest.mark.parametrize("overwrite", [False, True], ids=["", "overwrite"])
def test_a_link_for_a_stage_directory_is_refused(bio_job, capsys, overwrite):
    prefix, other = _finished_run(bio_job), _outside(bio_job)
    for path in sorted((prefix / "emb").iterdir(), reverse=True):
        path.unlink()
    (prefix / "emb").rmdir()
    (prefix / "emb").symlink_to(other, target_is_directory=True)
    err = one_line_error(bio_job / "config.yml", capsys, *["--overwrite"] * overwrite)
    assert f"my_job/emb is a symbolic link (to {other}); the pipeline follows no link out " \
           "of its prefix" in err
    assert sorted(p.name for p in other.iterdir()) == ["reduced_embeddings_file.h5"]
    assert (other / "reduced_embeddings_file.h5").read_text() == "precious"


@pytest.mark.parametrize("place", [
    "emb/reduced_embeddings_file.h5", "emb/output_parameters_file.yml", "emb/.embed.partial",
    "mapping_file.csv", STATE, "output_parameters_file.yml"])
def test_a_link_inside_the_prefix_is_refused(bio_job, capsys, place):
    prefix, other = _finished_run(bio_job), _outside(bio_job)
    link = prefix / place
    if link.exists():
        link.unlink()
    target = other if place.endswith("partial") else other / "reduced_embeddings_file.h5"
    link.symlink_to(target)
    for flags in ([], ["--overwrite"]):
        err = one_line_error(bio_job / "config.yml", capsys, *flags)
        assert f"my_job/{place} is a symbolic link" in err
    assert sorted(p.name for p in other.iterdir()) == ["reduced_embeddings_file.h5"]
    assert (other / "reduced_embeddings_file.h5").read_text() == "precious"


def test_links_at_the_prefix_and_its_lock(bio_job, capsys):
    config = write_config(bio_job, GLOBAL + EMBED)
    (bio_job / "my_job").symlink_to(bio_job / "nowhere")
    assert "my_job is a symbolic link to nothing" in one_line_error(config, capsys)
    (bio_job / "my_job").unlink()
    (bio_job / "my_job.lock").symlink_to(bio_job / "created_by_the_lock")
    assert "cannot write my_job" in one_line_error(config, capsys)
    assert not (bio_job / "created_by_the_lock").exists()
    (bio_job / "my_job.lock").unlink()
    (bio_job / "real_job").mkdir()
    (bio_job / "my_job").symlink_to(bio_job / "real_job")  # the prefix itself may be a link
    run_pipeline(config, progress=False)
    assert (bio_job / "real_job" / "emb" / "reduced_embeddings_file.h5").is_file()


# --- malformed configs ----------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    (GLOBAL + "x: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than YAML can be read"),
    (GLOBAL + "x: " + "{a: " * 5000 + "}" * 5000 + "\n", "nested deeper than YAML can be read"),
    (GLOBAL + EMBED + "  junk: " + "[" * 12 + "]" * 12 + "\n", "nested more than 10 levels"),
    (GLOBAL + "a: &a [*a]\n", "nested more than 10 levels"),
    (GLOBAL + "x: &x [1, 2]\n" + "".join(f"x{i}: &x{i} [*x{i - 1 if i else ''}, "
                                         f"*x{i - 1 if i else ''}]\n" for i in range(12)),
     "nested more than 10 levels"),
    ("- a\n- b\n", "a config is a mapping of sections"),
    ("global: [1, 2]\n", "a section holds indented 'option: value' lines, not [1, 2]"),
    (GLOBAL.replace("my_job", "[a, b]") + EMBED, "prefix is ['a', 'b']; write a text"),
    (GLOBAL + EMBED.replace("type: embed", "type: [embed]"), "type is ['embed']; write a text"),
    (GLOBAL + EMBED + "  depends_on: [[x]]\n", "depends_on is a stage name, a list"),
    (GLOBAL + EMBED + "  embeddings_file: {a: 1}\n", "embeddings_file is {'a': 1}; write a"),
    (GLOBAL + EMBED + "  max_amino_acids: " + "[1, " * 7 + "]" * 7 + "\n",
     "max_amino_acids is [1, [1, [1, [1, [1, [1, [...]]]]]]]; write a whole number"),
    (GLOBAL + EMBED.replace("seqvec", "seqvc"), "package); did you mean 'seqvec'?; what runs"),
    (GLOBAL.replace("prefix", "prefx"), "prefix is missing; add 'prefix: ...' under global "
     "('prefx' is not an option: a typo of 'prefix'?)"),
    (GLOBAL + EMBED.replace("type", "tpye"), "the stage has no type ('tpye' is not an option"),
])
def test_a_malformed_config_is_one_line(bio_job, capsys, text, message):
    err = one_line_error(write_config(bio_job, text), capsys)
    assert message in err
    assert not (bio_job / "my_job").exists()


def test_configs_that_are_no_config_file(bio_job, capsys):
    (bio_job / "big.yml").write_text(GLOBAL + "# " + "x" * (1 << 20) + "\n")
    assert "big.yml is over 1 MiB" in one_line_error(bio_job / "big.yml", capsys)
    (bio_job / "dir.yml").mkdir()
    assert "dir.yml is not a file" in one_line_error(bio_job / "dir.yml", capsys)


def test_a_typod_option_names_the_nearest(bio_job):
    config = write_config(bio_job, GLOBAL + EMBED.replace("reduce: True",
                                                          "reduce: True\n  reduced: 1"))
    with pytest.warns(UserWarning, match=re.escape("'reduced' means nothing to 'emb' here and "
                                                   "is ignored; did you mean 'reduce'?")):
        run_pipeline(config, progress=False)


def test_the_bio_embeddings_command_is_named_so(monkeypatch, capsys):
    from elmo.__main__ import bio_embeddings as console_main

    monkeypatch.setattr(sys, "argv", ["bio_embeddings", "--help"])
    with pytest.raises(SystemExit) as exit_:
        console_main()
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: bio_embeddings [-h]")
    monkeypatch.setattr(sys, "argv", ["bio_embeddings"])
    with pytest.raises(SystemExit):
        console_main()
    assert "bio_embeddings: error: the following arguments are required" in \
        capsys.readouterr().err


# --- everything checked before the first stage ----------------------------------------------

@pytest.mark.parametrize("n, stages, message", [
    (3, EMBED + TSNE.replace("  perplexity: 2\n", ""),
     r"line 10 \(option 'perplexity' of 'tsne'\): t-SNE's perplexity must be less than the "
     "number of proteins, 3"),
    (6, EMBED.replace("  reduce: True\n", "") + TSNE,
     r"line 12 \(option 'depends_on' of 'tsne'\): no per-protein vectors to project; make it "
     "depend on an embed stage with 'reduce: True'"),
    (6, EMBED + TSNE.replace("depends_on: emb", "depends_on: {emb: [embeddings_file]}"),
     "no per-protein vectors to project"),
    (6, EMBED + TSNE + "  n_components: 4\n", "tsne draws 6 proteins in 1 to 3 components"),
    (2, EMBED + TSNE.replace("perplexity: 2", "perplexity: 1") + "  n_components: 3\n",
     "tsne draws 2 proteins in 1 to 2 components here, not 3"),
    (1, EMBED + TSNE.replace("perplexity: 2", "perplexity: 0.5"), "cannot project 1 protein;"),
    (6, EMBED + TSNE.replace("n_iter: 250", "n_iter: 100"), "max_iter' parameter of TSNE"),
    (6, EMBED + TSNE + "  metric: cosin\n", "t-SNE refuses these options"),
    (6, EMBED + TSNE + PLOT + "  n_components: 4\n", "n_components is 4; a plot has 2 or 3"),
    (6, EMBED + TSNE + "  n_components: 2\n" + PLOT + "  n_components: 3\n",
     "n_components is 3, but the projection it plots has 2"),
    (6, EMBED + PLOT.replace("tsne", "emb"), "no projection to plot"),
    (6, EMBED + PLOT.replace("tsne", "emb") + "  projected_reduced_embeddings_file: gone.h5\n",
     "gone.h5 is not a file"),
    (6, EMBED + TSNE + PLOT + "  annotation_file: labels.csv\n",
     "labels.csv, line 1: an annotation file has the columns identifier and label"),
    (6, EMBED + TSNE + "  perplexity: 2\n", "the option 'perplexity' in 'tsne' is written twice"),
])
def test_what_the_config_and_fasta_allow_is_checked_before_the_first_stage(
        bio_job, capsys, n, stages, message):
    write_fasta(bio_job, n)
    (bio_job / "labels.csv").write_text("id,location\nP0,Nucleus\n")
    err = one_line_error(write_config(bio_job, GLOBAL + stages), capsys)
    assert re.search(message, err), err
    assert not (bio_job / "my_job").exists()


def test_umap_too_is_checked_before_the_first_stage(bio_job, capsys):
    pytest.importorskip("umap")
    umap = EMBED + TSNE.replace("tsne", "umap").replace("  perplexity: 2\n  n_iter: 250\n", "")
    write_fasta(bio_job, 4)
    for extra, message in [("", "umap draws 4 proteins in 1 to 2 components here, not 3"),
                           ("  min_dist: 2\n", "min_dist must be between 0 and spread (1)"),
                           ("  metric: cosin\n", "umap-learn has no metric 'cosin'"),
                           ("  n_neighbors: 1\n", "n_neighbors must be at least 2")]:
        assert message in one_line_error(write_config(bio_job, GLOBAL + umap + extra), capsys)
    assert not (bio_job / "my_job").exists()


# --- reruns of a changed config -------------------------------------------------------------

def _snapshot(prefix: Path, stage: str) -> dict[str, tuple[bytes, int]]:
    """The bytes and modification times of a stage's files."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted((prefix / stage).iterdir())}


def _not_run(monkeypatch, *kinds: str) -> None:
    """Make the stages of these types fail if they run."""
    def refuse(run):
        raise AssertionError(f"{run.directory.name} ran again")
    for kind in kinds:
        monkeypatch.setitem(STAGE_TYPES, kind, dataclasses.replace(STAGE_TYPES[kind],
                                                                   run=refuse))


def test_a_changed_later_stage_keeps_the_finished_ones(bio_job, monkeypatch, caplog):
    caplog.set_level("INFO", "elmo.bio")
    run_pipeline(write_config(bio_job, GLOBAL + EMBED + TSNE + PLOT), progress=False)
    prefix = bio_job / "my_job"
    embedded, projected = _snapshot(prefix, "emb"), _snapshot(prefix, "tsne")
    _not_run(monkeypatch, "embed")
    tsne = TSNE.replace("perplexity: 2", "perplexity: 1.5")
    run_pipeline(write_config(bio_job, GLOBAL + EMBED + tsne + PLOT), progress=False)
    assert "keeping the finished stages emb: their options, inputs and proteins are " \
           "unchanged" in caplog.text
    assert "computing the stages tsne, plot anew" in caplog.text
    assert _snapshot(prefix, "emb") == embedded
    assert _snapshot(prefix, "tsne") != projected
    assert (prefix / "output_parameters_file.yml").is_file()
    assert "perplexity: 1.5" in (prefix / "tsne" / "output_parameters_file.yml").read_text()
    # a new annotation file: the plot alone is made anew
    (bio_job / "labels.csv").write_text("identifier,label\nP0,Nucleus\n")
    caplog.clear()
    _not_run(monkeypatch, "project")
    run_pipeline(write_config(bio_job, GLOBAL + EMBED + tsne + PLOT
                              + "  annotation_file: labels.csv\n"), progress=False)
    assert "keeping the finished stages emb, tsne" in caplog.text
    assert "computing the stages plot anew" in caplog.text
    assert (prefix / "plot" / "input_annotation_file.csv").is_file()


def test_a_stage_that_failed_is_rerun_and_the_ones_before_it_kept(bio_job, monkeypatch, caplog):
    """The run stops in its second stage; the rerun of a fixed config keeps the first."""
    def fail(run):
        raise ElmoError("the projection failed")
    project = STAGE_TYPES["project"]
    monkeypatch.setitem(STAGE_TYPES, "project", dataclasses.replace(project, run=fail))
    with pytest.raises(ElmoError, match="the projection failed"):
        run_pipeline(write_config(bio_job, GLOBAL + EMBED + TSNE), progress=False)
    prefix = bio_job / "my_job"
    assert not (prefix / "output_parameters_file.yml").exists()
    embedded = _snapshot(prefix, "emb")
    monkeypatch.setitem(STAGE_TYPES, "project", project)
    _not_run(monkeypatch, "embed")
    caplog.set_level("INFO", "elmo.bio")
    run_pipeline(write_config(bio_job, GLOBAL + EMBED + TSNE.replace("n_iter: 250", "n_iter: 300")),
                 progress=False)
    assert "keeping the finished stages emb" in caplog.text
    assert _snapshot(prefix, "emb") == embedded
    assert (prefix / "tsne" / "projected_reduced_embeddings_file.h5").is_file()


def test_a_changed_first_stage_redoes_those_that_depend_on_it(bio_job, caplog, capsys):
    run_pipeline(write_config(bio_job, GLOBAL + EMBED + TSNE + PLOT), progress=False)
    (bio_job / "my_job" / "tsne" / "notes.txt").write_text("a file the run did not write")
    config = write_config(bio_job, GLOBAL + EMBED + "  half_precision: True\n" + TSNE + PLOT)
    err = one_line_error(config, capsys)
    assert "my_job/tsne holds notes.txt, which this pipeline did not write there" in err
    assert (bio_job / "my_job" / "tsne" / "notes.txt").is_file()
    assert (bio_job / "my_job" / "emb" / "reduced_embeddings_file.h5").is_file()
    (bio_job / "my_job" / "tsne" / "notes.txt").unlink()
    caplog.set_level("INFO", "elmo.bio")
    run_pipeline(config, progress=False)
    assert "keeping" not in caplog.text
    assert "computing the stages emb, tsne, plot anew" in caplog.text
    import h5py
    with h5py.File(bio_job / "my_job" / "emb" / "reduced_embeddings_file.h5") as f:
        assert {d.dtype.name for d in f.values()} == {"float16"}


def test_a_changed_fasta_redoes_every_stage(bio_job, caplog):
    run_pipeline(write_config(bio_job, GLOBAL + EMBED), progress=False)
    write_fasta(bio_job, 5)
    caplog.set_level("INFO", "elmo.bio")
    run_pipeline(bio_job / "config.yml", progress=False)
    assert "computing the stages emb anew" in caplog.text
    import h5py
    with h5py.File(bio_job / "my_job" / "emb" / "reduced_embeddings_file.h5") as f:
        assert len(f) == 5


def test_a_stage_not_written_by_the_pipeline_is_not_replaced_without_overwrite(bio_job, capsys):
    run_pipeline(write_config(bio_job, GLOBAL + EMBED), progress=False)
    (bio_job / "my_job" / "tsne").mkdir()
    (bio_job / "my_job" / "tsne" / "notes.txt").write_text("mine")
    err = one_line_error(write_config(bio_job, GLOBAL + EMBED + TSNE), capsys)
    assert "tsne was not written by this pipeline (the prefix's .elmo_stages.json does not " \
           "record it): move it away, or rename the stage" in err
    assert "was not written by this pipeline" in one_line_error(
        bio_job / "config.yml", capsys, "--overwrite")
    assert (bio_job / "my_job" / "tsne" / "notes.txt").read_text() == "mine"
    assert os.listdir(bio_job / "my_job" / "emb")


def test_a_kept_stage_after_a_changed_one_keeps_its_place(bio_job, caplog):
    """The prefix's output parameters list the stages in the config's order."""
    yaml = pytest.importorskip("yaml")
    second = EMBED.replace("emb:", "emb2:")
    run_pipeline(write_config(bio_job, GLOBAL + EMBED + second), progress=False)
    caplog.set_level("INFO", "elmo.bio")
    run_pipeline(write_config(bio_job, GLOBAL + EMBED + "  half_precision: True\n" + second),
                 progress=False)
    assert "keeping the finished stages emb2" in caplog.text
    assert "computing the stages emb anew" in caplog.text
    whole = yaml.safe_load((bio_job / "my_job" / "output_parameters_file.yml").read_text())
    assert list(whole) == ["emb", "emb2", "global"]
