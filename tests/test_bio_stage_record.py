"""`elmo bio-embeddings` and PREFIX's record of what it wrote (`.elmo_stages.json`): a forged
or damaged record never makes a user's folder the pipeline's, and a link put in the prefix
after the checks is not written through."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from elmo.bio.folders import PrefixFolder
from elmo.bio.pipeline import STATE, run_pipeline
from elmo.errors import ElmoError
from tests.helpers.bio_pipeline import (
    EMBED,
    GLOBAL,
    TSNE,
    one_line_error,
    write_config,
)

pytest.importorskip("yaml")
pytest.importorskip("sklearn")

DOCS = EMBED.replace("emb:", "Documents:")


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file()}


def test_the_record_names_each_file_with_its_size_and_sha256(bio_job):
    import hashlib

    prefix = run_pipeline(write_config(bio_job, GLOBAL + EMBED + TSNE), progress=False)
    stages = json.loads((prefix / STATE).read_text())["stages"]
    assert sorted(stages) == ["emb", "tsne"]
    for name, entry in stages.items():
        written = _files(prefix / name)
        assert sorted(entry["files"]) == sorted(written) and entry["dirs"] == []
        for path, (size, sha256) in entry["files"].items():
            assert size == len(written[path])
            assert sha256 == hashlib.sha256(written[path]).hexdigest()


def _forgeries(identity: str, thesis: bytes) -> list[object]:
    """Records of stage Documents that a stranger could write without knowing the bytes of
    the user's files."""
    import hashlib

    wrong = hashlib.sha256(b"something else").hexdigest()
    entry = {"identity": identity, "files": {}, "dirs": []}
    return [
        None, identity, "", 0, [], {}, {"identity": None}, {"identity": identity},
        {**entry, "identity": None}, {**entry, "identity": identity.upper()},
        {**entry, "identity": 5}, entry, {**entry, "files": None},
        {**entry, "files": {"thesis.tex": [len(thesis), wrong]}},
        {**entry, "files": {"thesis.tex": [len(thesis), None]}},
        {**entry, "files": {"thesis.tex": len(thesis)}},
        {**entry, "files": {"thesis.tex": [True, wrong]}},
        {**entry, "files": {"../Documents/thesis.tex": [len(thesis), wrong]}},
        {**entry, "dirs": ["."]}, {**entry, "dirs": [".git"]}, {**entry, "extra": 1},
    ]


@pytest.mark.parametrize("changed", [False, True], ids=["same-config", "changed-config"])
def test_a_forged_record_never_lets_a_run_touch_a_users_folder(bio_job, capsys, changed):
    prefix = run_pipeline(write_config(bio_job, GLOBAL + DOCS), progress=False)
    identity = json.loads((prefix / STATE).read_text())["stages"]["Documents"]["identity"]
    for path in sorted((prefix / "Documents").iterdir()):
        path.unlink()
    thesis = b"years of work"
    (prefix / "Documents" / "thesis.tex").write_bytes(thesis)
    (prefix / "Documents" / ".git").mkdir()
    (prefix / "Documents" / ".git" / "HEAD").write_bytes(b"ref: refs/heads/main\n")
    config = write_config(bio_job, GLOBAL + DOCS + "  half_precision: True\n" * changed)
    records = [json.dumps({"stages": {"Documents": forged}})
               for forged in _forgeries(identity, thesis)]
    for record in [*records, "not json", '{"stages": null}', json.dumps({"Documents": None})]:
        (prefix / STATE).write_text(record)
        for flags in ([], ["--overwrite"]):
            err = one_line_error(config, capsys, *flags)
            assert "my_job/Documents" in err and "move it" in err, (record, err)
            assert _files(prefix / "Documents") == {
                "thesis.tex": thesis, ".git/HEAD": b"ref: refs/heads/main\n"}, record


def test_a_changed_or_added_file_makes_a_recorded_folder_a_users(bio_job, capsys):
    prefix = run_pipeline(write_config(bio_job, GLOBAL + EMBED), progress=False)
    reduced = prefix / "emb" / "reduced_embeddings_file.h5"
    before = reduced.read_bytes()
    reduced.write_bytes(before[:-1] + bytes([before[-1] ^ 1]))  # same size, other bytes
    config = write_config(bio_job, GLOBAL + EMBED + "  half_precision: True\n")
    for flags in ([], ["--overwrite"]):
        err = one_line_error(config, capsys, *flags)
        assert "my_job/emb holds reduced_embeddings_file.h5, which this pipeline did not " \
               "write there (or which changed since" in err
    reduced.write_bytes(before)
    (prefix / "emb" / "sub").mkdir()
    assert "my_job/emb holds sub," in one_line_error(config, capsys)
    (prefix / "emb" / "sub").rmdir()
    (prefix / "emb" / ".notes.txt.tmp").write_text("mine")  # a temporary name: excused, as
    run_pipeline(config, progress=False)  # a killed write leaves, where the rest is the run's
    assert not (prefix / "emb" / ".notes.txt.tmp").exists()


def _plant(link: Path, target: Path) -> None:
    """Replace `link` (a directory or nothing) by a link to `target`."""
    if link.is_dir():
        os.rename(link, link.with_name(link.name + ".moved"))
    link.symlink_to(target, target_is_directory=True)


def test_a_link_planted_after_the_checks_is_refused_not_followed(bio_job, monkeypatch, capsys):
    """The stage's directory replaced by a link between the checks and its first write."""
    import elmo.bio.pipeline as pipeline

    outside = bio_job / "outside"
    outside.mkdir()
    claim = pipeline._claim_prefix

    (outside / "victim.txt").write_text("precious")

    def claim_then_plant(prefix, plans, overwrite):
        decided = claim(prefix, plans, overwrite)
        prefix.mkdir(exist_ok=True)
        _plant(prefix / "emb", outside)
        (prefix / "mapping_file.csv").symlink_to(outside / "victim.txt")
        return decided

    monkeypatch.setattr(pipeline, "_claim_prefix", claim_then_plant)
    err = one_line_error(write_config(bio_job, GLOBAL + EMBED), capsys)
    assert "my_job/emb is not a directory the pipeline can write" in err
    assert [p.name for p in outside.iterdir()] == ["victim.txt"]
    assert (outside / "victim.txt").read_text() == "precious"
    assert not (bio_job / "my_job" / "mapping_file.csv").is_symlink()  # replaced, not followed


def test_a_link_planted_while_a_stage_writes_is_not_written_through(bio_job, monkeypatch):
    """The stage's directory renamed away and replaced by a link once opened: its files go
    to the directory that was opened, nothing to the link's target."""
    outside = bio_job / "outside"
    outside.mkdir()
    opened = PrefixFolder.stage

    def open_then_plant(self, name):
        place = opened(self, name)
        _plant(self.prefix / name, outside)
        return place

    monkeypatch.setattr(PrefixFolder, "stage", open_then_plant)
    config = write_config(bio_job, GLOBAL + EMBED)
    run_pipeline(config, progress=False)
    assert list(outside.iterdir()) == []
    assert (bio_job / "my_job" / "emb.moved" / "reduced_embeddings_file.h5").is_file()
    with pytest.raises(ElmoError, match="my_job/emb is a symbolic link"):
        run_pipeline(config, progress=False)  # the next run refuses the links
    assert list(outside.iterdir()) == []


class _Stop(Exception):
    pass


def test_a_run_stopped_before_recording_its_last_segment_resumes(bio_job, monkeypatch, caplog):
    """A segment renamed into `.embed.partial/` but not yet in the record (the run killed
    between the two) is what a killed run leaves: the rerun resumes from it."""
    from elmo.bio.embed_stage import StageSink

    real = StageSink.save

    def save_then_stop(self, items, layers):
        self.saved = lambda: None
        real(self, items, layers)
        raise _Stop

    monkeypatch.setattr(StageSink, "save", save_then_stop)
    config = write_config(bio_job, GLOBAL + EMBED + "  max_amino_acids: 60\n")
    with pytest.raises(_Stop):
        run_pipeline(config, progress=False)
    partial = bio_job / "my_job" / "emb" / ".embed.partial"
    recorded = json.loads((bio_job / "my_job" / STATE).read_text())["stages"]["emb"]
    segments = [p.name for p in partial.glob("*.hdf5")]
    assert len(segments) == 1 and f".embed.partial/{segments[0]}" not in recorded["files"]
    monkeypatch.setattr(StageSink, "save", real)
    caplog.set_level("INFO", "elmo.bio")
    run_pipeline(config, progress=False)
    assert "stage emb: resuming its unfinished run" in caplog.text
    assert (bio_job / "my_job" / "emb" / "reduced_embeddings_file.h5").is_file()
