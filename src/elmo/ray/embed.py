"""`Embed`: the biLM as a callable class for `ray.data.Dataset.map_batches`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from elmo.embedding import Embedder, EmbedSettings
from elmo.errors import ElmoError
from elmo.memory import AUTO
from elmo.tokenize import Tokenizer, get_tokenizer


class Embed:
    """Adds `tokens` and `embedding` to every row of a Ray Data batch; Ray builds one per
    actor, which loads the model once::

        ds.map_batches(Embed, fn_constructor_kwargs={"model": "default"},
                       compute=ray.data.ActorPoolStrategy(size=2), batch_size=64)

    The batch is a dict of columns (Ray's default batch format); `column` holds one sentence
    per row, split by `tokenizer` (default: the model's, else whitespace). Each row keeps its
    columns and gains `tokens` (list of str) and `embedding`: what the layer choice `layers`
    keeps (`elmo.layer_choice`), float32 (n, D) for "top" or "average", (L+1, n, D) for
    "all", equal to `Embedder.embed_sentences` on the same tokens; an empty or blank line
    gives no tokens and an (0, D) (or (L+1, 0, D)) embedding.
    Rows come back in the batch's order, each with its own array (never stacked into one):
    Ray stores the column as a tensor column, variable-shaped where lengths differ.
    Stateless: a row's vectors do not depend on the batch or actor it lands in.

    `threads`: torch CPU threads of this actor (Ray gives an actor OMP_NUM_THREADS=1).
    `model`, `tokenizer`, `quantize` ("int8"), `device`, `batch_size` (sentences per
    forward pass, default 256) and `max_tokens` (padded tokens per forward pass; "auto":
    16,384 on the CPU, from the free memory on a GPU) are those of
    `Embedder.from_pretrained`; a model that cannot be loaded fails the actor with the
    loader's message, which names it.
    Proteins: `tokenizer="chars"` makes each residue of a sequence (no white space) one
    token, as `elmo embed` does for FASTA.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        layers: str = "average",
        tokenizer: Tokenizer | str | None = None,
        quantize: str | None = None,
        threads: int | None = None,
        column: str = "text",
        device: str | None = None,
        batch_size: int | None = None,
        max_tokens: int | str = AUTO,
    ) -> None:
        settings = EmbedSettings(layers=layers, tokenizer=tokenizer, quantize=quantize,
                                 device=device, batch_size=batch_size, max_tokens=max_tokens)
        if threads is not None:
            if threads < 1:
                raise ValueError(f"threads must be at least 1, got {threads}")
            torch.set_num_threads(threads)
        self.layers, self.column = layers, column
        self.embedder = Embedder.from_pretrained(model, **settings.embedder_options())
        self.layer_choice = settings.layer_choice
        self.layer_choice.check(self.embedder.model.num_layers)
        chosen = self.embedder.tokenizer
        self.tokenize = get_tokenizer(chosen) if isinstance(chosen, str) else chosen

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        if self.column not in batch:
            raise ElmoError(f"the batch has no column {self.column!r} (it has "
                            f"{', '.join(map(repr, batch))}): pass column=NAME to Embed")
        tokens = [self.tokenize(str(text).strip()) for text in batch[self.column]]
        layers = self.embedder.embed_sentences(tokens)
        return {**batch, "tokens": _one_per_row(tokens),
                "embedding": _one_per_row(self.layer_choice.numpy(a) for a in layers)}


def _one_per_row(items: Iterable[Any]) -> np.ndarray:
    """A 1-D object array holding each item as it is (np.array would stack equal shapes)."""
    items = list(items)
    column = np.empty(len(items), dtype=object)
    for row, item in enumerate(items):
        column[row] = item
    return column
