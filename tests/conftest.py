"""Shared test fixtures (small random models, the labels of saved figures) and the location of
../shared; helpers shared by test modules are in tests/helpers/."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
import torch

from elmo.config import BiLMConfig
from elmo.modules.bilm import BiLM

REPO = Path(__file__).resolve().parents[1]

# Tests run tiny models: one thread is faster, and immune to OpenMP spin-waits when the
# machine's two cores are busy with something else.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def idle_machine(monkeypatch):
    """Commands run in a test see an idle machine (no note about a busy one in what they
    print), whatever else the host runs; tests of the thread choice set their own load."""
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))


def shared_dir() -> Path | None:
    """`../shared` beside the checkout (or $ELMO_SHARED), if present."""
    candidates = [os.environ.get("ELMO_SHARED"), REPO.parent / "shared"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def require_shared(*parts: str) -> Path:
    """Path under ../shared; skip (fail in CI) when it is absent."""
    root = shared_dir()
    path = root.joinpath(*parts) if root else None
    if path is None or not path.exists():
        reason = f"../shared/{'/'.join(parts)} not found (set ELMO_SHARED to its location)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI must run the tests that need ../shared")
        pytest.skip(reason)
    return path


def random_bilm(seed: int = 0, **overrides) -> BiLM:
    """A `tiny` biLM with random weights (biases too), in eval mode."""
    torch.manual_seed(seed)
    model = BiLM(BiLMConfig.preset("tiny", **overrides))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.5, 0.5)
    return model.eval()


@pytest.fixture
def tiny_bilm() -> BiLM:
    return random_bilm()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A `tiny` random biLM saved as a model folder (for commands that take a MODEL)."""
    from elmo import save_pretrained

    path = tmp_path_factory.mktemp("bilm") / "tiny"
    save_pretrained(random_bilm(), path)
    return path


@pytest.fixture(scope="module")
def bio_model_pair(tmp_path_factory) -> Path:
    """A small random biLM as bilm-tf's options/weights pair, for bio_embeddings' pipeline."""
    from tests.helpers.bio_pipeline import save_model_pair

    return save_model_pair(tmp_path_factory.mktemp("model"))


@pytest.fixture
def bio_job(tmp_path, monkeypatch, bio_model_pair) -> Path:
    """A working directory (made the current one) with fasta.fa (6 proteins) and model/."""
    from tests.helpers.bio_pipeline import prepare_job

    monkeypatch.chdir(tmp_path)
    return prepare_job(tmp_path, bio_model_pair)


@pytest.fixture
def labelled_figures(monkeypatch):
    """The (title, x label, y label) of every axes of every figure saved."""
    from elmo.analysis import plots  # loaded only for the tests that plot

    seen = []
    original = plots._save

    def spy(figure, path):
        seen.extend((a.get_title(), a.get_xlabel(), a.get_ylabel()) for a in figure.axes
                    if a.get_label() != "<colorbar>")
        return original(figure, path)

    monkeypatch.setattr(plots, "_save", spy)
    return seen


def write_text(path: Path, text: str, gz: bool = False) -> Path:
    """Write UTF-8 `text` to `path`, gzipped when `gz`; returns `path`."""
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path
