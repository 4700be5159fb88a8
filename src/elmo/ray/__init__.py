"""Embedding corpora with Ray Data (the [ray] extra): `Embed`, a callable class for
`ray.data.Dataset.map_batches`, and `embed_files`, the resumable job of `elmo embed --ray`
(docs/scaling.md)."""

from elmo.ray.embed import Embed
from elmo.ray.files import RayEmbedRun, embed_files, input_files

__all__ = ["Embed", "RayEmbedRun", "embed_files", "input_files"]
