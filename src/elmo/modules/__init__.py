"""The torch modules of ELMo, for people who compose their own models."""

from elmo.modules.bilm import BiLM, BiLMOutput
from elmo.modules.char_cnn import CharCNNEncoder, Highway
from elmo.modules.elmo import MixedBiLM
from elmo.modules.lstm import ProjectedLSTM, StackedLSTM
from elmo.modules.scalar_mix import ScalarMix

__all__ = ["BiLM", "BiLMOutput", "CharCNNEncoder", "Highway", "MixedBiLM", "ProjectedLSTM",
           "ScalarMix", "StackedLSTM"]
