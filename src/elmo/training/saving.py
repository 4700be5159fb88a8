"""Writing a run's model: into the run directory (our format, the softmax included) and, with
`--weights-copy DIR`, also as a directory of small files: fp16 safetensors shards of at most a
given size each (`model-00001-of-0000N.safetensors` and `model.safetensors.index.json`, Hugging
Face's layout), with `config.json`, `vocab.txt`, `run.json` and `progress.json`, where the run
stood (`CopyProgress`). DIR is replaced whole at each save, so it always holds one complete
model and its progress; `elmo.load_model(DIR)`, `elmo perplexity DIR` and `elmo train
--init-from DIR` read it (the last continues the run: `elmo.training.continuation`).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from elmo.errors import ElmoError, ModelFileError
from elmo.io.atomic import atomic_directory
from elmo.loading.formats.native import INDEX_NAME, RUN_NAME, VOCAB_NAME, save_pretrained
from elmo.loading.formats.untrusted import own_file, read_json
from elmo.modules.language_model import BiLanguageModel

PROGRESS_NAME = "progress.json"


@dataclass
class CopyProgress:
    """Where a run stood when its weights copy was written: what resuming it needs of its
    checkpoint but the optimizer state and the carried LSTM states (too large to travel)."""

    step: int  # optimizer steps taken
    tokens_seen: int  # step x rows x unroll steps x processes
    streams: list[dict[str, Any]]  # each rank's data position: RankState.stream
    best_valid_ppl: float | None = None

    @classmethod
    def read(cls, directory: Path) -> CopyProgress | None:
        """The progress the weights copy `directory` records; None where it has none (an
        older copy, or another model)."""
        path = own_file(directory, PROGRESS_NAME)
        if not path.is_file():
            return None
        data = read_json(path)
        names = {f.name for f in dataclasses.fields(cls)}
        required = {"step", "tokens_seen", "streams"}
        if not isinstance(data, dict) or not names >= data.keys() >= required:
            raise ModelFileError(f"{path} is not the progress of a weights copy: its fields "
                                 f"are {sorted(names)}")
        progress = cls(**data)
        counts = (progress.step, progress.tokens_seen)
        if not (all(isinstance(n, int) and n >= 0 for n in counts)
                and isinstance(progress.streams, list)
                and all(isinstance(s, dict) for s in progress.streams)
                and isinstance(progress.best_valid_ppl, float | int | None)):
            raise ModelFileError(f"{path}: step and tokens_seen must be counts, streams a list "
                                 "of data positions, best_valid_ppl a number or null")
        return progress


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


class WeightsCopy:
    """The weights copy of the run in `run_dir`: `directory`, replaced whole at each `write`
    by the model in fp16 shards of at most `shard_mib` MiB, the run directory's vocabulary and
    options, and the run's progress; its size is said (`say`) once."""

    def __init__(self, directory: Path, run_dir: Path, shard_mib: float,
                 say: Callable[[str], None]) -> None:
        self.directory, self.run_dir, self.say = directory, run_dir, say
        self.max_shard_bytes = int(shard_mib * 2**20)
        self.reported = False

    def write(self, lm: BiLanguageModel, progress: CopyProgress) -> None:
        """Replace the copy with `lm` at `progress`."""
        with atomic_directory(self.directory) as new:
            save_language_model(lm, new, dtype=torch.float16,
                                max_shard_bytes=self.max_shard_bytes)
            for name in (VOCAB_NAME, RUN_NAME):
                shutil.copyfile(self.run_dir / name, new / name)
            text = json.dumps(dataclasses.asdict(progress), separators=(",", ":"))
            (new / PROGRESS_NAME).write_text(text + "\n", encoding="utf-8")
        if not self.reported:
            self.reported = True
            sizes = [f.stat().st_size / 2**20 for f in self.directory.iterdir()]
            self.say(f"weights copy in {self.directory}: {len(sizes)} files, {sum(sizes):.1f} "
                     f"MiB (the largest {max(sizes):.1f} MiB)")
