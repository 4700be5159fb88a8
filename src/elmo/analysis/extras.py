"""Optional dependencies of the analyses (the `analysis` extra), imported when first used."""

from __future__ import annotations

import importlib
from types import ModuleType

from elmo.errors import ElmoError

EXTRA_PACKAGES = {"sklearn": "scikit-learn", "matplotlib": "matplotlib"}


def import_extra(module: str, purpose: str) -> ModuleType:
    """Import `module`, or say which package `purpose` needs and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = EXTRA_PACKAGES.get(module.split(".")[0], module.split(".")[0])
        raise ElmoError(f"{purpose} needs {package}: pip install 'elmo[analysis]' "
                        f"(or pip install {package})") from None
