"""Run a bio_embeddings pipeline config: `run_pipeline("config.yml")` writes their output folder.

The config (`elmo.bio.pipeline_config`) and the whole FASTA file are checked before anything
is written. Then PREFIX gets the global files (`elmo.bio.layout`) and each stage, in order,
its directory: its input parameters (the global ones, those taken from the stages it depends
on, its own, `stage_name` and `start_time`), its files, and its output parameters (the input
ones, its options with their defaults, the paths of its files, `end_time`, `elapsed_time`).
PREFIX's `output_parameters_file.yml` comes last: each stage's output parameters and the
global ones.

Safe to re-run. While a run is unfinished, PREFIX holds the hidden file
`.unfinished_run.json`, the digests of its config and sequences file. An existing PREFIX is
refused unless it is empty, or holds that marker of the same config and sequences (the run
resumes: finished stages are kept, the embed stage carries on from its last saved chunk),
or `overwrite` is given (the config's stage directories are removed and everything is
computed anew; other files in PREFIX are left alone). A lock beside PREFIX keeps a second
process out.
"""

from __future__ import annotations

import json
import logging
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from elmo import __version__
from elmo.bio.layout import (
    INPUT_PARAMETERS,
    MAPPING,
    OUTPUT_PARAMETERS,
    REMAPPED_SEQUENCES,
    SEQUENCES,
    RemappedProtein,
    StageRun,
    read_parameters,
    remap,
    write_global_files,
    write_parameters,
)
from elmo.bio.pipeline_config import (
    STAGE_TYPES,
    PipelineConfig,
    StageConfig,
    read_pipeline_config,
)
from elmo.errors import ElmoError
from elmo.io.atomic import atomic_write_text, output_lock
from elmo.io.fasta import FastaRecord, read_fasta, scan_records
from elmo.io.textfile import scan_input

MARKER = ".unfinished_run.json"

logger = logging.getLogger(__name__)


def run_pipeline(config_path: str | Path, overwrite: bool = False, progress: bool = True
                 ) -> Path:
    """Run the config at `config_path` (see the module docstring); returns PREFIX."""
    config = read_pipeline_config(config_path)
    records = _read_records(config.sequences_file)
    proteins = remap(records, config.simple_remapping, config.sequences_file)
    identity = {"config_sha256": config.digest,
                "sequences_sha256": scan_input(config.sequences_file)[1]}
    prefix = config.prefix
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(prefix):
        resuming = _claim_prefix(config, identity, overwrite)
        write_global_files(prefix, config.text, records, proteins)
        global_parameters = {**config.written_global,
                             "sequences_file": str(prefix / SEQUENCES),
                             "simple_remapping": config.simple_remapping,
                             "mapping_file": str(prefix / MAPPING),
                             "remapped_sequences_file": str(prefix / REMAPPED_SEQUENCES)}
        outputs: dict[str, dict[str, Any]] = {}
        for stage in config.stages:
            outputs[stage.name] = _run_stage(stage, prefix, global_parameters, outputs,
                                             proteins, resuming, progress)
        write_parameters(prefix / OUTPUT_PARAMETERS,
                         {**outputs, "global": {**global_parameters, "elmo_version": __version__}})
        (prefix / MARKER).unlink()
    logger.info("finished: %s", prefix)
    return prefix


def _read_records(path: Path) -> list[FastaRecord]:
    """Every record of the FASTA file, checked whole first (by line; a warning for lowercase
    letters): ids must not repeat, and the file must hold a record."""
    scan_records(path)
    return list(read_fasta(path))


def _claim_prefix(config: PipelineConfig, identity: dict[str, str], overwrite: bool) -> bool:
    """Make PREFIX this run's, as the module docstring says; whether the run resumes."""
    prefix, marker = config.prefix, config.prefix / MARKER
    if prefix.exists() and not prefix.is_dir():
        raise ElmoError(f"the prefix {prefix} is a file: give a directory name as prefix")
    in_use = prefix.is_dir() and any(prefix.iterdir())
    left = _read_marker(marker)
    if in_use and left == identity and not overwrite:
        logger.info("resuming the unfinished run in %s", prefix)
        for leftover in [*prefix.glob(".*.tmp"), *prefix.glob("*/.*.tmp")]:
            leftover.unlink()  # a file being written when the run was killed
        return True
    if in_use and not overwrite:
        what = "holds an unfinished run of another config or sequences file" if marker.exists() \
            else "already exists"
        raise ElmoError(f"the prefix {prefix} {what}: pass --overwrite to compute this config "
                        "anew there (its stage directories are replaced), or choose another "
                        "prefix")
    if overwrite:
        for stage in config.stages:
            shutil.rmtree(prefix / stage.name, ignore_errors=True)
    prefix.mkdir(exist_ok=True)
    atomic_write_text(marker, json.dumps(identity, indent=1))
    return False


def _read_marker(path: Path) -> dict[str, str] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _run_stage(stage: StageConfig, prefix: Path, global_parameters: dict[str, Any],
               outputs: dict[str, dict[str, Any]], proteins: list[RemappedProtein],
               resuming: bool, progress: bool) -> dict[str, Any]:
    """Run one stage (or, resuming, take a finished one's output parameters)."""
    stage_dir = prefix / stage.name
    finished = stage_dir / OUTPUT_PARAMETERS
    if resuming and finished.exists():
        logger.info("stage %s: finished before", stage.name)
        return read_parameters(finished)
    stage_dir.mkdir(exist_ok=True)
    carried: dict[str, Any] = {}
    for dependency, names in stage.depends_on.items():
        taken = outputs[dependency]
        carried.update(taken if names is None else {n: taken[n] for n in names if n in taken})
    started = datetime.now().astimezone()
    parameters = {**global_parameters, **carried, **stage.written, "stage_name": stage.name,
                  "start_time": str(started)}
    write_parameters(stage_dir / INPUT_PARAMETERS, parameters)
    # an option the stage does not set comes from the stages it depends on, then the default
    options = {name: value if name in stage.written else carried.get(name, value)
               for name, value in stage.options.items()}
    logger.info("stage %s: %s with %s", stage.name, stage.type, stage.protocol)
    added = STAGE_TYPES[stage.type].run(
        StageRun(stage_dir, stage.protocol, options, parameters, proteins, progress))
    ended = datetime.now().astimezone()
    result = {**parameters, **options, **added, "end_time": str(ended),
              "elapsed_time": str(ended - started)}
    write_parameters(finished, result)
    return result
