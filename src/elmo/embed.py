"""The Embedder's public path before the `elmo.embedding` package: its names, re-exported."""

from elmo.embedding.embedder import CHUNK_BATCHES, Embedder, TokenVectorCache, unpad
from elmo.embedding.files import EmbedFileOptions, InputLine, read_lines
from elmo.embedding.settings import (
    BATCH_SIZE,
    OUTPUT_DTYPES,
    STATEFUL_BATCH_SIZE,
    EmbedSettings,
    batch_size_or_default,
)
from elmo.layer_choice import select_layers

__all__ = ["BATCH_SIZE", "CHUNK_BATCHES", "OUTPUT_DTYPES", "STATEFUL_BATCH_SIZE", "Embedder",
           "EmbedFileOptions", "EmbedSettings", "InputLine", "TokenVectorCache",
           "batch_size_or_default", "read_lines", "select_layers", "unpad"]
