"""Embed any records that carry tokens, each once for all layers, with a progress bar."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import numpy as np
from tqdm import tqdm

from elmo.embedding import Embedder

Item = TypeVar("Item")


def embed_items(
    embedder: Embedder,
    items: Iterable[Item],
    tokens: Callable[[Item], Sequence[str]],
    desc: str = "embedding",
    progress: bool = True,
) -> Iterator[tuple[Item, np.ndarray]]:
    """(item, layers (L+1, n, D)) for every item with at least one token, in input order.

    Streams: the Embedder's fast path regroups a bounded chunk of sentences by length, so
    memory does not grow with the number of items.
    """
    kept, to_embed = itertools.tee(item for item in items if len(tokens(item)) > 0)
    embedded = embedder.iter_embeddings(tokens(item) for item in to_embed)
    with tqdm(desc=desc, unit=" tok", disable=not progress) as bar:
        for item, (_, layers) in zip(kept, embedded, strict=True):
            bar.update(layers.shape[1])
            yield item, layers
