"""Continuing a run from its weights copy, the part of a run small enough to travel (a call on
a rented GPU gives back its `--weights-copy` DIR, not the run directory).

`elmo train --init-from DIR`, where DIR is a weights copy that records its progress
(`elmo.training.saving.CopyProgress`), continues DIR's run when this command decides the
batches, the schedule and the model kept as that run did: the values of `SAME_RUN` recorded
in DIR's `run.json` are this command's. Its first step is then the recorded step + 1, with the
lr the schedule has there, on the batch the uninterrupted run trained next (each rank's data
position, as its checkpoint keeps it), and its best validation perplexity is the recorded one.
Not in the copy, so starting fresh: the optimizer's state (Adagrad's sums, Adam's moments) and
the LSTM states carried across windows; the random generators (dropout) are seeded from the
seed, the rank and the step. Otherwise the run is a new one from DIR's weights, from step 0,
and the log names the first value of `SAME_RUN` that differs.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elmo.errors import ModelFileError
from elmo.loading.formats.native import RUN_NAME
from elmo.loading.formats.untrusted import own_file, read_json
from elmo.training.prepare import RunInfo
from elmo.training.saving import PROGRESS_NAME, CopyProgress
from elmo.training.stream import PreparedBatches

# The facts of `run.json` beside the options, and how the log names them.
RUN_FACTS = {"train_files": "the training files", "n_tokens": "the training tokens counted",
             "world_size": "the number of processes"}
# What decides a run's batches, its schedule and the model it keeps: the facts, then options
# of `TrainConfig`, in the order a difference is named.
SAME_RUN = (
    *RUN_FACTS, "input_format", "exclude_titles", "tokenizer", "vocab", "min_count",
    "max_vocab", "batch_size", "unroll_steps", "shuffle_window", "seed", "softmax",
    "num_samples", "dropout", "max_steps", "epochs", "optimizer", "lr", "schedule",
    "warmup_frac", "discriminative_lr", "gradual_unfreeze", "unfreeze_every", "valid",
)


@dataclass
class Continuation:
    """Where the run of the weights copy `source` stood, which a new run continues."""

    progress: CopyProgress
    source: Path

    def restore(self, batches: PreparedBatches, rank: int) -> None:
        """Put `batches` at rank `rank`'s recorded data position and step."""
        try:
            batches.load_state_dict(self.progress.streams[rank], self.progress.step)
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise ModelFileError(f"{self.source / PROGRESS_NAME} holds no data position of "
                                 f"this run's rank {rank}: {err}") from None


def find_continuation(info: RunInfo, say: Callable[[str], None]) -> Continuation | None:
    """Where the run of the new run `info`'s --init-from weights copy stood, if that copy
    records its progress and `SAME_RUN` of both agree; else None (a new run from step 0). For
    a copy with progress, `say` says which, and why not."""
    source = info.config.init_from
    directory = Path(source) if source else None
    progress = CopyProgress.read(directory) if directory and directory.is_dir() else None
    if progress is None:
        return None
    saved = _recorded(directory)
    current = json.loads(json.dumps(_facts(info.to_dict())))  # as JSON reads it back
    name = next((k for k in SAME_RUN if saved.get(k) != current.get(k)), None)
    if name is not None:
        label = RUN_FACTS.get(name, "--" + name.replace("_", "-"))
        there, here = (_shown(run.get(name)) for run in (saved, current))
        say(f"{directory} is the weights copy of another run ({label}: {there} there, {here} "
            "here): a new run from its weights, from step 0")
        return None
    if len(progress.streams) != info.world_size:
        raise ModelFileError(f"{directory / PROGRESS_NAME} holds {len(progress.streams)} data "
                             f"positions, its run.json {info.world_size} processes")
    say(f"continuing the run of {directory} from step {progress.step:,} ({progress.tokens_seen:,} "
        "tokens seen): its data position and lr schedule; the optimizer's state and the LSTM "
        "states carried across windows start fresh (a weights copy holds neither)")
    return Continuation(progress, directory)


def _recorded(directory: Path) -> dict[str, Any]:
    """The facts and options recorded in the weights copy's `run.json`."""
    path = own_file(directory, RUN_NAME)
    data = read_json(path) if path.is_file() else None
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        raise ModelFileError(f"{path} is missing or not the run.json of an `elmo train` run "
                             f"(no options): a weights copy with {PROGRESS_NAME} has both")
    return _facts(data)


def _facts(run: dict[str, Any]) -> dict[str, Any]:
    """A `RunInfo.to_dict()`'s options and facts in one mapping."""
    return {**run["config"], **{k: run.get(k) for k in RUN_FACTS}}


def _shown(value: Any) -> str:
    """An option's value in a log line, briefly."""
    return "the default" if value is None else reprlib.repr(value)
