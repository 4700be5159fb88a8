"""The inputs of an exported graph for tokenized sentences, as numpy arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from elmo.modules.bilm import BiLM
from elmo.onnx.graph import INPUTS


def onnx_inputs(bilm: BiLM, sentences: Sequence[Sequence[str]]) -> dict[str, np.ndarray]:
    """{"char_ids": (B, T, width) int64, "lengths": (B,) int64} for `bilm`'s exported graph:
    its own ids (`bilm.batch_to_ids`), absent tokens all 0."""
    char_ids = bilm.batch_to_ids(sentences).numpy()
    lengths = np.array([len(s) for s in sentences], dtype=np.int64)
    return dict(zip(INPUTS, (char_ids, lengths), strict=True))
