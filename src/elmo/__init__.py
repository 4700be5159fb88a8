"""elmo: deep contextualized word representations (Peters et al. 2018) in PyTorch."""

from elmo.allennlp import Elmo, ElmoEmbedder
from elmo.chars import batch_to_ids
from elmo.config import BiLMConfig
from elmo.embed import Embedder
from elmo.errors import ElmoError
from elmo.loading import LoadedModel, load_model, load_pretrained
from elmo.loading.formats import load_bilm_tf, save_bilm_tf, save_pretrained
from elmo.loading.publish import push_to_hub
from elmo.modules import BiLM, BiLMOutput, CharCNNEncoder, ScalarMix
from elmo.tokenize import TOKENIZER_NAMES, Tokenizer, get_tokenizer

__version__ = "0.1.0"

__all__ = [
    "BiLM",
    "BiLMConfig",
    "BiLMOutput",
    "CharCNNEncoder",
    "Elmo",
    "ElmoEmbedder",
    "ElmoError",
    "Embedder",
    "LoadedModel",
    "ScalarMix",
    "TOKENIZER_NAMES",
    "Tokenizer",
    "batch_to_ids",
    "get_tokenizer",
    "load_bilm_tf",
    "load_model",
    "load_pretrained",
    "push_to_hub",
    "save_bilm_tf",
    "save_pretrained",
]
