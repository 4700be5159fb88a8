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

Safe to re-run, also with a changed config. PREFIX keeps the hidden file `.elmo_stages.json`:
the identity (`elmo.bio.plan`) of each stage directory it holds. A rerun keeps a finished
stage whose identity is unchanged, resumes an unfinished one (the embed stage from its last
saved chunk), and computes anew, its directory removed first, one whose options, inputs or
proteins changed, or those of a stage it depends on; the log says which. A PREFIX without
that file is refused unless it is empty, or `overwrite` is given: then the config's stage
directories (only those a stage wrote, or empty ones) are removed and everything is computed
anew; other files in PREFIX are left alone. Nothing is followed out of PREFIX: a symbolic
link where the run reads, writes or removes (PREFIX's own files, a stage's directory or
anything in it) is refused, naming it, before anything is written. A lock beside PREFIX
keeps a second process out.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from elmo import __version__
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
from elmo.errors import ElmoError
from elmo.io.atomic import atomic_write_text, output_lock
from elmo.io.fasta import FastaRecord, read_fasta, scan_records

STATE = ".elmo_stages.json"

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
        kept = _claim_prefix(prefix, plans, overwrite)  # the output parameters of each
        write_global_files(prefix, config.text, records, proteins)
        start = global_parameters(prefix, config.written_global, config.simple_remapping)
        outputs: dict[str, dict[str, Any]] = {}
        for stage, plan in zip(config.stages, plans, strict=True):
            outputs[stage.name] = kept[stage.name] if stage.name in kept else \
                _run_stage(stage, plan, prefix, start, outputs, proteins, progress)
        write_parameters(prefix / OUTPUT_PARAMETERS,
                         {**outputs, "global": {**start, "elmo_version": __version__}})
    logger.info("finished: %s", prefix)
    return prefix


def _read_records(path: Path) -> list[FastaRecord]:
    """Every record of the FASTA file, checked whole first (by line; a warning for lowercase
    letters): ids must not repeat, and the file must hold a record."""
    scan_records(path)
    return list(read_fasta(path))


def _claim_prefix(prefix: Path, plans: tuple[StagePlan, ...], overwrite: bool
                  ) -> dict[str, dict[str, Any]]:
    """Make PREFIX this run's, as the module docstring says; returns the output parameters
    of the stages kept."""
    _check_places(prefix, plans)
    recorded = _read_state(prefix)
    if recorded is None and prefix.is_dir() and any(prefix.iterdir()) and not overwrite:
        raise ElmoError(f"the prefix {prefix} already exists and holds no run of this "
                        "pipeline: pass --overwrite to compute this config there (its stage "
                        "directories are replaced), or choose another prefix")
    recorded = recorded or {}
    kept, redone, resumed = {}, [], []
    for plan in plans:
        directory = prefix / plan.name
        if not directory.exists():
            continue
        if plan.name not in recorded:
            if not overwrite:
                raise ElmoError(f"{directory} was not written by this pipeline: move it "
                                "away, or pass --overwrite to replace it")
            _check_removable(directory)
        if overwrite or recorded[plan.name] != plan.identity:
            redone.append(plan.name)
        elif (finished := _finished(plan, directory)) is not None:
            kept[plan.name] = finished
        else:
            resumed.append(plan.name)
    prefix.mkdir(exist_ok=True)
    (prefix / OUTPUT_PARAMETERS).unlink(missing_ok=True)
    if redone:  # recorded as being removed first: a run killed meanwhile removes them again
        _write_state(prefix, {**recorded, **dict.fromkeys(redone)})
        for name in redone:
            shutil.rmtree(prefix / name)
    _write_state(prefix, {**recorded, **{plan.name: plan.identity for plan in plans}})
    leftovers = [path for name in (*PREFIX_FILES, STATE) for path in
                 prefix.glob(f".{name}.*.tmp")]
    for name in [*kept, *resumed]:
        leftovers += (prefix / name).glob(".*.tmp")
    for leftover in leftovers:
        leftover.unlink()  # a file being written when a run was killed
    _log_claim(kept, resumed, redone, overwrite)
    return kept


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


def _check_removable(directory: Path) -> None:
    """`overwrite` removes a stage directory this pipeline did not record only if a stage
    wrote it (it holds input_parameters_file.yml), or if it is empty."""
    if any(directory.iterdir()) and not (directory / INPUT_PARAMETERS).is_file():
        raise ElmoError(f"{directory} is not a stage's directory (it has no "
                        f"{INPUT_PARAMETERS}); --overwrite removes only those: move it away, "
                        "or rename the stage")


def _read_state(prefix: Path) -> dict[str, str | None] | None:
    """The identities PREFIX's state file records by stage name (None: being removed); None
    without a state file, {} for one that cannot be read."""
    path = prefix / STATE
    if not path.is_file():
        return None
    try:
        stages = json.loads(path.read_text(encoding="utf-8"))["stages"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(stages, dict):
        return {}
    return {str(name): value for name, value in stages.items()
            if value is None or isinstance(value, str)}


def _write_state(prefix: Path, stages: dict[str, str | None]) -> None:
    atomic_write_text(prefix / STATE, json.dumps({"stages": stages}, indent=1) + "\n")


def _finished(plan: StagePlan, directory: Path) -> dict[str, Any] | None:
    """A stage's output parameters if it finished (its last file is whole, its files are
    there), else None."""
    if not all(Path(path).is_file() for path in plan.files.values()):
        return None
    return read_parameters(directory / OUTPUT_PARAMETERS)


def _log_claim(kept: dict[str, Any], resumed: list[str], redone: list[str], overwrite: bool
               ) -> None:
    if kept:
        logger.info("keeping the finished stages %s: their options, inputs and proteins are "
                    "unchanged", ", ".join(kept))
    for name in resumed:
        logger.info("stage %s: resuming its unfinished run", name)
    if redone:
        why = "--overwrite" if overwrite else "their options, inputs or proteins changed, or " \
            "those of a stage they depend on"
        logger.info("computing the stages %s anew (%s)", ", ".join(redone), why)


def _run_stage(stage: StageConfig, plan: StagePlan, prefix: Path, start: dict[str, Any],
               outputs: dict[str, dict[str, Any]], proteins: list[RemappedProtein],
               progress: bool) -> dict[str, Any]:
    """Run one stage; returns its output parameters."""
    stage_dir = prefix / stage.name
    stage_dir.mkdir(exist_ok=True)
    started = datetime.now().astimezone()
    parameters = {**stage_parameters(stage, start, taken(stage, outputs)),
                  "start_time": str(started)}
    write_parameters(stage_dir / INPUT_PARAMETERS, parameters)
    logger.info("stage %s: %s with %s", stage.name, stage.type, stage.protocol)
    added = STAGE_TYPES[stage.type].run(
        StageRun(stage_dir, stage.protocol, plan.options, parameters, proteins, progress))
    ended = datetime.now().astimezone()
    result = {**parameters, **plan.options, **added, "end_time": str(ended),
              "elapsed_time": str(ended - started)}
    write_parameters(stage_dir / OUTPUT_PARAMETERS, result)
    return result
