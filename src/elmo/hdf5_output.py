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

from elmo.atomic import atomic_output, claim_output
from elmo.errors import ElmoError

INDEX = "sentence_to_index"
# A shard keeps its run's identity attributes (input and model digests, settings) so that
# `merge_shards` can check that the parts belong together; these two order them.
SHARD_ATTRS = ("num_shards", "shard_index")
# A partial file's progress: lines done, and the empty lines among them (for the warning).
LINES_DONE, EMPTY_LINES, FIRST_EMPTY = "lines_done", "empty_lines", "first_empty"
# Settings that keep a writer's memory flat however many lines it writes. HDF5 1.8's group
# format: in the oldest one (the default) the names of a group's members live in one heap held
# in memory (~70 bytes per dataset). File space "aggregate": the default free-space manager keeps
# every small gap in the file in memory while it is open (~35 bytes per dataset); without it,
# space freed during a run (a resumed run's leftover line) is not reused.
NEW_FILE = {"libver": "v108", "fs_strategy": "aggregate"}


def shard_range(n_lines: int, num_shards: int, shard_index: int, align: int = 1) -> range:
    """The contiguous block of line numbers that shard `shard_index` of `num_shards` embeds:
    equal blocks, their boundaries rounded to multiples of `align` lines."""
    if num_shards < 1:
        raise ElmoError(f"--num-shards must be at least 1, got {num_shards}")
    if not 0 <= shard_index < num_shards:
        raise ElmoError(f"--shard-index must be in 0..{num_shards - 1} for --num-shards "
                        f"{num_shards}, got {shard_index}")

    def boundary(i: int) -> int:
        if i == num_shards:
            return n_lines
        return min(n_lines, round(n_lines * i / num_shards / align) * align)

    return range(boundary(shard_index), boundary(shard_index + 1))


@contextmanager
def open_partial(path: Path, identity: dict[str, str]) -> Iterator[h5py.File]:
    """`path` opened for appending if the same run made it, else started anew.

    `identity` (strings) says what the run is made of; the file's `lines_done` attribute says
    how far it got.
    """
    if path.exists():
        try:
            f = h5py.File(path, "a", libver=NEW_FILE["libver"])
        except OSError as err:
            if "lock" in str(err):  # HDF5's own file lock: open in another program
                raise ElmoError(f"another process has {path} open: wait for it to finish, or "
                                "choose another output") from None
            f = None  # unreadable after a crash
        if f is not None and all(f.attrs.get(k) == v for k, v in identity.items()) \
                and LINES_DONE in f.attrs:
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
        f.attrs[LINES_DONE] = 0
        yield f


def write_index(out: h5py.File, sentence_to_index: dict[str, str]) -> None:
    if INDEX in out:
        del out[INDEX]
    out.create_dataset(INDEX, data=[json.dumps(sentence_to_index, ensure_ascii=False)],
                       dtype=h5py.string_dtype("utf-8"))


def read_index(f: h5py.File) -> dict[str, str]:
    return json.loads(f[INDEX][0])


def finish_attrs(out: h5py.File, shard: bool) -> None:
    """Drop the bookkeeping attributes of a complete file: all of them (the AllenNLP layout
    has none), or, for a shard, only the progress (its identity stays, for merging)."""
    for name in list(out.attrs):
        if name in (LINES_DONE, EMPTY_LINES, FIRST_EMPTY) or not shard:
            del out.attrs[name]


def merge_shards(
    shards: Sequence[str | Path], output: str | Path, overwrite: bool = False
) -> Path:
    """Join the shard files of one `elmo embed --num-shards N` run into the single file that
    a one-process run with the same settings writes (bit for bit: shards start at chunk
    boundaries, so every line is computed in the same batch). Shards of another input, model
    or setting are refused. The output is claimed (see `atomic.claim_output`) and written
    atomically."""
    if not shards:
        raise ElmoError("merge needs the shard files")
    infos = []
    for path in shards:
        try:
            with h5py.File(path, "r") as f:
                attrs = {k: str(v) for k, v in f.attrs.items()}
        except OSError as err:
            raise ElmoError(f"cannot read shard {path}: not an HDF5 file ({err})") from None
        if any(k not in attrs for k in SHARD_ATTRS) or LINES_DONE in attrs:
            raise ElmoError(f"{path} is not a complete shard written by `elmo embed "
                            "--num-shards`")
        infos.append((int(attrs["shard_index"]), Path(path), attrs))
    infos.sort(key=lambda info: info[0])
    first_path, first = infos[0][1], infos[0][2]
    for _, path, attrs in infos[1:]:
        differ = sorted(k for k in set(attrs) | set(first)
                        if k != "shard_index" and attrs.get(k) != first.get(k))
        if differ:
            raise ElmoError(f"{path} and {first_path} belong to different runs: their "
                            f"{', '.join(differ)} differ (another input, model or setting)")
    n = int(first["num_shards"])
    indices = [i for i, _, _ in infos]
    if indices != list(range(n)):
        raise ElmoError(f"merge needs shards 0..{n - 1} once each; got {indices}")
    sentence_to_index: dict[str, str] | None = None  # None: the run wrote no index
    with claim_output(output, inputs=shards, overwrite=overwrite), \
            atomic_output(output) as tmp, h5py.File(tmp, "w", **NEW_FILE) as out:
        for _, path, _ in infos:
            with h5py.File(path, "r") as f:
                for name in f:
                    if name != INDEX:
                        f.copy(f[name], out, name)
                if INDEX in f:
                    sentence_to_index = {**(sentence_to_index or {}), **read_index(f)}
        if sentence_to_index is not None:
            write_index(out, sentence_to_index)
    return Path(output)
