"""Optional packages: a missing one is a clear error that names our extra, never a traceback."""

from __future__ import annotations

import sys

import pytest

from elmo.errors import ElmoError
from elmo.extras import EXTRA_PACKAGES, import_extra
from elmo.tasks.metrics import span_f1
from elmo.tasks.tagger import make_crf


@pytest.mark.parametrize(("module", "package_extra"), sorted(EXTRA_PACKAGES.items()))
def test_missing_package_names_the_extra(monkeypatch, module, package_extra):
    package, extra = package_extra
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(ElmoError, match=rf"needs {package}: pip install 'elmo-bilm\[{extra}\]'"):
        import_extra(module, "this")


def test_tasks_report_a_missing_extra_as_a_user_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "seqeval.metrics", None)
    with pytest.raises(ElmoError, match=r"span F1 needs seqeval"):
        span_f1([["B-X"]], [["B-X"]])
    monkeypatch.setitem(sys.modules, "torchcrf", None)
    with pytest.raises(ElmoError, match=r"CRF needs pytorch-crf: pip install 'elmo-bilm\[tasks\]'"):
        make_crf(3)
