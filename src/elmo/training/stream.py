"""The training data of one rank: BPTT batches over its shard of the corpus, epoch after epoch.

Rank r of W reads sentences r, r + W, r + 2W, ... of the stream of all training files. The
stream never ends: when a pass is over, the next epoch starts (the window shuffle, if any, is
reseeded with the epoch), so a run is as long as its step budget, identical on every rank.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from elmo.chars import TokenIndexer
from elmo.data.batching import Batch, BPTTBatcher, BPTTConfig
from elmo.data.corpus import iter_sentences
from elmo.errors import ElmoError
from elmo.tokenize import get_tokenizer
from elmo.vocab import BOS, EOS, Vocabulary


class TrainStream:
    """Endless iterator of :class:`Batch` es of one rank, resumable with ``state_dict``."""

    def __init__(
        self,
        paths: Sequence[Path],
        tokenizer: str,
        vocab: Vocabulary,
        config: BPTTConfig,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.paths = list(paths)
        self.tokenizer = get_tokenizer(tokenizer)
        self.vocab, self.config = vocab, config
        self.rank, self.world_size = rank, world_size
        self.epoch = 0
        self._batcher = self._new_batcher()
        self._batches: Iterator[Batch] | None = None

    def _new_batcher(self) -> BPTTBatcher:
        def sentences(start: int) -> Iterator[list[str]]:
            return iter_sentences(self.paths, self.tokenizer, rank=self.rank,
                                  world_size=self.world_size, start=start)

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


def batch_tensors(
    batch: Batch, indexer: TokenIndexer, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch as BiLanguageModel inputs: char ids (2, B, T, C), targets (2, B, T), mask (B, T).

    Index 0 is the forward direction, 1 the backward one; padded positions get all-zero chars.
    The vocabulary's sentence boundaries become the ones the model's `indexer` knows.
    """
    mask = torch.from_numpy(batch.mask)
    boundary = {BOS: indexer.bos_token, EOS: indexer.eos_token}
    char_ids = torch.stack([
        indexer.batch_to_ids([[boundary.get(w, w) for w in words] for words in direction])
        for direction in (batch.words_fwd, batch.words_bwd)
    ])
    char_ids[:, ~mask] = 0
    targets = torch.from_numpy(np.stack([batch.next_ids, batch.prev_ids]))
    return char_ids.to(device), targets.to(device), mask.to(device)
