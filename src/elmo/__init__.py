"""elmo: deep contextualized word representations (Peters et al. 2018) in PyTorch."""

from elmo.chars import batch_to_ids
from elmo.config import BiLMConfig
from elmo.formats import load_bilm_tf, load_pretrained, save_bilm_tf, save_pretrained
from elmo.modules import BiLM, BiLMOutput, CharCNNEncoder, Elmo, ScalarMix

__version__ = "0.1.0"

__all__ = [
    "BiLM",
    "BiLMConfig",
    "BiLMOutput",
    "CharCNNEncoder",
    "Elmo",
    "ScalarMix",
    "batch_to_ids",
    "load_bilm_tf",
    "load_pretrained",
    "save_bilm_tf",
    "save_pretrained",
]
