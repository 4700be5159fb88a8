"""Optional dependencies (the package's extras), imported when first used."""

from __future__ import annotations

import importlib
import importlib.metadata
from types import ModuleType

from elmo.errors import ElmoError

DISTRIBUTION = "elmo-bilm"

# top-level module -> (package on PyPI, extra of ours that installs it)
EXTRA_PACKAGES = {
    "sklearn": ("scikit-learn", "analysis"),
    "matplotlib": ("matplotlib", "analysis"),
    "seqeval": ("seqeval", "tasks"),
    "torchcrf": ("pytorch-crf", "tasks"),
    "nltk": ("nltk", "tasks"),
    "scipy": ("scipy", "tasks"),  # CEAF's cluster alignment (coreference)
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
    "transformers": ("transformers", "bench"),  # benchmarks/elmo_vs_bert.py only
    "tokenizers": ("tokenizers", "bench"),
}


class MissingExtraError(ElmoError, ImportError):
    """An optional package is not installed, or is and fails to import; the message says
    which extra installs it, or what went wrong while importing it."""


def import_extra(module: str, purpose: str) -> ModuleType:
    """Import `module`, or raise MissingExtraError: naming the package `purpose` needs when it
    is absent, or the installed package and its error when it fails for another reason (a
    package it needs missing, a version conflict): the first line of its message, the whole
    error chained."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        top = module.split(".")[0]
        package, extra = EXTRA_PACKAGES.get(top, (top, None))
        if not _is_absent(err, module):
            raise MissingExtraError(
                f"{purpose} needs {package}, which is installed{_version(package)} but "
                f"failed to import: {type(err).__name__}{_raised_in(err)}: "
                f"{str(err).splitlines()[0]} (make the "
                "installed versions agree, or install it in a virtual environment of its "
                "own)") from err
        hint = f"pip install '{DISTRIBUTION}[{extra}]' (or pip install {package})" if extra \
            else f"pip install {package}"
        raise MissingExtraError(f"{purpose} needs {package}: {hint}") from None


def _is_absent(err: ImportError, module: str) -> bool:
    """Whether `err` says that `module` itself (or a package above it) is not installed, as
    opposed to an error raised while importing it."""
    parts = module.split(".")
    above = {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
    return isinstance(err, ModuleNotFoundError) and err.name in above


def _version(package: str) -> str:
    try:
        return f" ({package} {importlib.metadata.version(package)})"
    except importlib.metadata.PackageNotFoundError:
        return ""


def _raised_in(err: ImportError) -> str:
    """' in MODULE': the innermost module (not importlib's, nor this one) whose code raised
    `err`, such as a dependency's version check."""
    name, traceback = None, err.__traceback__
    while traceback is not None:
        frame_module = traceback.tb_frame.f_globals.get("__name__", "")
        if not frame_module.startswith(("importlib", "_frozen_importlib", __name__)):
            name = frame_module
        traceback = traceback.tb_next
    return f" in {name}" if name else ""
