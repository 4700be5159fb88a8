"""A prepared corpus: a corpus as token ids in a run's vocabulary, compressed, in shards, with a
manifest and checksums, which `elmo train --train DIR` reads instead of the text, batch for
batch the same (`open_corpus` tells which it is given).

    DIR/manifest.json       format and version, tokenizer, input format, sources, the
                            vocabulary's size and sha256, the counts, and each shard: file,
                            sha256, bytes, sentences, tokens, words outside the vocabulary
    DIR/vocab.txt.xz        the vocabulary (bilm-tf's format, xz-compressed): the run's
    DIR/shard-00000.xz ...  the sentences, in stream order, a shard after another
    DIR/held-out.txt        with --hold-out-every N: the sentences of every N-th document,
                            left out of the shards and the vocabulary, a sentence per line
                            (untokenized), for `elmo train --valid`

A shard is one xz stream of the sentences' lengths, token ids and words outside the
vocabulary (`elmo.data.shards`); sentences never span two shards. A run reads one shard at a
time, checks its sha256 and its size, and skips whole shards to reach the position it resumes
at; a shard the run does not reach need not be there (a machine can hold the shards it will
read).
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from tqdm import tqdm

from elmo.data.corpus import (
    Selection,
    Tally,
    TextCorpus,
    expand_paths,
    iter_parts,
    split_language,
)
from elmo.data.shards import Shard, ShardWriter, read_shard
from elmo.errors import InputFileError
from elmo.io.atomic import atomic_directory, atomic_output, atomic_write_text, claim_output
from elmo.io.inputs import AUTO
from elmo.io.overlap import OverlapSet
from elmo.tokenize import DEFAULT_TOKENIZER, Tokenizer, get_tokenizer
from elmo.vocab import Vocabulary

MANIFEST_NAME = "manifest.json"
PROGRESS_NAME = "progress.json"  # how far a preparation got, in OUT's partial copy
VOCAB_NAME = "vocab.txt.xz"
HELD_OUT_NAME = "held-out.txt"
FORMAT = "elmo-prepared-corpus"
VERSION = 1
SHARD_TOKENS = 1_000_000  # tokens per shard by default: about 1.3 MB of English text


@dataclass
class Manifest:
    """What a prepared corpus holds. `n_sentences` and `n_tokens` count as a text corpus's
    scan does: non-empty sentences, and their words plus one </S> each. `min_count` and
    `max_vocab`: how the vocabulary was built from the corpus (None, None: it was given).
    `exclude_titles`: the title lists whose documents were left out (`exclude_sha256`, of
    their files), `left_out` of them, titled `left_out_titles`; `hold_out_every`: every
    N-th document of the others went to HELD_OUT_NAME (`held_out` documents,
    `held_out_sentences` lines) instead of the shards. `overlap`: the test files whose text
    documents were left out for sharing (`elmo.io.overlap.OverlapSet.describe`), with how
    many were, per test file (`left_out`) and per input file (`inputs`)."""

    tokenizer: str
    input_format: str
    sources: list[str]
    vocab_size: int
    vocab_sha256: str
    min_count: int | None = None
    max_vocab: int | None = None
    n_sentences: int = 0
    n_tokens: int = 0
    shards: list[Shard] = field(default_factory=list)
    exclude_titles: list[str] = field(default_factory=list)
    exclude_sha256: str | None = None
    left_out: int = 0
    left_out_titles: list[str] = field(default_factory=list)
    hold_out_every: int = 0
    held_out: int = 0
    held_out_sentences: int = 0
    overlap: dict[str, Any] | None = None
    format: str = FORMAT
    version: int = VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def read(cls, path: Path) -> Manifest:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT or data.get("version") != VERSION:
                raise ValueError(f"format {data.get('format')!r} version "
                                 f"{data.get('version')!r}, not {FORMAT!r} version {VERSION}")
            manifest = _manifest(data)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
            raise InputFileError(f"{path} is not the manifest of a prepared corpus ({err}); "
                                 "prepare the corpus again with `elmo prepare-corpus`") from None
        bad = [s.file for s in manifest.shards if Path(s.file).name != s.file
               or s.file.startswith(".")]
        if bad:
            raise InputFileError(f"{path} names a shard outside its folder ({bad[0]!r})")
        return manifest


def vocab_sha256(vocab: Vocabulary) -> str:
    """The sha256 of a vocabulary as its file holds it (a word per line)."""
    return hashlib.sha256("".join(w + "\n" for w in vocab).encode("utf-8")).hexdigest()


def is_prepared_corpus(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a folder holding a prepared corpus's manifest."""
    return (Path(path) / MANIFEST_NAME).is_file()


class PreparedCorpus:
    """A prepared corpus read as the sentences of its text: `sentences` as
    `TextCorpus.sentences` yields them for the same text, tokenizer and vocabulary."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.manifest = Manifest.read(self.directory / MANIFEST_NAME)
        self.vocab = _read_vocab(self.directory / VOCAB_NAME)
        if (len(self.vocab), vocab_sha256(self.vocab)) != (self.manifest.vocab_size,
                                                            self.manifest.vocab_sha256):
            raise InputFileError(f"{self.directory / VOCAB_NAME} is not the vocabulary the "
                                 f"corpus in {self.directory} was prepared with (its sha256 "
                                 "differs from the manifest's)")
        self.tokenizer = self.manifest.tokenizer
        self._words = self.vocab.words

    @property
    def files(self) -> list[str]:
        return [str(self.directory)]

    def sentences(self, rank: int = 0, world_size: int = 1, start: int = 0
                  ) -> Iterator[list[str]]:
        """Rank `rank`'s non-empty sentences from its `start`-th on: sentence `i` of the
        stream is rank `i % world_size`'s, as `elmo.data.corpus.iter_sentences` has it."""
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world={world_size}")
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        index = rank + start * world_size  # the next sentence of the stream to read
        offset = 0  # the stream index of the shard's first sentence
        for shard in self.manifest.shards:
            end = offset + shard.sentences
            if index < end:
                lengths, ids, table = read_shard(self.directory, shard, self._words)
                ends = np.cumsum(lengths, dtype=np.int64)
                for i in range(index - offset, shard.sentences, world_size):
                    if lengths[i]:
                        yield [table[t] for t in ids[ends[i] - lengths[i]:ends[i]].tolist()]
                index = end + (index - end) % world_size  # the next of this rank
            offset = end


def prepare_corpus(
    train: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    tokenizer: str = DEFAULT_TOKENIZER,
    *,
    input_format: str = AUTO,
    vocab: Vocabulary | None = None,
    min_count: int = 1,
    max_vocab: int | None = None,
    exclude_titles: Sequence[str | os.PathLike[str]] = (),
    exclude_overlap: OverlapSet | None = None,
    hold_out_every: int = 0,
    shard_tokens: int = SHARD_TOKENS,
    overwrite: bool = False,
    progress: bool = False,
) -> Manifest:
    """Prepare the corpus of the files or globs `train` (read as `elmo train` reads them) into
    the folder `out`: its vocabulary (`vocab`, or built from it as `elmo train` builds it:
    `min_count`, `max_vocab`), then its sentences in shards of about `shard_tokens` tokens.
    Documents whose title is in one of the lists `exclude_titles` (`elmo.io.titles`) are left
    out, and those that share a run of text with the test files of `exclude_overlap`
    (`elmo.io.overlap`); of the others, with `hold_out_every` N, every N-th goes to
    HELD_OUT_NAME, not to the shards nor the vocabulary (`elmo.data.corpus.Selection`).
    `out` is written beside itself (`.OUT.new`) and renamed into place when complete; an
    existing prepared corpus there is replaced only with `overwrite`. Killed, the same call
    resumes after the last shard written, if the files (names, sizes, modification times) and
    options are the same. Returns the manifest."""
    if shard_tokens < 1:
        raise ValueError(f"shard_tokens must be >= 1, got {shard_tokens}")
    out, paths = Path(out), expand_paths(train)
    selection = Selection.leaving_out(exclude_titles, hold_out_every, exclude_overlap)
    titles = selection.exclude
    if out.is_dir() and any(out.iterdir()) and not is_prepared_corpus(out):
        raise InputFileError(f"{out} holds files but no prepared corpus ({MANIFEST_NAME}), "
                             "and it is replaced whole: give a new or empty folder")
    identity = {"version": VERSION, "tokenizer": tokenizer, "input_format": input_format,
                "vocab": None if vocab is None else vocab_sha256(vocab), "min_count": min_count,
                "max_vocab": max_vocab, "shard_tokens": shard_tokens,
                "exclude": None if titles is None else titles.sha256,
                "overlap": None if exclude_overlap is None else exclude_overlap.describe(),
                "hold_out_every": hold_out_every, "files": _files_identity(paths)}
    with (claim_output(out, inputs=paths, overwrite=overwrite, directory_of=[MANIFEST_NAME]),
          atomic_directory(out, keep_partial=PROGRESS_NAME) as new):
        state = _progress(new, identity)
        if state is None:
            for stale in new.iterdir():
                stale.unlink()
            vocab, manifest = _start(paths, tokenizer, input_format, selection, vocab,
                                     min_count, max_vocab, progress)
            _write_vocab(new / VOCAB_NAME, vocab)
            state = {"identity": identity, "read": 0, "held_bytes": 0,
                     "manifest": asdict(manifest)}
        else:
            vocab, manifest = _read_vocab(new / VOCAB_NAME), _manifest(state["manifest"])
            if progress:
                print(f"resuming after {state['read']:,} sentences ({len(manifest.shards)} "
                      "shards)", file=sys.stderr)
        tokenize = get_tokenizer(tokenizer)
        writer = ShardWriter(new, vocab, shard_tokens, manifest.shards)
        tally = Tally()
        parts = tqdm(iter_parts(paths, input_format, split_language(tokenizer), selection,
                                tally),
                     desc="preparing corpus", unit=" sent", disable=not progress,
                     mininterval=1.0)
        with _held_out(new / HELD_OUT_NAME, hold_out_every, state["held_bytes"]) as held_out:
            _write_sentences(parts, tokenize, writer, held_out, manifest, state,
                             new / PROGRESS_NAME)
        writer.close()
        if manifest.n_sentences == 0:  # no shard written, so nothing to resume
            raise InputFileError(f"the training files {list(map(str, train))} have no "
                                 "sentences")
        manifest.left_out, manifest.held_out = tally.left_out, tally.held_out
        manifest.left_out_titles = tally.left_out_titles
        if exclude_overlap is not None:
            manifest.overlap = {**exclude_overlap.describe(), "left_out": dict(tally.overlapped),
                                "inputs": dict(tally.overlapped_inputs)}
        (new / PROGRESS_NAME).unlink(missing_ok=True)
        atomic_write_text(new / MANIFEST_NAME, manifest.to_json())
    return manifest


def _files_identity(paths: Sequence[Path]) -> list[list[str | int]]:
    """What tells the training files apart from other ones: name, size, modification time."""
    return [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in paths]


def _write_sentences(parts: Iterable[tuple[bool, str]], tokenize: Tokenizer,
                     writer: ShardWriter, held_out: BinaryIO, manifest: Manifest,
                     state: dict[str, Any], progress_path: Path) -> None:
    """The sentences of `parts` (held out or not) after the `state["read"]` first: into the
    held-out text, or tokenized into the shards of `writer`, counted in `manifest`; `state`
    written to `progress_path` after each shard."""
    for read, (held, line) in enumerate(parts, start=1):
        if read <= state["read"]:
            continue
        if held:
            held_out.write(line.encode("utf-8") + b"\n")
            manifest.held_out_sentences += 1
            continue
        tokens = tokenize(line)
        manifest.n_sentences += bool(tokens)
        manifest.n_tokens += (len(tokens) + 1) if tokens else 0
        if writer.add(tokens):
            held_out.flush()
            state.update(read=read, held_bytes=held_out.tell(), manifest=asdict(manifest))
            atomic_write_text(progress_path, json.dumps(state))


@contextmanager
def _held_out(path: Path, hold_out_every: int, size: int) -> Iterator[BinaryIO]:
    """The held-out text of a preparation, cut to the `size` it had when the last shard was
    written (without `hold_out_every`, nothing is held out: a buffer that stays empty)."""
    if not hold_out_every:
        yield io.BytesIO()
        return
    with open(path, "ab") as f:
        f.truncate(size)
        f.seek(size)
        yield f


def _start(paths: list[Path], tokenizer: str, input_format: str, selection: Selection,
           vocab: Vocabulary | None, min_count: int, max_vocab: int | None, progress: bool
           ) -> tuple[Vocabulary, Manifest]:
    """The vocabulary of a corpus to prepare (built, if not given, from the documents kept)
    and its empty manifest."""
    built = vocab is None
    if built:
        sentences = tqdm(TextCorpus(paths, tokenizer, input_format, selection).sentences(),
                         desc="counting words", unit=" sent", disable=not progress,
                         mininterval=1.0)
        vocab = Vocabulary.build(sentences, min_count=min_count, max_size=max_vocab)
    titles = selection.exclude
    return vocab, Manifest(tokenizer, input_format, [str(p) for p in paths], len(vocab),
                           vocab_sha256(vocab), min_count if built else None,
                           max_vocab if built else None,
                           exclude_titles=[] if titles is None else list(titles.sources),
                           exclude_sha256=None if titles is None else titles.sha256,
                           hold_out_every=selection.hold_out_every)


def _progress(directory: Path, identity: dict[str, Any]) -> dict[str, Any] | None:
    """What a killed preparation of the same corpus left in `directory`, if any."""
    try:
        state = json.loads((directory / PROGRESS_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if state.get("identity") != json.loads(json.dumps(identity)):
        return None
    return state


def _manifest(data: dict[str, Any]) -> Manifest:
    return Manifest(**{**data, "shards": [Shard(**s) for s in data["shards"]]})


def _write_vocab(path: Path, vocab: Vocabulary) -> None:
    with atomic_output(path) as tmp, lzma.open(tmp, "wt", encoding="utf-8", newline="\n") as f:
        f.write("".join(word + "\n" for word in vocab))


def _read_vocab(path: Path) -> Vocabulary:
    try:
        with lzma.open(path, "rt", encoding="utf-8") as f:
            return Vocabulary(f.read().splitlines(), source=str(path))
    except (OSError, lzma.LZMAError, ValueError) as err:
        raise InputFileError(f"{path} is not a vocabulary ({err})") from None


def open_corpus(
    paths: Sequence[str | os.PathLike[str]], tokenizer: str, input_format: str = AUTO,
    exclude_titles: Sequence[str | os.PathLike[str]] = (),
) -> TextCorpus | PreparedCorpus:
    """The corpus `elmo train --train PATH...` reads: a prepared corpus if PATH is one folder
    holding one, else the text of the files and globs (`TextCorpus`), without the documents
    whose title is in one of the lists `exclude_titles` (`elmo.io.titles`)."""
    prepared = [p for p in paths if is_prepared_corpus(p)]
    if not prepared:
        return TextCorpus(expand_paths(paths), tokenizer, input_format,
                          Selection.leaving_out(exclude_titles))
    if exclude_titles:
        raise InputFileError(f"{prepared[0]} is a prepared corpus, read as it was prepared: "
                             "leave documents out by title when preparing it "
                             "(`elmo prepare-corpus --exclude-titles`)")
    if len(paths) > 1:
        raise InputFileError(f"{prepared[0]} is a prepared corpus, which is read alone: give "
                             "it as the only --train, or prepare all the files into one")
    corpus = PreparedCorpus(prepared[0])
    if corpus.tokenizer != tokenizer:
        raise InputFileError(f"the corpus in {prepared[0]} was prepared with --tokenizer "
                             f"{corpus.tokenizer}: train with the same (not {tokenizer})")
    return corpus
