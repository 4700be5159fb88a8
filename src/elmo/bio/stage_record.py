"""PREFIX's `.elmo_stages.json`: what each stage directory holds, as the pipeline wrote it.

For each stage: its identity (`elmo.bio.plan`), the files the run wrote in its directory
(path inside it -> size and sha256) and the directories it made there. The pipeline updates
it after each file a stage completes, so a killed run leaves a record of what it wrote.

A stage directory is the pipeline's (`StageRecord.difference` is None: kept, resumed or
removed) only if the record names it with a well-formed entry and everything in it is
recorded with the same size and sha256; what a killed run can leave unrecorded (temporary
files, `.NAME.tmp`, and files in the stage's recorded hidden working directories) is excused
where a recorded file is there too, as recorded. Anything else is a user's folder, left
alone: a forged or damaged record (a null, a string or a number where an entry belongs, a
path that leaves the directory) names no folder, and a record cannot vouch for a file whose
bytes it does not know.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from elmo.io.atomic import atomic_write_text

STATE = ".elmo_stages.json"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TEMPORARY = re.compile(r"\..+\.tmp")
_CHUNK = 1 << 20


@dataclass
class StageEntry:
    """A stage's record: its identity, its files (relative path -> (size, sha256)) and its
    directories (relative paths)."""

    identity: str
    files: dict[str, tuple[int, str]] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)

    def as_json(self) -> dict[str, Any]:
        return {"identity": self.identity,
                "files": {path: list(info) for path, info in sorted(self.files.items())},
                "dirs": sorted(self.dirs)}


@dataclass
class StageRecord:
    """The record of PREFIX (read at `path`, written back to `place`: the prefix as the run
    writes it, see `elmo.bio.folders`)."""

    stages: dict[str, StageEntry] = field(default_factory=dict)
    _seen: dict[tuple[str, str], tuple[tuple[int, int], str]] = field(default_factory=dict,
                                                                        repr=False)

    @classmethod
    def read(cls, path: Path) -> StageRecord | None:
        """The record at `path`; None without one. Entries that are not well formed are
        left out (their folders are then a user's)."""
        if not path.is_file():
            return None
        try:
            stages = json.loads(path.read_text(encoding="utf-8"))["stages"]
        except (OSError, ValueError, KeyError, TypeError):
            return cls()
        if not isinstance(stages, dict):
            return cls()
        entries = {name: _entry(value) for name, value in stages.items()}
        return cls({name: entry for name, entry in entries.items() if entry is not None})

    def write(self, place: Path) -> None:
        atomic_write_text(place / STATE, json.dumps(
            {"stages": {name: entry.as_json() for name, entry in self.stages.items()}},
            indent=1) + "\n")

    def difference(self, name: str, directory: Path) -> str | None:
        """Why `directory` is not stage `name`'s as recorded (the first path in it that the
        record does not vouch for), or None where it is. An empty directory is anyone's."""
        found = _contents(directory)
        entry = self.stages.get(name, StageEntry(""))
        vouched = False  # a recorded file is there, as recorded
        for path, info in sorted(found.items(), key=lambda item: (item[1] is None, item[0])):
            if info is None:
                if path not in entry.dirs:
                    return path
            elif path in entry.files:
                if info[0] != entry.files[path][0] or \
                        self._digest(name, directory, path, info) != entry.files[path][1]:
                    return path
                vouched = True
            elif not (info[0] >= 0 and _excused(path, entry)):
                return path
        excused = [path for path, info in found.items() if info is not None
                   and path not in entry.files]
        return excused[0] if excused and not vouched else None

    def note(self, name: str, identity: str, directory: Path) -> None:
        """Record what `directory` holds now as stage `name`'s, but temporary files (being
        written) and what is not a file or a directory."""
        entry = StageEntry(identity)
        for path, info in _contents(directory).items():
            if info is None:
                entry.dirs.add(path)
            elif info[0] >= 0 and not _TEMPORARY.fullmatch(PurePosixPath(path).name):
                entry.files[path] = (info[0], self._digest(name, directory, path, info))
        self.stages[name] = entry

    def _digest(self, name: str, directory: Path, path: str, info: tuple[int, int]) -> str:
        """The sha256 of a file, read again only if its size or modification time changed
        since this run last read it."""
        key = (name, path)
        if key not in self._seen or self._seen[key][0] != info:
            self._seen[key] = (info, _sha256(directory / path))
        return self._seen[key][1]


def _excused(path: str, entry: StageEntry) -> bool:
    """Whether a file the record does not name may be what a killed run left: a temporary
    file (`.NAME.tmp`), or a file in one of the stage's recorded working directories (a
    hidden one, as the embed stage's `.embed.partial/`, whose segments a run records after
    writing them)."""
    where = PurePosixPath(path)
    return bool(_TEMPORARY.fullmatch(where.name)) or any(
        str(parent) in entry.dirs and parent.name.startswith(".")
        for parent in where.parents if parent.parts)


def _entry(value: Any) -> StageEntry | None:
    """A stage's entry as written by `StageEntry.as_json`, or None for anything else."""
    if not isinstance(value, dict) or set(value) != {"identity", "files", "dirs"}:
        return None
    identity, files, dirs = value["identity"], value["files"], value["dirs"]
    if not (isinstance(identity, str) and _SHA256.fullmatch(identity)
            and isinstance(files, dict) and isinstance(dirs, list)):
        return None
    entry = StageEntry(identity)
    for path, info in files.items():
        if not (_inside(path) and isinstance(info, list) and len(info) == 2
                and type(info[0]) is int and info[0] >= 0
                and isinstance(info[1], str) and _SHA256.fullmatch(info[1])):
            return None
        entry.files[path] = (info[0], info[1])
    if not all(isinstance(path, str) and _inside(path) for path in dirs):
        return None
    entry.dirs = set(dirs)
    return entry


def _inside(path: Any) -> bool:
    """A relative path that stays inside its directory, written as `_contents` writes it."""
    if not isinstance(path, str) or not path or "\\" in path or "\0" in path:
        return False
    parts = PurePosixPath(path).parts
    return not PurePosixPath(path).is_absolute() and "/".join(parts) == path and \
        all(part not in (".", "..") for part in parts)


def _contents(directory: Path) -> dict[str, tuple[int, int] | None]:
    """Every entry under `directory`, links not followed: relative path -> (size,
    modification time) for a file, None for a directory. Links and other kinds of files
    are refused before this runs (`elmo.bio.pipeline`); here they are directories' peers
    that no record holds."""
    found: dict[str, tuple[int, int] | None] = {}
    if not directory.is_dir():
        return found
    stack = [(directory, "")]
    while stack:
        where, prefix = stack.pop()
        with os.scandir(where) as entries:
            for item in entries:
                path = f"{prefix}{item.name}"
                if item.is_dir(follow_symlinks=False):
                    found[path] = None
                    stack.append((Path(item.path), f"{path}/"))
                else:
                    stat = item.stat(follow_symlinks=False)
                    found[path] = (stat.st_size if item.is_file(follow_symlinks=False)
                                   else -1, stat.st_mtime_ns)
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with open(fd, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
