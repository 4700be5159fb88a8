"""The HDF5 output of `elmo embed`: resumable partial files, shards, and merging them.

Layout (as AllenNLP's `elmo` command): one float32 dataset per input line, named by its 0-based
number, and `sentence_to_index`: a one-element string dataset holding JSON that maps each
line's text to its number (as a string; a repeated line maps to its last number).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import h5py

from elmo.atomic import atomic_output
from elmo.errors import ElmoError

INDEX = "sentence_to_index"
# Attributes a shard keeps so that `merge_shards` can check and order the parts.
SHARD_ATTRS = ("num_shards", "shard_index", "total_lines", "layers")
# Settings that keep a writer's memory flat however many lines it writes. HDF5 1.8's group
# format: in the oldest one (the default) the names of a group's members live in one heap held
# in memory (~70 bytes per dataset). File space "aggregate": the default free-space manager keeps
# every small gap in the file in memory while it is open (~35 bytes per dataset); without it,
# space freed during a run (a resumed run's leftover line) is not reused.
NEW_FILE = {"libver": "v108", "fs_strategy": "aggregate"}


def shard_range(n_lines: int, num_shards: int, shard_index: int) -> range:
    """The contiguous block of line numbers that shard `shard_index` of `num_shards` embeds."""
    if num_shards < 1 or not 0 <= shard_index < num_shards:
        raise ElmoError(
            f"--shard-index must be in 0..{num_shards - 1} and --num-shards >= 1; "
            f"got {shard_index} of {num_shards}"
        )
    return range(n_lines * shard_index // num_shards, n_lines * (shard_index + 1) // num_shards)


@contextmanager
def open_partial(path: Path, identity: dict[str, str]) -> Iterator[h5py.File]:
    """`path` opened for appending if the same run made it, else started anew.

    `identity` (strings) says what the run is made of; the file's `lines_done` attribute says
    how far it got.
    """
    if path.exists():
        try:
            f = h5py.File(path, "a", libver=NEW_FILE["libver"])
        except OSError:  # unreadable after a crash
            f = None
        if f is not None and all(f.attrs.get(k) == v for k, v in identity.items()):
            with f:
                yield f
            return
        if f is not None:
            f.close()
        path.unlink()
    try:
        f = h5py.File(path, "w", **NEW_FILE)
    except OSError as err:
        raise ElmoError(f"cannot write {path}: {err}") from err
    with f:
        f.attrs.update(identity)
        f.attrs["lines_done"] = 0
        yield f


def write_index(out: h5py.File, sentence_to_index: dict[str, str]) -> None:
    if INDEX in out:
        del out[INDEX]
    out.create_dataset(INDEX, data=[json.dumps(sentence_to_index, ensure_ascii=False)],
                       dtype=h5py.string_dtype("utf-8"))


def read_index(f: h5py.File) -> dict[str, str]:
    return json.loads(f[INDEX][0])


def keep_only_attrs(out: h5py.File, names: Sequence[str]) -> None:
    """Drop the bookkeeping attributes of a partial file, keeping `names`."""
    for name in list(out.attrs):
        if name not in names:
            del out.attrs[name]


def merge_shards(shards: Sequence[str | Path], output: str | Path) -> Path:
    """Join the shard files of one `elmo embed --num-shards N` run into the single file that
    a one-process run writes. The output is written atomically."""
    if not shards:
        raise ElmoError("merge needs the shard files")
    infos = []
    for path in shards:
        try:
            with h5py.File(path, "r") as f:
                attrs = {k: f.attrs.get(k) for k in SHARD_ATTRS}
        except OSError as err:
            raise ElmoError(f"cannot read shard {path}: {err}") from err
        if any(v is None for v in attrs.values()):
            raise ElmoError(f"{path} is not a shard written by `elmo embed --num-shards`")
        infos.append((int(attrs["shard_index"]), Path(path), attrs))
    infos.sort(key=lambda info: info[0])
    first = infos[0][2]
    n = int(first["num_shards"])
    if [i for i, _, _ in infos] != list(range(n)):
        raise ElmoError(f"merge needs shards 0..{n - 1} once each; got {[i for i, _, _ in infos]}")
    for _, path, attrs in infos:
        if any(attrs[k] != first[k] for k in ("num_shards", "total_lines", "layers")):
            raise ElmoError(f"{path} belongs to another run (its attributes differ: {attrs})")
    sentence_to_index: dict[str, str] = {}
    with atomic_output(output) as tmp, h5py.File(tmp, "w", **NEW_FILE) as out:
        for _, path, _ in infos:
            with h5py.File(path, "r") as f:
                for name in f:
                    if name != INDEX:
                        f.copy(f[name], out, name)
                sentence_to_index.update(read_index(f))
        write_index(out, sentence_to_index)
    return Path(output)
