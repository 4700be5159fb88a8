"""ELMoForManyLangs (EfML) model directories -> BiLM (read only).

A directory holds `config.json` (the training options; its `config_path` names the network
config), `char.dic` and `word.dic` (`token<TAB>id` lines) and two `torch.save`d state dicts,
`token_embedder.pkl` and `encoder.pkl`. The pickles are read with `weights_only=True`: a file
that needs anything but tensors and containers is refused, never run.

The network maps onto our BiLM with a vocabulary token encoder (see `VocabIndexer`); the
differences from bilm-tf are folded into the weights: EfML's highway gate carries the input
where ours carries the transform (so our gate is its negation), its LSTM gates come in the
order i, f, g, o with no constant forget bias (ours: i, g, f, o plus 1).
"""

from __future__ import annotations

import os
import pickle
import re
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

import torch

from elmo.config import BiLMConfig, ConfigFieldError
from elmo.errors import ModelFileError
from elmo.loading.formats.untrusted import (
    MAX_VOCABULARY_BYTES,
    check_torch_file,
    checked_tensor,
    named_file,
    own_file,
    read_json,
    read_text,
    weights_bytes,
)
from elmo.modules.bilm import BiLM

CONFIG_NAME = "config.json"
CHAR_DIC, WORD_DIC = "char.dic", "word.dic"
TOKEN_EMBEDDER, ENCODER = "token_embedder.pkl", "encoder.pkl"
REQUIRED_FILES = (CONFIG_NAME, CHAR_DIC, TOKEN_EMBEDDER, ENCODER)

# The network configs bundled with the `elmoformanylangs` package, used by the released
# models whose config_path names a file they do not ship. Both names hold the same values.
_RELEASED_NETWORK: dict[str, Any] = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3,
                "dim": 4096, "n_layers": 2},
    "token_embedder": {"name": "cnn", "activation": "relu",
                       "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512],
                                   [7, 1024]],
                       "n_highway": 2, "word_dim": 100, "char_dim": 50,
                       "max_characters_per_token": 50},
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
BUNDLED_CONFIGS: dict[str, dict[str, Any]] = {
    "cnn_50_100_512_4096_sample.json": _RELEASED_NETWORK,
    "cnn_0_100_512_4096_sample.json": _RELEASED_NETWORK,
}


class EfmlFormatError(ModelFileError):
    """An EfML directory with a missing, unreadable or inconsistent file."""


def holds_efml(names: Collection[str]) -> bool:
    """Whether a directory holding the files `names` is an EfML model (one of its pickles)."""
    return TOKEN_EMBEDDER in names or ENCODER in names


def efml_files(names: Collection[str]) -> list[str]:
    """The files an EfML model reads among a directory's `names` (relative paths), sorted:
    its configs (the network's is whichever .json `config.json` names), dictionaries and
    pickles."""
    return sorted(n for n in names if "/" not in n and n.endswith((".json", ".dic", ".pkl")))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path)
    except FileNotFoundError:
        raise EfmlFormatError(f"{path} is missing (an ELMoForManyLangs model directory "
                              f"needs {', '.join(REQUIRED_FILES)})") from None
    if not isinstance(data, dict):
        raise EfmlFormatError(f"{path} should hold a JSON object")
    return data


def read_network_config(model_dir: str | Path) -> tuple[dict[str, Any], str]:
    """The network config that `config.json`'s `config_path` names, and where it was found.

    Looked for as the package does: the path as given (relative to the model directory),
    then its file name in the model directory (released models record an absolute path of
    their authors' machine), then the package's bundled configs of that name. Nothing outside
    the model directory is read (`untrusted.named_file`).
    """
    model_dir = Path(model_dir)
    options = _read_json(own_file(model_dir, CONFIG_NAME))
    given = options.get("config_path")
    if not isinstance(given, str) or not given:
        raise EfmlFormatError(f"{model_dir / CONFIG_NAME} has no config_path naming the "
                              "network config")
    name = os.path.basename(given.replace("\\", "/"))
    where = f"{model_dir / CONFIG_NAME}: its config_path"
    named = (named_file(model_dir, given, where), named_file(model_dir, name, where))
    candidates = list(dict.fromkeys(p for p in named if p is not None))
    for candidate in candidates:
        if candidate.is_file():
            return _read_json(candidate), str(candidate)
    if name in BUNDLED_CONFIGS:
        return BUNDLED_CONFIGS[name], f"bundled {name}"
    raise EfmlFormatError(
        f"{model_dir / CONFIG_NAME}: its config_path {given!r} names no file: not "
        f"{', not '.join(map(str, candidates))}, and not a config the package bundles "
        f"({', '.join(BUNDLED_CONFIGS)}); put the network config in {model_dir}"
    )


def network_to_config(network: dict[str, Any], chars: list[str], words: list[str],
                      where: str) -> BiLMConfig:
    """An EfML network config (+ its vocabularies) -> our BiLMConfig; an error names the
    network config's key."""
    try:
        embedder, encoder = network["token_embedder"], network["encoder"]
        if str(embedder["name"]).lower() != "cnn" or str(encoder["name"]).lower() != "elmo":
            raise EfmlFormatError(
                f"{where}: token_embedder {embedder['name']!r} with encoder "
                f"{encoder['name']!r}; only the 'cnn' token embedder with the 'elmo' encoder "
                "(every released model) is supported")
        char_dim, word_dim = embedder["char_dim"], embedder["word_dim"]
        if isinstance(char_dim, int) and char_dim <= 0:
            raise EfmlFormatError(f"{where}: char_dim {char_dim}: models without a character "
                                  "CNN are not supported")
        with_words = isinstance(word_dim, int) and word_dim > 0
        return BiLMConfig(
            token_encoder="vocab",
            char_embed_dim=char_dim,
            filters=embedder["filters"],
            n_highway=embedder["n_highway"],
            activation=embedder.get("activation", "relu"),
            max_characters_per_token=embedder["max_characters_per_token"],
            lstm_dim=encoder["dim"],
            projection_dim=encoder["projection_dim"],
            n_layers=encoder["n_layers"],
            cell_clip=encoder.get("cell_clip") or None,  # 0: no clipping, as the package
            proj_clip=encoder.get("proj_clip") or None,
            use_skip_connections=True,
            char_vocab=tuple(chars),
            word_vocab=tuple(words) if with_words else (),
            word_embed_dim=word_dim if with_words or not isinstance(word_dim, int) else 0,
            dropout=network.get("dropout", 0.1),
        )
    except (KeyError, TypeError, AttributeError) as err:
        raise EfmlFormatError(f"{where} lacks a network field: {err!r}") from err
    except ConfigFieldError as err:
        field = NETWORK_KEYS.get(err.field, err.field)
        raise EfmlFormatError(f"{where}: {field} {err.problem}") from None
    except ValueError as err:
        if isinstance(err, EfmlFormatError):
            raise
        raise EfmlFormatError(f"{where}: {err}") from err


# The network config's key of each BiLMConfig field that `network_to_config` sets from it.
NETWORK_KEYS = {
    "char_embed_dim": "token_embedder.char_dim", "filters": "token_embedder.filters",
    "filters' widths": "token_embedder.filters' widths",
    "filters' counts": "token_embedder.filters' counts",
    "n_highway": "token_embedder.n_highway", "activation": "token_embedder.activation",
    "max_characters_per_token": "token_embedder.max_characters_per_token",
    "word_embed_dim": "token_embedder.word_dim", "lstm_dim": "encoder.dim",
    "projection_dim": "encoder.projection_dim", "n_layers": "encoder.n_layers",
    "cell_clip": "encoder.cell_clip", "proj_clip": "encoder.proj_clip",
}


def released_config(chars: list[str], words: list[str]) -> BiLMConfig:
    """The released models' architecture (cnn_50_100_512_4096) over these vocabularies."""
    return network_to_config(_RELEASED_NETWORK, chars, words, "the released config")


def read_dic(path: Path) -> list[str]:
    """A `token<TAB>id` file -> tokens by id. A line left with one field after stripping had
    white space for its token: it is the full-width space U+3000, as the package reads it."""
    try:
        text = read_text(path, MAX_VOCABULARY_BYTES, "a vocabulary", EfmlFormatError)
    except FileNotFoundError:
        raise EfmlFormatError(f"{path} is missing (the model's config needs it)") from None
    by_id: dict[int, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.strip().split("\t")
        if fields == [""]:
            continue
        if len(fields) == 1:
            fields.insert(0, "\u3000")
        try:
            token, index = fields
            by_id[int(index)] = token
        except ValueError:
            raise EfmlFormatError(f"{path}, line {number}: expected 'token<TAB>id' (an "
                                  "ELMoForManyLangs dictionary)") from None
    if sorted(by_id) != list(range(len(by_id))):
        raise EfmlFormatError(f"{path}: the ids should be 0 .. {len(by_id) - 1}, each once")
    return [by_id[i] for i in range(len(by_id))]


def load_state(path: Path, max_bytes: int) -> dict[str, torch.Tensor]:
    """A `torch.save`d state dict of at most `max_bytes`, read with weights_only=True:
    tensors only, no code. A file that is no torch file at all (empty, text, an HTML page, a
    Git LFS pointer) is named as such before torch reads it, one whose records torch would
    inflate whole is refused (`untrusted.check_torch_file`)."""
    if not path.is_file():
        raise EfmlFormatError(f"{path} is missing (an ELMoForManyLangs model directory needs "
                              f"{', '.join(REQUIRED_FILES)})")
    if path.stat().st_size > max_bytes:
        raise EfmlFormatError(f"{path} is {path.stat().st_size:,} bytes, more than the "
                              f"{max_bytes:,} the weights of its network config take")
    with path.open("rb") as f:
        head = f.read(len(_LEGACY_TORCH_MAGIC))
    if not head or (not head.startswith((_ZIP_MAGIC, _LEGACY_TORCH_MAGIC))
                    and _LEGACY_TORCH_MAGIC[: len(head)] != head):  # (or cut inside its magic)
        raise EfmlFormatError(f"{path} is {_what_it_is(path, head)}, not a torch file: "
                              "download or copy the model again")
    check_torch_file(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's warnings repeat what the error says
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        code = re.search(r"GLOBAL ([\w.]+)", str(err))
        if code and not code.group(1).startswith("torch."):
            raise EfmlFormatError(
                f"{path}: refused: it is not a plain state dict of tensors; loading it would "
                f"run code from the file ({code.group(1)}). Get the model from its "
                "original source") from None
        reason = f"it names {code.group(1)}" if code else "its pickle data cannot be read"
        raise EfmlFormatError(_damaged(path, reason)) from None
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, IndexError) as err:
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else \
            f"{type(err).__name__}: it ends too early"
        raise EfmlFormatError(_damaged(path, reason)) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                              for v in state.values()):
        raise EfmlFormatError(f"{path} should hold a state dict (names -> tensors)")
    return state


_ZIP_MAGIC = b"PK\x03\x04"  # torch.save since PyTorch 1.6
# torch.save before 1.6 (the 2018 releases): pickle protocol 2, then torch's magic number.
_LEGACY_TORCH_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"


def _what_it_is(path: Path, head: bytes) -> str:
    """What a file that does not start as a torch file is, for an error message."""
    with path.open("rb") as f:
        start = f.read(512).lstrip()
    if not start:
        return "empty"
    if start.startswith(b"version https://git-lfs"):
        return "a Git LFS pointer (the model was cloned without `git lfs pull`)"
    if start[:1] == b"<":
        return "an HTML or XML page (a failed download?)"
    if head.startswith(b"\x80"):
        return "a Python pickle"
    return "something else (its first bytes are " + repr(head[:8]) + ")"


def _damaged(path: Path, reason: str) -> str:
    return (f"{path} is a truncated or damaged torch file ({reason}): download or copy the "
            "model again")


def _take(state: dict[str, torch.Tensor], name: str, shape: tuple[int, ...], path: Path,
          where: str) -> torch.Tensor:
    if name not in state:
        raise EfmlFormatError(f"{path} lacks tensor {name!r} (expected shape {shape} from "
                              f"{where})")
    return checked_tensor(state[name], name, shape, str(path), where, EfmlFormatError).float()


def _efml_gates(tensor: torch.Tensor) -> torch.Tensor:
    """Gate blocks along dim 0 from EfML's order (i, f, g, o) to ours (i, g, f, o)."""
    i, f, g, o = tensor.chunk(4, dim=0)
    return torch.cat([i, g, f, o])


@torch.no_grad()
def load_efml(model_dir: str | Path) -> BiLM:
    """Build a BiLM (eval mode) from an ELMoForManyLangs model directory."""
    model_dir = Path(model_dir)
    network, where = read_network_config(model_dir)
    chars = read_dic(own_file(model_dir, CHAR_DIC))
    embedder = network.get("token_embedder")
    word_dim = embedder.get("word_dim", 0) if isinstance(embedder, dict) else 0
    with_words = isinstance(word_dim, int) and word_dim > 0
    words = read_dic(own_file(model_dir, WORD_DIC)) if with_words else []
    config = network_to_config(network, chars, words, where)
    max_bytes = weights_bytes(config.n_parameters)
    model = BiLM(config)
    enc, c = model.token_encoder, config
    embedder_path, encoder_path = (own_file(model_dir, n) for n in (TOKEN_EMBEDDER, ENCODER))
    state = load_state(embedder_path, max_bytes)

    def take(name: str, shape: tuple[int, ...]) -> torch.Tensor:
        return _take(state, name, shape, embedder_path, where)

    chars_weight = take("char_emb_layer.embedding.weight", (len(chars), c.char_embed_dim))
    enc.char_embedding.weight[0] = 0.0
    enc.char_embedding.weight[1:] = chars_weight
    if enc.word_embedding is not None:
        enc.word_embedding.weight[0] = 0.0
        enc.word_embedding.weight[1:] = take("word_emb_layer.embedding.weight",
                                             (len(words), c.word_embed_dim))
    for k, (conv, (width, count)) in enumerate(zip(enc.convolutions, c.filters, strict=True)):
        conv.weight.copy_(take(f"convolutions.{k}.weight", (count, c.char_embed_dim, width)))
        conv.bias.copy_(take(f"convolutions.{k}.bias", (count,)))
    f = c.n_filters
    for k, highway in enumerate(enc.highways):
        weight = take(f"highways._layers.{k}.weight", (2 * f, f))
        bias = take(f"highways._layers.{k}.bias", (2 * f,))
        highway.transform.weight.copy_(weight[:f])
        highway.transform.bias.copy_(bias[:f])
        # EfML: y = g * x + (1 - g) * relu(.); ours: y = t * relu(.) + (1 - t) * x: t = 1 - g.
        highway.gate.weight.copy_(-weight[f:])
        highway.gate.bias.copy_(-bias[f:])
    width = c.word_embed_dim + f
    enc.projection.weight.copy_(take("projection.weight", (c.projection_dim, width)))
    enc.projection.bias.copy_(take("projection.bias", (c.projection_dim,)))

    state = load_state(encoder_path, max_bytes)
    p, cell = c.projection_dim, c.lstm_dim
    for k, layer in enumerate(model.lstm.layers):
        for d, direction in enumerate(("forward", "backward")):
            prefix = f"{direction}_layer_{k}"

            def take_lstm(name: str, shape: tuple[int, ...], prefix: str = prefix) -> torch.Tensor:
                return _take(state, f"{prefix}.{name}", shape, encoder_path, where)

            layer.input_weight[d] = _efml_gates(take_lstm("input_linearity.weight",
                                                          (4 * cell, p))).T
            layer.state_weight[d] = _efml_gates(take_lstm("state_linearity.weight",
                                                          (4 * cell, p))).T
            bias = _efml_gates(take_lstm("state_linearity.bias", (4 * cell,)))
            bias[2 * cell : 3 * cell] -= 1.0  # our cell adds a constant forget bias of 1
            layer.bias[d] = bias
            layer.proj_weight[d] = take_lstm("state_projection.weight", (p, cell)).T
    return model.eval()
