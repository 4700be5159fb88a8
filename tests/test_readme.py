"""Every ```python block of README.md and docs/*.md runs as written (offline, fresh dir)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def python_blocks(path: Path) -> list[str]:
    """The bodies of the ```python fenced blocks of a Markdown file."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")  # [text](target#anchor)

BLOCKS = [(path.relative_to(REPO), number, block)
          for path in DOCUMENTS for number, block in enumerate(python_blocks(path), 1)]


def test_readme_and_docs_have_python_blocks():
    assert python_blocks(REPO / "README.md")
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("name, number, block", BLOCKS,
                         ids=[f"{name}-{number}" for name, number, _ in BLOCKS])
def test_python_block_runs(name, number, block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_OFFLINE", "1")  # a block that needs a download fails, not waits
    monkeypatch.setenv("ELMO_CACHE", str(tmp_path / "cache"))
    code = compile(block, f"{name} python block {number}", "exec")
    exec(code, {})
    exec(code, {})  # twice: a block must not fail on the outputs of its own first run


def test_readme_first_example_then_its_shell_lines_run_in_one_directory(tmp_path, monkeypatch,
                                                                      capsys):
    """A reader runs the first example's Python, then the `elmo` lines after it, in one place."""
    from elmo.cli import main

    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## A first example"):text.index("## Documentation")]
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", section, flags=re.S | re.M)
    lines = [line.split("#")[0] for info, block in blocks if not info
             for line in block.splitlines() if line.startswith("elmo ")]
    assert lines
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    exec(compile(python_blocks(REPO / "README.md")[0], "README.md python block 1", "exec"), {})
    for line in lines:
        try:
            status = main(shlex.split(line)[1:])
        except SystemExit as exit_:  # --help
            status = exit_.code
        assert status == 0, (line, capsys.readouterr().err)


def test_relative_links_resolve():
    """Every relative Markdown link of README.md and docs/*.md names a file that exists."""
    broken = [f"{path.relative_to(REPO)}: {target}"
              for path in DOCUMENTS
              for target in LINK.findall(path.read_text(encoding="utf-8"))
              if "://" not in target and not (path.parent / target).exists()]
    assert not broken, f"links to missing files: {broken}"
