"""The package as users get it: a wheel and an sdist that carry the shipped models, and a
wheel that works when installed into a fresh virtual environment.

The wheel test builds both archives with `python -m build`, installs the wheel (and the local
CPU build of torch, pinned so pip never fetches a CUDA build) into a new venv, and runs it from
a directory outside the repository. It needs no network beyond the package index pip is set up
with; it never skips, so CI fails if it cannot run. The test's own pip (22.3 or later, for
`--python`) installs into the venv, without byte-compiling (Python compiles what it imports):
the venv is made without pip, which it gets only beside build, for build's isolated
environments. That spares most of a minute.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

import elmo
from elmo.embed import Embedder
from elmo.loading.resolve import shipped_models, shipped_root
from tests.conftest import REPO

TORCH = "torch==2.13.0"  # the CPU wheel on this project's machines (see the Makefile)
SENTENCES = "The river bank was muddy .\nShe borrowed money from the bank .\n"


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_version_is_written_once_and_read_by_setuptools():
    project = _pyproject()
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "elmo.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", elmo.__version__)


def test_install_hints_name_our_distribution_not_the_unrelated_elmo():
    """`pip install 'elmo[...]'` would install an alarm-system adapter from PyPI."""
    assert _pyproject()["project"]["name"] == "elmo-bilm"
    wrong = [f"{path.relative_to(REPO)}:{number}"
             for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
                         *sorted((REPO / "src").rglob("*.py"))]
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"pip install '?elmo(\[|\s|'|$)", line)]
    assert not wrong, f"install hints that name the wrong distribution: {wrong}"


def _run(*args: str | Path, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_embeds_with_the_shipped_model(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["ELMO_OFFLINE"] = "1"  # the shipped model must come from the wheel, not a download
    # Build from a copy, so the checkout gets no build/ or egg-info directories.
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(REPO / "src", source / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path, env=env)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python, "-q"]
    _run(*pip, "install", "--no-compile", "build", "pip", cwd=tmp_path, env=env)
    dist = tmp_path / "dist"
    _run(python, "-m", "build", "--outdir", dist, source, cwd=tmp_path, env=env)
    (wheel,), (sdist,) = dist.glob("*.whl"), dist.glob("*.tar.gz")

    # Both archives carry every file of every shipped model, byte for byte in size.
    shipped = {f"{name}/{p.name}": p.stat().st_size for name in shipped_models()
               for p in (shipped_root() / name).iterdir() if p.is_file()}
    assert "default/model.safetensors" in shipped
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = {i.filename.removeprefix("elmo/pretrained/"): i.file_size
                    for i in zf.infolist() if i.filename.startswith("elmo/pretrained/")}
    with tarfile.open(sdist) as tf:
        in_sdist = {m.name.split("/src/elmo/pretrained/", 1)[1]: m.size
                    for m in tf.getmembers() if m.isfile() and "/src/elmo/pretrained/" in m.name}
    assert in_wheel == shipped and in_sdist == shipped

    constraints = tmp_path / "constraints.txt"
    constraints.write_text(TORCH + "\n")
    _run(*pip, "install", "--no-compile", "-c", constraints, TORCH, cwd=tmp_path, env=env)
    _run(*pip, "install", "--no-compile", "-c", constraints, wheel, cwd=tmp_path, env=env)
    torch_version = _run(python, "-c", "import torch; print(torch.__version__)",
                         cwd=tmp_path, env=env).strip()
    assert torch_version.startswith("2.13.0") and "cu" not in torch_version

    outside = tmp_path / "elsewhere"  # not the checkout: `import elmo` must find the wheel
    outside.mkdir()
    where = _run(python, "-c", "import elmo; print(elmo.__version__, elmo.__file__)",
                 cwd=outside, env=env).split()
    assert where[0] == elmo.__version__
    assert Path(where[1]).is_relative_to(venv) and not Path(where[1]).is_relative_to(REPO)
    (outside / "small.txt").write_text(SENTENCES, encoding="utf-8")
    _run(venv / "bin" / "elmo", "embed", "default", "small.txt", "out.hdf5", "--quiet",
         cwd=outside, env=env)
    expected = Embedder.from_pretrained("default").embed_sentences(
        [line.split() for line in SENTENCES.splitlines()])
    with h5py.File(outside / "out.hdf5", "r") as f:
        assert sorted(k for k in f if k != "sentence_to_index") == ["0", "1"]
        for i, layers in enumerate(expected):
            assert f[str(i)].shape == layers.shape == (3, len(SENTENCES.splitlines()[i].split()),
                                                       256)
            np.testing.assert_allclose(f[str(i)][...], layers, atol=1e-5)
