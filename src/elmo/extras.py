"""Optional dependencies (the package's extras), imported when first used."""

from __future__ import annotations

import importlib
from types import ModuleType

from elmo.errors import ElmoError

DISTRIBUTION = "elmo-bilm"

# top-level module -> (package on PyPI, extra of ours that installs it)
EXTRA_PACKAGES = {
    "sklearn": ("scikit-learn", "analysis"),
    "matplotlib": ("matplotlib", "analysis"),
    "seqeval": ("seqeval", "tasks"),
    "torchcrf": ("pytorch-crf", "tasks"),
    "sacremoses": ("sacremoses", "moses"),
    "jieba": ("jieba", "zh"),
    "gensim": ("gensim", "word2vec"),
    "fastapi": ("fastapi", "serve"),
    "uvicorn": ("uvicorn", "serve"),
    "prometheus_client": ("prometheus-client", "serve"),
    "orjson": ("orjson", "serve"),
    "ray": ("ray", "ray"),  # ray[data]: Ray Data with pyarrow and pandas
    "pyarrow": ("pyarrow", "ray"),
    "huggingface_hub": ("huggingface_hub", "hub"),
    "yaml": ("pyyaml", "bio"),
    "plotly": ("plotly", "bio"),
    "umap": ("umap-learn", "bio"),
    "onnx": ("onnx", "onnx"),
    "onnxruntime": ("onnxruntime", "onnx"),
    "flair": ("flair", "flair"),
    "spacy": ("spacy", "spacy"),
}


class MissingExtraError(ElmoError, ImportError):
    """An optional package is not installed; the message says which extra installs it."""


def import_extra(module: str, purpose: str) -> ModuleType:
    """Import `module`, or raise MissingExtraError naming the package `purpose` needs."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        package, extra = EXTRA_PACKAGES.get(top, (top, None))
        hint = f"pip install '{DISTRIBUTION}[{extra}]' (or pip install {package})" if extra \
            else f"pip install {package}"
        raise MissingExtraError(f"{purpose} needs {package}: {hint}") from None
