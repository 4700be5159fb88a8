"""Find and load a biLM by name or path: shipped models, released models, directories.

One resolver serves every command and loader. A model is named by

- a path that exists: a directory in our format (`config.json` + `model.safetensors`, with
  `vocab.txt` and the softmax when `elmo train` wrote it), an ELMoForManyLangs model directory
  (`config.json`, `char.dic`, `word.dic`, `token_embedder.pkl`, `encoder.pkl`) or a directory
  holding one official options/weights pair;
- else a shipped model: a directory `src/elmo/pretrained/NAME/` inside the package
  (`default`, the English model; more are added by dropping a directory in);
- else a released name (`small`, `medium`, `original`, `original-5.5B`, or `efml:<lang>` for
  the ELMoForManyLangs models), downloaded on first use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

from elmo.errors import ElmoError
from elmo.loading.formats.bilm_tf import load_bilm_tf
from elmo.loading.formats.efml import REQUIRED_FILES as EFML_FILES
from elmo.loading.formats.efml import is_efml_dir, load_efml
from elmo.loading.formats.native import (
    CONFIG_NAME,
    RUN_NAME,
    VOCAB_NAME,
    WEIGHTS_NAME,
    is_native_dir,
    load_native,
)
from elmo.loading.releases import EFML_RELEASES, RELEASED_MODELS, resolve_efml, resolve_released
from elmo.modules.bilm import BiLM
from elmo.modules.quantize import check_quantize
from elmo.runs import TASK, run_kind

DEFAULT_MODEL = "default"
CARD_NAME = "card.json"  # a shipped model's recorded facts (training, perplexity, tokenizer)
FORMATS_NEEDED = (f"our format ({CONFIG_NAME} + {WEIGHTS_NAME}), an ELMoForManyLangs model "
                  f"({', '.join(EFML_FILES)}, word.dic), or exactly one options .json and one "
                  "weights .hdf5 (bilm-tf)")


class ModelNotFoundError(ElmoError, FileNotFoundError):
    """A model name or path that names no model."""


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
    """Where a model's weights are: our format's directory, an official pair, or an
    ELMoForManyLangs directory."""

    directory: Path | None = None  # our format (may hold the softmax and vocab.txt)
    options: Path | None = None
    weights: Path | None = None
    efml: Path | None = None

    @property
    def format(self) -> str:
        """"native", "efml" or "bilm-tf"."""
        return "native" if self.directory else "efml" if self.efml else "bilm-tf"


def find_official_pair(
    directory: Path, choose: str = "Pass --options and --weights to choose."
) -> tuple[Path, Path]:
    """The one options .json and one weights .hdf5 in a directory; `choose` ends the error
    message when there are none or several (how the caller's user picks a pair)."""
    options = sorted(p for p in directory.glob("*.json")
                     if p.name not in (CONFIG_NAME, CARD_NAME, RUN_NAME))
    weights = sorted(directory.glob("*.hdf5")) + sorted(directory.glob("*.h5"))
    if len(options) == 1 and len(weights) == 1:
        return options[0], weights[0]
    raise ElmoError(
        f"{directory} is no model directory: it should hold {FORMATS_NEEDED}; found options "
        f"{[p.name for p in options]} and weights {[p.name for p in weights]}. {choose}"
    )


def model_directory(model: str | Path | None) -> Path | None:
    """Our-format directory that `model` names (a path or a shipped name), without
    downloading; None for a released name or a directory holding an official pair."""
    path = Path(model) if model is not None else None
    if path is not None and path.exists():
        if not path.is_dir():
            raise ModelNotFoundError(
                f"model {str(model)!r} is a file; give its directory: {FORMATS_NEEDED}"
            )
        if is_task_run(path):
            raise ElmoError(f"{path} is a task run (made by elmo task train), not a biLM: give "
                            "the biLM it was trained with (its config.json says which, under "
                            "task.elmo)")
        return path if is_native_dir(path) else None
    name = DEFAULT_MODEL if model is None else str(model)
    if name in RELEASED_MODELS or name in EFML_RELEASES:
        return None
    if name in shipped_models():
        return shipped_model_dir(name)
    raise ModelNotFoundError(
        f"model {name!r} is neither a released name ({', '.join(RELEASED_MODELS)}, or "
        f"efml:<lang> such as efml:zhs, efml:en), a shipped model "
        f"({', '.join(shipped_models()) or 'none'}), nor a model directory ({FORMATS_NEEDED})"
    )


def is_task_run(directory: str | Path) -> bool:
    """Whether `directory` is a run of `elmo task train` (its marker says so)."""
    return run_kind(directory) == TASK


def model_format(model: str | Path | None) -> str:
    """"native", "efml" or "bilm-tf": the format of `model`, without downloading it (a name
    that names no model is a ModelNotFoundError, as in `model_directory`)."""
    return "native" if model_directory(model) is not None else _other_format(model)


def _other_format(model: str | Path | None) -> str:
    """"efml" or "bilm-tf" for a model that `model_directory` found not in our format."""
    path = Path(str(model))
    if path.exists():
        return "efml" if is_efml_dir(path) else "bilm-tf"
    return "bilm-tf" if str(model) in RELEASED_MODELS else "efml"  # a released name


def resolve_model(model: str | Path | None = None, *, progress: bool = True) -> ModelFiles:
    """The files of `model` (see the module docstring), downloading a released model."""
    directory = model_directory(model)
    if directory is not None:
        return ModelFiles(directory=directory)
    path = Path(str(model))
    if _other_format(model) == "efml":
        return ModelFiles(efml=path if path.exists() else resolve_efml(str(model),
                                                                       progress=progress))
    if path.exists():
        return ModelFiles(None, *find_official_pair(path))
    return ModelFiles(None, *resolve_released(str(model), progress=progress))


def load_pretrained(
    model: str | Path | None = None, *, progress: bool = True
) -> tuple[BiLM, dict[str, torch.Tensor]]:
    """A biLM in eval mode and the other tensors stored with it (such as `softmax.weight`;
    none for official files). `model`: a name or path as in the module docstring."""
    files = resolve_model(model, progress=progress)
    if files.directory is not None:
        return load_native(files.directory)
    if files.efml is not None:
        return load_efml(files.efml), {}
    return load_bilm_tf(files.options, files.weights), {}


def load_bilm(
    model: str | Path | None = None,
    *,
    options: str | Path | None = None,
    weights: str | Path | None = None,
    progress: bool = True,
    quantize: str | None = None,
) -> BiLM:
    """Load a biLM in eval mode: `model` as in the module docstring (None: `default`), or an
    official `options`/`weights` pair; `quantize="int8"` for int8 CPU inference (see
    `BiLM.quantize_`)."""
    check_quantize(quantize)  # before loading: a platform without the kernels fails at once
    if options is not None or weights is not None:
        if options is None or weights is None or model is not None:
            raise ElmoError("give both --options and --weights, and no model name")
        return load_bilm_tf(options, weights).quantize_(quantize)
    return load_pretrained(model, progress=progress)[0].quantize_(quantize)


def model_vocab_file(model: str | Path | None) -> Path | None:
    """The `vocab.txt` stored with `model`, if it has one."""
    directory = model_directory(model)
    vocab = directory / VOCAB_NAME if directory is not None else None
    return vocab if vocab is not None and vocab.is_file() else None


def recorded_tokenizer(model: str | Path | None) -> str | None:
    """The tokenizer `model` was trained with, as recorded in its directory: `run.json` of an
    `elmo train` run, or the `card.json` of a shipped or exported model (an official pair's
    directory too); None when nothing is recorded."""
    directory = model_directory(model)
    if directory is None and model is not None and Path(model).is_dir():
        directory = Path(model)
    if directory is None:
        return None
    for record, keys in ((directory / RUN_NAME, ("config", "tokenizer")),
                         (directory / CARD_NAME, ("tokenizer",))):
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
