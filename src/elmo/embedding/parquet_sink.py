"""ParquetBlockSink: one block of `elmo embed --ray` from the embedding job (needs pyarrow).

A block's rows (`elmo.io.parquet_output`: its source, each entry's line number, attributes,
text, tokens and what `keep` makes of its layers) are held until the block is complete, then
written as one Parquet file, atomically: a block is there whole or not at all, and the run's
manifest (`ParquetOutput`) resumes the run block by block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from elmo.embedding.job import Item
from elmo.io.parquet_output import write_block


class ParquetBlockSink:
    """A `Sink` writing the block file `path` of the entries of `source` from line `first`
    on (the job numbers them from 0). After `finish`, `items` and `tokens` count what it
    wrote."""

    def __init__(self, path: Path, source: str, first: int,
                 keep: Callable[[np.ndarray], np.ndarray]) -> None:
        self.path, self.source, self.first, self.keep = path, source, first, keep
        self.restarted = False
        self.rows: list[tuple[Item, np.ndarray]] = []

    def open(self, identity: dict[str, str]) -> int:
        self.rows = []
        return 0

    def save(self, items: Sequence[Item], layers: Sequence[np.ndarray]) -> None:
        self.rows += [(item, self.keep(a)) for item, a in zip(items, layers, strict=True)]

    def discard(self) -> None:
        self.rows = []

    def finish(self) -> None:
        items = [item for item, _ in self.rows]
        attrs = {name: [item.attrs[name] for item in items] for name in items[0].attrs}
        write_block(self.path, self.source, [self.first + item.number for item in items],
                    [item.text for item in items], [item.tokens for item in items],
                    [kept for _, kept in self.rows], attrs)

    @property
    def items(self) -> int:
        return len(self.rows)

    @property
    def tokens(self) -> int:
        return sum(len(item.tokens) for item, _ in self.rows)
