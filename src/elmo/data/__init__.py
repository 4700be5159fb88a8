"""Corpus streaming and BPTT batching for biLM pretraining."""

from elmo.data.batching import Batch, BPTTBatcher, BPTTConfig
from elmo.data.corpus import count_tokens, expand_paths, iter_lines, iter_sentences

__all__ = [
    "BPTTBatcher",
    "BPTTConfig",
    "Batch",
    "count_tokens",
    "expand_paths",
    "iter_lines",
    "iter_sentences",
]
