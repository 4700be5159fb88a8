"""Which files a MODEL names, and in which format: the one resolver of model names.

A model is named by

- `hf:OWNER/REPO`, `hf:OWNER/REPO/SUB/DIR`, either with `@REVISION` (a branch, tag or commit):
  a model on the Hugging Face Hub (`elmo.loading.hf_hub`), in any layout below;
- a path that exists: a model directory in one of the formats of `FORMATS` in
  `elmo.loading.formats.registry` (ours, with `vocab.txt` and the softmax when `elmo train`
  wrote it; an ELMoForManyLangs model; an unpacked AllenNLP archive or an `Elmo`'s
  `weights.th` alone; an NLPL model; one official options/weights pair), told by its file
  names, or an NLPL model's ZIP archive;
- else a shipped model: a directory `src/elmo/pretrained/NAME/` inside the package
  (`default`, the English model; more are added by dropping a directory in);
- else a released name (`small`, `medium`, `original`, `original-5.5B`, or `efml:<lang>` for
  the ELMoForManyLangs models), downloaded on first use;
- or, instead of a MODEL, an official options/weights pair given as two files.

`resolve_model` decides the source and format without downloading anything (a Hub model's
layout comes from the repo's file listing); `ModelFiles.local` brings a released or Hub
model's files to this machine. `elmo.loading.load` reads them. A new source of models is one
branch in each of the two.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from elmo.errors import ElmoError, ModelNotFoundError
from elmo.loading import hf_hub
from elmo.loading.formats.bilm_tf import official_pair
from elmo.loading.formats.native import CARD_NAME, RUN_NAME, VOCAB_NAME, is_native_dir
from elmo.loading.formats.nlpl import is_zip_archive
from elmo.loading.formats.registry import (
    BILM_TF,
    EFML,
    NATIVE,
    NLPL,
    ModelFormat,
    format_of_files,
    formats_described,
)
from elmo.loading.formats.untrusted import read_json
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


@dataclass(frozen=True)
class ModelFiles:
    """A resolved MODEL: its `format` (the name of its record in
    `elmo.loading.formats.registry.FORMATS`), where it comes from (`source`: "path",
    "shipped", "release", "efml-release", "hub" or "files") and, once on this machine, where
    its files are: `directory` (the model's directory, or an NLPL model's ZIP archive; for an
    official pair, the directory holding it, which may record its tokenizer), `options` and
    `weights` (the official pair's two files). A Hub model also has the commit its name
    resolved to (`revision`) and the repo files it reads, with their sizes (`remote`)."""

    name: str
    format: str
    source: str
    directory: Path | None = None
    options: Path | None = None
    weights: Path | None = None
    revision: str | None = None
    remote: tuple[tuple[str, int], ...] = ()

    @property
    def paths(self) -> list[Path]:
        """The files or directory the weights are read from."""
        if self.format == BILM_TF.name:
            return [p for p in (self.options, self.weights) if p is not None]
        return [self.directory] if self.directory is not None else []

    def local(self, *, progress: bool = True) -> ModelFiles:
        """These files on this machine: a released or Hub model is downloaded into its cache
        on first use (a progress bar unless `progress` is False)."""
        if self.paths:
            return self
        if self.source == "release":
            options, weights = resolve_released(self.name, progress=progress)
            return dataclasses.replace(self, directory=options.parent, options=options,
                                       weights=weights)
        if self.source == "efml-release":
            return dataclasses.replace(self, directory=resolve_efml(self.name,
                                                                    progress=progress))
        if self.source == "hub":
            hub = hf_hub.parse_hub_name(self.name)
            directory = hf_hub.download(hub, self.revision, [p for p, _ in self.remote],
                                        progress=progress)
            names = {hub.relative(p) for p, _ in self.remote}
            return dataclasses.replace(self, directory=directory,
                                       **_pair_of(directory, self.format, names))
        return self

    @property
    def vocab_file(self) -> Path | None:
        """The `vocab.txt` stored with a model in our format (the softmax's rows), if any."""
        if self.format != NATIVE.name or self.directory is None:
            return None
        vocab = self.directory / VOCAB_NAME
        return vocab if vocab.is_file() else None

    def recorded_tokenizer(self) -> str | None:
        """The tokenizer the model was trained with, as its directory records it: `run.json`
        of an `elmo train` run, or the `card.json` of a shipped or exported model (an official
        pair's directory too); None when nothing is recorded (or the files are not local)."""
        if self.directory is None:
            return None
        for record, keys in ((self.directory / RUN_NAME, ("config", "tokenizer")),
                             (self.directory / CARD_NAME, ("tokenizer",))):
            if record.is_file():
                try:
                    value = read_json(record)
                    for key in keys:
                        value = value[key]
                    return value
                except (ValueError, KeyError, TypeError) as err:
                    raise ElmoError(f"{record} does not record the tokenizer ({err!r}); pass "
                                    "--tokenizer") from None
        return None


def check_model_args(model: str | Path | None, options: str | Path | None,
                     weights: str | Path | None) -> None:
    """A MODEL, or an official pair as both `options` and `weights`: not both, not half."""
    if (options is None) != (weights is None) or (options is not None and model is not None):
        raise ElmoError("give a MODEL, or both --options and --weights (an official bilm-tf "
                        "pair) instead of it")


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
        return ModelFiles(str(options), BILM_TF.name, "files", options=Path(options),
                          weights=Path(weights))
    name = DEFAULT_MODEL if model is None else str(model)
    if name.startswith(hf_hub.PREFIX):
        return _resolve_hub(name)
    path = Path(name)
    if model is not None and is_zip_archive(path):  # read as it is, not unpacked
        return ModelFiles(name, NLPL.name, "path", directory=path)
    if model is not None and path.exists():
        names = _model_directory_files(path)
        fmt = format_of_files(names, str(path)).name
        return ModelFiles(name, fmt, "path", directory=path, **_pair_of(path, fmt, names))
    if name in RELEASED_MODELS:
        return ModelFiles(name, BILM_TF.name, "release")
    if name in EFML_RELEASES:
        return ModelFiles(name, EFML.name, "efml-release")
    if name in shipped_models():
        return ModelFiles(name, NATIVE.name, "shipped", directory=shipped_model_dir(name))
    raise ModelNotFoundError(
        f"model {name!r} is neither a released name ({', '.join(RELEASED_MODELS)}, or "
        f"efml:<lang> such as efml:zhs, efml:en), a Hub model (hf:OWNER/REPO[@REVISION]), a "
        f"shipped model ({', '.join(shipped_models()) or 'none'}), nor a model directory "
        f"(in one of the formats {formats_described()})"
    )


def _resolve_hub(name: str) -> ModelFiles:
    """A Hub model's layout, from the file listing of its folder at the commit its revision
    names (asked of the Hub, or read from the cache offline); no file is downloaded."""
    hub = hf_hub.parse_hub_name(name)
    commit, sizes = hf_hub.listing(hub)
    where = f"{name} (commit {commit[:12]})"
    fmt = format_of_files(sizes, where)
    return ModelFiles(name, fmt.name, "hub", revision=commit,
                      remote=tuple((hub.path(n), sizes[n]) for n in files_read(fmt, sizes, where)))


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


def _pair_of(directory: Path, fmt: str, names: Collection[str]) -> dict[str, Path]:
    """The official pair in `directory` (holding the files `names`) as ModelFiles fields;
    none for other formats."""
    if fmt != BILM_TF.name:
        return {}
    options, weights = official_pair(names, str(directory))
    return {"options": directory / options, "weights": directory / weights}


def find_official_pair(directory: Path) -> tuple[Path, Path]:
    """The one options .json and one weights .hdf5 in a directory."""
    options, weights = official_pair(_file_names(directory), str(directory))
    return directory / options, directory / weights


def is_task_run(directory: str | Path) -> bool:
    """Whether `directory` is a run of `elmo task train` (its marker says so)."""
    return run_kind(directory) == TASK
