"""BiLMConfig: every hyper-parameter of a biLM, and the official `options.json` mapping."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The char-CNN filters of every released English model: (width, count), 2048 in all.
RELEASED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
# Entries a vocabulary token encoder needs (ELMoForManyLangs' names).
VOCAB_CHAR_SPECIALS = ("<bow>", "<eow>", "<bos>", "<eos>", "<oov>", "<pad>")
VOCAB_WORD_SPECIALS = ("<oov>", "<pad>")


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
    token_encoder: str = "bytes"  # "bytes" or "vocab"
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
        self.filters = tuple((int(w), int(n)) for w, n in self.filters)
        self.char_vocab, self.word_vocab = tuple(self.char_vocab), tuple(self.word_vocab)
        self._check_token_encoder()
        if self.activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got {self.activation!r}")
        if self.n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {self.n_layers}")
        if not self.filters:
            raise ValueError("filters must name at least one (width, count) pair")
        too_wide = [w for w, _ in self.filters if w > self.max_characters_per_token]
        if too_wide:
            raise ValueError(
                f"filter widths {too_wide} exceed max_characters_per_token "
                f"({self.max_characters_per_token})"
            )

    def _check_token_encoder(self) -> None:
        if self.token_encoder == "bytes":
            if self.char_vocab or self.word_vocab or self.word_embed_dim:
                raise ValueError("char_vocab, word_vocab and word_embed_dim belong to "
                                 'token_encoder="vocab"')
            return
        if self.token_encoder != "vocab":
            raise ValueError("token_encoder must be 'bytes' or 'vocab', got "
                             f"{self.token_encoder!r}")
        missing = [c for c in VOCAB_CHAR_SPECIALS if c not in self.char_vocab]
        if missing:
            raise ValueError(f"char_vocab lacks the special entries {missing}")
        if self.word_embed_dim < 0:
            raise ValueError(f"word_embed_dim must be >= 0, got {self.word_embed_dim}")
        if self.word_embed_dim:
            missing = [w for w in VOCAB_WORD_SPECIALS if w not in self.word_vocab]
            if missing:
                raise ValueError(f"word_vocab lacks the special entries {missing}")
        elif self.word_vocab:
            raise ValueError("word_vocab needs word_embed_dim > 0")
        if self.max_characters_per_token < 3:
            raise ValueError("max_characters_per_token must leave room for <bow>, <eow> and "
                             f"a character, got {self.max_characters_per_token}")

    @property
    def n_filters(self) -> int:
        """Width of the concatenated char-CNN output."""
        return sum(n for _, n in self.filters)

    @property
    def output_dim(self) -> int:
        """Width of every returned layer: forward and backward concatenated (2P)."""
        return 2 * self.projection_dim

    # ---- options.json ----------------------------------------------------------------

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> BiLMConfig:
        """Build a config from the dict held in an official `options.json`."""
        try:
            lstm, cnn = options["lstm"], options["char_cnn"]
            kwargs = dict(
                char_embed_dim=cnn["embedding"]["dim"],
                filters=tuple(tuple(f) for f in cnn["filters"]),
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
        except (KeyError, TypeError) as err:
            raise ValueError(f"options are missing a required field: {err}") from err
        if cnn.get("n_characters", 262) not in (261, 262):
            raise ValueError(f"n_characters must be 261 or 262, got {cnn['n_characters']}")
        if not options.get("bidirectional", True):
            raise ValueError("only bidirectional models are supported (bidirectional=false)")
        extra = {k: v for k, v in options.items() if k not in ("lstm", "char_cnn")}
        vocab_size = extra.pop("n_tokens_vocab", None)
        dropout = extra.pop("dropout", 0.0)  # none unless asked for, as AllenNLP
        return cls(**kwargs, vocab_size=vocab_size, dropout=dropout, extra_options=extra)

    def to_options(self) -> dict[str, Any]:
        """The `options.json` dict for this config (prediction form: n_characters 262)."""
        if self.token_encoder != "bytes":
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
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> BiLMConfig:
        """A named architecture: `tiny`, `compact`, `small`, `medium` or `original`."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        return dataclasses.replace(PRESETS[name], **overrides)


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
