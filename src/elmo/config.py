"""BiLMConfig: every hyper-parameter of a biLM, and the official `options.json` mapping."""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elmo.token_encoders import TokenEncoder, token_encoder

# The char-CNN filters of every released English model: (width, count), 2048 in all.
RELEASED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))

# Bounds on what a config may ask for, checked before any tensor is allocated (a config comes
# with a model file from anyone). A biLM has at most 1e9 parameters: 4 GB of float32 weights,
# ten times `original`'s 93.6 M, the largest released ELMo. A stack (LSTM layers, highway
# layers, char-CNN filter widths) has at most 64 entries, each a module of its own (released
# models: 2, 2 and 7). A token is read as at most 1024 characters (every released model: 50);
# the ids and the char-CNN's activations of each token grow with it.
MAX_PARAMETERS = 1_000_000_000
MAX_STACK = 64
MAX_CHARACTERS_PER_TOKEN = 1024
MAX_VOCAB_SIZE = 2**31 - 1  # token ids are int32 in bilm-tf's softmax
# A number the model computes with is a float32: its largest finite value.
FLOAT32_MAX = 3.4028234663852886e38
# The most an LSTM's cell or output may be clipped at: a clip keeps values in [-clip, clip]
# (every released model: 3); beyond 1e4 a clip clips nothing a float32 LSTM computes sanely.
MAX_CLIP = 1e4


class ConfigFieldError(ValueError):
    """A config field of the wrong type or out of its range; `field` names it (so that a
    reader of another format can say which of its own keys it came from)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


def shown(value: Any, width: int = 60) -> str:
    """`value` as an error quotes it: its repr, cut to `width` characters (a config's value may
    be a string of any length)."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _integer(name: str, value: Any, low: int, high: int | None = None) -> int:
    """`value` as an int, when it is an integer (not a bool, float or string; numpy's
    integers are) in [low, high]; else the error."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigFieldError(name, f"must be an integer, got {shown(value)} "
                                     f"({type(value).__name__})")
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"between {low} and {high}"
        raise ConfigFieldError(name, f"must be {bounds}, got {value}")
    return int(value)


def _number(name: str, value: Any, low: float, below: float | None = None,
            high: float | None = None) -> float:
    """`value`, a real number (not a bool) finite in float32, >= low (and < below, and
    <= high)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or abs(value) > FLOAT32_MAX:
        raise ConfigFieldError(name, f"must be a finite number (in float32, at most "
                                     f"{FLOAT32_MAX:.4g} in size), got {shown(value)}")
    if value < low or (below is not None and value >= below) \
            or (high is not None and value > high):
        bounds = f"in [{low}, {below})" if below is not None else \
            f"between {low} and {high:g}" if high is not None else f">= {low}"
        raise ConfigFieldError(name, f"must be {bounds}, got {value}")
    return value


def parse_json(data: bytes | str, where: str) -> Any:
    """The JSON value of a config's text; ValueError naming `where` when it is not UTF-8
    JSON, or nests arrays or objects deeper than Python's parser can follow."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"{where} nests JSON arrays or objects too deeply to read (a config "
                         "nests a few levels)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{where} is not valid JSON: {err}") from None


def check_fields(cls: type, data: dict[str, Any], what: str) -> None:
    """Raise ValueError naming the keys of `data` that are not fields of dataclass `cls`."""
    unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise ValueError(f"unknown {what}: {unknown}")


@dataclass
class BiLMConfig:
    """Architecture of a biLM: character CNN token encoder + L projected LSTM layers per direction.

    Field names follow the paper; `from_options` / `to_options` map them to bilm-tf's
    `options.json`. The token encoder reads either UTF-8 bytes (`token_encoder="bytes"`, as
    bilm-tf: 262 fixed ids) or the characters of its own vocabulary (`"vocab"`, as
    ELMoForManyLangs: `char_vocab` by id, learned embeddings, plus an optional word embedding
    of `word_embed_dim` over `word_vocab`, concatenated before the projection).
    """

    # Character CNN token encoder.
    token_encoder: str = "bytes"  # a key of elmo.token_encoders.TOKEN_ENCODERS
    char_embed_dim: int = 16
    filters: tuple[tuple[int, int], ...] = RELEASED_FILTERS
    n_highway: int = 1
    activation: str = "relu"  # "relu" or "tanh"
    max_characters_per_token: int = 50
    # LSTM stacks.
    lstm_dim: int = 1024  # memory cell size
    projection_dim: int = 128  # P: token embedding, LSTM output and recurrent state size
    n_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True
    # Vocabulary token encoder only: characters and words by id (their position).
    char_vocab: tuple[str, ...] = field(default=(), repr=False)
    word_vocab: tuple[str, ...] = field(default=(), repr=False)
    word_embed_dim: int = 0
    # Pretraining (not needed for inference).
    vocab_size: int | None = None
    dropout: float = 0.1
    # Unknown options.json keys, kept so that export writes back what import read.
    extra_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Check every field's type and range, and the parameter count, before anything is
        built from the config: ConfigFieldError (a ValueError) names the field."""
        self._check_values()
        self._check_token_encoder()
        if self.n_parameters > MAX_PARAMETERS:
            raise ConfigFieldError(
                "the architecture", f"has {self.n_parameters:,} parameters (lstm_dim "
                f"{self.lstm_dim}, projection_dim {self.projection_dim}, n_layers "
                f"{self.n_layers}, {self.n_filters} char-CNN filters), more than the "
                f"{MAX_PARAMETERS:,} a biLM may have (ten times the largest released ELMo's)")

    def _check_values(self) -> None:
        """Each field's type and range; `filters`, `char_vocab` and `word_vocab` as tuples."""
        if not isinstance(self.filters, list | tuple) or not self.filters:
            raise ConfigFieldError("filters", "must list at least one (width, count) pair, got "
                                   f"{shown(self.filters)}")
        if len(self.filters) > MAX_STACK:
            raise ConfigFieldError("filters", f"lists {len(self.filters)} widths, more than "
                                   f"{MAX_STACK}")
        if not all(isinstance(f, list | tuple) and len(f) == 2 for f in self.filters):
            raise ConfigFieldError("filters", "must be (width, count) pairs of integers")
        chars = _integer("max_characters_per_token", self.max_characters_per_token, 3,
                         MAX_CHARACTERS_PER_TOKEN)  # room for <bow>, <eow> and a character
        self.filters = tuple((_integer("filters' widths", w, 1, chars),
                              _integer("filters' counts", n, 1)) for w, n in self.filters)
        for name, low, high in (("char_embed_dim", 1, None), ("n_highway", 0, MAX_STACK),
                                ("lstm_dim", 1, None), ("projection_dim", 1, None),
                                ("n_layers", 1, MAX_STACK), ("word_embed_dim", 0, None)):
            setattr(self, name, _integer(name, getattr(self, name), low, high))
        for name in ("token_encoder", "activation"):
            if not isinstance(getattr(self, name), str):
                raise ConfigFieldError(name, "must be a string, got "
                                             f"{shown(getattr(self, name))}")
        if self.activation not in ("relu", "tanh"):
            raise ConfigFieldError("activation", f"must be 'relu' or 'tanh', got "
                                   f"{shown(self.activation)}")
        for name in ("cell_clip", "proj_clip"):
            if getattr(self, name) is not None:
                _number(name, getattr(self, name), 0, high=MAX_CLIP)
        if not isinstance(self.use_skip_connections, bool):
            raise ConfigFieldError("use_skip_connections", "must be true or false, got "
                                   f"{shown(self.use_skip_connections)}")
        for name in ("char_vocab", "word_vocab"):
            vocab = getattr(self, name)
            if not isinstance(vocab, list | tuple) or not all(isinstance(t, str) for t in vocab):
                raise ConfigFieldError(name, "must be a list of strings")
            setattr(self, name, tuple(vocab))
        if self.vocab_size is not None:
            self.vocab_size = _integer("vocab_size", self.vocab_size, 1, MAX_VOCAB_SIZE)
        _number("dropout", self.dropout, 0, 1)
        if not isinstance(self.extra_options, dict):
            raise ConfigFieldError("extra_options", "must be a JSON object")

    def _check_token_encoder(self) -> None:
        self.encoder.check(self)

    @property
    def encoder(self) -> TokenEncoder:
        """The record of `token_encoder` (`elmo.token_encoders`)."""
        return token_encoder(self.token_encoder)

    @property
    def n_filters(self) -> int:
        """Width of the concatenated char-CNN output."""
        return sum(n for _, n in self.filters)

    @property
    def n_char_ids(self) -> int:
        """Rows of the character embedding: the token encoder's characters, plus id 0."""
        return self.encoder.n_char_ids(self)

    @property
    def n_parameters(self) -> int:
        """The parameters of a BiLM of this config (the pretraining softmax not included),
        counted without building it."""
        e, f, p, c = self.char_embed_dim, self.n_filters, self.projection_dim, self.lstm_dim
        words = (len(self.word_vocab) + 1) * self.word_embed_dim if self.word_embed_dim else 0
        encoder = (self.n_char_ids * e + words
                   + sum(n * (e * w + 1) for w, n in self.filters)
                   + self.n_highway * 2 * (f * f + f)
                   + (self.word_embed_dim + f + 1) * p)
        lstm = self.n_layers * 2 * (8 * c * p + 4 * c + c * p)  # two directions
        return encoder + lstm

    @property
    def output_dim(self) -> int:
        """Width of every returned layer: forward and backward concatenated (2P)."""
        return 2 * self.projection_dim

    # ---- options.json ----------------------------------------------------------------

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> BiLMConfig:
        """Build a config from the dict held in an official `options.json`; an error names
        the options' key (`lstm.dim`, ...)."""
        if not isinstance(options, dict):
            raise ValueError(f"options should be a JSON object, got {type(options).__name__}")
        try:
            lstm, cnn = options["lstm"], options["char_cnn"]
            kwargs = dict(
                char_embed_dim=cnn["embedding"]["dim"],
                filters=cnn["filters"],
                n_highway=cnn["n_highway"],
                activation=cnn.get("activation", "relu"),
                max_characters_per_token=cnn.get("max_characters_per_token", 50),
                lstm_dim=lstm["dim"],
                projection_dim=lstm.get("projection_dim", lstm["dim"]),
                n_layers=lstm["n_layers"],
                cell_clip=lstm.get("cell_clip"),
                proj_clip=lstm.get("proj_clip"),
                use_skip_connections=lstm.get("use_skip_connections", False),
            )
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"options are missing a required field: {err}") from err
        if cnn.get("n_characters", 262) not in (261, 262):
            raise ValueError(f"n_characters must be 261 or 262, got {cnn['n_characters']!r}")
        if not options.get("bidirectional", True):
            raise ValueError("only bidirectional models are supported (bidirectional=false)")
        extra = {k: v for k, v in options.items() if k not in ("lstm", "char_cnn")}
        vocab_size = extra.pop("n_tokens_vocab", None)
        dropout = extra.pop("dropout", 0.0)  # none unless asked for, as AllenNLP
        try:
            return cls(**kwargs, vocab_size=vocab_size, dropout=dropout, extra_options=extra)
        except ConfigFieldError as err:
            raise ConfigFieldError(OPTIONS_KEYS.get(err.field, err.field), err.problem) \
                from None

    def to_options(self) -> dict[str, Any]:
        """The `options.json` dict for this config (prediction form: n_characters 262)."""
        if not self.encoder.options_json:
            raise ValueError(
                "bilm-tf's options.json describes byte-level character CNNs only; this model "
                "reads its own character vocabulary (an ELMoForManyLangs model), which the "
                "format cannot hold: export it in our format (--format native) instead"
            )
        options: dict[str, Any] = {
            "lstm": {
                "dim": self.lstm_dim,
                "projection_dim": self.projection_dim,
                "n_layers": self.n_layers,
                "cell_clip": self.cell_clip,
                "proj_clip": self.proj_clip,
                "use_skip_connections": self.use_skip_connections,
            },
            "char_cnn": {
                "activation": self.activation,
                "embedding": {"dim": self.char_embed_dim},
                "filters": [list(f) for f in self.filters],
                "max_characters_per_token": self.max_characters_per_token,
                "n_characters": 262,
                "n_highway": self.n_highway,
            },
            "bidirectional": True,
            "dropout": self.dropout,
        }
        if self.vocab_size is not None:
            options["n_tokens_vocab"] = self.vocab_size
        options.update(self.extra_options)
        return options

    # ---- our own config.json ---------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["filters"] = [list(f) for f in self.filters]
        for name in ("char_vocab", "word_vocab"):
            data[name] = list(data[name])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BiLMConfig:
        check_fields(cls, data, "BiLMConfig fields")
        return cls(**data)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> BiLMConfig:
        data = parse_json(Path(path).read_bytes(), str(path))
        if not isinstance(data, dict):
            raise ValueError(f"{path} should hold a JSON object")
        return cls.from_dict(data)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> BiLMConfig:
        """A named architecture: `tiny`, `compact`, `small`, `medium` or `original`."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        return dataclasses.replace(PRESETS[name], **overrides)


# The options.json key of each field that `from_options` reads (its errors name them).
OPTIONS_KEYS = {
    "char_embed_dim": "char_cnn.embedding.dim", "filters": "char_cnn.filters",
    "filters' widths": "char_cnn.filters' widths", "filters' counts": "char_cnn.filters' counts",
    "n_highway": "char_cnn.n_highway", "activation": "char_cnn.activation",
    "max_characters_per_token": "char_cnn.max_characters_per_token", "lstm_dim": "lstm.dim",
    "projection_dim": "lstm.projection_dim", "n_layers": "lstm.n_layers",
    "cell_clip": "lstm.cell_clip", "proj_clip": "lstm.proj_clip",
    "use_skip_connections": "lstm.use_skip_connections", "vocab_size": "n_tokens_vocab",
}

PRESETS: dict[str, BiLMConfig] = {
    # For tests and quick runs: a few milliseconds per batch.
    "tiny": BiLMConfig(
        char_embed_dim=8,
        filters=((1, 8), (2, 8), (3, 16), (4, 16)),
        n_highway=1,
        lstm_dim=64,
        projection_dim=16,
    ),
    # The shipped default model: `small` with a narrower char-CNN (1024 filters); ~7 M
    # parameters plus the softmax, trainable on a CPU in well under an hour.
    "compact": BiLMConfig(
        filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 256), (7, 256)),
        n_highway=1,
        lstm_dim=1024,
        projection_dim=128,
    ),
    # The released English models (Peters et al. 2018 and the AllenNLP release).
    "small": BiLMConfig(lstm_dim=1024, projection_dim=128, n_highway=1),
    "medium": BiLMConfig(lstm_dim=2048, projection_dim=256, n_highway=1),
    "original": BiLMConfig(lstm_dim=4096, projection_dim=512, n_highway=2),
}
