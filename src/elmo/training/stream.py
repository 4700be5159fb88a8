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
from contextlib import AbstractContextManager
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
from elmo.modules.bilm import DistinctTokens
from elmo.modules.language_model import BiLanguageModel
from elmo.modules.softmax import SampledCandidates
from elmo.training.config import DEFAULT_PREFETCH, TrainConfig
from elmo.training.distributed import World
from elmo.vocab import BOS, EOS, Vocabulary


class TrainStream:
    """Endless iterator of :class:`Batch` es of one rank, resumable with ``state_dict``, over
    the corpus of `paths` (`elmo.data.prepared.open_corpus`: text files of any input kind,
    without the documents titled in `exclude_titles`, or a prepared corpus, whose batches are
    the same as its text's)."""

    def __init__(
        self,
        paths: Sequence[Path],
        tokenizer: str,
        vocab: Vocabulary,
        config: BPTTConfig,
        rank: int = 0,
        world_size: int = 1,
        input_format: str = AUTO,
        exclude_titles: Sequence[str] = (),
    ) -> None:
        self.corpus = open_corpus(paths, tokenizer, input_format, exclude_titles)
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
    """A batch as BiLanguageModel inputs. Index 0 of the direction axis is the forward
    direction, 1 the backward one."""

    tokens: DistinctTokens  # chars (K, C) of each distinct token, index (2, B, T)
    targets: torch.Tensor  # (2, B, T)
    mask: torch.Tensor | None  # (B, T) real positions; None where every position is real
    candidates: SampledCandidates | None  # the sampled softmax's draw (None: full softmax)
    n_tokens: int  # real positions, per direction

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> BatchTensors:
        """The batch with `fn` applied to every tensor."""
        return BatchTensors(
            DistinctTokens(fn(self.tokens.chars), fn(self.tokens.index)), fn(self.targets),
            None if self.mask is None else fn(self.mask),
            None if self.candidates is None else self.candidates.map(fn), self.n_tokens)

    def to(self, device: torch.device) -> BatchTensors:
        """The batch on `device`; from pinned memory the copies do not wait for the device."""
        return self.map(lambda t: t.to(device, non_blocking=True))


class CandidateSampler:
    """The sampled softmax's candidates of each step, drawn where its batch is prepared (the
    batch thread, ahead of the device): from a generator seeded by (seed, rank, step), so that
    a step's draw depends neither on the batches read ahead nor on torch's generators, and a
    resumed run draws what an uninterrupted one did."""

    def __init__(self, vocab_size: int, num_samples: int, seed: int, rank: int = 0) -> None:
        self.vocab_size, self.num_samples = vocab_size, num_samples
        self.seed, self.rank = seed, rank

    def __call__(self, targets: torch.Tensor, step: int) -> SampledCandidates:
        words = np.random.SeedSequence([self.seed, self.rank, step]).generate_state(2)
        generator = torch.Generator().manual_seed(int(words[0]) << 32 | int(words[1]))
        return SampledCandidates.draw(targets, self.vocab_size, self.num_samples, generator)


UNKNOWN_CACHE = 65536  # words outside the vocabulary whose char ids a BatchEncoder keeps


class BatchEncoder:
    """Batches -> BatchTensors, in pinned memory if `pin_memory` (for copies to a GPU).

    Each distinct token of a batch gets one row of char ids (the char-CNN runs once per row),
    found on the host with `np.unique` over the word ids. A word's char ids come from a table
    over the vocabulary, filled as its words are first met (no Python per token); a word
    outside the vocabulary (at an `<UNK>` id) from a cache of the last UNKNOWN_CACHE such
    words, filled by the model's `indexer`. The vocabulary's sentence boundaries become the
    ones the indexer knows, and padded positions read an all-zero row. With a `sampler`, each
    batch carries the sampled softmax's draw of its step.
    """

    def __init__(
        self, vocab: Vocabulary, indexer: TokenIndexer, pin_memory: bool = False,
        sampler: CandidateSampler | None = None,
    ) -> None:
        boundary = {BOS: indexer.bos_token, EOS: indexer.eos_token}
        self.words = [boundary.get(w, w) for w in vocab.words]
        self.unk, self.indexer, self.pin_memory = vocab.unk, indexer, pin_memory
        self.sampler = sampler
        # Byte ids fit 16 bits; zeros from calloc: only the rows filled take memory.
        dtype = np.int16 if isinstance(indexer, ByteIndexer) else np.int32
        self.table = np.zeros((len(vocab), indexer.width), dtype=dtype)
        self.filled = np.zeros(len(vocab), dtype=bool)
        self._unknown: dict[str, np.ndarray] = {}  # words outside the vocabulary

    def __call__(self, batch: Batch, step: int = 0) -> BatchTensors:
        """The tensors of `batch`, the batch of training step `step` (which seeds its draw)."""
        ids = np.stack([batch.token_ids_fwd, batch.token_ids_bwd])  # (2, B, T)
        real = np.broadcast_to(batch.mask, ids.shape)
        self._fill(ids[real])
        # One key per distinct token: its word id; V + k for the k-th distinct word outside
        # the vocabulary; -1 for padding.
        keys = np.where(real, ids, -1)
        unknown = np.nonzero((ids == self.unk) & real)
        words: list[str] = []
        if len(unknown[0]):
            directions = (batch.words_fwd, batch.words_bwd)
            d, b, t = (i.tolist() for i in unknown)
            positions = [directions[i][j][k] for i, j, k in zip(d, b, t, strict=True)]
            words, which = np.unique(np.array(positions, dtype=object), return_inverse=True)
            keys[unknown] = len(self.words) + which
        distinct, index = np.unique(keys, return_inverse=True)
        known = (distinct >= 0) & (distinct < len(self.words))
        chars = np.zeros((len(distinct), self.table.shape[1]), dtype=np.int64)  # (K, C)
        chars[known] = self.table[distinct[known]]
        if len(words):
            chars[distinct >= len(self.words)] = self._unknown_rows(list(words))
        targets = torch.from_numpy(np.stack([batch.next_ids, batch.prev_ids]))  # (2, B, T)
        tensors = BatchTensors(
            DistinctTokens(torch.from_numpy(chars), torch.from_numpy(index.reshape(ids.shape))),
            targets, None if batch.mask.all() else torch.from_numpy(batch.mask),
            None if self.sampler is None else self.sampler(targets, step), batch.num_tokens)
        return tensors.map(torch.Tensor.pin_memory) if self.pin_memory else tensors

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
    """The stream's batches as tensors (`encode(batch, step)`), prepared `ahead` batches in
    advance by a background thread (0: none, each batch when asked for).

    `state_dict` is the stream's position after the last batch returned, not after the ones
    read ahead, so a checkpoint resumes exactly there; `step` is the training step of the next
    batch returned. `quiet()` holds the thread between batches (it calls CUDA to pin their
    memory); `close` stops it.
    """

    def __init__(
        self, stream: TrainStream, encode: Callable[[Batch, int], BatchTensors], ahead: int = 0
    ) -> None:
        self.stream, self.encode, self.ahead = stream, encode, ahead
        self.step = 0
        self._position = stream.state_dict()
        self._queue: queue.Queue[tuple[BatchTensors, dict[str, Any]] | BaseException] = \
            queue.Queue(maxsize=max(ahead, 1))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._encoding = threading.Lock()  # held by the thread while it encodes a batch

    def __iter__(self) -> Iterator[BatchTensors]:
        return self

    def __next__(self) -> BatchTensors:
        if self.ahead == 0:
            tensors = self.encode(next(self.stream), self.step)
            self.step += 1
            return tensors
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, args=(self.step,),
                                            name="elmo-train-batches", daemon=True)
            self._thread.start()
        if self._error is None:
            item = self._queue.get()
            if not isinstance(item, BaseException):
                tensors, self._position = item
                self.step += 1
                return tensors
            self._error = item  # the thread has ended: raised again if asked again
        raise self._error

    def state_dict(self) -> dict[str, Any]:
        """The stream's position after the last batch returned (JSON-serializable)."""
        return self.stream.state_dict() if self.ahead == 0 else self._position

    def load_state_dict(self, state: dict[str, Any], step: int = 0) -> None:
        """Continue from a position saved by :meth:`state_dict`, at training step `step`
        (before iterating)."""
        if self._thread is not None:
            raise RuntimeError("load_state_dict must be called before iteration starts")
        self.stream.load_state_dict(state)
        self._position = self.stream.state_dict()
        self.step = step

    def quiet(self) -> AbstractContextManager[object]:
        """A context inside which the thread encodes no batch."""
        return self._encoding

    def close(self) -> None:
        """Stop the background thread (it ends within one batch); idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _work(self, step: int) -> None:
        """The thread: encode batch after batch (from training step `step` on) with the
        position after each, until stopped; an error is handed on to be raised by
        `__next__`."""
        try:
            while not self._stop.is_set():
                with self._encoding:
                    tensors = self.encode(next(self.stream), step)
                step += 1
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


def training_batches(config: TrainConfig, train_files: Sequence[str], vocab: Vocabulary,
                     lm: BiLanguageModel, world: World) -> PreparedBatches:
    """The batches of a run for this rank: its share of `train_files` in BPTT windows, encoded
    for `lm` (with the sampled softmax's candidates where it samples), prepared ahead by a
    thread (`prefetch`; by default on CUDA only)."""
    on_cuda = world.device.type == "cuda"
    bptt = BPTTConfig(batch_size=config.batch_size, unroll_steps=config.unroll_steps,
                      max_chars=lm.bilm.config.max_characters_per_token,
                      shuffle_window=config.shuffle_window, seed=config.seed)
    stream = TrainStream([Path(f) for f in train_files], config.tokenizer, vocab, bptt,
                         world.rank, world.world_size, config.input_format,
                         config.exclude_titles)
    ahead = config.prefetch if config.prefetch is not None else \
        (DEFAULT_PREFETCH if on_cuda else 0)
    sampler = CandidateSampler(len(vocab), config.num_samples, config.seed, world.rank) \
        if lm.softmax_mode == "sampled" else None
    return PreparedBatches(stream, BatchEncoder(vocab, lm.bilm.indexer, on_cuda, sampler), ahead)
