"""Words to character ids, exactly as the official ELMo models expect them.

A token becomes `max_characters_per_token` (50) ids: its UTF-8 bytes (at most 48), wrapped in
begin-word / end-word marks and padded; every id is shifted by +1 so that 0 can mark an absent
token. The sentence boundaries `<S>` and `</S>` are whole tokens made of special ids.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import lru_cache

import torch

BOS_CHAR = 256  # begin of sentence
EOS_CHAR = 257  # end of sentence
BOW_CHAR = 258  # begin of word
EOW_CHAR = 259  # end of word
PAD_CHAR = 260  # padding inside a word
MAX_CHARS = 50

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"

_warned_truncation = False


def _warn_truncation_once(max_bytes: int) -> None:
    global _warned_truncation
    if not _warned_truncation:
        _warned_truncation = True
        warnings.warn(
            f"tokens longer than {max_bytes} UTF-8 bytes are cut to their first {max_bytes} bytes "
            "(as the original ELMo does); this warning is shown once",
            stacklevel=3,
        )


def _wrap(content: Sequence[int], max_chars: int) -> tuple[int, ...]:
    """[BOW, content..., EOW, PAD...] shifted by +1."""
    ids = [BOW_CHAR, *content, EOW_CHAR]
    ids += [PAD_CHAR] * (max_chars - len(ids))
    return tuple(i + 1 for i in ids)


@lru_cache(maxsize=65536)
def word_to_char_ids(word: str, max_chars: int = MAX_CHARS) -> tuple[int, ...]:
    """The `max_chars` model-input character ids of one token (boundary tokens included)."""
    if word == BOS_TOKEN:
        return _wrap([BOS_CHAR], max_chars)
    if word == EOS_TOKEN:
        return _wrap([EOS_CHAR], max_chars)
    data = word.encode("utf-8", errors="surrogatepass")
    max_bytes = max_chars - 2
    if len(data) > max_bytes:
        _warn_truncation_once(max_bytes)
        data = data[:max_bytes]
    return _wrap(data, max_chars)


def check_tokens(tokens: object, what: str = "a sentence") -> None:
    """TypeError unless `tokens` is a sequence of strings (one tokenized sentence)."""
    if isinstance(tokens, str):
        raise TypeError(f"{what} must be a list of tokens, not the string {tokens[:40]!r}: "
                        "split it first, e.g. text.split()")
    if not isinstance(tokens, Sequence):
        raise TypeError(f"{what} must be a list of tokens (str), not {type(tokens).__name__}")
    for i, token in enumerate(tokens):
        if not isinstance(token, str):
            raise TypeError(f"{what}: token {i} is {token!r} ({type(token).__name__}); "
                            "tokens must be strings")


def check_sentences(sentences: object, first: int = 0) -> None:
    """TypeError unless `sentences` is a sequence of tokenized sentences (numbered from
    `first` in the message)."""
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError("sentences must be a list of sentences, each a list of tokens (str); "
                        f"got {type(sentences).__name__}")
    for i, tokens in enumerate(sentences, first):
        check_tokens(tokens, f"sentence {i}")


def batch_to_ids(
    sentences: Sequence[Sequence[str]], max_chars: int = MAX_CHARS
) -> torch.Tensor:
    """Character ids for a batch of tokenized sentences, boundaries not added.

    Returns a LongTensor (B, T, max_chars), T the longest sentence; absent tokens are all 0.
    Raises TypeError unless `sentences` is a list of lists of strings.
    """
    check_sentences(sentences)
    longest = max((len(s) for s in sentences), default=0)
    ids = torch.zeros(len(sentences), longest, max_chars, dtype=torch.long)
    for b, sentence in enumerate(sentences):
        if sentence:
            ids[b, : len(sentence)] = torch.tensor(
                [word_to_char_ids(w, max_chars) for w in sentence], dtype=torch.long
            )
    return ids
