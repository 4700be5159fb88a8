"""A run folder (`elmo train --out`, `elmo task train --out`): one writer at a time, a marker
that says what kind of run it holds, and the check that a resumed run is the same run.

The marker, `elmo-run.json` ({"kind": "pretraining"} or {"kind": "task"}), is the first file a
run writes: a folder without one holds no run of ours, whatever else it holds. Each recipe
records its own options (pretraining in `run.json`, task runs in `config.json`) and names the
options that may change when a run is resumed; `changed_options` compares them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from elmo.config import parse_json
from elmo.errors import ElmoError
from elmo.io.atomic import atomic_write_text, output_lock

MARKER_NAME = "elmo-run.json"
PRETRAINING, TASK = "pretraining", "task"  # the kinds of run
WRITTEN_BY = {PRETRAINING: "elmo train", TASK: "elmo task train"}


def run_kind(directory: str | Path) -> str | None:
    """The kind of run `directory` holds ("pretraining" or "task"), from its marker; None
    when it has no marker (or is no directory)."""
    try:
        path = Path(directory) / MARKER_NAME
        marker = parse_json(path.read_bytes(), str(path))
    except (OSError, ValueError):
        return None
    kind = marker.get("kind") if isinstance(marker, dict) else None
    return kind if kind in WRITTEN_BY else None


def mark_run_folder(directory: Path, kind: str) -> None:
    """Create `directory` (and its parents) if missing and mark it as a run of `kind`."""
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(directory / MARKER_NAME, json.dumps({"kind": kind}) + "\n")


@contextmanager
def claim_run_folder(directory: Path, kind: str) -> Iterator[bool]:
    """Hold `directory` for a run of `kind` while the body runs; yields whether it already
    holds a run of that kind (marked; to be checked and resumed by the recipe).

    Refused with an ElmoError that says the fix: `directory` is a file or cannot be created
    or written; another process holds it ("another process is writing DIR"); it holds a run
    of another kind. The temporary files a killed writer left in it are deleted. Nothing is
    written but missing parent directories and the lock file beside it (DIR.lock, removed on
    exit)."""
    check_writable(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(directory):
        found = run_kind(directory)
        if found not in (None, kind):
            raise ElmoError(f"{directory} holds a {found} run (made by {WRITTEN_BY[found]}), "
                            f"not a {kind} run: choose another --out")
        if directory.is_dir():
            for stale in directory.glob(".*.tmp"):  # left by a writer that was killed
                stale.unlink()
        yield found == kind


def check_writable(directory: Path) -> None:
    """Raise ElmoError unless `directory` is a directory, or can be created, that we may
    write."""
    if directory.exists() and not directory.is_dir():
        raise ElmoError(f"--out {directory} is a file; give a directory for the run (it is "
                        "created if missing)")
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ElmoError(f"cannot create the run directory {directory}: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ElmoError(f"cannot write the run directory {directory}: {existing} is not "
                        "writable (permission denied or a read-only file system); choose "
                        "another --out")


def changed_options(
    saved: Mapping[str, Any], current: Mapping[str, Any], resumable: Collection[str]
) -> tuple[list[str], list[str]]:
    """The options that differ between a run's saved options and the current ones, sorted:
    (those in `resumable`, which may change when the run is resumed; the others, which make
    it another run). An option only one side has counts as changed."""
    changed = sorted(k for k in {*saved, *current} if saved.get(k, _MISSING)
                     != current.get(k, _MISSING))
    return [k for k in changed if k in resumable], [k for k in changed if k not in resumable]


_MISSING = object()
