"""The project's scripts (benchmarks/, tools/) imported as modules by the tests of them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def script_module(path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script at `path` as a module, for one test: its folder first on sys.path (a
    benchmark imports `common`) and the module in sys.modules, where its dataclasses look
    themselves up."""
    monkeypatch.syspath_prepend(str(path.parent))
    name = f"{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module
