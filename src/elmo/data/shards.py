"""The shards of a prepared corpus (`elmo.data.prepared`): its sentences as token ids, a file
of about `shard_tokens` tokens after another, each a `Shard` record in the manifest.

A shard is one xz stream (`lzma`, the standard library's) of three parts: the length of every
sentence of the stream (uint32, little-endian; the length of a sentence the tokenizer left
empty is 0, so that the sentence index, which decides the ranks' shares and the position a run
resumes at, is the text's), the token ids (uint32), and the JSON list of the shard's words
outside the vocabulary. Id `i` below the vocabulary's size V is its word; `V + k` is the k-th
word outside it, so that the words the model reads from their characters stay what the text
had. `ShardWriter` writes them, `read_shard` reads one back, checked against its record.
"""

from __future__ import annotations

import hashlib
import json
import lzma
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elmo.errors import InputFileError
from elmo.io.atomic import atomic_output
from elmo.vocab import Vocabulary

_UINT32 = np.dtype("<u4")


@dataclass
class Shard:
    """One shard file: its name, sha256 and size, and what it holds (`sentences`: those of
    the stream, empty ones included; `tokens`: words; `unknown`: distinct words outside the
    vocabulary; `raw_bytes`: its size decompressed)."""

    file: str
    sha256: str
    bytes: int
    raw_bytes: int
    sentences: int
    tokens: int
    unknown: int


class ShardWriter:
    """Sentences -> shard files of about `shard_tokens` tokens in `directory`, after the
    `shards` written already."""

    def __init__(self, directory: Path, vocab: Vocabulary, shard_tokens: int,
                 shards: list[Shard]) -> None:
        self.directory, self.shard_tokens = directory, shard_tokens
        self.index = {w: i for i, w in enumerate(vocab)}
        self.size = len(vocab)
        self.shards = shards
        self._start()

    def _start(self) -> None:
        self.lengths, self.ids = array("I"), array("I")
        self.unknown: dict[str, int] = {}

    def add(self, tokens: Sequence[str]) -> bool:
        """Add a sentence; whether a shard was written."""
        ids = []
        for word in tokens:
            i = self.index.get(word)
            if i is None:
                i = self.size + self.unknown.setdefault(word, len(self.unknown))
            ids.append(i)
        self.lengths.append(len(ids))
        self.ids.extend(ids)
        return len(self.ids) >= self.shard_tokens and self.close()

    def close(self) -> bool:
        """Write the shard begun, if it holds a sentence; whether it did."""
        if not self.lengths:
            return False
        words = json.dumps(list(self.unknown), ensure_ascii=False).encode("utf-8")
        raw = (np.asarray(self.lengths, _UINT32).tobytes() + np.asarray(self.ids, _UINT32)
               .tobytes() + words)
        data = lzma.compress(raw)
        name = f"shard-{len(self.shards):05d}.xz"
        with atomic_output(self.directory / name) as tmp:
            tmp.write_bytes(data)
        self.shards.append(Shard(name, hashlib.sha256(data).hexdigest(), len(data), len(raw),
                                 len(self.lengths), len(self.ids), len(self.unknown)))
        self._start()
        return True


def read_shard(directory: Path, shard: Shard, words: list[str]
               ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The shard `shard` of the corpus in `directory`: its sentence lengths [sentences], token
    ids [tokens] and id -> word table (`words`, the vocabulary's, then its own), checked
    against its record (InputFileError for a missing, damaged or different file)."""
    path = directory / shard.file
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(f"{path} is missing: the manifest lists it, and the run has "
                             "reached it; bring it beside the manifest") from None
    if len(data) != shard.bytes or hashlib.sha256(data).hexdigest() != shard.sha256:
        raise InputFileError(f"{path} is damaged: its size or sha256 is not the "
                             "manifest's; copy it again")
    try:
        raw = lzma.LZMADecompressor().decompress(data, max_length=shard.raw_bytes + 1)
    except lzma.LZMAError as err:
        raise InputFileError(f"{path} is not an xz stream ({err})") from None
    words_at = 4 * (shard.sentences + shard.tokens)
    if len(raw) != shard.raw_bytes or words_at > len(raw):
        raise InputFileError(f"{path} does not hold what the manifest says")
    lengths = np.frombuffer(raw, _UINT32, shard.sentences)
    ids = np.frombuffer(raw, _UINT32, shard.tokens, offset=4 * shard.sentences)
    unknown = json.loads(raw[words_at:].decode("utf-8"))
    if (int(lengths.sum(dtype=np.int64)) != shard.tokens or len(unknown) != shard.unknown
            or (shard.tokens and int(ids.max()) >= len(words) + len(unknown))):
        raise InputFileError(f"{path} does not hold what the manifest says")
    return lengths, ids, words + unknown
