"""Words to character ids, exactly as the released ELMo models expect them.

Bytes (bilm-tf, AllenNLP): a token becomes `max_characters_per_token` (50) ids: its UTF-8
bytes (at most 48), wrapped in begin-word / end-word marks and padded; every id is shifted by
+1 so that 0 can mark an absent token. The sentence boundaries `<S>` and `</S>` are whole
tokens made of special ids.

Vocabulary (ELMoForManyLangs): ids of the model's own characters (see `VocabIndexer`), and,
with a word embedding, the token's word id in one more column.

`token_indexer(config)` gives the indexer a model's config asks for; `BiLM.batch_to_ids`
uses it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from functools import lru_cache

import torch

from elmo.config import BiLMConfig

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
    return _batch(sentences, lambda w: word_to_char_ids(w, max_chars), max_chars)


def _batch(
    sentences: Sequence[Sequence[str]], token_ids: Callable[[str], tuple[int, ...]], width: int
) -> torch.Tensor:
    """(B, T, width) ids of a batch, absent tokens all 0; TypeError for a malformed batch."""
    check_sentences(sentences)
    longest = max((len(s) for s in sentences), default=0)
    ids = torch.zeros(len(sentences), longest, width, dtype=torch.long)
    for b, sentence in enumerate(sentences):
        if sentence:
            ids[b, : len(sentence)] = torch.tensor([token_ids(w) for w in sentence])
    return ids


class ByteIndexer:
    """Tokens -> UTF-8 byte ids (bilm-tf); the sentence boundaries are `<S>` and `</S>`."""

    bos_token, eos_token = BOS_TOKEN, EOS_TOKEN

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self.width = max_chars

    def token_ids(self, word: str) -> tuple[int, ...]:
        return word_to_char_ids(word, self.width)

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """(B, T, C) ids, boundaries not added (see `batch_to_ids`)."""
        return batch_to_ids(sentences, self.width)


class VocabIndexer:
    """Tokens -> ids of a character vocabulary (+1, 0 marks absent), as ELMoForManyLangs.

    A token longer than C - 2 characters (code points) is cut to its first C - 2, for its
    characters and its word. Its row is `[<eow>, chars..., <bow>, <pad>...]`: the original code
    swaps the two markers (consistently in training and inference, so the weights expect it).
    Unknown characters and words get `<oov>`; word look-up is exact. With a word vocabulary
    the row has one more column, the word id (+1). The boundaries `<bos>`/`<eos>` are tokens
    whose row holds their special character.
    """

    bos_token, eos_token = "<bos>", "<eos>"

    def __init__(self, chars: Sequence[str], words: Sequence[str], max_chars: int) -> None:
        self.chars = {c: i + 1 for i, c in enumerate(chars)}  # a repeated entry: its last id
        self.words = {w: i + 1 for i, w in enumerate(words)}
        self.max_chars = max_chars
        self.width = max_chars + (1 if words else 0)
        self.token_ids = lru_cache(maxsize=65536)(self._token_ids)

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "token_ids"}  # the cache

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.token_ids = lru_cache(maxsize=65536)(self._token_ids)

    def _token_ids(self, word: str) -> tuple[int, ...]:
        chars, c = self.chars, self.max_chars
        word = word[: c - 2]
        if word in (self.bos_token, self.eos_token):
            inner = [chars[word]]
        else:
            oov = chars["<oov>"]
            inner = [chars.get(ch, oov) for ch in word]
        row = [chars["<eow>"], *inner, chars["<bow>"]]
        row += [chars["<pad>"]] * (c - len(row))
        if self.words:
            row.append(self.words.get(word, self.words["<oov>"]))
        return tuple(row)

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """(B, T, width) ids, boundaries not added; absent tokens all 0."""
        return _batch(sentences, self.token_ids, self.width)


TokenIndexer = ByteIndexer | VocabIndexer


def token_indexer(config: BiLMConfig) -> TokenIndexer:
    """The indexer for the token encoder `config` describes."""
    if config.encoder.vocabulary:
        return VocabIndexer(config.char_vocab, config.word_vocab, config.max_characters_per_token)
    return ByteIndexer(config.max_characters_per_token)
