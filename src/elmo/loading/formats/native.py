"""Our own format: a directory with `config.json` and `model.safetensors`.

A model written by `elmo train` also holds its vocabulary (`vocab.txt`, whose order is the
softmax's rows) and the options it was trained with (`run.json`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from elmo.config import BiLMConfig
from elmo.errors import ModelFileError, ModelNotFoundError
from elmo.io.atomic import atomic_output
from elmo.modules.bilm import BiLM
from elmo.modules.quantize import check_savable

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
VOCAB_NAME = "vocab.txt"
RUN_NAME = "run.json"


def save_pretrained(
    model: BiLM,
    out_dir: str | Path,
    extra_tensors: dict[str, torch.Tensor] | None = None,
    dtype: torch.dtype = torch.float32,
) -> Path:
    """Write `config.json` and `model.safetensors` into out_dir, each atomically.

    `extra_tensors` (e.g. a pretraining softmax under `softmax.*`) are stored beside the
    biLM's own; `dtype=torch.float16` halves the file (outputs then change by ~1e-3).
    """
    check_savable(model.quantization)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    for name, tensor in (extra_tensors or {}).items():
        if name in tensors:
            raise ValueError(f"extra tensor {name!r} clashes with a biLM tensor")
        tensors[name] = tensor.detach().to("cpu", dtype).contiguous()
    with atomic_output(out_dir / WEIGHTS_NAME) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "elmo"})
    with atomic_output(out_dir / CONFIG_NAME) as tmp:
        model.config.save(tmp)
    return out_dir


def is_native_dir(path: str | Path) -> bool:
    path = Path(path)
    return (path / CONFIG_NAME).is_file() and (path / WEIGHTS_NAME).is_file()


def load_native(model_dir: str | Path) -> tuple[BiLM, dict[str, torch.Tensor]]:
    """Load a BiLM saved by `save_pretrained`; returns it (in eval mode, float32) and the
    file's other tensors (such as `softmax.weight`). For names as well as directories, use
    `elmo.load_pretrained`."""
    model_dir = Path(model_dir)
    if not is_native_dir(model_dir):
        raise ModelNotFoundError(
            f"{model_dir} is not a model directory: it needs {CONFIG_NAME} and {WEIGHTS_NAME}"
        )
    try:
        config = BiLMConfig.load(model_dir / CONFIG_NAME)
    except (ValueError, TypeError, UnicodeDecodeError) as err:
        raise ModelFileError(f"{model_dir / CONFIG_NAME} is not a valid model config: {err}") \
            from err
    try:
        tensors = load_file(str(model_dir / WEIGHTS_NAME))
    except SafetensorError as err:
        message = f"{model_dir / WEIGHTS_NAME} is not a valid safetensors file: {err}"
        raise ModelFileError(message) from err
    model = BiLM(config)
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    if missing:
        raise ModelFileError(f"{model_dir / WEIGHTS_NAME} lacks tensors {missing[:5]}")
    for name, expected in own.items():
        found = tensors[name]
        if found.shape != expected.shape:
            raise ModelFileError(
                f"{model_dir / WEIGHTS_NAME}: tensor {name!r} has shape {tuple(found.shape)}, "
                f"but {CONFIG_NAME} describes {tuple(expected.shape)}"
            )
    model.load_state_dict({k: tensors[k].float() for k in own})
    rest = {k: v.float() for k, v in tensors.items() if k not in own}
    return model.eval(), rest
