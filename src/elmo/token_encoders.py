"""Token encoders: what the character CNN of a biLM reads of a token, one `TokenEncoder`
record each in `TOKEN_ENCODERS`: UTF-8 bytes (bilm-tf's 262 fixed ids) or the characters (and
words) of the model's own vocabulary (ELMoForManyLangs).

`BiLMConfig.token_encoder` names one; the config's checks, the character embedding's size,
the char-CNN and the indexer of `elmo.chars` (bytes or the vocabulary), bilm-tf's options.json,
`elmo info` and a model card read the record, so a new encoder is one record here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

# Entries a vocabulary token encoder needs (ELMoForManyLangs' names).
VOCAB_CHAR_SPECIALS = ("<bow>", "<eow>", "<bos>", "<eos>", "<oov>", "<pad>")
VOCAB_WORD_SPECIALS = ("<oov>", "<pad>")
# Character ids of the bytes token encoder: 256 bytes + 5 specials, shifted by +1 (id 0 is the
# absent-token padding).
BYTE_CHAR_IDS = 262


class EncoderFields(Protocol):
    """What a token encoder reads of a `BiLMConfig`."""

    char_vocab: tuple[str, ...]
    word_vocab: tuple[str, ...]
    word_embed_dim: int


@dataclass(frozen=True)
class TokenEncoder:
    """A token encoder: its `name` (`BiLMConfig.token_encoder`); `vocabulary`: whether its
    characters (and words) are the model's own vocabulary (`char_vocab`, `word_vocab`), else
    UTF-8 bytes; `unit`: what a token is cut into ("bytes", "characters"); `options_json`:
    whether bilm-tf's options.json can describe it. `check(config)`: ValueError for fields
    that do not fit it; `n_char_ids(config)`: rows of the character embedding (id 0
    included); `facts(config)`: what
    `elmo info --json` says of it beside its kind; `summary(facts)`: `elmo info`'s phrase;
    `phrase(config)`: a model card's."""

    name: str
    vocabulary: bool
    unit: str
    options_json: bool
    check: Callable[[EncoderFields], None]
    n_char_ids: Callable[[EncoderFields], int]
    facts: Callable[[EncoderFields], dict[str, Any]]
    summary: Callable[[dict[str, Any]], str]
    phrase: Callable[[EncoderFields], str]


def _check_bytes(config: EncoderFields) -> None:
    if config.char_vocab or config.word_vocab or config.word_embed_dim:
        raise ValueError("char_vocab, word_vocab and word_embed_dim belong to "
                         'token_encoder="vocab"')


def _check_vocab(config: EncoderFields) -> None:
    missing = [c for c in VOCAB_CHAR_SPECIALS if c not in config.char_vocab]
    if missing:
        raise ValueError(f"char_vocab lacks the special entries {missing}")
    if config.word_embed_dim < 0:
        raise ValueError(f"word_embed_dim must be >= 0, got {config.word_embed_dim}")
    if config.word_embed_dim:
        missing = [w for w in VOCAB_WORD_SPECIALS if w not in config.word_vocab]
        if missing:
            raise ValueError(f"word_vocab lacks the special entries {missing}")
    elif config.word_vocab:
        raise ValueError("word_vocab needs word_embed_dim > 0")


def _vocab_summary(facts: dict[str, Any]) -> str:
    return (f"its own vocabulary of {facts['characters']:,} characters, plus "
            + (f"{facts['words']:,} words ({facts['word_embed_dim']} dims)"
               if facts["words"] else "no word embedding"))


def _vocab_phrase(config: EncoderFields) -> str:
    return f"its own vocabulary of {len(config.char_vocab):,} characters" \
        + (f" and {len(config.word_vocab):,} words" if config.word_vocab else "")


TOKEN_ENCODERS: dict[str, TokenEncoder] = {e.name: e for e in (
    TokenEncoder(
        "bytes", vocabulary=False, unit="bytes", options_json=True, check=_check_bytes,
        n_char_ids=lambda config: BYTE_CHAR_IDS,
        facts=lambda config: {
            "characters": "262 byte ids (UTF-8 bytes + 5 specials + padding)"},
        summary=lambda facts: "UTF-8 bytes (262 ids)", phrase=lambda config: "UTF-8 bytes"),
    TokenEncoder(
        "vocab", vocabulary=True, unit="characters", options_json=False, check=_check_vocab,
        n_char_ids=lambda config: len(config.char_vocab) + 1,
        facts=lambda config: {"characters": len(config.char_vocab),
                              "words": len(config.word_vocab),
                              "word_embed_dim": config.word_embed_dim},
        summary=_vocab_summary, phrase=_vocab_phrase),
)}


def token_encoder(name: str) -> TokenEncoder:
    """The record of `name`; ValueError naming the encoders for another."""
    if name not in TOKEN_ENCODERS:
        choices = " or ".join(repr(n) for n in TOKEN_ENCODERS)
        shown = repr(name) if len(repr(name)) <= 60 else repr(name)[:57] + "..."
        raise ValueError(f"token_encoder must be {choices}, got {shown}")
    return TOKEN_ENCODERS[name]
