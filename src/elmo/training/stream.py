"""The training data of one rank: BPTT batches over its shard of the corpus, epoch after epoch,
and their tensors, prepared ahead of the device if asked.

Rank r of W reads sentences r, r + W, r + 2W, ... of the stream of all training files. The
stream never ends: when a pass is over, the next epoch starts (the window shuffle, if any, is
reseeded with the epoch), so a run is as long as its step budget, identical on every rank.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from elmo.chars import ByteIndexer, TokenIndexer
from elmo.data.batching import Batch, BPTTBatcher, BPTTConfig
from elmo.data.prepared import open_corpus
from elmo.errors import ElmoError
from elmo.io.inputs import AUTO
from elmo.vocab import BOS, EOS, Vocabulary


class TrainStream:
    """Endless iterator of :class:`Batch` es of one rank, resumable with ``state_dict``, over
    the corpus of `paths` (`elmo.data.prepared.open_corpus`: text files of any input kind, or
    a prepared corpus, whose batches are the same as its text's)."""

    def __init__(
        self,
        paths: Sequence[Path],
        tokenizer: str,
        vocab: Vocabulary,
        config: BPTTConfig,
        rank: int = 0,
        world_size: int = 1,
        input_format: str = AUTO,
    ) -> None:
        self.corpus = open_corpus(paths, tokenizer, input_format)
        self.vocab, self.config = vocab, config
        self.rank, self.world_size = rank, world_size
        self.epoch = 0
        self._batcher = self._new_batcher()
        self._batches: Iterator[Batch] | None = None

    def _new_batcher(self) -> BPTTBatcher:
        def sentences(start: int) -> Iterator[list[str]]:
            return self.corpus.sentences(self.rank, self.world_size, start)

        config = replace(self.config, seed=self.config.seed + self.epoch)
        return BPTTBatcher(sentences, self.vocab, config)

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        while True:
            if self._batches is None:
                self._batches = iter(self._batcher)
            batch = next(self._batches, None)
            if batch is not None:
                return batch
            if self._batcher.batches_yielded == 0:
                raise ElmoError(
                    f"rank {self.rank} of {self.world_size} has no training sentences: the "
                    "corpus needs at least one non-blank line per process"
                )
            self.epoch += 1
            self._batcher, self._batches = self._new_batcher(), None

    def state_dict(self) -> dict[str, Any]:
        """Position after the last batch returned (JSON-serializable)."""
        return {"epoch": self.epoch, "batcher": self._batcher.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a position saved by :meth:`state_dict` (before iterating)."""
        self.epoch = int(state["epoch"])
        self._batcher, self._batches = self._new_batcher(), None
        self._batcher.load_state_dict(state["batcher"])


@dataclass
class BatchTensors:
    """A batch as BiLanguageModel inputs, on the host: char ids (2, B, T, C), targets
    (2, B, T), mask (B, T). Index 0 is the forward direction, 1 the backward one."""

    char_ids: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor

    def to(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(char ids, targets, mask) on `device`; from pinned memory the copies do not wait
        for the device."""
        return (self.char_ids.to(device, non_blocking=True),
                self.targets.to(device, non_blocking=True),
                self.mask.to(device, non_blocking=True))


UNKNOWN_CACHE = 65536  # words outside the vocabulary whose char ids a BatchEncoder keeps


class BatchEncoder:
    """Batches -> BatchTensors, in pinned memory if `pin_memory` (for copies to a GPU).

    A word's char ids come from a table over the vocabulary, filled as its words are first
    met (no Python per token); a word outside the vocabulary (at an `<UNK>` id) from a cache
    of the last UNKNOWN_CACHE such words, filled by the model's `indexer`. The vocabulary's
    sentence boundaries become the ones the indexer knows, and padded positions get all-zero
    chars.
    """

    def __init__(self, vocab: Vocabulary, indexer: TokenIndexer, pin_memory: bool = False) -> None:
        boundary = {BOS: indexer.bos_token, EOS: indexer.eos_token}
        self.words = [boundary.get(w, w) for w in vocab.words]
        self.unk, self.indexer, self.pin_memory = vocab.unk, indexer, pin_memory
        # Byte ids fit 16 bits; zeros from calloc: only the rows filled take memory.
        dtype = np.int16 if isinstance(indexer, ByteIndexer) else np.int32
        self.table = np.zeros((len(vocab), indexer.width), dtype=dtype)
        self.filled = np.zeros(len(vocab), dtype=bool)
        self._unknown: dict[str, np.ndarray] = {}  # words outside the vocabulary

    def __call__(self, batch: Batch) -> BatchTensors:
        ids = np.stack([batch.token_ids_fwd, batch.token_ids_bwd])  # (2, B, T)
        real = np.broadcast_to(batch.mask, ids.shape)
        self._fill(ids[real])
        char_ids = np.take(self.table, ids, axis=0).astype(np.int64)  # (2, B, T, C)
        char_ids[~real] = 0
        unknown = np.nonzero((ids == self.unk) & real)
        if len(unknown[0]):
            directions = (batch.words_fwd, batch.words_bwd)
            d, b, t = (i.tolist() for i in unknown)
            char_ids[unknown] = self._unknown_rows(
                [directions[i][j][k] for i, j, k in zip(d, b, t, strict=True)])
        tensors = (torch.from_numpy(char_ids),
                   torch.from_numpy(np.stack([batch.next_ids, batch.prev_ids])),
                   torch.from_numpy(batch.mask))
        if self.pin_memory:
            tensors = tuple(t.pin_memory() for t in tensors)
        return BatchTensors(*tensors)

    def _unknown_rows(self, words: list[str]) -> np.ndarray:
        """(N, C) char ids of `words` outside the vocabulary, through a bounded cache."""
        rows = []
        for word in words:
            row = self._unknown.get(word)
            if row is None:
                if len(self._unknown) >= UNKNOWN_CACHE:
                    self._unknown.clear()
                row = self._unknown[word] = np.array(self.indexer.token_ids(word),
                                                     dtype=self.table.dtype)
            rows.append(row)
        return np.stack(rows)

    def _fill(self, ids: np.ndarray) -> None:
        """Fill the table's rows of the word ids `ids` not filled yet."""
        new = np.unique(ids[~self.filled[ids]])
        for i in new.tolist():
            self.table[i] = self.indexer.token_ids(self.words[i])
        self.filled[new] = True


class PreparedBatches:
    """The stream's batches as tensors (`encode`), prepared `ahead` batches in advance by a
    background thread (0: none, each batch when asked for).

    `state_dict` is the stream's position after the last batch returned, not after the ones
    read ahead, so a checkpoint resumes exactly there. `close` stops the thread.
    """

    def __init__(
        self, stream: TrainStream, encode: Callable[[Batch], BatchTensors], ahead: int = 0
    ) -> None:
        self.stream, self.encode, self.ahead = stream, encode, ahead
        self._position = stream.state_dict()
        self._queue: queue.Queue[tuple[BatchTensors, dict[str, Any]] | BaseException] = \
            queue.Queue(maxsize=max(ahead, 1))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def __iter__(self) -> Iterator[BatchTensors]:
        return self

    def __next__(self) -> BatchTensors:
        if self.ahead == 0:
            return self.encode(next(self.stream))
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="elmo-train-batches",
                                            daemon=True)
            self._thread.start()
        if self._error is None:
            item = self._queue.get()
            if not isinstance(item, BaseException):
                tensors, self._position = item
                return tensors
            self._error = item  # the thread has ended: raised again if asked again
        raise self._error

    def state_dict(self) -> dict[str, Any]:
        """The stream's position after the last batch returned (JSON-serializable)."""
        return self.stream.state_dict() if self.ahead == 0 else self._position

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a position saved by :meth:`state_dict` (before iterating)."""
        if self._thread is not None:
            raise RuntimeError("load_state_dict must be called before iteration starts")
        self.stream.load_state_dict(state)
        self._position = self.stream.state_dict()

    def close(self) -> None:
        """Stop the background thread (it ends within one batch); idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _work(self) -> None:
        """The thread: encode batch after batch with the position after each, until stopped;
        an error is handed on to be raised by `__next__`."""
        try:
            while not self._stop.is_set():
                tensors = self.encode(next(self.stream))
                self._put((tensors, self.stream.state_dict()))
        except BaseException as err:  # raised again by __next__, in the training thread
            self._put(err)

    def _put(self, item: tuple[BatchTensors, dict[str, Any]] | BaseException) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
