"""AllenNLP model archives (a `model.tar.gz` unpacked) and `Elmo` weights -> BiLM (read only).

An archive directory holds `config.json`, the experiment's configuration, and `weights.th`,
the torch state dict of the whole model (read with `weights_only=True`). Its ELMo token
embedder holds an `Elmo` module, whose biLM tensors end in `_elmo_lstm._token_embedder.*` and
`_elmo_lstm._elmo_lstm.*` (AllenNLP's layout, see `formats/allennlp.py`). A `weights.th`
without `config.json` (an `Elmo`, or its `_ElmoBiLm`, saved alone) is read the same way, its
architecture from an `options.json` beside it, else as a released model's (below, with a
warning).

The architecture comes from the options file that the configuration's `options_file` names,
found as AllenNLP finds it: archived with the model (AllenNLP <= 0.9: `fta/<key>`, listed in
`files_to_archive.json`), at the path given (relative to the archive) or by its file name in
the archive. A released model's options file (AllenNLP >= 1.0 names its URL) needs no copy:
the sizes are read off the weights, the rest is what every released model uses (ReLU,
clipping at 3, skip connections).
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import torch

from elmo.config import BiLMConfig, ConfigFieldError
from elmo.errors import ModelFileError
from elmo.loading.formats.allennlp import (
    DIRECTIONS,
    LSTM,
    TOKEN_EMBEDDER,
    from_allennlp,
    to_allennlp,
)
from elmo.loading.formats.bilm_tf import read_options
from elmo.loading.formats.untrusted import (
    check_torch_file,
    checked_tensor,
    named_file,
    own_file,
    read_json,
)
from elmo.loading.releases import RELEASED_MODELS
from elmo.modules.bilm import BiLM

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "weights.th"
OPTIONS_NAME = "options.json"  # beside a weights.th without config.json
FILES_TO_ARCHIVE = "files_to_archive.json"
ARCHIVED_DIR = "fta"
BILM = "_elmo_lstm."  # the `Elmo` module's biLM
CHAR_EMBEDDING = TOKEN_EMBEDDER + "_char_embedding_weights"  # marks an Elmo: (262, E)
RELEASED_OPTIONS = {m.options_url.rsplit("/", 1)[-1] for m in RELEASED_MODELS.values()}


class ArchiveFormatError(ModelFileError):
    """An AllenNLP archive without an ELMo biLM, or with one that cannot be read."""


def holds_archive(names: Collection[str]) -> bool:
    """Whether a directory holding the files `names` is an archive, or an `Elmo`'s weights
    alone (a `weights.th` not beside an official options/weights pair)."""
    return WEIGHTS_NAME in names and (
        CONFIG_NAME in names or not any(n.endswith((".hdf5", ".h5")) for n in names))


def archive_files(names: Collection[str]) -> list[str]:
    """The files an archive reads among a directory's `names` (relative paths): the weights,
    the configuration and options files (any .json, or archived under `fta/`)."""
    top = sorted(n for n in names if "/" not in n)
    return [n for n in top if n.endswith(".json") or n == WEIGHTS_NAME] \
        + sorted(n for n in names if n.startswith(ARCHIVED_DIR + "/"))


def load_allennlp_archive(directory: str | Path) -> BiLM:
    """The biLM of the ELMo token embedder in an unpacked AllenNLP archive (or of the `Elmo`
    whose `weights.th` the directory holds alone), in eval mode."""
    directory = Path(directory)
    weights = own_file(directory, WEIGHTS_NAME)
    state = bilm_state(_read_weights(weights), weights)
    config = _options(directory, state) if own_file(directory, CONFIG_NAME).is_file() else \
        _options_beside(directory, state)
    try:
        model = BiLM(config)
        expected = to_allennlp(model.state_dict())  # the layout's names and shapes
    except ValueError as err:
        raise ArchiveFormatError(f"{weights}: options {config} make no biLM: {err}") from None
    for key, tensor in state.items():
        if key not in expected:
            raise ArchiveFormatError(f"{weights}: unknown AllenNLP biLM tensor {key!r}")
        checked_tensor(tensor, key, tuple(expected[key].shape), str(weights),
                       "the architecture", ArchiveFormatError)
    try:
        model.load_state_dict(from_allennlp(state))
    except (ValueError, RuntimeError) as err:
        raise ArchiveFormatError(f"{directory / WEIGHTS_NAME}: its ELMo biLM does not fit the "
                                 f"options {config}: {err}") from None
    return model.eval()


def _read_weights(path: Path) -> dict[str, Any]:
    check_torch_file(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as err:
        raise ArchiveFormatError(f"{path} is no torch state dict of tensors ({err}); an "
                                 "AllenNLP archive holds the model's state dict there") from None
    if not isinstance(state, dict):
        raise ArchiveFormatError(f"{path} holds a {type(state).__name__}, not a state dict")
    return state


def bilm_state(state: dict[str, Any], where: Path) -> dict[str, torch.Tensor]:
    """The tensors of the one ELMo biLM (AllenNLP's `_ElmoBiLm`, alone or inside an `Elmo`
    or a model) in a state dict, with biLM-relative keys in AllenNLP's layout
    (`_token_embedder.*`, `_elmo_lstm.*`)."""
    starts = [key.removesuffix(CHAR_EMBEDDING) for key in state if key.endswith(CHAR_EMBEDDING)]
    if len(starts) != 1:
        found = f"{len(starts)}: {', '.join(p or '(top level)' for p in starts)}" \
            if starts else "none"
        raise ArchiveFormatError(f"{where} should hold one ELMo biLM (a key ending in "
                                 f"{CHAR_EMBEDDING!r}); found {found}")
    start = starts[0]
    bilm = {key.removeprefix(start): tensor for key, tensor in state.items()
            if key.startswith(start + TOKEN_EMBEDDER) or key.startswith(start + LSTM)}
    odd = next((key for key, value in bilm.items() if not isinstance(value, torch.Tensor)), None)
    if odd is not None:
        raise ArchiveFormatError(f"{where}: {odd!r} holds a value of type "
                                 f"{type(bilm[odd]).__name__}, not a tensor")
    return bilm


def _options(directory: Path, state: dict[str, torch.Tensor]) -> BiLMConfig:
    """The biLM's architecture, from the options file the archive's configuration names."""
    config_path = directory / CONFIG_NAME
    named = list(_options_files(_read_json(config_path)))
    if not named:
        raise ArchiveFormatError(f"{config_path} names no options_file (an ELMo token "
                                 "embedder's); is this an AllenNLP model with ELMo?")
    archived = _read_json(own_file(directory, FILES_TO_ARCHIVE)) \
        if own_file(directory, FILES_TO_ARCHIVE).is_file() else {}
    for key, value in named:
        name = value.replace("\\", "/").rsplit("/", 1)[-1]
        where = f"{config_path}: {key}"
        candidates = [named_file(directory, f"{ARCHIVED_DIR}/{key}", where)] \
            if key in archived else []
        if "://" not in value:
            candidates.append(named_file(directory, value, where))
        candidates.append(named_file(directory, name, where))
        for candidate in candidates:
            if candidate is not None and candidate.is_file():
                return _read_options(candidate)
        if name in RELEASED_OPTIONS:
            return released_config(state)
    key, value = named[0]
    raise ArchiveFormatError(
        f"{config_path}: {key} names {value!r}, which is neither in {directory} nor a released "
        f"model's options file ({', '.join(sorted(RELEASED_OPTIONS))}); put that options "
        f"file in {directory}")


def _options_beside(directory: Path, state: dict[str, torch.Tensor]) -> BiLMConfig:
    """The architecture of a `weights.th` that came without `config.json`: the options file
    beside it, else a released model's, with a warning (clipping is not in the weights)."""
    if own_file(directory, OPTIONS_NAME).is_file():
        return _read_options(directory / OPTIONS_NAME)
    warnings.warn(f"{directory / WEIGHTS_NAME} came without options: sizes read from its "
                  "tensors, ReLU, clipping at 3 and skip connections assumed, as in every "
                  f"released model; if it was trained otherwise, put its {OPTIONS_NAME} beside "
                  "it", stacklevel=2)
    return released_config(state)


def _read_options(path: Path) -> BiLMConfig:
    try:
        return read_options(path)
    except (OSError, ValueError) as err:
        raise ArchiveFormatError(str(err)) from None


def _options_files(config: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, value) of every `options_file` in a nested configuration."""
    if isinstance(config, dict):
        for name, value in config.items():
            path = f"{key}.{name}" if key else str(name)
            if name == "options_file" and isinstance(value, str):
                yield path, value
            else:
                yield from _options_files(value, path)
    elif isinstance(config, list):
        for index, value in enumerate(config):
            yield from _options_files(value, f"{key}.{index}")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path)
    except OSError as err:
        raise ArchiveFormatError(f"{path} is not a readable JSON file: {err}") from None
    except ValueError as err:
        raise ArchiveFormatError(str(err)) from None
    if not isinstance(data, dict):
        raise ArchiveFormatError(f"{path} should hold a JSON object")
    return data


def released_config(state: dict[str, torch.Tensor]) -> BiLMConfig:
    """A released model's architecture: sizes from the biLM's AllenNLP tensors (`state`),
    ReLU, clipping at 3 and skip connections as in every released options file."""
    def count(prefix: str) -> int:
        return sum(1 for key in state if key.startswith(prefix) and key.endswith(".weight"))

    try:
        convolutions = [state[f"{TOKEN_EMBEDDER}char_conv_{i}.weight"]  # (n, E, width)
                        for i in range(count(TOKEN_EMBEDDER + "char_conv_"))]
        first = state[f"{LSTM}{DIRECTIONS[0]}_layer_0.input_linearity.weight"]  # (4C, P)
        return BiLMConfig(
            char_embed_dim=state[CHAR_EMBEDDING].shape[1],
            filters=tuple((w.shape[2], w.shape[0]) for w in convolutions),
            n_highway=count(TOKEN_EMBEDDER + "_highways._layers."),
            lstm_dim=first.shape[0] // 4,
            projection_dim=first.shape[1],
            n_layers=len({key.split(".")[1] for key in state
                          if key.startswith(f"{LSTM}{DIRECTIONS[0]}_layer_")}),
            cell_clip=3.0, proj_clip=3.0, use_skip_connections=True, activation="relu",
            dropout=0.0)
    except ConfigFieldError as err:
        raise ArchiveFormatError(f"the sizes of the ELMo biLM's tensors make no biLM: {err}") \
            from None
    except (KeyError, IndexError, ValueError) as err:
        raise ArchiveFormatError(f"the ELMo biLM of the weights lacks the tensor {err} of the "
                                 "released layout") from None
