"""The file job's public path before the `elmo.embedding` package: its names, re-exported."""

from elmo.embedding.embedder import embed_file
from elmo.embedding.files import EmbedFileOptions, InputLine, read_lines
from elmo.embedding.settings import OUTPUT_DTYPES, POOL_MODES, EmbedSettings

__all__ = ["OUTPUT_DTYPES", "POOL_MODES", "EmbedFileOptions", "EmbedSettings", "InputLine",
           "embed_file", "read_lines"]
