"""Loading models: names and paths (`resolve`), the release catalogue (`releases`), the file
formats (`formats`, one record each in `formats.registry`), the one loader (`load`) and what a
model is (`describe`)."""

from elmo.loading.load import LoadedModel, load_model, load_pretrained
from elmo.loading.resolve import ModelFiles, resolve_model

__all__ = ["LoadedModel", "ModelFiles", "load_model", "load_pretrained", "resolve_model"]
