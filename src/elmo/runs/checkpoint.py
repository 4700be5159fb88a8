"""A run's checkpoint: one safetensors file, written atomically, that holds plain state.

The state is what `state_dict()` methods return: nested dicts (string or integer keys) and
lists of tensors, numbers, strings, booleans and None. Tensors are stored as safetensors under
their path in the state ("model.bilm.token_encoder.char_embed.weight", "optimizer.state.0.exp_avg");
everything else is JSON in the file's metadata, where each tensor is {"$tensor": its path}.
What the state means (a step or an epoch, which random states) each recipe says itself. One
file renamed into place means a reader (or a killed writer) never sees a half-written
checkpoint.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from elmo.errors import ElmoError
from elmo.io.atomic import atomic_output

CHECKPOINT_NAME = "checkpoint.safetensors"
_META_KEY = "elmo_checkpoint"
_TENSOR, _INT_KEYS = "$tensor", "$int_keys"  # JSON stand-ins: a tensor; a dict of int keys
_MAX_HEADER_BYTES = 100 * 2**20  # safetensors' own limit on a header


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write `state` (plain state, see the module docstring) to `path` atomically."""
    tensors: dict[str, torch.Tensor] = {}
    meta = _to_json(state, "", tensors)
    with atomic_output(path) as tmp:
        save_file(tensors, str(tmp), metadata={_META_KEY: json.dumps(meta)})


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The state saved by :func:`save_checkpoint` (tensors on CPU)."""
    meta = read_checkpoint_meta(path)
    return _from_json(meta, load_file(str(path)))


def read_checkpoint_meta(path: str | Path) -> dict[str, Any]:
    """The checkpoint's state without loading its tensors (each is {"$tensor": its path}),
    from the file's header read through one open file: a run that renames a new checkpoint
    into place meanwhile is never half seen (safetensors' `safe_open` reads the header, then
    maps the file again by its name)."""
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= _MAX_HEADER_BYTES:
                raise ValueError(f"a header of {size:,} bytes")
            header = json.loads(f.read(size))
        meta = (header.get("__metadata__") or {}).get(_META_KEY)
    except (OSError, ValueError, AttributeError) as err:
        raise ElmoError(f"{path} is not a readable checkpoint of an elmo run: {err}") from err
    if meta is None:
        raise ElmoError(f"{path} is a safetensors file but not a checkpoint of an elmo run")
    return json.loads(meta)


def _to_json(value: Any, path: str, tensors: dict[str, torch.Tensor]) -> Any:
    """`value` with its tensors moved into `tensors` (by path) and replaced by stand-ins."""
    if isinstance(value, torch.Tensor):
        if path in tensors:
            raise ValueError(f"two tensors of a checkpoint have the path {path!r}")
        tensors[path] = value.detach().cpu().contiguous()
        return {_TENSOR: path}
    prefix = f"{path}." if path else ""
    if isinstance(value, dict):
        if all(isinstance(k, int) for k in value) and value:
            return {_INT_KEYS: {str(k): _to_json(v, f"{prefix}{k}", tensors)
                                for k, v in value.items()}}
        if not all(isinstance(k, str) and k not in (_TENSOR, _INT_KEYS) for k in value):
            raise TypeError(f"checkpoint state {path!r}: keys must be all strings or all "
                            f"integers, not {_TENSOR!r} or {_INT_KEYS!r}")
        return {k: _to_json(v, f"{prefix}{k}", tensors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v, f"{prefix}{i}", tensors) for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"checkpoint state {path!r}: {type(value).__name__} is not plain state")


def _from_json(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """Inverse of :func:`_to_json` (tuples come back as lists)."""
    if isinstance(value, dict):
        if _TENSOR in value:
            return tensors[value[_TENSOR]]
        if _INT_KEYS in value:
            return {int(k): _from_json(v, tensors) for k, v in value[_INT_KEYS].items()}
        return {k: _from_json(v, tensors) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v, tensors) for v in value]
    return value


# ---- random number generators ---------------------------------------------------------


def capture_rng() -> dict[str, Any]:
    """The torch (CPU and CUDA), numpy and Python global RNG states, as plain state."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, py_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [name, keys.tolist(), pos, has_gauss, gauss],
        "python": [version, list(internal), py_gauss],
    }


def restore_rng(state: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng`. The CUDA states are restored only where CUDA is
    available, for as many GPUs as both processes have (a state saved on a GPU resumes on a
    machine without one, and the reverse)."""
    torch.set_rng_state(state["torch"])
    if torch.cuda.is_available():
        for index, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state, index)
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, internal, py_gauss = state["python"]
    random.setstate((version, tuple(internal), py_gauss))
