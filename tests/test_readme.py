"""Every ```python block of README.md runs as written (offline, in a fresh directory)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO

BLOCKS = re.findall(r"^```python\n(.*?)^```", (REPO / "README.md").read_text(encoding="utf-8"),
                    flags=re.S | re.M)


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_OFFLINE", "1")  # a block that needs a download fails, not waits
    monkeypatch.setenv("ELMO_CACHE", str(tmp_path / "cache"))
    exec(compile(BLOCKS[index], f"README.md python block {index + 1}", "exec"), {})
