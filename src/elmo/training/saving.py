"""Writing a run's model: into the run directory (our format, the softmax included) and, with
`--weights-copy DIR`, also as a directory of small files: fp16 safetensors shards of at most a
given size each (`model-00001-of-0000N.safetensors` and `model.safetensors.index.json`, Hugging
Face's layout), with `config.json`, `vocab.txt` and `run.json`. DIR is replaced whole at each
save, so it always holds one complete model; `elmo.load_model(DIR)`, `elmo perplexity DIR` and
`elmo train --init-from DIR` read it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from elmo.errors import ElmoError
from elmo.io.atomic import atomic_directory
from elmo.loading.formats.native import INDEX_NAME, RUN_NAME, VOCAB_NAME, save_pretrained
from elmo.modules.language_model import BiLanguageModel


def save_language_model(lm: BiLanguageModel, directory: Path, **options: Any) -> None:
    """`lm`'s biLM and softmax (`softmax.*` tensors) in our format in `directory`;
    `options` as `save_pretrained` takes them."""
    softmax = {"softmax.weight": lm.softmax.weight, "softmax.bias": lm.softmax.bias}
    save_pretrained(lm.bilm, directory, extra_tensors=softmax, **options)


def check_weights_copy(directory: Path, run_dir: Path) -> None:
    """ElmoError unless `directory` may receive the weights copies of the run in `run_dir`:
    it is not the run directory nor one that holds it, not a file, and new, empty or a
    weights copy already (each save replaces it whole)."""
    where, run = directory.resolve(), run_dir.resolve()
    if where == run or where in run.parents:
        raise ElmoError(f"--weights-copy {directory} would replace the run directory "
                        f"{run_dir}: give a directory of its own, such as {run_dir / 'fp16'}")
    if directory.exists() and not directory.is_dir():
        raise ElmoError(f"--weights-copy {directory} is a file: give a directory")
    if directory.is_dir() and any(directory.iterdir()) and not (directory / INDEX_NAME).is_file():
        raise ElmoError(f"--weights-copy {directory} holds files but no weights copy ("
                        f"{INDEX_NAME}), and each save replaces it whole: give a new or empty "
                        "directory")


def write_weights_copy(
    lm: BiLanguageModel, run_dir: Path, directory: Path, max_shard_bytes: int
) -> list[Path]:
    """Replace `directory` with `lm` in fp16 shards of at most `max_shard_bytes` and the run
    directory's vocabulary and options; returns its files."""
    with atomic_directory(directory) as new:
        save_language_model(lm, new, dtype=torch.float16, max_shard_bytes=max_shard_bytes)
        for name in (VOCAB_NAME, RUN_NAME):
            shutil.copyfile(run_dir / name, new / name)
    return sorted(directory.iterdir())
