"""Model file formats: the official bilm-tf pair, our safetensors directory, and
ELMoForManyLangs directories and AllenNLP archives (read only); one record each in
`registry.FORMATS`."""

from elmo.loading.formats.bilm_tf import WeightsMismatchError, load_bilm_tf, save_bilm_tf
from elmo.loading.formats.efml import load_efml
from elmo.loading.formats.native import load_native, save_pretrained

__all__ = [
    "WeightsMismatchError",
    "load_bilm_tf",
    "load_efml",
    "load_native",
    "save_bilm_tf",
    "save_pretrained",
]
