"""Model file formats: the official bilm-tf pair, our safetensors directory, and
ELMoForManyLangs directories (read only)."""

from elmo.formats.bilm_tf import WeightsMismatchError, load_bilm_tf, save_bilm_tf
from elmo.formats.efml import load_efml
from elmo.formats.native import load_native, save_pretrained

__all__ = [
    "WeightsMismatchError",
    "load_bilm_tf",
    "load_efml",
    "load_native",
    "save_bilm_tf",
    "save_pretrained",
]
