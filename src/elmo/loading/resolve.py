"""Which files a MODEL names, and in which format: the one resolver of model names.

A model is named by a string one of the sources in `SOURCES` takes, tried in the table's
order:

- `hf:OWNER/REPO`, `hf:OWNER/REPO/SUB/DIR`, either with `@REVISION` (a branch, tag or commit):
  a model on the Hugging Face Hub (`elmo.loading.hf_hub`), in any layout below;
- a path that exists: a model directory in one of the formats of `FORMATS` in
  `elmo.loading.formats.registry` (ours, with `vocab.txt` and the softmax when `elmo train`
  wrote it; an ELMoForManyLangs model; an unpacked AllenNLP archive or an `Elmo`'s
  `weights.th` alone; an NLPL model; one official options/weights pair), told by its file
  names, or a model file a format reads as it is (an NLPL model's ZIP archive);
- else a released name (`small`, `medium`, `original`, `original-5.5B`), or `efml:<lang>` for
  the ELMoForManyLangs models, downloaded on first use;
- else a shipped model: a directory `src/elmo/pretrained/NAME/` inside the package
  (`default`, the English model; more are added by dropping a directory in);
- or, instead of a MODEL, an official options/weights pair given as two files
  (`OFFICIAL_PAIR`).

Each source is a `ModelSource` (`elmo.loading.model_files`): its `resolve` decides whether a
name is its and the model's format without downloading anything (a Hub model's layout comes
from the repo's file listing); its `local` brings the files to this machine
(`ModelFiles.local`); its `help` is its phrase in the MODEL help (`sources_described`).
`elmo.loading.load` reads the files. A new source of models is one `ModelSource` in `SOURCES`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from importlib import resources
from pathlib import Path
from typing import Any

from elmo.errors import ElmoError, ModelNotFoundError
from elmo.loading import hf_hub
from elmo.loading.formats.bilm_tf import official_pair
from elmo.loading.formats.native import CARD_NAME, RUN_NAME, is_native_dir
from elmo.loading.formats.registry import (
    BILM_TF,
    EFML,
    NATIVE,
    ModelFormat,
    format_of_file,
    format_of_files,
    formats_described,
)
from elmo.loading.formats.untrusted import own_file
from elmo.loading.model_files import ModelFiles, ModelSource
from elmo.loading.releases import EFML_RELEASES, RELEASED_MODELS, resolve_efml, resolve_released
from elmo.runs import TASK, run_kind

DEFAULT_MODEL = "default"


def shipped_root() -> Path:
    """The package directory that holds one sub-directory per shipped model."""
    return Path(str(resources.files("elmo") / "pretrained"))


def shipped_models() -> list[str]:
    """Names of the models that ship inside the installed package, sorted."""
    root = shipped_root()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if is_native_dir(p))


def shipped_model_dir(name: str = DEFAULT_MODEL) -> Path:
    """The directory of the shipped model `name`; ModelNotFoundError if it is not installed."""
    directory = shipped_root() / name
    if not is_native_dir(directory):
        raise ModelNotFoundError(
            f"no shipped model {name!r} in this installation (shipped: "
            f"{', '.join(shipped_models()) or 'none'}; they live in {shipped_root()}). "
            "Install a version of the package that ships it, or give a model directory."
        )
    return directory


class HubSource(ModelSource):
    """A model on the Hugging Face Hub: its layout from the file listing of its folder at the
    commit its revision names (asked of the Hub, or read from the cache offline)."""

    name = "hub"

    def help(self) -> str:
        return f"a Hugging Face Hub model ({hf_hub.PREFIX}OWNER/REPO[/SUB/DIR][@REVISION])"

    def resolve(self, name: str) -> ModelFiles | None:
        if not name.startswith(hf_hub.PREFIX):
            return None
        hub = hf_hub.parse_hub_name(name)
        commit, sizes = hf_hub.listing(hub)
        where = f"{name} (commit {commit[:12]})"
        fmt = format_of_files(sizes, where)
        return ModelFiles(name, fmt.name, self, revision=commit,
                          remote=tuple((hub.path(n), sizes[n])
                                       for n in files_read(fmt, sizes, where)))

    def local(self, files: ModelFiles, *, progress: bool) -> ModelFiles:
        hub = hf_hub.parse_hub_name(files.name)
        paths = [p for p, _ in files.remote]
        directory = hf_hub.download(hub, files.revision, paths, progress=progress)
        return dataclasses.replace(files, directory=directory).with_pair(
            {hub.relative(p) for p in paths})

    def facts(self, files: ModelFiles) -> dict[str, Any]:
        """The revision, commit and the files the model reads with their sizes."""
        name = hf_hub.parse_hub_name(files.name)
        return {"hub": {
            "repo": name.repo_id, "folder": name.subfolder, "revision": name.revision or "main",
            "commit": files.revision, "files": dict(files.remote),
            "bytes": sum(size for _, size in files.remote),
            "downloaded": self._cached(files)}}

    def describe_unloaded(self, files: ModelFiles) -> bool:
        return not self._cached(files)

    @staticmethod
    def _cached(files: ModelFiles) -> bool:
        return hf_hub.is_cached(hf_hub.parse_hub_name(files.name), files.revision,
                                [p for p, _ in files.remote])


class PathSource(ModelSource):
    """A path that exists: a model directory, told by its files' names, or a model file a
    format reads as it is."""

    name = "path"

    def help(self) -> str:
        return f"a model directory in one of the formats {formats_described()}"

    def resolve(self, name: str) -> ModelFiles | None:
        path = Path(name)
        archive = format_of_file(path)  # read as it is, not unpacked
        if archive is not None:
            return ModelFiles(name, archive.name, self, directory=path)
        if not path.exists():
            return None
        names = _model_directory_files(path)
        fmt = format_of_files(names, str(path))
        return ModelFiles(name, fmt.name, self, directory=path).with_pair(names)


class ReleaseSource(ModelSource):
    """A released bilm-tf model, downloaded into the cache on first use."""

    name = "release"

    def help(self) -> str:
        return f"a released name ({', '.join(RELEASED_MODELS)})"

    def resolve(self, name: str) -> ModelFiles | None:
        return ModelFiles(name, BILM_TF.name, self) if name in RELEASED_MODELS else None

    def local(self, files: ModelFiles, *, progress: bool) -> ModelFiles:
        options, weights = resolve_released(files.name, progress=progress)
        return dataclasses.replace(files, directory=options.parent, options=options,
                                   weights=weights)


class EfmlReleaseSource(ModelSource):
    """A released ELMoForManyLangs model, downloaded and unpacked on first use."""

    name = "efml-release"

    def help(self) -> str:
        return "a released ELMoForManyLangs name (efml:<lang> such as efml:zhs, efml:en)"

    def resolve(self, name: str) -> ModelFiles | None:
        return ModelFiles(name, EFML.name, self) if name in EFML_RELEASES else None

    def local(self, files: ModelFiles, *, progress: bool) -> ModelFiles:
        return dataclasses.replace(files, directory=resolve_efml(files.name, progress=progress))


class ShippedSource(ModelSource):
    """A model inside the installed package (`shipped_root`)."""

    name = "shipped"

    def help(self) -> str:
        return f"a shipped model ({', '.join(shipped_models()) or 'none'})"

    def resolve(self, name: str) -> ModelFiles | None:
        if name not in shipped_models():
            return None
        return ModelFiles(name, NATIVE.name, self, directory=shipped_model_dir(name))


class OfficialPairSource(ModelSource):
    """An official pair given as two files (--options and --weights) instead of a MODEL: no
    MODEL names it, so it is not in `SOURCES`."""

    name = "files"

    def help(self) -> str:
        return "an official pair given as --options and --weights"

    def resolve(self, name: str) -> ModelFiles | None:
        return None  # given as two files, never as a MODEL

    def files(self, options: Path, weights: Path) -> ModelFiles:
        return ModelFiles(str(options), BILM_TF.name, self, options=options, weights=weights)


SHIPPED = ShippedSource()
OFFICIAL_PAIR = OfficialPairSource()
# In the order they are tried: a path that exists is read as it is, whatever its name.
SOURCES: dict[str, ModelSource] = {s.name: s for s in (
    HubSource(), PathSource(), ReleaseSource(), EfmlReleaseSource(), SHIPPED)}


def sources_described(last: str = "or") -> str:
    """What a MODEL may be, as help text and errors list the sources (`last` before the
    last one)."""
    phrases = [s.help() for s in SOURCES.values()]
    return "; ".join(phrases[:-1]) + f"; {last} {phrases[-1]}"


def check_model_args(model: str | Path | None, options: str | Path | None,
                     weights: str | Path | None) -> None:
    """A MODEL, or an official pair as both `options` and `weights`: not both, not half."""
    if (options is None) != (weights is None) or (options is not None and model is not None):
        raise ElmoError("give a model, or both options and weights (an official bilm-tf "
                        "pair: --options and --weights in a command, options= and weights= "
                        "in Python) instead of it")


def resolve_model(
    model: str | Path | ModelFiles | None = None,
    *,
    options: str | Path | None = None,
    weights: str | Path | None = None,
) -> ModelFiles:
    """The source and format of `model` (see the module docstring; None: `default`), or of
    the official pair `options` + `weights`; a ModelFiles is returned as it is. Nothing is
    downloaded: call `.local()` on the result for the files."""
    check_model_args(model, options, weights)
    if isinstance(model, ModelFiles):
        return model
    if options is not None and weights is not None:
        return OFFICIAL_PAIR.files(Path(options), Path(weights))
    name = DEFAULT_MODEL if model is None else str(model)
    # no MODEL: the shipped default, never a directory that happens to be named so
    for source in [SHIPPED] if model is None else SOURCES.values():
        files = source.resolve(name)
        if files is not None:
            return files
    raise ModelNotFoundError(f"model {name!r} is neither {sources_described('nor')}")


def _model_directory_files(path: Path) -> set[str]:
    """The names of the files in the model directory `path`; an error for a file or a task
    run."""
    if not path.is_dir():
        raise ModelNotFoundError(f"model {str(path)!r} is a file; give its directory, in one "
                                 f"of the formats {formats_described()}")
    if is_task_run(path):
        raise ElmoError(f"{path} is a task run (made by elmo task train), not a biLM: give "
                        "the biLM it was trained with (its config.json says which, under "
                        "task.elmo)")
    return _file_names(path)


def _file_names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.is_file()}


def files_read(fmt: ModelFormat, names: Collection[str], where: str) -> list[str]:
    """Which of a model directory's files (`names`, relative paths) a model of format `fmt`
    reads: the weights and what describes them, and the records beside them (`card.json`,
    `run.json`: the tokenizer). An error names `where` when they make no one model."""
    read = fmt.files_read(names, where)
    return [*read, *(n for n in (CARD_NAME, RUN_NAME) if n in names and n not in read)]


def find_official_pair(directory: Path) -> tuple[Path, Path]:
    """The one options .json and one weights .hdf5 in a directory."""
    options, weights = official_pair(_file_names(directory), str(directory))
    return own_file(directory, options), own_file(directory, weights)


def is_task_run(directory: str | Path) -> bool:
    """Whether `directory` is a run of `elmo task train` (its marker says so)."""
    return run_kind(directory) == TASK
