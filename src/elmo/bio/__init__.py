"""Proteins: SeqVec's and bio_embeddings' names on any biLM (`SeqVecEmbedder`), and
bio_embeddings' pipeline (`elmo.bio.pipeline.run_pipeline`: its YAML config, its output
folder)."""

from elmo.bio.seqvec import SeqVecEmbedder

__all__ = ["SeqVecEmbedder"]
