"""The official bilm-tf / AllenNLP format: `options.json` + `weights.hdf5` <-> BiLM.

Matrices are stored TensorFlow-style (`y = x @ W`, W of shape (in, out)); the file's character
embedding has no row for the padding id 0.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import IO, Any

import h5py
import numpy as np
import torch

from elmo.config import BiLMConfig
from elmo.errors import ElmoError, ModelFileError, ModelNotFoundError
from elmo.io.atomic import atomic_output, atomic_write_text
from elmo.loading.formats.native import CARD_NAME, CONFIG_NAME, RUN_NAME
from elmo.loading.formats.untrusted import read_hdf5_dataset, read_json
from elmo.modules.bilm import BiLM
from elmo.modules.quantize import check_savable
from elmo.runs import MARKER_NAME

OPTIONS_NAME, WEIGHTS_NAME = "options.json", "weights.hdf5"  # the names `save_bilm_tf` writes
# The .json files of a model directory that are not options: records and other formats' configs
NOT_OPTIONS = (CONFIG_NAME, CARD_NAME, RUN_NAME, MARKER_NAME)


class WeightsMismatchError(ModelFileError):
    """A weights file does not fit the architecture its options describe."""


def _tf_tensors(model: BiLM) -> Iterator[tuple[str, torch.Tensor, bool]]:
    """(hdf5 name, our tensor, stored transposed?) for every tensor of the official format.

    "Transposed" means the file holds a TF (in, out) matrix for our torch (out, in) weight.
    """
    enc = model.token_encoder
    for i, conv in enumerate(enc.convolutions):
        yield f"CNN/W_cnn_{i}", conv.weight, False
        yield f"CNN/b_cnn_{i}", conv.bias, False
    for k, highway in enumerate(enc.highways):
        yield f"CNN_high_{k}/W_transform", highway.transform.weight, True
        yield f"CNN_high_{k}/b_transform", highway.transform.bias, False
        yield f"CNN_high_{k}/W_carry", highway.gate.weight, True
        yield f"CNN_high_{k}/b_carry", highway.gate.bias, False
    yield "CNN_proj/W_proj", enc.projection.weight, True
    yield "CNN_proj/b_proj", enc.projection.bias, False


def _lstm_name(direction: int, layer: int, tensor: str) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/{tensor}"


def _read(f: h5py.File, name: str, shape: tuple[int, ...], where: str) -> np.ndarray:
    return read_hdf5_dataset(f, name, shape, where, "the options", WeightsMismatchError)


def read_options(path: str | Path) -> BiLMConfig:
    """Parse an official options.json into a BiLMConfig."""
    path = Path(path)
    try:
        return parse_options(read_json(path), str(path))
    except FileNotFoundError:
        raise ModelNotFoundError(f"options file not found: {path}") from None


def parse_options(options: Any, where: str) -> BiLMConfig:
    """The BiLMConfig of an official options.json's value (`where`: the file, for errors)."""
    try:
        return BiLMConfig.from_options(options)
    except (ValueError, TypeError) as err:
        raise ModelFileError(f"{where}: {err}") from err


def load_bilm_tf(options_path: str | Path, weights_path: str | Path) -> BiLM:
    """Build a BiLM from an official options.json and weights.hdf5 pair."""
    config = read_options(options_path)
    weights_path = Path(weights_path)
    if not weights_path.exists():
        raise ModelNotFoundError(f"weights file not found: {weights_path}")
    return read_weights(config, weights_path, str(weights_path))


def read_weights(config: BiLMConfig, weights: Path | IO[bytes], where: str) -> BiLM:
    """The BiLM of `config` with the official weights in `weights`, an HDF5 file's path or
    an open binary file (h5py reads either); `where` names it in errors."""
    model = BiLM(config)
    try:
        f = h5py.File(weights, "r")
    except OSError as err:
        raise ModelFileError(f"{where} is not a readable HDF5 weights file: {err}") from err
    with f, torch.no_grad():
        enc = model.token_encoder
        n_chars, e = enc.char_embedding.weight.shape
        enc.char_embedding.weight[1:] = torch.from_numpy(
            _read(f, "char_embed", (n_chars - 1, e), where)
        )
        enc.char_embedding.weight[0] = 0.0
        for name, tensor, transposed in _tf_tensors(model):
            if tensor.dim() == 3:  # conv: file (1, width, E, count), torch (count, E, width)
                shape = (1, tensor.shape[2], tensor.shape[1], tensor.shape[0])
                array = _read(f, name, shape, where)[0].transpose(2, 1, 0)
            elif transposed:
                array = _read(f, name, tuple(tensor.shape[::-1]), where).T
            else:
                array = _read(f, name, tuple(tensor.shape), where)
            tensor.copy_(torch.from_numpy(np.ascontiguousarray(array)))
        for k, layer in enumerate(model.lstm.layers):
            p = layer.input_weight.shape[1]
            for d in range(layer.bias.shape[0]):
                w = _read(f, _lstm_name(d, k, "W_0"), (p + layer.proj_dim, 4 * layer.cell_dim),
                          where)
                layer.input_weight[d] = torch.from_numpy(w[:p])
                layer.state_weight[d] = torch.from_numpy(w[p:])
                layer.bias[d] = torch.from_numpy(
                    _read(f, _lstm_name(d, k, "B"), (4 * layer.cell_dim,), where)
                )
                layer.proj_weight[d] = torch.from_numpy(
                    _read(f, _lstm_name(d, k, "W_P_0"), (layer.cell_dim, layer.proj_dim),
                          where)
                )
    return model.eval()


def save_bilm_tf(model: BiLM, out_dir: str | Path) -> tuple[Path, Path]:
    """Write `options.json` and `weights.hdf5` into out_dir, each atomically; return both."""
    check_savable(model.quantization)
    options = model.config.to_options()  # refuses a model the format cannot hold, first
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    options_path, weights_path = out_dir / OPTIONS_NAME, out_dir / WEIGHTS_NAME

    def array(t: torch.Tensor) -> np.ndarray:
        return t.detach().to("cpu", torch.float32).numpy()

    with atomic_output(weights_path) as tmp, h5py.File(tmp, "w") as f:
        f.create_dataset("char_embed", data=array(model.token_encoder.char_embedding.weight[1:]))
        for name, tensor, transposed in _tf_tensors(model):
            if tensor.dim() == 3:
                data = array(tensor).transpose(2, 1, 0)[None]
            else:
                data = array(tensor).T if transposed else array(tensor)
            f.create_dataset(name, data=np.ascontiguousarray(data))
        for k, layer in enumerate(model.lstm.layers):
            for d in range(layer.bias.shape[0]):
                w = torch.cat([layer.input_weight[d], layer.state_weight[d]], dim=0)
                f.create_dataset(_lstm_name(d, k, "W_0"), data=array(w))
                f.create_dataset(_lstm_name(d, k, "B"), data=array(layer.bias[d]))
                f.create_dataset(_lstm_name(d, k, "W_P_0"), data=array(layer.proj_weight[d]))
    atomic_write_text(options_path, json.dumps(options, indent=2) + "\n")
    return options_path, weights_path



def holds_official_pair(names: Collection[str]) -> bool:
    """Whether a directory holding the files `names` holds an options .json and a weights
    .hdf5 (which pair, when there are several, `official_pair` says)."""
    options, weights = _pair_candidates(names)
    return bool(options and weights)


def official_pair(names: Collection[str], where: str) -> tuple[str, str]:
    """The names of the one options .json and the one weights .hdf5 among `names`; where
    several are, those named "options" and "weights" (AllenNLP's test fixtures hold the
    expected embeddings as .hdf5 files beside `lm_weights.hdf5`). An error names `where`."""
    options, weights = _pair_candidates(names)
    if len(options) == 1 and len(weights) == 1:
        return options[0], weights[0]
    if options and weights:  # several of either: which pair is meant is not known
        raise ElmoError(f"{where} holds several options or weights files (options {options}, "
                        f"weights {weights}; found {found_files(names)}): put the "
                        "options/weights pair you mean in a directory of its own")
    raise ElmoError(f"{where} holds no official pair (one options .json and one weights "
                    f".hdf5); found {found_files(names) or 'no files'}")


def _pair_candidates(names: Collection[str]) -> tuple[list[str], list[str]]:
    """The options .json and weights .hdf5 files among `names`, each narrowed by `_named`."""
    options = sorted(n for n in names if n.endswith(".json") and n not in NOT_OPTIONS)
    weights = sorted(n for n in names if n.endswith((".hdf5", ".h5")))
    return _named(options, "options"), _named(weights, "weights")


def _named(candidates: list[str], word: str) -> list[str]:
    """`candidates`, or those whose name holds `word` when there are several."""
    if len(candidates) < 2:
        return candidates
    return [n for n in candidates if word in n.lower()] or candidates


def found_files(names: Collection[str]) -> str:
    """The file `names`, sorted, as an error lists them (the first 30, then how many more)."""
    shown = sorted(names)
    return ", ".join(shown[:30]) + (f" and {len(shown) - 30} more" if len(shown) > 30 else "")
