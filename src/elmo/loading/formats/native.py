"""Our own format: a directory with `config.json` and `model.safetensors`.

The tensors may instead be split into shards, as Hugging Face does:
`model-00001-of-0000N.safetensors` ... and `model.safetensors.index.json` ({"metadata":
{"total_size": bytes}, "weight_map": {tensor: shard}}); `model.safetensors` wins when a
directory has both. A model written by
`elmo train` also holds its vocabulary (`vocab.txt`, whose order is the softmax's rows) and the
options it was trained with (`run.json`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from elmo.config import BiLMConfig
from elmo.errors import ModelFileError, ModelNotFoundError
from elmo.io.atomic import atomic_output, atomic_write_text
from elmo.loading.formats.untrusted import MAX_VOCABULARY_BYTES, own_file, read_json
from elmo.modules.bilm import BiLM
from elmo.modules.quantize import check_savable

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
VOCAB_NAME = "vocab.txt"
RUN_NAME = "run.json"
CARD_NAME = "card.json"  # a shipped or exported model's recorded facts (tokenizer, training)
INDEX_NAME = "model.safetensors.index.json"
SHARD_NAME = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")
# Bounds on what a safetensors file holds beside its tensors' bytes: the file's own (length,
# metadata, padding) and each tensor's entry (name, dtype, shape, offsets) in its JSON header.
_FILE_HEADER_BYTES, _ENTRY_BYTES, _DIM_BYTES = 256, 128, 21


def save_pretrained(
    model: BiLM,
    out_dir: str | Path,
    extra_tensors: dict[str, torch.Tensor] | None = None,
    dtype: torch.dtype = torch.float32,
    max_shard_bytes: int | None = None,
) -> Path:
    """Write `config.json` and `model.safetensors` into out_dir, each atomically.

    `extra_tensors` (e.g. a pretraining softmax under `softmax.*`) are stored beside the
    biLM's own; `dtype=torch.float16` halves the file (outputs then change by ~1e-3).
    `max_shard_bytes`: the tensors go into shards of at most that many bytes each, with
    their index, instead (a tensor larger than that alone fills a larger shard). The weight
    files of the other layout, or of more shards, left by an earlier save are deleted.
    """
    check_savable(model.quantization)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    for name, tensor in (extra_tensors or {}).items():
        if name in tensors:
            raise ValueError(f"extra tensor {name!r} clashes with a biLM tensor")
        tensors[name] = tensor.detach().to("cpu", dtype).contiguous()
    if max_shard_bytes is None:
        written = {WEIGHTS_NAME: tensors}
    else:
        shards = _shards(tensors, max_shard_bytes)
        written = {f"model-{i:05d}-of-{len(shards):05d}.safetensors": shard
                   for i, shard in enumerate(shards, 1)}
    for name, part in written.items():
        with atomic_output(out_dir / name) as tmp:
            save_file(part, str(tmp), metadata={"format": "elmo"})
    if max_shard_bytes is not None:
        index = {"metadata": {"total_size": sum(t.nbytes for t in tensors.values())},
                 "weight_map": {k: name for name, part in written.items() for k in part}}
        atomic_write_text(out_dir / INDEX_NAME, json.dumps(index, indent=2) + "\n")
    kept = {*written, INDEX_NAME} if max_shard_bytes is not None else set(written)
    for path in out_dir.iterdir():
        if path.name not in kept and _holds_weights(path.name):
            path.unlink()
    with atomic_output(out_dir / CONFIG_NAME) as tmp:
        model.config.save(tmp)
    return out_dir


def _shards(tensors: dict[str, torch.Tensor], max_bytes: int) -> list[dict[str, torch.Tensor]]:
    """`tensors` in order, cut into files of at most `max_bytes` (headers counted)."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = _FILE_HEADER_BYTES
    for name, tensor in tensors.items():
        entry = tensor.nbytes + len(name.encode()) + _ENTRY_BYTES + _DIM_BYTES * tensor.dim()
        if shards[-1] and size + entry > max_bytes:
            shards.append({})
            size = _FILE_HEADER_BYTES
        shards[-1][name] = tensor
        size += entry
    return shards


def _holds_weights(name: str) -> bool:
    return name in (WEIGHTS_NAME, INDEX_NAME) or SHARD_NAME.fullmatch(name) is not None


def weight_files(names: Collection[str]) -> list[str]:
    """Which of a directory's file `names` hold a model's tensors in our format:
    `model.safetensors`, else the shard index and the shards; sorted."""
    if WEIGHTS_NAME in names:
        return [WEIGHTS_NAME]
    return sorted(n for n in names if _holds_weights(n))


def holds_native(names: Collection[str]) -> bool:
    """Whether a directory holding the files `names` is a model in our format."""
    return CONFIG_NAME in names and (WEIGHTS_NAME in names or INDEX_NAME in names)


def is_native_dir(path: str | Path) -> bool:
    path = Path(path)
    return holds_native([n for n in (CONFIG_NAME, WEIGHTS_NAME, INDEX_NAME)
                         if (path / n).is_file()])


def native_files(names: Collection[str]) -> list[str]:
    """The files a model in our format reads among a directory's `names`: its config, its
    weights and its vocabulary (when it has one)."""
    return [CONFIG_NAME, *weight_files(names), *(n for n in (VOCAB_NAME,) if n in names)]


def load_native(model_dir: str | Path) -> tuple[BiLM, dict[str, torch.Tensor]]:
    """Load a BiLM saved by `save_pretrained`; returns it (in eval mode, float32) and the
    file's other tensors (such as `softmax.weight`). For names as well as directories, use
    `elmo.load_pretrained`."""
    model_dir = Path(model_dir)
    if not is_native_dir(model_dir):
        raise ModelNotFoundError(
            f"{model_dir} is not a model directory: it needs {CONFIG_NAME} and {WEIGHTS_NAME} "
            f"(or {INDEX_NAME} and its shards)"
        )
    config_path = own_file(model_dir, CONFIG_NAME)
    data = read_json(config_path, max_bytes=MAX_VOCABULARY_BYTES)  # it may list vocabularies
    try:
        if not isinstance(data, dict):
            raise ValueError("it should hold a JSON object")
        config = BiLMConfig.from_dict(data)
    except (ValueError, TypeError) as err:
        raise ModelFileError(f"{config_path} is not a valid model config: {err}") from err
    tensors, source = _read_tensors(model_dir)
    model = BiLM(config)
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    if missing:
        raise ModelFileError(f"{source} lacks tensors {missing[:5]}")
    for name, expected in own.items():
        found = tensors[name]
        if found.shape != expected.shape:
            raise ModelFileError(
                f"{source}: tensor {name!r} has shape {tuple(found.shape)}, "
                f"but {CONFIG_NAME} describes {tuple(expected.shape)}"
            )
    model.load_state_dict({k: tensors[k].float() for k in own})
    rest = {k: v.float() for k, v in tensors.items() if k not in own}
    return model.eval(), rest


def _read_tensors(model_dir: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The tensors of `model_dir`'s `model.safetensors`, or of the shards its index names;
    and the file that lists them (for messages)."""
    weights = own_file(model_dir, WEIGHTS_NAME)
    if weights.is_file():
        return _load_file(weights), weights
    index_path = own_file(model_dir, INDEX_NAME)
    try:
        weight_map = read_json(index_path)["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ModelFileError(f"{index_path} is not a valid shard index (a JSON object with a "
                             f"weight_map of tensor names to shard files): {err!r}") from err
    tensors: dict[str, torch.Tensor] = {}
    for shard in shards:
        if not isinstance(shard, str) or Path(shard).name != shard:
            raise ModelFileError(f"{index_path} names the shard {shard!r}: shards must be "
                                 f"files beside it")
        if not own_file(model_dir, shard).is_file():
            raise ModelFileError(f"{index_path} names the shard {shard}, which is missing; "
                                 "copy the whole model directory")
        tensors.update(_load_file(model_dir / shard))
    misplaced = sorted(k for k in weight_map if k not in tensors)
    if misplaced:
        raise ModelFileError(f"{index_path}: tensors {misplaced[:5]} are not in the shards it "
                             "names for them")
    return tensors, index_path


def _load_file(path: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(path))
    except SafetensorError as err:
        raise ModelFileError(f"{path} is not a valid safetensors file: {err}") from err
