"""Run a bio_embeddings pipeline config: `run_pipeline("config.yml")` writes its output folder.

The config (`elmo.bio.pipeline_config`), the whole FASTA file and every stage's plan
(`elmo.bio.plan`: each stage type's checks, knowing the stages it depends on and the number
of proteins) are checked before anything is written. Then PREFIX gets the global files
(`elmo.bio.layout`) and each stage, in order, its directory: its input parameters (the global
ones, those taken from the stages it depends on, its own, `stage_name` and `start_time`), its
files, and its output parameters (the input ones, its options with their defaults, the paths
of its files, `end_time`, `elapsed_time`). PREFIX's `output_parameters_file.yml` comes last:
each stage's output parameters and the global ones; it exists only while the run it
describes is complete.

Safe to re-run, also with a changed config. PREFIX keeps the hidden file `.elmo_stages.json`
(`elmo.bio.stage_record`): each stage's identity (`elmo.bio.plan`) and the files it wrote,
with their sizes and sha256. A rerun keeps a finished stage whose identity is unchanged,
resumes an unfinished one (the embed stage from its last saved chunk), and computes anew, its
directory removed first, one whose options, inputs or proteins changed, or those of a stage
it depends on; the log says which. A stage directory is kept, resumed or removed only if
everything in it is as the record says: any other (not recorded, or holding a file the run
did not write, or one changed since) is a user's folder, refused with its name and left
alone. A PREFIX without that file is refused unless it is empty, or `overwrite` is given:
then the config's stage directories (only the recorded ones, as above, or empty ones) are
removed and everything is computed anew; other files in PREFIX are left alone. Nothing is
followed out of PREFIX: a symbolic link where the run reads, writes or removes (PREFIX's own
files, a stage's directory or anything in it) is refused, naming it, before anything is
written, and the directories are written through handles opened without following links
(`elmo.bio.folders`), so that a link put there after the checks is refused too. A lock
beside PREFIX keeps a second process out.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from elmo import __version__
from elmo.bio.folders import PrefixFolder
from elmo.bio.layout import (
    INPUT_PARAMETERS,
    OUTPUT_PARAMETERS,
    PREFIX_FILES,
    RemappedProtein,
    StagePlan,
    StageRun,
    global_parameters,
    proteins_digest,
    read_parameters,
    remap,
    write_global_files,
    write_parameters,
)
from elmo.bio.pipeline_config import STAGE_TYPES, StageConfig, read_pipeline_config
from elmo.bio.plan import plan_stages, stage_parameters, taken
from elmo.bio.stage_record import STATE, StageEntry, StageRecord
from elmo.errors import ElmoError
from elmo.io.atomic import output_lock
from elmo.io.fasta import FastaRecord, read_fasta, scan_records

logger = logging.getLogger(__name__)


def run_pipeline(config_path: str | Path, overwrite: bool = False, progress: bool = True
                 ) -> Path:
    """Run the config at `config_path` (see the module docstring); returns PREFIX."""
    config = read_pipeline_config(config_path)
    records = _read_records(config.sequences_file)
    proteins = remap(records, config.simple_remapping, config.sequences_file)
    plans = plan_stages(config, proteins_digest(proteins), len(proteins))
    prefix = config.prefix
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(prefix):
        claim = _claim_prefix(prefix, plans, overwrite)
        prefix.mkdir(exist_ok=True)
        with PrefixFolder(prefix) as folder:
            kept = _clear(folder, plans, claim)  # the output parameters of each
            write_global_files(folder.place, config.text, records, proteins)
            start = global_parameters(prefix, config.written_global, config.simple_remapping)
            outputs: dict[str, dict[str, Any]] = {}
            for stage, plan in zip(config.stages, plans, strict=True):
                outputs[stage.name] = kept[stage.name] if stage.name in kept else \
                    _run_stage(stage, plan, folder, claim.record, start, outputs, proteins,
                               progress)
            write_parameters(folder.place / OUTPUT_PARAMETERS,
                             {**outputs, "global": {**start, "elmo_version": __version__}})
    logger.info("finished: %s", prefix)
    return prefix


def _read_records(path: Path) -> list[FastaRecord]:
    """Every record of the FASTA file, checked whole first (by line; a warning for lowercase
    letters): ids must not repeat, and the file must hold a record."""
    scan_records(path)
    return list(read_fasta(path))


@dataclass
class _Claim:
    """What a run does with PREFIX's stage directories: keep (name -> output parameters),
    resume or compute anew; and PREFIX's record."""

    record: StageRecord
    kept: dict[str, dict[str, Any]] = field(default_factory=dict)
    resumed: list[str] = field(default_factory=list)
    redone: list[str] = field(default_factory=list)


def _claim_prefix(prefix: Path, plans: tuple[StagePlan, ...], overwrite: bool) -> _Claim:
    """Decide, writing nothing, what this run does with PREFIX (the module docstring)."""
    _check_places(prefix, plans)
    recorded = StageRecord.read(prefix / STATE)
    if recorded is None and prefix.is_dir() and any(prefix.iterdir()) and not overwrite:
        raise ElmoError(f"the prefix {prefix} already exists and holds no run of this "
                        "pipeline: pass --overwrite to compute this config there (its stage "
                        "directories are replaced), or choose another prefix")
    claim = _Claim(recorded or StageRecord())
    for plan in plans:
        directory = prefix / plan.name
        if not directory.exists():
            continue
        _check_owned(claim.record, plan.name, directory)
        entry = claim.record.stages.get(plan.name)
        if overwrite or entry is None or entry.identity != plan.identity:
            claim.redone.append(plan.name)
        elif (finished := _finished(plan, directory)) is not None:
            claim.kept[plan.name] = finished
        else:
            claim.resumed.append(plan.name)
    _log_claim(claim, overwrite)
    return claim


def _check_owned(record: StageRecord, name: str, directory: Path) -> None:
    """Refuse a stage directory that is not as the record says (a user's folder); an empty
    one is anyone's."""
    if name not in record.stages and any(directory.iterdir()):
        raise ElmoError(f"{directory} was not written by this pipeline (the prefix's {STATE} "
                        "does not record it): move it away, or rename the stage")
    why = record.difference(name, directory)
    if why is not None:
        raise ElmoError(f"{directory} holds {why}, which this pipeline did not write there "
                        f"(or which changed since; its {STATE} says what it wrote): the "
                        "folder is left alone as yours; move it (or that file) away, or "
                        "rename the stage")


def _clear(folder: PrefixFolder, plans: tuple[StagePlan, ...], claim: _Claim
           ) -> dict[str, dict[str, Any]]:
    """Remove what the claim computes anew and the files killed writes left; record the
    stages as planned. Returns the output parameters of the stages kept."""
    prefix, record = folder.prefix, claim.record
    (folder.place / OUTPUT_PARAMETERS).unlink(missing_ok=True)
    for name in claim.redone:  # a run killed meanwhile finds what is left as recorded
        folder.remove(name)
    for plan in plans:
        if plan.name not in [*claim.kept, *claim.resumed]:
            record.stages[plan.name] = StageEntry(plan.identity)
    record.write(folder.place)
    leftovers = [path for name in (*PREFIX_FILES, STATE) for path in
                 prefix.glob(f".{name}.*.tmp")]
    for name in [*claim.kept, *claim.resumed]:
        leftovers += (prefix / name).rglob(".*.tmp")
    for leftover in leftovers:
        leftover.unlink()  # a file being written when a run was killed
    return claim.kept


def _check_places(prefix: Path, plans: tuple[StagePlan, ...]) -> None:
    """Refuse what the run would follow out of PREFIX, or could not write: a link, or a file
    where a directory belongs (or the reverse), at PREFIX's own files and the config's stage
    directories, and a link anywhere in those directories."""
    if prefix.exists() and not prefix.is_dir():
        raise ElmoError(f"the prefix {prefix} is a file: give a directory name as prefix")
    if prefix.is_symlink() and not prefix.exists():
        raise ElmoError(f"the prefix {prefix} is a symbolic link to nothing: remove it, or "
                        "give a directory name as prefix")
    if not prefix.is_dir():
        return
    for name in (*PREFIX_FILES, STATE):
        _check_not_link(prefix / name)
        if (prefix / name).is_dir():
            raise ElmoError(f"{prefix / name} is a directory where the pipeline writes a "
                            "file: move it away, or choose another prefix")
    for plan in plans:
        directory = prefix / plan.name
        _check_not_link(directory)
        if directory.exists() and not directory.is_dir():
            raise ElmoError(f"{directory} is a file where stage {plan.name!r} writes its "
                            "directory: move it away, or rename the stage")
        for parent, names, files in os.walk(directory):
            for name in [*names, *files]:
                _check_not_link(Path(parent, name))


def _check_not_link(path: Path) -> None:
    if path.is_symlink():
        raise ElmoError(f"{path} is a symbolic link (to {os.readlink(path)}); the pipeline "
                        "follows no link out of its prefix: remove the link, or choose "
                        "another prefix")


def _finished(plan: StagePlan, directory: Path) -> dict[str, Any] | None:
    """A stage's output parameters if it finished (its last file is whole, its files are
    there), else None."""
    if not all(Path(path).is_file() for path in plan.files.values()):
        return None
    return read_parameters(directory / OUTPUT_PARAMETERS)


def _log_claim(claim: _Claim, overwrite: bool) -> None:
    if claim.kept:
        logger.info("keeping the finished stages %s: their options, inputs and proteins are "
                    "unchanged", ", ".join(claim.kept))
    for name in claim.resumed:
        logger.info("stage %s: resuming its unfinished run", name)
    if claim.redone:
        why = "--overwrite" if overwrite else "their options, inputs or proteins changed, or " \
            "those of a stage they depend on"
        logger.info("computing the stages %s anew (%s)", ", ".join(claim.redone), why)


def _run_stage(stage: StageConfig, plan: StagePlan, folder: PrefixFolder, record: StageRecord,
               start: dict[str, Any], outputs: dict[str, dict[str, Any]],
               proteins: list[RemappedProtein], progress: bool) -> dict[str, Any]:
    """Run one stage, recording in PREFIX's record each file it completes; returns its
    output parameters."""
    place = folder.stage(stage.name)

    def saved() -> None:
        record.note(stage.name, plan.identity, place)
        record.write(folder.place)

    started = datetime.now().astimezone()
    parameters = {**stage_parameters(stage, start, taken(stage, outputs)),
                  "start_time": str(started)}
    write_parameters(place / INPUT_PARAMETERS, parameters)
    saved()
    logger.info("stage %s: %s with %s", stage.name, stage.type, stage.protocol)
    added = STAGE_TYPES[stage.type].run(StageRun(
        folder.prefix / stage.name, stage.protocol, plan.options, parameters, proteins,
        progress, place, saved))
    ended = datetime.now().astimezone()
    result = {**parameters, **plan.options, **added, "end_time": str(ended),
              "elapsed_time": str(ended - started)}
    write_parameters(place / OUTPUT_PARAMETERS, result)
    saved()
    return result
