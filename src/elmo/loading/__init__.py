"""Loading models: names and paths (`resolve`, one record per source; what they resolve to,
`model_files`), the release catalogue (`releases`), the file
formats (`formats`, one record each in `formats.registry`), the one loader (`load`) and what a
model is (`describe`)."""

from elmo.loading.load import LoadedModel, load_model, load_pretrained
from elmo.loading.model_files import ModelFiles
from elmo.loading.resolve import resolve_model

__all__ = ["LoadedModel", "ModelFiles", "load_model", "load_pretrained", "resolve_model"]
