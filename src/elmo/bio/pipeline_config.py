"""A bio_embeddings pipeline config (YAML), read and checked whole before anything runs.

The file has a `global` section (`sequences_file`, `prefix`, optionally `simple_remapping`)
and stages, run in file order, each with a `type` and a `protocol`: `embed` with `seqvec`,
`project` with `tsne` or `umap`, `visualize` with `plotly`. A stage takes the output
parameters of the stages named in its `depends_on` (a name, a list of names, or a mapping of
names to the parameters to take). Relative paths are relative to the working directory, as
in bio_embeddings. Every problem is an ElmoError naming the file, the line and the fix;
options bio_embeddings knew but that change nothing here are warned about and ignored.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elmo.bio.embed_stage import run_embed_stage
from elmo.bio.layout import StageRun
from elmo.bio.project_stage import run_project_stage
from elmo.bio.visualize_stage import run_visualize_stage
from elmo.errors import ElmoError
from elmo.extras import import_extra

GLOBAL_OPTIONS = ("sequences_file", "prefix", "simple_remapping")
STAGE_KEYS = ("type", "protocol", "depends_on")
# bio_embeddings' default batch for SeqVec: residues per batch.
SEQVEC_MAX_AMINO_ACIDS = 15000
# Options of the stages, with their type and bio_embeddings' default.
EMBED_OPTIONS: dict[str, tuple[type, Any]] = {
    "weights_file": (str, None), "options_file": (str, None), "model_directory": (str, None),
    "max_amino_acids": (int, SEQVEC_MAX_AMINO_ACIDS), "use_cpu": (bool, False),
    "device": (str, None), "half_precision": (bool, False), "reduce": (bool, False),
    "discard_per_amino_acid_embeddings": (bool, False),
}
PROJECT_OPTIONS: dict[str, dict[str, tuple[type, Any]]] = {
    "tsne": {"n_components": (int, 3), "perplexity": (float, 6), "n_iter": (int, 15000),
             "metric": (str, "cosine"), "random_state": (int, 420), "n_jobs": (int, -1),
             "verbose": (int, 1)},
    "umap": {"n_components": (int, 3), "min_dist": (float, 0.6), "n_neighbors": (int, 15),
             "spread": (float, 1), "metric": (str, "cosine"), "random_state": (int, 420),
             "verbose": (int, 1)},
}
VISUALIZE_OPTIONS: dict[str, tuple[type, Any]] = {
    "annotation_file": (str, None), "merge_via_index": (bool, False),
    "display_unknown": (bool, True), "n_components": (int, 3),
}
# bio_embeddings' options that would change what is written, and why they are refused.
REFUSED = {
    "embeddings_transformer_function": "it evaluates Python code from the config; compute "
    "the transformation from embeddings_file.h5 instead",
    "half_precision_model": "bio_embeddings allowed it for prottrans_t5 only; use "
    "half_precision for float16 files",
}
# Input and output files a stage reads from the stages it depends on (not options).
CARRIED = ("reduced_embeddings_file", "embeddings_file", "projected_reduced_embeddings_file",
           "projected_embeddings_file")


@dataclass(frozen=True)
class StageConfig:
    """One stage: its name, type and protocol, the stages it takes parameters from
    (`depends_on`: name -> the parameters to take, None for all), its options with the
    defaults filled in (`options`), and its parameters as written (`written`)."""

    name: str
    type: str
    protocol: str
    depends_on: dict[str, tuple[str, ...] | None]
    options: dict[str, Any]
    written: dict[str, Any]


@dataclass(frozen=True)
class PipelineConfig:
    """A whole config: where it came from (its text, for the input parameters file), the
    global parameters, and the stages in order."""

    path: Path
    text: str
    sequences_file: Path
    prefix: Path
    simple_remapping: bool
    written_global: dict[str, Any]
    stages: tuple[StageConfig, ...]

    @property
    def digest(self) -> str:
        """The sha256 of the config's text: what a resumed run must share."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


class _Where:
    """Names a place in the config: 'FILE, line N (stage S, option O)'."""

    def __init__(self, path: Path, lines: dict[tuple[str, ...], int]) -> None:
        self.path, self.lines = path, lines

    def __call__(self, *keys: str) -> str:
        line = next((self.lines[keys[:n]] for n in range(len(keys), 0, -1)
                     if keys[:n] in self.lines), None)
        place = f"{self.path}, line {line}" if line else str(self.path)
        what = f"section {keys[0]!r}" if len(keys) == 1 else \
            f"option {keys[1]!r} of {keys[0]!r}" if keys else ""
        return f"{place} ({what})" if what else place


def read_pipeline_config(path: str | Path) -> PipelineConfig:
    """Read and check the config at `path` (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ElmoError(f"cannot read the config {path}: {err}") from None
    data, lines = _parse_yaml(path, text)
    where = _Where(path, lines)
    if "global" not in data:
        raise ElmoError(f"{path}: no 'global' section; start the config with 'global:' and "
                        "its sequences_file and prefix")
    written_global = _section(data, "global", where)
    for key in ("sequences_file", "prefix"):
        if not written_global.get(key):
            raise ElmoError(f"{where('global')}: {key} is missing; add '{key}: ...' under "
                            "global")
    _warn_unknown(written_global, GLOBAL_OPTIONS, "global", where)
    sequences_file = Path(str(written_global["sequences_file"]))
    _check_local(str(written_global["sequences_file"]), ("global", "sequences_file"), where)
    if not sequences_file.is_file():
        raise ElmoError(f"{where('global', 'sequences_file')}: {sequences_file} is not a "
                        "file (a relative path is relative to the working directory)")
    simple = _typed(written_global, "simple_remapping", bool, False, ("global",), where)
    stages: list[StageConfig] = []
    for name in data:
        if name != "global":
            stages.append(_stage(name, _section(data, name, where), stages, where))
    if not stages:
        raise ElmoError(f"{path}: no stage after 'global'; add one, e.g. a stage "
                        "'seqvec_embeddings' with 'type: embed' and 'protocol: seqvec'")
    return PipelineConfig(path, text, sequences_file, Path(str(written_global["prefix"])),
                          simple, written_global, tuple(stages))


def _parse_yaml(path: Path, text: str) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """The config as data, and the 1-based line of each section and option."""
    yaml = import_extra("yaml", "a bio_embeddings config")
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        place = f"{path}, line {mark.line + 1}" if mark else str(path)
        raise ElmoError(f"{place}: not valid YAML ({getattr(err, 'problem', err)}); a config "
                        "is 'section:' lines with indented 'option: value' lines") from None
    if not isinstance(data, dict):
        raise ElmoError(f"{path}: a config is a mapping of sections ('global:', then the "
                        "stages), not a YAML " + type(data).__name__)
    lines: dict[tuple[str, ...], int] = {}
    for key, value in root.value:
        lines[(key.value,)] = key.start_mark.line + 1
        if isinstance(value, yaml.MappingNode):
            for option, _ in value.value:
                lines[(key.value, option.value)] = option.start_mark.line + 1
    return data, lines


def _section(data: dict[str, Any], name: str, where: _Where) -> dict[str, Any]:
    section = data[name]
    if not isinstance(section, dict):
        raise ElmoError(f"{where(str(name))}: a section holds indented 'option: value' lines, "
                        f"not {section!r}")
    return section


def _stage(name: str, written: dict[str, Any], earlier: list[StageConfig], where: _Where
           ) -> StageConfig:
    """Check one stage's type, protocol, dependencies and options."""
    for key in ("type", "protocol"):
        if key not in written:
            raise ElmoError(f"{where(name)}: the stage has no {key}; what runs here: "
                            f"{runs_here()}")
    kind, protocol = str(written["type"]), str(written["protocol"])
    if kind not in STAGE_TYPES or protocol not in STAGE_TYPES[kind].protocols:
        raise ElmoError(f"{where(name)}: type {kind!r} with protocol {protocol!r} does not run "
                        f"here (bio_embeddings' other models and stages are not part of this "
                        f"package); what runs here: {runs_here()}")
    depends_on = _depends_on(name, written.get("depends_on"), earlier, where)
    stage_type = STAGE_TYPES[kind]
    known = stage_type.protocols[protocol]
    for option, why in REFUSED.items():
        if option in written:
            raise ElmoError(f"{where(name, option)}: {option} is not supported here: {why}")
    _warn_unknown(written, (*STAGE_KEYS, *known, *CARRIED), name, where)
    options = {option: _typed(written, option, kind_, default, (name,), where)
               for option, (kind_, default) in known.items()}
    stage_type.check(name, options, where)
    return StageConfig(name, kind, protocol, depends_on, options, dict(written))


def _check_embed(name: str, options: dict[str, Any], where: _Where) -> None:
    if options["discard_per_amino_acid_embeddings"] and not options["reduce"]:
        raise ElmoError(f"{where(name, 'discard_per_amino_acid_embeddings')}: with "
                        "discard_per_amino_acid_embeddings the stage would write nothing; also "
                        "set 'reduce: True'")
    if options["use_cpu"] and options["device"] not in (None, "cpu"):
        raise ElmoError(f"{where(name, 'use_cpu')}: use_cpu and device "
                        f"{options['device']!r} disagree; keep one")
    if options["max_amino_acids"] < 1:
        raise ElmoError(f"{where(name, 'max_amino_acids')}: max_amino_acids is the most "
                        "residues in a batch, a whole number >= 1")
    for option in ("weights_file", "options_file", "model_directory"):
        value = options[option]
        if value is not None:
            _check_local(value, (name, option), where)
            if not Path(value).exists():
                raise ElmoError(f"{where(name, option)}: {value} does not exist (a relative "
                                "path is relative to the working directory)")
    if (options["weights_file"] is None) != (options["options_file"] is None):
        raise ElmoError(f"{where(name)}: give both weights_file and options_file (or "
                        "model_directory, or neither for the released seqvec)")


def _check_visualize(name: str, options: dict[str, Any], where: _Where) -> None:
    annotations = options["annotation_file"]
    if annotations is not None and not Path(annotations).is_file():
        raise ElmoError(f"{where(name, 'annotation_file')}: {annotations} is not a file "
                        "(a CSV with the columns identifier and label)")


def _depends_on(name: str, value: Any, earlier: list[StageConfig], where: _Where
                ) -> dict[str, tuple[str, ...] | None]:
    """`depends_on` as name -> the parameters taken (None: all)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = {value: None}
    elif isinstance(value, list):
        value = dict.fromkeys(map(str, value))
    elif isinstance(value, dict):
        value = {str(k): tuple(map(str, v)) if isinstance(v, list) else None
                 for k, v in value.items()}
    else:
        raise ElmoError(f"{where(name, 'depends_on')}: depends_on is a stage name, a list of "
                        "them, or a mapping of stage names to lists of parameters")
    names = [stage.name for stage in earlier]
    for dependency in value:
        if dependency not in names:
            raise ElmoError(f"{where(name, 'depends_on')}: {dependency!r} is not a stage above "
                            f"this one (stages above: {', '.join(names) or 'none'})")
    return value


def _typed(section: dict[str, Any], option: str, kind: type, default: Any,
           place: tuple[str, ...], where: _Where) -> Any:
    """An option's value checked against its type (an int is a float too), or the default."""
    value = section.get(option, default)
    if value is None or value is default:
        return value
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool)) \
        or kind is float and isinstance(value, int) and not isinstance(value, bool)
    if not ok:
        example = {bool: "True or False", int: "a whole number", float: "a number",
                   str: "a text"}[kind]
        raise ElmoError(f"{where(*place, option)}: {option} is {value!r}; write {example}")
    return float(value) if kind is float else value


def _check_local(value: str, place: tuple[str, ...], where: _Where) -> None:
    if value.startswith(("http://", "https://", "ftp://")):
        raise ElmoError(f"{where(*place)}: {value} is a URL; nothing is downloaded by the "
                        "pipeline here: download the file and give its path")


def _warn_unknown(section: dict[str, Any], known: tuple[str, ...], name: str, where: _Where
                  ) -> None:
    for option in section:
        if option not in known:
            warnings.warn(f"{where(name, str(option))}: {option!r} means nothing to {name!r} "
                          "here and is ignored", stacklevel=4)


@dataclass(frozen=True)
class StageType:
    """A stage type that runs here: its `protocols`, each with its options (name -> (type,
    bio_embeddings' default)); `check(stage name, options, where)`: what its options must
    agree on; `run`: the stage itself, which returns the output parameters it adds."""

    protocols: dict[str, dict[str, tuple[type, Any]]]
    run: Callable[[StageRun], dict[str, str]]
    check: Callable[[str, dict[str, Any], _Where], None] = lambda name, options, where: None


# What runs here, in the order `runs_here` names it: a new stage type or protocol is an entry.
STAGE_TYPES: dict[str, StageType] = {
    "embed": StageType({"seqvec": EMBED_OPTIONS}, run_embed_stage, _check_embed),
    "project": StageType(PROJECT_OPTIONS, run_project_stage),
    "visualize": StageType({"plotly": VISUALIZE_OPTIONS}, run_visualize_stage, _check_visualize),
}


def runs_here() -> str:
    """The stage types and protocols that run here, as errors name them ("embed with protocol
    seqvec, project with tsne or umap, ...")."""
    named = ", ".join(f"{kind} with {' or '.join(stage_type.protocols)}"
                      for kind, stage_type in STAGE_TYPES.items())
    return named.replace(" with ", " with protocol ", 1)
