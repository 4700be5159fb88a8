"""Find and load a biLM from a name or a path: released models, our format, official pairs."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from elmo.errors import ElmoError
from elmo.formats.bilm_tf import load_bilm_tf
from elmo.formats.native import is_native_dir, load_pretrained
from elmo.hub import RELEASED_MODELS, resolve_released
from elmo.modules.bilm import BiLM

DEFAULT_MODEL = "default"


def default_model_dir() -> Path:
    """The small model that ships inside the package."""
    return Path(str(resources.files("elmo") / "pretrained" / DEFAULT_MODEL))


def find_official_pair(
    directory: Path, choose: str = "Pass --options and --weights to choose."
) -> tuple[Path, Path]:
    """The one options .json and one weights .hdf5 in a directory; `choose` ends the error
    message when there are none or several (how the caller's user picks a pair)."""
    options = sorted(p for p in directory.glob("*.json") if p.name != "config.json")
    weights = sorted(directory.glob("*.hdf5")) + sorted(directory.glob("*.h5"))
    if len(options) == 1 and len(weights) == 1:
        return options[0], weights[0]
    raise ElmoError(
        f"{directory} should hold our format (config.json + model.safetensors) or exactly one "
        f"options .json and one weights .hdf5; found options {[p.name for p in options]} and "
        f"weights {[p.name for p in weights]}. {choose}"
    )


def load_bilm(
    model: str | Path | None = None,
    *,
    options: str | Path | None = None,
    weights: str | Path | None = None,
    progress: bool = True,
) -> BiLM:
    """Load a biLM in eval mode.

    `model` is `None`/"default" (the shipped model), a released name (`small`, `medium`,
    `original`, `original-5.5B`, downloaded on first use), a directory in our format, or a
    directory holding one official options/weights pair. Or give `options` and `weights`.
    """
    if options is not None or weights is not None:
        if options is None or weights is None or model is not None:
            raise ElmoError("give both --options and --weights, and no model name")
        return load_bilm_tf(options, weights)
    if model is None or str(model) == DEFAULT_MODEL:
        directory = default_model_dir()
        if not is_native_dir(directory):
            raise ElmoError(f"the default model is not installed at {directory}")
        return load_pretrained(directory)[0]
    if str(model) in RELEASED_MODELS and not Path(model).exists():
        return load_bilm_tf(*resolve_released(str(model), progress=progress))
    path = Path(model)
    if path.is_dir():
        if is_native_dir(path):
            return load_pretrained(path)[0]
        return load_bilm_tf(*find_official_pair(path))
    raise ElmoError(
        f"model {str(model)!r} is neither a released name ({', '.join(RELEASED_MODELS)}, "
        f"{DEFAULT_MODEL}) nor a model directory"
    )
