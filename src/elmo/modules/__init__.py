"""The torch modules of ELMo, for people who compose their own models."""

from elmo.modules.bilm import BiLM, BiLMOutput
from elmo.modules.char_cnn import CharCNNEncoder, Highway
from elmo.modules.lstm import ProjectedLSTM, StackedLSTM

__all__ = ["BiLM", "BiLMOutput", "CharCNNEncoder", "Highway", "ProjectedLSTM", "StackedLSTM"]
