"""Which files a MODEL names, and in which format: the one resolver of model names.

A model is named by

- a path that exists: a directory in our format (`config.json` + `model.safetensors`, with
  `vocab.txt` and the softmax when `elmo train` wrote it), an ELMoForManyLangs model directory
  (`config.json`, `char.dic`, `word.dic`, `token_embedder.pkl`, `encoder.pkl`) or a directory
  holding one official options/weights pair;
- else a shipped model: a directory `src/elmo/pretrained/NAME/` inside the package
  (`default`, the English model; more are added by dropping a directory in);
- else a released name (`small`, `medium`, `original`, `original-5.5B`, or `efml:<lang>` for
  the ELMoForManyLangs models), downloaded on first use;
- or, instead of a MODEL, an official options/weights pair given as two files.

`resolve_model` decides the source and format without downloading anything;
`ModelFiles.local` brings a released model's files into the cache. `elmo.loading.load` reads
them. A new source of models is one branch in each of the two.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from elmo.errors import ElmoError, ModelNotFoundError
from elmo.loading.formats.efml import REQUIRED_FILES as EFML_FILES
from elmo.loading.formats.efml import is_efml_dir
from elmo.loading.formats.native import (
    CONFIG_NAME,
    RUN_NAME,
    VOCAB_NAME,
    WEIGHTS_NAME,
    is_native_dir,
)
from elmo.loading.releases import EFML_RELEASES, RELEASED_MODELS, resolve_efml, resolve_released
from elmo.runs import MARKER_NAME, TASK, run_kind

DEFAULT_MODEL = "default"
CARD_NAME = "card.json"  # a shipped model's recorded facts (training, perplexity, tokenizer)
FORMATS = ("native", "efml", "bilm-tf")
FORMATS_NEEDED = (f"our format ({CONFIG_NAME} + {WEIGHTS_NAME}), an ELMoForManyLangs model "
                  f"({', '.join(EFML_FILES)}, word.dic), or exactly one options .json and one "
                  "weights .hdf5 (bilm-tf)")


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
    """A resolved MODEL: its format ("native", "efml" or "bilm-tf"), where it comes from
    (`source`: "path", "shipped", "release", "efml-release" or "files") and, once on this
    machine, where its files are: `directory` (the model's directory; for an official pair,
    the directory holding it, which may record its tokenizer), `options` and `weights` (the
    official pair's two files)."""

    name: str
    format: str
    source: str
    directory: Path | None = None
    options: Path | None = None
    weights: Path | None = None

    @property
    def paths(self) -> list[Path]:
        """The files or directory the weights are read from."""
        if self.format == "bilm-tf":
            return [p for p in (self.options, self.weights) if p is not None]
        return [self.directory] if self.directory is not None else []

    def local(self, *, progress: bool = True) -> ModelFiles:
        """These files on this machine: a released model is downloaded into the cache on
        first use (a progress bar unless `progress` is False)."""
        if self.paths:
            return self
        if self.source == "release":
            options, weights = resolve_released(self.name, progress=progress)
            return dataclasses.replace(self, directory=options.parent, options=options,
                                       weights=weights)
        if self.source == "efml-release":
            return dataclasses.replace(self, directory=resolve_efml(self.name,
                                                                    progress=progress))
        return self

    @property
    def vocab_file(self) -> Path | None:
        """The `vocab.txt` stored with a model in our format (the softmax's rows), if any."""
        if self.format != "native" or self.directory is None:
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
                    value = json.loads(record.read_text(encoding="utf-8"))
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
        return ModelFiles(str(options), "bilm-tf", "files", options=Path(options),
                          weights=Path(weights))
    name = DEFAULT_MODEL if model is None else str(model)
    path = Path(name)
    if model is not None and path.exists():
        return ModelFiles(name, _format_of_directory(path), "path", directory=path,
                          **_pair_of(path))
    if name in RELEASED_MODELS:
        return ModelFiles(name, "bilm-tf", "release")
    if name in EFML_RELEASES:
        return ModelFiles(name, "efml", "efml-release")
    if name in shipped_models():
        return ModelFiles(name, "native", "shipped", directory=shipped_model_dir(name))
    raise ModelNotFoundError(
        f"model {name!r} is neither a released name ({', '.join(RELEASED_MODELS)}, or "
        f"efml:<lang> such as efml:zhs, efml:en), a shipped model "
        f"({', '.join(shipped_models()) or 'none'}), nor a model directory ({FORMATS_NEEDED})"
    )


def _format_of_directory(path: Path) -> str:
    """The format of the model directory `path`; an error for a file or a task run."""
    if not path.is_dir():
        raise ModelNotFoundError(f"model {str(path)!r} is a file; give its directory: "
                                 f"{FORMATS_NEEDED}")
    if is_task_run(path):
        raise ElmoError(f"{path} is a task run (made by elmo task train), not a biLM: give "
                        "the biLM it was trained with (its config.json says which, under "
                        "task.elmo)")
    if is_native_dir(path):
        return "native"
    return "efml" if is_efml_dir(path) else "bilm-tf"


def _pair_of(directory: Path) -> dict[str, Path]:
    """The official pair in `directory` as ModelFiles fields; none for other formats."""
    if is_native_dir(directory) or is_efml_dir(directory):
        return {}
    options, weights = find_official_pair(directory)
    return {"options": options, "weights": weights}


def find_official_pair(directory: Path) -> tuple[Path, Path]:
    """The one options .json and one weights .hdf5 in a directory."""
    options = sorted(p for p in directory.glob("*.json")
                     if p.name not in (CONFIG_NAME, CARD_NAME, RUN_NAME, MARKER_NAME))
    weights = sorted(directory.glob("*.hdf5")) + sorted(directory.glob("*.h5"))
    if len(options) == 1 and len(weights) == 1:
        return options[0], weights[0]
    raise ElmoError(
        f"{directory} is no model directory: it should hold {FORMATS_NEEDED}; found options "
        f"{[p.name for p in options]} and weights {[p.name for p in weights]}. Give the two "
        "files with --options and --weights, or put one pair in a directory of its own."
    )


def is_task_run(directory: str | Path) -> bool:
    """Whether `directory` is a run of `elmo task train` (its marker says so)."""
    return run_kind(directory) == TASK
