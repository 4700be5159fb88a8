"""The HDF5 output of `elmo embed`: resumable partial files, shards, and merging them.

Layout (as AllenNLP's `elmo` command): one float32 dataset per input line, named by its 0-based
number, and `sentence_to_index`: a one-element string dataset holding JSON that maps each
line's text to its number (as a string; a repeated line maps to its last number).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import h5py
import numpy as np

from elmo.errors import ElmoError
from elmo.io.atomic import atomic_output, atomic_write_text, claim_output

INDEX = "sentence_to_index"
# A shard keeps its run's identity attributes (input and model digests, settings) so that
# `merge_shards` can check that the parts belong together; these two order them.
SHARD_ATTRS = ("num_shards", "shard_index")
# A partial output's record of what the run is made of (input, model, settings).
IDENTITY = "identity.json"
# A segment's attribute listing its datasets made from no tokens (JSON).
EMPTY = "empty"
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


class PartialOutput:
    """A resumable HDF5 output in progress: the directory `path` (OUTPUT.partial) holds
    `identity.json` (what the run is made of) and one segment file per save, each written
    under a temporary name and renamed when complete, so a kill at any moment loses at most
    the segment being written. A directory of another run (or an older version's partial
    file) is removed and the run starts anew. The caller holds the output's lock.

    `done`: the first line not yet saved (the end of the segments that follow on from
    `start`); `save(start, datasets)` adds a segment; `assemble(out)` copies every dataset,
    in order, into the final file `out`; `concatenate(out)` joins each dataset's parts.
    """

    def __init__(self, path: Path, identity: dict[str, str], start: int = 0) -> None:
        self.path, self.start = path, start
        self.restarted = path.exists() and _read_identity(path) != identity
        if path.is_dir() and not self.restarted:
            for leftover in path.glob(".*.tmp"):  # a segment being written when killed
                leftover.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        try:
            path.mkdir(exist_ok=True)
        except OSError as err:
            raise ElmoError(f"cannot write {path}: {err.strerror}") from None
        if not (path / IDENTITY).exists():
            atomic_write_text(path / IDENTITY, json.dumps(identity, indent=1, sort_keys=True))
        self.segments = self._chain()

    def _chain(self) -> list[Path]:
        """The readable segments that follow on from `start`; any other is deleted."""
        chain, end = [], self.start
        for segment in sorted(self.path.glob("*.hdf5")):
            first, _, stop = segment.stem.partition("-")
            readable = first.isdigit() and stop.isdigit() and int(first) == end
            if readable:
                try:
                    h5py.File(segment, "r").close()
                except OSError:  # cut short by a crash of the machine
                    readable = False
            if readable:
                chain.append(segment)
                end = int(stop)
            else:
                segment.unlink()
        return chain

    @property
    def done(self) -> int:
        return int(self.segments[-1].stem.partition("-")[2]) if self.segments else self.start

    def save(self, stop: int, datasets: Iterable[tuple[str, np.ndarray]],
             attrs: dict[str, dict[str, str]] | None = None, empty: Sequence[str] = ()) -> None:
        """Write the datasets of lines `done`..`stop` - 1 as one segment; `attrs`: attributes
        of some datasets by name; `empty`: the names of those made from no tokens."""
        segment = self.path / f"{self.done:012d}-{stop:012d}.hdf5"
        with atomic_output(segment) as tmp, h5py.File(tmp, "w", **NEW_FILE) as f:
            for name, data in datasets:
                f.create_dataset(name, data=data).attrs.update((attrs or {}).get(name, {}))
            f.attrs[EMPTY] = json.dumps(list(empty), ensure_ascii=False)
        self.segments.append(segment)

    def assemble(self, out: h5py.File) -> list[str]:
        """Copy every saved dataset (with its attributes) into `out`; returns the names of
        those saved as made from no tokens."""
        empty = []
        for segment in self.segments:
            with h5py.File(segment, "r") as f:
                for name in f:
                    f.copy(f[name], out, name)
                empty += json.loads(f.attrs.get(EMPTY, "[]"))
        return empty

    def concatenate(self, out: h5py.File, chunk_rows: int) -> None:
        """Write each saved dataset into `out` as one, the segments' parts joined along the
        first axis in order (stored in chunks of `chunk_rows` rows)."""
        for segment in self.segments:
            with h5py.File(segment, "r") as f:
                for name, part in f.items():
                    if name not in out:
                        rest = part.shape[1:]
                        out.create_dataset(name, (0, *rest), part.dtype, maxshape=(None, *rest),
                                           chunks=(chunk_rows, *rest))
                    whole = out[name]
                    whole.resize(whole.shape[0] + len(part), axis=0)
                    whole[-len(part):] = part[...]

    @contextmanager
    def final(self, output: Path) -> Iterator[h5py.File]:
        """The complete output, opened for writing under a temporary name inside the partial
        directory; renamed to `output` at the end of the block, the directory then removed."""
        tmp = self.path / ".output.tmp"
        with h5py.File(tmp, "w", **NEW_FILE) as f:
            yield f
        os.replace(tmp, output)
        shutil.rmtree(self.path)


def _read_identity(path: Path) -> dict[str, str] | None:
    try:
        return json.loads((path / IDENTITY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_index(out: h5py.File, sentence_to_index: dict[str, str]) -> None:
    if INDEX in out:
        del out[INDEX]
    out.create_dataset(INDEX, data=[json.dumps(sentence_to_index, ensure_ascii=False)],
                       dtype=h5py.string_dtype("utf-8"))


def read_index(f: h5py.File) -> dict[str, str]:
    return json.loads(f[INDEX][0])


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
        if any(k not in attrs for k in SHARD_ATTRS):
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
