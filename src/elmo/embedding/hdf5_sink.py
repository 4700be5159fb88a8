"""HDF5Sink: the job's items into the layout of AllenNLP's `elmo` command, a dataset each;
and PartialSink, the resumable work that it and every other HDF5 layout (bio_embeddings' stage,
the neighbours index) keep.

Each item's dataset is named by the item's name and holds what `keep` makes of its layers (the
layer choice, pooling and type of `EmbedSettings.reduce`), with the item's attributes. Work is
saved in the directory OUTPUT.partial, a segment per chunk (`elmo.io.hdf5_output.PartialOutput`),
and OUTPUT assembled from it at the end, under a temporary name then renamed; `complete(out)`
adds what else the file holds (`sentence_to_index`, a shard's identity, a cache's attributes).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import h5py
import numpy as np

from elmo.embedding.job import Item
from elmo.io.hdf5_output import PartialOutput


class PartialSink:
    """The part of a `Sink` that keeps its work in a `PartialOutput` at `path` (a directory of
    segments, resumed by a run of the same identity; `start`: the number of its first item):
    a sink of an HDF5 layout adds `save` (what a segment holds) and `finish` (the output)."""

    def __init__(self, path: Path, start: int = 0) -> None:
        self.path, self.start, self.restarted = path, start, False

    def open(self, identity: dict[str, str]) -> int:
        self.identity = identity
        self.partial = PartialOutput(self.path, identity, start=self.start)
        self.restarted = self.partial.restarted
        return self.partial.done

    def discard(self) -> None:
        shutil.rmtree(self.path)


class HDF5Sink(PartialSink):
    """A `Sink` writing OUTPUT (see the module docstring). `start`: the number of its first
    item (a shard's first line). After `finish`, `empty` names the datasets made from no
    tokens."""

    def __init__(self, output: Path, keep: Callable[[np.ndarray], np.ndarray], start: int = 0,
                 complete: Callable[[h5py.File], None] | None = None) -> None:
        super().__init__(output.with_name(output.name + ".partial"), start)
        self.output, self.keep, self.complete = output, keep, complete
        self.empty: list[str] = []

    def save(self, items: Sequence[Item], layers: Sequence[np.ndarray]) -> None:
        self.partial.save(items[-1].number + 1,
                          [(item.name, self.keep(a)) for item, a in zip(items, layers,
                                                                        strict=True)],
                          attrs={item.name: item.attrs for item in items if item.attrs},
                          empty=[item.name for item in items if not item.tokens])

    def finish(self) -> None:
        with self.partial.final(self.output) as out:
            self.empty = self.partial.assemble(out)
            if self.complete is not None:
                self.complete(out)
