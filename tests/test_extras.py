"""Optional packages: a missing one is a clear error that names our extra, never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from elmo.errors import ElmoError
from elmo.extras import EXTRA_PACKAGES, MissingExtraError, import_extra
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


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path for fake installed packages; what they import is forgotten after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def install_fake(site: Path, files: dict[str, str], version: str | None = None) -> None:
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text, encoding="utf-8")
    if version:  # what pip leaves, read by importlib.metadata
        top = next(iter(files)).split("/")[0]
        (site / f"{top}-{version}.dist-info").mkdir()
        (site / f"{top}-{version}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {top}\nVersion: {version}\n", encoding="utf-8")


def test_an_installed_package_that_fails_to_import_is_named_with_its_error(site):
    # flair installed beside huggingface_hub 1.x: transformers' version check raises
    install_fake(site, {"fakeflair/__init__.py": "import fakedeps.versions\n",
                        "fakedeps/__init__.py": "",
                        "fakedeps/versions.py": "raise ImportError('huggingface-hub>=0.34.0,"
                                                "<1.0 is required, but found 1.1.2.\\n"
                                                "Try: pip install fakedeps -U')\n"},
                 version="0.15.1")
    with pytest.raises(MissingExtraError) as caught:
        import_extra("fakeflair", "elmo.flair")
    message = str(caught.value)
    assert message.startswith("elmo.flair needs fakeflair, which is installed (fakeflair "
                               "0.15.1) but failed to import: ImportError in fakedeps.versions: "
                               "huggingface-hub>=0.34.0,<1.0 is required, but found 1.1.2. "
                               "(make the installed versions agree")
    assert "pip install" not in message and "\n" not in message  # the CLI prints one line
    assert isinstance(caught.value.__cause__, ImportError)  # the traceback is kept


def test_a_missing_dependency_of_an_installed_package_is_not_taken_for_its_absence(site):
    install_fake(site, {"fakespacy/__init__.py": "from fakespacy import util\n",
                        "fakespacy/util.py": "import elmo_no_such_dependency\n"})
    with pytest.raises(MissingExtraError, match=r"^this needs fakespacy, which is installed but "
                       r"failed to import: ModuleNotFoundError in fakespacy.util: No module "
                       r"named 'elmo_no_such_dependency'"):
        import_extra("fakespacy", "this")


def test_an_absent_package_or_submodule_still_says_what_to_install(site):
    with pytest.raises(MissingExtraError, match=r"^this needs elmo_absent: pip install "
                       r"elmo_absent$"):
        import_extra("elmo_absent.sub", "this")
    install_fake(site, {"fakeray/__init__.py": ""})
    with pytest.raises(MissingExtraError, match=r"^this needs fakeray: pip install fakeray$"):
        import_extra("fakeray.data", "this")
