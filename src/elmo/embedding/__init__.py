"""Embedding: the settings, the Embedder, and the one resumable job that embeds items into a
sink, read bottom-up: `settings` (EmbedSettings, whose fields give the commands their flags),
`embedder` (Embedder: sentences -> arrays), `job` (run_job: items -> a sink, resumable),
`hdf5_sink` (the layout of AllenNLP's `elmo` command), `files` (`elmo embed`: an input file
of any kind with entries -> HDF5) and `parquet_sink` (a block of `elmo embed --ray`; it needs
pyarrow, so it is imported by `elmo.ray` only)."""

from elmo.embedding.embedder import Embedder, TokenVectorCache
from elmo.embedding.files import EmbedFileOptions, InputLine, embed_file, read_lines
from elmo.embedding.hdf5_sink import HDF5Sink, PartialSink
from elmo.embedding.job import Item, Progress, Sink, run_job
from elmo.embedding.settings import EmbedSettings

__all__ = ["EmbedFileOptions", "EmbedSettings", "Embedder", "HDF5Sink", "InputLine", "Item",
           "PartialSink", "Progress", "Sink", "TokenVectorCache", "embed_file", "read_lines",
           "run_job"]
