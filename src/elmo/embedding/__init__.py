"""Embedding: the settings, the Embedder, and the one resumable job that embeds items into a
sink, read bottom-up: `settings` (EmbedSettings, whose fields give the commands their flags),
`job` (what a job is made of: items, the `Sink` protocol, its progress), `hdf5_sink` (the
layout of AllenNLP's `elmo` command), `files` (`elmo embed`'s job: an input file of any kind
with entries -> HDF5), `embedder` (Embedder: sentences -> arrays; it runs the job,
`Embedder.run_job`) and `parquet_sink` (a block of `elmo embed --ray`; it needs pyarrow, so
it is imported by `elmo.ray` only)."""

from elmo.embedding.embedder import Embedder, TokenVectorCache, embed_file
from elmo.embedding.files import EmbedFileOptions, InputLine, read_lines
from elmo.embedding.hdf5_sink import HDF5Sink, PartialSink
from elmo.embedding.job import Item, Progress, Sink
from elmo.embedding.settings import EmbedSettings

__all__ = ["EmbedFileOptions", "EmbedSettings", "Embedder", "HDF5Sink", "InputLine", "Item",
           "PartialSink", "Progress", "Sink", "TokenVectorCache", "embed_file", "read_lines"]
