"""What the one resumable embedding job is made of: items, a sink, a progress bar.

The Embedder runs the job (`Embedder.run_job(items, sink, identity, progress)`): it opens the
sink with the run's identity (what the caller says the run is made of, and the Embedder's
`settings()`: its weights and batching), which resumes the work a killed run of the same
identity saved and drops any other; then embeds the items not saved yet, a chunk of the
Embedder at a time (`Embedder.chunks`: a chunk never crosses a multiple of `chunk_size` counted
from item 0, so a resumed run computes every item in the batch it had in a run from the start,
bit for bit), and hands each chunk's layers to the sink, which stores what it keeps of them as
one segment, atomically; the sink then makes the complete output. Every long embedding of the
package is this job: `elmo embed` (`elmo.embedding.files`, HDF5), each block of `elmo embed
--ray` (Parquet), bio_embeddings' embed stage, the neighbours index of the analyses and the
feature cache of the tasks. Nothing here knows the Embedder.

A sink is anything with the methods of `Sink`; tests/test_embedding_job.py adds a toy one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
from tqdm import tqdm


@dataclass
class Item:
    """One thing to embed: its `number` in the job (counted from the job's first item, 0
    unless it is a shard of a larger input: what resuming and chunks count), its `name` in
    the output, its `tokens`, what the progress bar counts of it (`size`), its attributes in
    the output, the `text` it was read from, and `where` it is for an error ("FILE, line 12";
    empty: the Embedder's own words)."""

    number: int
    name: str
    tokens: list[str]
    size: int = 1
    attrs: dict[str, str] = field(default_factory=dict)
    text: str = ""
    where: str = ""


class Sink(Protocol):
    """Where a job's items go; it keeps its work where a killed run can find it.

    `open(identity)`: start, or resume the work saved by a run of the same identity (work of
    another is dropped, and `restarted` says so); returns the number of the first item not
    saved. `save(items, layers)`: store consecutive items given their layers (L+1, n_i, D)
    as one segment, atomically (a kill loses at most the segment being written). `discard()`:
    drop the work (the input turned out bad: nothing worth resuming). `finish()`: make the
    complete output from the segments and put it in place (renamed: atomic). `path`: where
    the work in progress is, for messages."""

    path: Path
    restarted: bool

    def open(self, identity: dict[str, str]) -> int: ...

    def save(self, items: Sequence[Item], layers: Sequence[np.ndarray]) -> None: ...

    def discard(self) -> None: ...

    def finish(self) -> None: ...


@dataclass(frozen=True)
class Progress:
    """The progress bar of a job and what it says of a resumed run. `desc`: the bar's words;
    `noun`: what an item is ("line", "record"); `count`: the job's items (for "16 of 40 lines
    were embedded before"); `unit`: what the bar counts, the items' `size` (None: items);
    `total`: the bar's total; `before(start)`: the units of the items before item `start`
    (None: `start` - `first`); `first`: the number of the job's first item."""

    desc: str
    noun: str = "item"
    count: int | None = None
    unit: str | None = None
    total: int | None = None
    before: Callable[[int], int] | None = None
    first: int = 0
    enabled: bool = True

    def bar(self, done: int) -> tqdm:
        """A bar that starts with the units of the items before `done`."""
        initial = self.before(done) if self.before is not None else done - self.first
        unit = self.unit or self.noun
        return tqdm(total=self.total, initial=initial, unit=unit, unit_scale=unit == "residue",
                    disable=not self.enabled, desc=self.desc)


# The layers of a chunk's token lists, the first numbered `start`: `Embedder.iter_embeddings`
# unless a job computes them otherwise (bio_embeddings' fallback to the CPU).
Compute = Callable[[list[list[str]], int], list[np.ndarray]]


def tell_resumed(path: Path, restarted: bool, done: int, total: int | None, noun: str) -> None:
    """Say on stderr that the work left at `path` by another run was dropped (`restarted`),
    or that `done` of its `total` `noun`s are kept."""
    if restarted:
        print(f"elmo: {path} was left by a run of another input, model or setting: "
              "starting anew", file=sys.stderr)
    if done:
        of = f" of {total:,}" if total is not None else ""
        print(f"elmo: resuming {path}: {done:,}{of} {noun}s were embedded before",
              file=sys.stderr)
