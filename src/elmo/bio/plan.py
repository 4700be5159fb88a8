"""The plan of a pipeline run, made and checked before anything is written.

For each stage, in order: the parameters it takes from the stages it depends on, its options
(one it does not set comes from those stages, then the default), its input parameters, the
files it will write, and its identity; its type's `check` (`STAGE_TYPES`) then sees all of
it and the number of proteins. A stage's identity is the sha256 of what its files are made
of: its type, protocol and options, the files it names (path, size and modification time),
what it takes from the stages it depends on and their identities, and the proteins
(`elmo.bio.layout.proteins_digest`). A rerun keeps a finished stage whose identity is
unchanged (`elmo.bio.pipeline`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from elmo.bio.layout import StagePlan, global_parameters
from elmo.bio.pipeline_config import (
    CARRIED,
    PATHS,
    STAGE_TYPES,
    PipelineConfig,
    StageConfig,
    typed_option,
)


def plan_stages(config: PipelineConfig, proteins_sha256: str, n_proteins: int
                ) -> tuple[StagePlan, ...]:
    """Every stage's plan, each checked by its type (ElmoError at the first problem)."""
    start = global_parameters(config.prefix, config.written_global, config.simple_remapping)
    outputs: dict[str, dict[str, Any]] = {}  # each stage's output parameters, but the times
    identities: dict[str, str] = {}
    coming: set[str] = set()
    plans = []
    for stage in config.stages:
        carried = taken(stage, outputs)
        options = _options(stage, carried, config)
        stage_type = STAGE_TYPES[stage.type]
        files = {name: str(config.prefix / stage.name / file)
                 for name, file in stage_type.outputs(options).items()}
        plan = StagePlan(stage.name, stage.protocol, options, carried,
                         stage_parameters(stage, start, carried), files, n_proteins,
                         frozenset(coming), functools.partial(config.where, stage.name),
                         _identity(stage, options, identities, proteins_sha256))
        stage_type.check(plan)
        coming.update(files.values())
        outputs[stage.name] = {**plan.parameters, **options, **files}
        identities[stage.name] = plan.identity
        plans.append(plan)
    return tuple(plans)


def taken(stage: StageConfig, outputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The parameters a stage takes from the output parameters of the stages it depends on."""
    carried: dict[str, Any] = {}
    for dependency, names in stage.depends_on.items():
        given = outputs[dependency]
        carried.update(given if names is None else {n: given[n] for n in names if n in given})
    return carried


def _options(stage: StageConfig, carried: dict[str, Any], config: PipelineConfig
             ) -> dict[str, Any]:
    """The stage's options: as written, else taken from the stages it depends on (checked
    as its own are), else the default."""
    known = STAGE_TYPES[stage.type].protocols[stage.protocol]
    return {option: typed_option(carried, option, known[option][0], value, (stage.name,),
                                 config.where)
            if option in carried and option not in stage.written else value
            for option, value in stage.options.items()}


def stage_parameters(stage: StageConfig, start: dict[str, Any], carried: dict[str, Any]
                     ) -> dict[str, Any]:
    """A stage's input parameters but `start_time`: the global ones, those it takes, its own
    as written, and its name (bio_embeddings' order)."""
    return {**start, **carried, **stage.written, "stage_name": stage.name}


def _identity(stage: StageConfig, options: dict[str, Any], identities: dict[str, str],
              proteins_sha256: str) -> str:
    """The sha256 of what the stage's files are made of (module docstring)."""
    made_of = {
        "type": stage.type, "protocol": stage.protocol, "options": options,
        "files": {name: stage.written[name] for name in CARRIED if name in stage.written},
        "inputs": {option: _signature(Path(options[option]))
                   for option in PATHS if options.get(option) is not None},
        "depends_on": {name: [names, identities[name]]
                       for name, names in stage.depends_on.items()},
        "proteins_sha256": proteins_sha256,
    }
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()


def _signature(path: Path) -> list[list[Any]]:
    """Name, size and modification time of a file, or of each file in a directory."""
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    return [[file.name, file.stat().st_size, file.stat().st_mtime_ns]
            for file in files if file.is_file()]
