"""Training helpers: a small corpus, a tiny run's config and CLI arguments, and the files a
run leaves, compared bit for bit."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file

from elmo.runs import CHECKPOINT_NAME, read_checkpoint_meta
from elmo.training.config import TrainConfig
from elmo.training.trainer import Trainer

SUBJECTS = ["the cat", "a dog", "my friend", "the teacher", "our neighbour"]
VERBS = ["sees", "likes", "finds", "watches", "helps"]
OBJECTS = ["the bird", "a ball", "the old man", "her sister", "the small child"]
ENDS = ["today .", "in the park .", "every morning .", "again .", "at home ."]


def write_corpus(directory: Path, n_train: int = 200, n_valid: int = 40) -> tuple[Path, Path]:
    """A small template-grammar corpus (34 word types): train.txt and valid.txt."""
    rng = random.Random(0)
    lines = [" ".join(rng.choice(part) for part in (SUBJECTS, VERBS, OBJECTS, ENDS))
             for _ in range(n_train + n_valid)]
    directory.mkdir(parents=True, exist_ok=True)
    train, valid = directory / "train.txt", directory / "valid.txt"
    train.write_text("\n".join(lines[:n_train]) + "\n", encoding="utf-8")
    valid.write_text("\n".join(lines[n_train:]) + "\n", encoding="utf-8")
    return train, valid


def write_documents(directory: Path, n_train: int = 200) -> dict[str, Path]:
    """The training sentences of `write_corpus` (train.txt) grouped into documents of
    paragraphs of 1-3 sentences, in the two forms WikiExtractor writes: a folder of wiki_NN
    files (two subfolders, a document's title line after its header, as WikiExtractor writes
    it) and JSON lines (one document per line, paragraphs joined by newlines, as its --json
    writes them). Both read as the same sentences as train.txt; returns the three paths."""
    train, _ = write_corpus(directory, n_train=n_train, n_valid=1)
    sentences = train.read_text(encoding="utf-8").splitlines()
    rng = random.Random(1)
    paragraphs = []
    while sentences:
        n = rng.randint(1, 3)
        paragraphs.append(" ".join(sentences[:n]))
        sentences = sentences[n:]
    documents = [paragraphs[i:i + 4] for i in range(0, len(paragraphs), 4)]
    wiki = directory / "wiki"
    jsonl = directory / "docs.jsonl"
    lines = []
    files: dict[Path, list[str]] = {}
    for i, doc in enumerate(documents):
        title = f"Document {i}"
        lines.append(json.dumps({"id": str(i), "url": f"?curid={i}", "title": title,
                                 "text": "\n".join(doc)}))
        part = 3 * i // len(documents)  # three files in two folders, in document order
        name = wiki / ("AA", "AA", "AB")[part] / f"wiki_{part % 2:02d}"
        files.setdefault(name, []).append(
            f'<doc id="{i}" url="?curid={i}" title="{title}">\n{title}\n\n'
            + "".join(p + "\n" for p in doc) + "</doc>\n")
    for name, docs in files.items():
        name.parent.mkdir(parents=True, exist_ok=True)
        name.write_text("".join(docs), encoding="utf-8")
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"text": train, "wikiextractor": wiki, "jsonl": jsonl}


def tiny_config(train: Path, valid: Path | None = None, **overrides) -> TrainConfig:
    """A tiny CPU run of 20 steps on `train` (checkpoint and evaluation every 10)."""
    options = dict(train=[str(train)], valid=None if valid is None else str(valid),
                   preset="tiny", batch_size=8, unroll_steps=10, max_steps=20,
                   checkpoint_every=10, eval_every=10, log_every=5, device="cpu")
    options.update(overrides)
    if options.get("init_from"):
        options["preset"] = None
    return TrainConfig(**options)


def run(config: TrainConfig, out: Path):
    """Train `config` into `out`, without a progress bar."""
    return Trainer(config, out, progress=False).run()


def run_files(directory: Path) -> dict[str, object]:
    """Everything a run leaves that must be reproducible: tensors, checkpoint metadata,
    metrics without the timing."""
    files: dict[str, object] = {}
    for name in (CHECKPOINT_NAME, "model.safetensors"):
        files.update({f"{name}:{k}": v for k, v in load_file(directory / name).items()})
    files["meta"] = read_checkpoint_meta(directory / CHECKPOINT_NAME)
    files["metrics"] = [
        {k: v for k, v in json.loads(line).items() if k not in ("tokens_per_s", "minutes")}
        for line in (directory / "metrics.jsonl").read_text().splitlines()
    ]
    return files


def assert_identical(got: dict[str, object], want: dict[str, object]) -> None:
    """Bitwise equality of two `run_files`."""
    assert got.keys() == want.keys()
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(got[key], value), key
        else:
            assert got[key] == value, key


def elmo_killed(args: list[str], n_threads: int, kill_when: Callable[[], bool]) -> None:
    """`python -m elmo ARGS` in a subprocess with `n_threads` torch threads, killed with
    SIGKILL as soon as `kill_when()` is True (which must happen before the command ends)."""
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "OMP_NUM_THREADS": str(n_threads),
           "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "elmo", *args], env=env)
    try:
        deadline = time.monotonic() + 300
        while not kill_when():
            assert proc.poll() is None, "the run ended before the moment to kill it"
            assert time.monotonic() < deadline
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


def train_args(train, valid, out, *extra) -> list[str]:
    """`elmo train` arguments for a tiny run on `train` (and `valid`, unless None)."""
    args = ["train", "--train", train, "--out", out, "--preset", "tiny", "--batch-size", "8",
            "--unroll-steps", "10", "--quiet", *extra]
    if valid is not None:
        args += ["--valid", valid]
    return [str(a) for a in args]
