"""A bio_embeddings pipeline config (YAML), read and checked whole before anything runs.

The file has a `global` section (`sequences_file`, `prefix`, optionally `simple_remapping`)
and stages, run in file order, each with a `type` and a `protocol`: `embed` with `seqvec`,
`project` with `tsne` or `umap`, `visualize` with `plotly`. A stage takes the output
parameters of the stages named in its `depends_on` (a name, a list of names, or a mapping of
names to the parameters to take). Relative paths are relative to the working directory, as
in bio_embeddings. A stage's name is its directory in the prefix: one plain name (no `/` or
`\\`, not starting with `.`, no control character, none of the prefix's own files). Every
problem is an ElmoError naming the file, the line and the fix; options bio_embeddings knew
but that change nothing here are warned about (with the nearest known name) and ignored.
What a stage type checks with the stages it depends on and the number of proteins is its
`check` in `STAGE_TYPES`, run by `elmo.bio.plan`.
"""

from __future__ import annotations

import difflib
import reprlib
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elmo.bio.embed_stage import check_embed_stage, embed_outputs, run_embed_stage
from elmo.bio.layout import PREFIX_FILES, StagePlan, StageRun
from elmo.bio.project_stage import check_project_stage, project_outputs, run_project_stage
from elmo.bio.visualize_stage import (
    check_visualize_stage,
    run_visualize_stage,
    visualize_outputs,
)
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
# Options that name a file or a directory the stage reads.
PATHS = {"weights_file": "file", "options_file": "file", "model_directory": "directory",
         "annotation_file": "file"}
# A config is a few hundred bytes of flat sections; far larger or deeper is no config.
MAX_CONFIG_BYTES = 1 << 20
MAX_DEPTH = 10
# A stage's name is its directory's: one plain name, at most this long (bytes, in UTF-8).
MAX_NAME_BYTES = 255


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


@dataclass(frozen=True)
class PipelineConfig:
    """A whole config: where it came from (its text, for the input parameters file), the
    global parameters, the stages in order, and `where` (names a place in it for errors)."""

    path: Path
    text: str
    sequences_file: Path
    prefix: Path
    simple_remapping: bool
    written_global: dict[str, Any]
    stages: tuple[StageConfig, ...]
    where: _Where


def read_pipeline_config(path: str | Path) -> PipelineConfig:
    """Read and check the config at `path` (see the module docstring)."""
    path = Path(path)
    text = _read_text(path)
    data, lines = _parse_yaml(path, text)
    where = _Where(path, lines)
    if "global" not in data:
        raise ElmoError(f"{path}: no 'global' section; start the config with 'global:' and "
                        "its sequences_file and prefix")
    written_global = _section(data, "global", where)
    _warn_unknown(written_global, GLOBAL_OPTIONS, "global", where)
    for key in ("sequences_file", "prefix"):
        if not written_global.get(key):
            raise ElmoError(f"{where('global')}: {key} is missing; add '{key}: ...' under "
                            f"global{_typo_of(key, written_global, GLOBAL_OPTIONS)}")
        _text(written_global, key, ("global",), where)
    sequences_file = Path(written_global["sequences_file"])
    _check_local(written_global["sequences_file"], ("global", "sequences_file"), where)
    if not sequences_file.is_file():
        raise ElmoError(f"{where('global', 'sequences_file')}: {sequences_file} is not a "
                        "file (a relative path is relative to the working directory)")
    simple = typed_option(written_global, "simple_remapping", bool, False, ("global",), where)
    stages: list[StageConfig] = []
    folders: dict[str, str] = {}
    for name in data:
        if name == "global":
            continue
        _check_stage_name(name, where)
        same = folders.setdefault(name.casefold(), name)
        if same != name:
            raise ElmoError(f"{where(name)}: stages {same!r} and {name!r} differ only in case; "
                            "their directories would be one on macOS and Windows: rename one")
        stages.append(_stage(name, _section(data, name, where), stages, where))
    if not stages:
        raise ElmoError(f"{path}: no stage after 'global'; add one, e.g. a stage "
                        "'seqvec_embeddings' with 'type: embed' and 'protocol: seqvec'")
    return PipelineConfig(path, text, sequences_file, Path(written_global["prefix"]), simple,
                          written_global, tuple(stages), where)


def _read_text(path: Path) -> str:
    """The config's text: a regular file of at most MAX_CONFIG_BYTES, in UTF-8."""
    try:
        if not path.is_file():
            raise ElmoError(f"the config {path} is not a file: give a YAML file")
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ElmoError(f"the config {path} is over {MAX_CONFIG_BYTES >> 20} MiB: a "
                            "pipeline config is a few sections of 'option: value' lines")
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ElmoError(f"cannot read the config {path}: {err}") from None


def _parse_yaml(path: Path, text: str) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """The config as data, and the 1-based line of each section and option. Refused: not
    YAML, not a mapping, nested deeper than MAX_DEPTH, a key written twice in a section."""
    yaml = import_extra("yaml", "a bio_embeddings config")
    loader = yaml.SafeLoader(text)
    lines: dict[tuple[str, ...], int] = {}
    try:
        root = loader.get_single_node()
        if isinstance(root, yaml.MappingNode):
            _check_nesting(path, root, yaml)
            lines = _lines(path, root, yaml)
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        place = f"{path}, line {mark.line + 1}" if mark else str(path)
        raise ElmoError(f"{place}: not valid YAML ({getattr(err, 'problem', err)}); a config "
                        "is 'section:' lines with indented 'option: value' lines") from None
    except RecursionError:
        raise ElmoError(f"{path}: nested deeper than YAML can be read here; a config is "
                        "'section:' lines with indented 'option: value' lines") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ElmoError(f"{path}: a config is a mapping of sections ('global:', then the "
                        "stages), not a YAML " + type(data).__name__)
    return data, lines


def _check_nesting(path: Path, root: Any, yaml: Any) -> None:
    """Refuse a document nested deeper than MAX_DEPTH (aliases followed, each node once at
    each depth, so a cycle or a tree of aliases costs no more than its nodes)."""
    deepest: dict[int, int] = {}
    todo = [(root, 1)]
    while todo:
        node, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise ElmoError(f"{path}, line {node.start_mark.line + 1}: nested more than "
                            f"{MAX_DEPTH} levels deep; a config is 'section:' lines with "
                            "indented 'option: value' lines")
        if deepest.get(id(node), 0) >= depth:
            continue
        deepest[id(node)] = depth
        if isinstance(node, yaml.SequenceNode):
            todo += [(child, depth + 1) for child in node.value]
        elif isinstance(node, yaml.MappingNode):
            todo += [(child, depth + 1) for pair in node.value for child in pair]


def _lines(path: Path, root: Any, yaml: Any) -> dict[tuple[str, ...], int]:
    """The line of each section and option; a key written twice in the file or in a
    section is refused (YAML would keep the last one silently)."""
    lines: dict[tuple[str, ...], int] = {}
    for key, value in root.value:
        place = _once(path, key, (), lines, yaml)
        if place and isinstance(value, yaml.MappingNode):
            for option, _ in value.value:
                _once(path, option, place, lines, yaml)
    return lines


def _once(path: Path, key: Any, within: tuple[str, ...], lines: dict[tuple[str, ...], int],
          yaml: Any) -> tuple[str, ...] | None:
    """Record a key's line (not YAML's merge key `<<`); a repeated one is refused, and a
    section's name that YAML does not read as a text (`5:`, `true:`, `null:`)."""
    if key.tag == "tag:yaml.org,2002:merge":
        return None
    if not within and (not isinstance(key, yaml.ScalarNode)
                       or key.tag != "tag:yaml.org,2002:str"):
        shown = key.value if isinstance(key, yaml.ScalarNode) else "?"
        raise ElmoError(f"{path}, line {key.start_mark.line + 1}: the stage name "
                        f"{reprlib.repr(shown)} is not a text (YAML reads it as "
                        f"{key.tag.rpartition(':')[2]}); a stage's name is its directory in "
                        f"the prefix: write it in quotes ('{shown}':)")
    if not isinstance(key, yaml.ScalarNode):
        return None
    place = (*within, key.value)
    if place in lines:
        what = f"the section {key.value!r}" if not within else \
            f"the option {key.value!r} in {within[0]!r}"
        raise ElmoError(f"{path}, line {key.start_mark.line + 1}: {what} is written twice "
                        f"(also on line {lines[place]}); YAML would keep only the last: keep one")
    lines[place] = key.start_mark.line + 1
    return place


def _check_stage_name(name: Any, where: _Where) -> None:
    """A stage's name is its directory in the prefix: one plain name (module docstring)."""
    if not isinstance(name, str):  # a key merged in with `<<`
        raise ElmoError(f"{where()}: the stage name {reprlib.repr(name)} is not a text; a "
                        "stage's name is its directory in the prefix: write it in quotes")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        size = -1
    problem = (
        "is empty" if not name
        else "is not valid text" if size < 0
        else "has a path separator" if "/" in name or "\\" in name
        else "starts with '.'" if name.startswith(".")
        else "has a control character" if any(ord(c) < 32 or ord(c) == 127 for c in name)
        else "starts or ends with a space" if name != name.strip()
        else f"is longer than {MAX_NAME_BYTES} bytes" if size > MAX_NAME_BYTES
        else "is the name of one of the prefix's own files" if name in PREFIX_FILES
        else None)
    if problem:
        raise ElmoError(f"{where(name)}: the stage name {reprlib.repr(name)} {problem}; a "
                        "stage's name is its directory in the prefix: one plain name (no '/' "
                        "or '\\', not starting with '.', no control character or edge space, "
                        f"at most {MAX_NAME_BYTES} bytes, not one of the prefix's own files)")


def _section(data: dict[str, Any], name: str, where: _Where) -> dict[str, Any]:
    section = data[name]
    if not isinstance(section, dict):
        raise ElmoError(f"{where(name)}: a section holds indented 'option: value' lines, "
                        f"not {reprlib.repr(section)}")
    return section


def _stage(name: str, written: dict[str, Any], earlier: list[StageConfig], where: _Where
           ) -> StageConfig:
    """Check one stage's type, protocol, dependencies, options and the paths it names."""
    for key in ("type", "protocol"):
        if key not in written:
            raise ElmoError(f"{where(name)}: the stage has no {key}"
                            f"{_typo_of(key, written, STAGE_KEYS)}; what runs here: "
                            f"{runs_here()}")
        _text(written, key, (name,), where)
    kind, protocol = written["type"], written["protocol"]
    if kind not in STAGE_TYPES or protocol not in STAGE_TYPES[kind].protocols:
        known = [p for stage_type in STAGE_TYPES.values() for p in stage_type.protocols]
        raise ElmoError(f"{where(name)}: type {kind!r} with protocol {protocol!r} does not run "
                        f"here (bio_embeddings' other models and stages are not part of this "
                        f"package){_near(kind, STAGE_TYPES)}{_near(protocol, known)}; what "
                        f"runs here: {runs_here()}")
    depends_on = _depends_on(name, written.get("depends_on"), earlier, where)
    known = STAGE_TYPES[kind].protocols[protocol]
    for option, why in REFUSED.items():
        if option in written:
            raise ElmoError(f"{where(name, option)}: {option} is not supported here: {why}")
    _warn_unknown(written, (*STAGE_KEYS, *known, *CARRIED), name, where)
    for option in CARRIED:
        if option in written:
            _text(written, option, (name,), where)
    options = {option: typed_option(written, option, kind_, default, (name,), where)
               for option, (kind_, default) in known.items()}
    for option, what in PATHS.items():
        if options.get(option) is not None:
            _check_path(options[option], what, (name, option), where)
    return StageConfig(name, kind, protocol, depends_on, options, dict(written))


def _depends_on(name: str, value: Any, earlier: list[StageConfig], where: _Where
                ) -> dict[str, tuple[str, ...] | None]:
    """`depends_on` as name -> the parameters taken (None: all)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = {value: None}
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = dict.fromkeys(value)
    elif isinstance(value, dict) and all(
            isinstance(k, str) and (v is None or isinstance(v, list)
                                    and all(isinstance(p, str) for p in v))
            for k, v in value.items()):
        value = {k: None if v is None else tuple(v) for k, v in value.items()}
    else:
        raise ElmoError(f"{where(name, 'depends_on')}: depends_on is a stage name, a list of "
                        "them, or a mapping of stage names to lists of parameters")
    names = [stage.name for stage in earlier]
    for dependency in value:
        if dependency not in names:
            raise ElmoError(f"{where(name, 'depends_on')}: {dependency!r} is not a stage above "
                            f"this one (stages above: {', '.join(names) or 'none'})"
                            f"{_near(dependency, names)}")
    return value


def typed_option(section: dict[str, Any], option: str, kind: type, default: Any,
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
        raise ElmoError(f"{where(*place, option)}: {option} is {reprlib.repr(value)}; write "
                        f"{example}")
    return float(value) if kind is float else value


def _text(section: dict[str, Any], option: str, place: tuple[str, ...], where: _Where) -> None:
    """Refuse an option that must be a text (a name, a path) and is not."""
    value = section[option]
    if not isinstance(value, str):
        raise ElmoError(f"{where(*place, option)}: {option} is {reprlib.repr(value)}; write "
                        "a text (in quotes if YAML reads it as something else)")


def _check_local(value: str, place: tuple[str, ...], where: _Where) -> None:
    if value.startswith(("http://", "https://", "ftp://")):
        raise ElmoError(f"{where(*place)}: {value} is a URL; nothing is downloaded by the "
                        "pipeline here: download the file and give its path")


def _check_path(value: str, what: str, place: tuple[str, ...], where: _Where) -> None:
    """A path an option names: local, and a `what` ('file' or 'directory') that exists."""
    _check_local(value, place, where)
    found = Path(value).is_dir() if what == "directory" else Path(value).is_file()
    if not found:
        raise ElmoError(f"{where(*place)}: {value} is not a {what} (a relative path is "
                        "relative to the working directory)")


def _warn_unknown(section: dict[str, Any], known: tuple[str, ...], name: str, where: _Where
                  ) -> None:
    for option in section:
        if option not in known:
            warnings.warn(f"{where(name, str(option))}: {option!r} means nothing to {name!r} "
                          f"here and is ignored{_near(option, known)}", stacklevel=4)


def _near(word: Any, known: Iterable[str]) -> str:
    """'; did you mean X?' for the known name nearest to a misspelt one, or ''."""
    close = difflib.get_close_matches(str(word), list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close and close[0] != word else ""


def _typo_of(key: str, section: dict[str, Any], known: tuple[str, ...]) -> str:
    """' (is X a typo of it?)' for an unknown option of `section` nearest to a missing `key`."""
    unknown = [str(option) for option in section if option not in known]
    close = difflib.get_close_matches(key, unknown, n=1)
    return f" ({close[0]!r} is not an option: a typo of {key!r}?)" if close else ""


@dataclass(frozen=True)
class StageType:
    """A stage type that runs here: its `protocols`, each with its options (name -> (type,
    bio_embeddings' default)); `check(plan)`: everything that can be known before anything
    runs (what its options, the stages it depends on and the number of proteins must agree
    on), an ElmoError naming the option and the fix; `outputs(options)`: the output
    parameters its files add (name -> file name in its directory); `run`: the stage itself,
    which returns the output parameters it adds."""

    protocols: dict[str, dict[str, tuple[type, Any]]]
    check: Callable[[StagePlan], None]
    outputs: Callable[[dict[str, Any]], dict[str, str]]
    run: Callable[[StageRun], dict[str, str]]


# What runs here, in the order `runs_here` names it: a new stage type or protocol is an entry.
STAGE_TYPES: dict[str, StageType] = {
    "embed": StageType({"seqvec": EMBED_OPTIONS}, check_embed_stage, embed_outputs,
                       run_embed_stage),
    "project": StageType(PROJECT_OPTIONS, check_project_stage, project_outputs,
                         run_project_stage),
    "visualize": StageType({"plotly": VISUALIZE_OPTIONS}, check_visualize_stage,
                           visualize_outputs, run_visualize_stage),
}


def runs_here() -> str:
    """The stage types and protocols that run here, as errors name them ("embed with protocol
    seqvec, project with tsne or umap, ...")."""
    named = ", ".join(f"{kind} with {' or '.join(stage_type.protocols)}"
                      for kind, stage_type in STAGE_TYPES.items())
    return named.replace(" with ", " with protocol ", 1)
