"""The Parquet output of `elmo embed --ray`: a directory of blocks, each written atomically, a
killed run resumed block by block, and its conversion to the HDF5 layout of `elmo embed`.

Layout of OUTPUT_DIR: `_manifest.json` (what the run is made of: its `version`, the input
files with their line counts and sha256, the `input_format`, the model's sha256, the settings,
and the list of blocks) and one Parquet file per block of consecutive lines of one input file,
`part-000000.parquet`, ... Columns: `source` (the input file), `line` (0-based number in that
file), `text` (the line, stripped), `tokens` (list of str) and `embedding`: float32 nested
lists, (n, D) per line, or (L+1, n, D) for the layers "all" (a line with no tokens: n = 0).
FASTA input (`input_format` "fasta"): a row per record, `line` its 0-based record number,
`text` its sequence, `tokens` its residues, and two more columns after `line`: `id` and
`description`; the manifest's line counts are record counts. Needs pyarrow (the [ray] extra).

While the run works, everything goes to the directory OUTPUT_DIR.partial: each block under a
temporary name, renamed when complete, so a kill at any moment loses at most the blocks being
written and the same run resumes; when every block is there, it becomes OUTPUT_DIR.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from elmo.errors import ElmoError
from elmo.extras import import_extra
from elmo.io.atomic import atomic_output, atomic_write_text, claim_output
from elmo.io.fasta import dataset_name
from elmo.io.hdf5_output import NEW_FILE, write_index
from elmo.io.inputs import INPUT_KINDS, TEXT

PURPOSE = "the Parquet output of `elmo embed --ray`"
pa = import_extra("pyarrow", PURPOSE)
pc = import_extra("pyarrow.compute", PURPOSE)
pq = import_extra("pyarrow.parquet", PURPOSE)

MANIFEST = "_manifest.json"  # "_": readers of the directory (pyarrow, Spark, Ray) skip it
# 1: text only; 2: adds `input_format` (text or fasta) and `max_tokens` (a version-1 output
# is text).
MANIFEST_VERSION = 2
BLOCK_NAME = re.compile(r"part-\d{6}\.parquet")
ROWS_PER_READ = 256  # rows held in memory at a time when converting to HDF5


def block_name(index: int) -> str:
    return f"part-{index:06d}.parquet"


def read_manifest(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _foreign(directory: Path) -> list[str]:
    """Names in `directory` that a run of `elmo embed --ray` does not write."""
    return sorted(p.name for p in directory.iterdir()
                  if p.name != MANIFEST and not BLOCK_NAME.fullmatch(p.name))


class ParquetOutput:
    """A Parquet output in progress: OUTPUT_DIR.partial with the run's manifest and the blocks
    written so far. A directory left by another run (another manifest) is removed and the run
    starts anew. The caller holds the output's lock (see `claim_parquet_output`)."""

    def __init__(self, output: Path, manifest: dict[str, Any]) -> None:
        manifest = json.loads(json.dumps(manifest))  # as it reads back from the file
        self.output, self.manifest = output, manifest
        self.path = output.with_name(output.name + ".partial")
        self.restarted = self.path.exists() and read_manifest(self.path) != manifest
        if self.path.is_dir():
            for leftover in self.path.glob(".*.tmp"):  # blocks being written when killed
                leftover.unlink()
            if _foreign(self.path):
                raise ElmoError(f"{self.path} holds files that `elmo embed --ray` did not "
                                f"write ({', '.join(_foreign(self.path)[:3])}): move them away")
        if self.restarted and self.path.is_dir():
            shutil.rmtree(self.path)
        elif self.restarted:
            self.path.unlink()
        self.path.mkdir(exist_ok=True)
        if read_manifest(self.path) is None:
            atomic_write_text(self.path / MANIFEST, json.dumps(manifest, indent=1))

    def pending(self) -> list[dict[str, Any]]:
        """The blocks of the manifest not written yet."""
        return [b for b in self.manifest["blocks"] if not (self.path / b["name"]).exists()]

    def finish(self) -> Path:
        """Replace OUTPUT_DIR (empty, or an earlier output) by the complete directory."""
        if self.pending():
            raise ElmoError(f"{self.path} misses blocks: run the same command again")
        if self.output.exists():
            (self.output / MANIFEST).unlink(missing_ok=True)  # first: no longer an output
            for block in self.output.glob("part-*.parquet"):
                block.unlink()
            self.output.rmdir()
        os.rename(self.path, self.output)
        return self.output


@contextmanager
def claim_parquet_output(output: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """Claim the output directory (see `atomic.claim_output`: an existing output is replaced
    only with `overwrite`; locked while the body runs). OUTPUT_DIR must be new, empty or an
    earlier output: files of others in it are never deleted. A body that fails before writing
    anything (a bad input) leaves no OUTPUT_DIR that was not there before."""
    output = Path(output)
    with claim_output(output, directory_of=[MANIFEST], overwrite=overwrite):
        foreign = _foreign(output)
        if foreign:
            raise ElmoError(f"the output directory {output} holds other files "
                            f"({', '.join(foreign[:3])}): give a new or empty directory")
        yield output


def write_block(
    path: Path,
    source: str,
    lines: Sequence[int],
    texts: Sequence[str],
    tokens: Sequence[Sequence[str]],
    embeddings: Sequence[np.ndarray],
    attrs: dict[str, Sequence[str]] | None = None,
) -> None:
    """Write one block's rows (see the module's layout) to `path`, atomically; `attrs`: the
    string columns that follow `line` (FASTA records: `id` and `description`)."""
    table = pa.table({
        "source": pa.array([source] * len(lines), pa.string()),
        "line": pa.array(lines, pa.int64()),
        **{name: pa.array(values, pa.string()) for name, values in (attrs or {}).items()},
        "text": pa.array(texts, pa.string()),
        "tokens": pa.array(tokens, pa.list_(pa.string())),
        "embedding": embedding_column(embeddings),
    })
    with atomic_output(path) as tmp:
        pq.write_table(table, tmp)


def embedding_column(arrays: Sequence[np.ndarray]) -> pa.Array:
    """Arrays (*lead, n_i, D), the same `lead` and D for all, as nested lists: one list of n_i
    vectors (fixed-size lists of D) per leading index, those in fixed-size lists of `lead`."""
    lead, dim = arrays[0].shape[:-2], arrays[0].shape[-1]
    values = np.concatenate([a.reshape(-1) for a in arrays])
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(values), dim)
    lengths = np.repeat([a.shape[-2] for a in arrays], math.prod(lead))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    nested = pa.ListArray.from_arrays(pa.array(offsets), vectors)
    for size in reversed(lead):
        nested = pa.FixedSizeListArray.from_arrays(nested, size)
    return nested


def embedding_arrays(column: Any) -> list[np.ndarray]:
    """The inverse of `embedding_column`: one numpy array (*lead, n, D) per row. `column` is
    an `embedding` column as pyarrow reads it (an Array, or the ChunkedArray of
    `pq.read_table(directory)["embedding"]`) or as pandas does (the Series of
    `pd.read_parquet(directory)["embedding"]`, whose rows are nested object arrays)."""
    if isinstance(column, pa.ChunkedArray):
        return [array for chunk in column.chunks for array in embedding_arrays(chunk)]
    if not isinstance(column, pa.Array):  # pandas (a Series of arrow types gives chunks)
        return embedding_arrays(pa.array(column))
    column = _fixed_sizes(column)
    lead: list[int] = []
    while pa.types.is_fixed_size_list(column.type) and \
            not pa.types.is_floating(column.type.value_type):
        lead.append(column.type.list_size)
        column = column.flatten()
    dim = column.type.value_type.list_size
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    vectors = column.flatten().flatten().to_numpy().reshape(-1, dim)
    per_row = math.prod(lead)
    ends = np.cumsum(lengths)
    arrays = []
    for row in range(len(lengths) // per_row):
        stop = ends[(row + 1) * per_row - 1]
        n = int(lengths[row * per_row])
        arrays.append(vectors[stop - per_row * n: stop].reshape(*lead, n, dim))
    return arrays


def _fixed_sizes(column: pa.Array) -> pa.Array:
    """Nested lists (of any length where pyarrow reads pandas' object arrays) -> the types of
    `embedding_column`: fixed-size lists of D floats, in lists of n, in fixed-size lists of
    each leading size (the sizes are the first row's)."""
    sizes, inner = [], column
    while pa.types.is_list(inner.type) or pa.types.is_fixed_size_list(inner.type):
        if pa.types.is_fixed_size_list(inner.type):
            sizes.append(inner.type.list_size)
        else:
            lengths = pc.list_value_length(inner).to_numpy(zero_copy_only=False)
            sizes.append(int(lengths[0]) if len(lengths) else 0)
        inner = inner.flatten()
    if len(sizes) < 2:
        raise ElmoError(f"not an embedding column: its rows are {column.type}, not nested lists "
                        "of vectors (n, D) or (L+1, n, D)")
    nested = pa.list_(pa.list_(pa.float32(), sizes[-1]))
    for size in reversed(sizes[:-2]):
        nested = pa.list_(nested, size)
    return column.cast(nested)


def parquet_to_hdf5(directory: str | Path, output: str | Path, overwrite: bool = False) -> Path:
    """The HDF5 file that `elmo embed` writes from the Parquet output `directory` of `elmo
    embed --ray`: for text, one dataset per line named by its 0-based number, and
    `sentence_to_index` (several input files numbered as their concatenation in the run's
    order); for FASTA, one dataset per record named by its id (`fasta.dataset_name`), with
    the attributes `id` and `description` (ids must differ across files too). Written
    atomically; an existing `output` is replaced only with `overwrite`."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    if manifest is None:
        raise ElmoError(f"{directory} is not an output of `elmo embed --ray` (no {MANIFEST})")
    if manifest.get("version", 1) > MANIFEST_VERSION:
        raise ElmoError(f"{directory} was written by a newer elmo (manifest version "
                        f"{manifest['version']}): upgrade elmo to merge it")
    if directory.name.endswith(".partial"):
        raise ElmoError(f"{directory} is the work of an unfinished `elmo embed --ray` run: run "
                        "the same command again to finish it, then merge its output directory")
    # a kind whose entries are keyed (FASTA's ids) names its datasets by key, with no index
    keyed = INPUT_KINDS[manifest.get("input_format", TEXT.name)].entries.keyed
    offsets = np.cumsum([0] + [source["lines"] for source in manifest["inputs"]])
    sentence_to_index: dict[str, str] = {}
    with claim_output(output, overwrite=overwrite), atomic_output(output) as tmp, \
            h5py.File(tmp, "w", **NEW_FILE) as out:
        for block in manifest["blocks"]:
            path = directory / block["name"]
            if not path.exists():
                raise ElmoError(f"{path} is missing: the output is incomplete")
            if keyed:
                for source, line, ident, description, array in _rows(
                        path, ["source", "line", "id", "description"]):
                    _create_record(out, ident, array, source, line).attrs.update(
                        id=ident, description=description)
                continue
            first = int(offsets[block["source"]])
            for line, text, array in _rows(path, ["line", "text"]):
                name = str(first + line)
                out.create_dataset(name, data=array)
                sentence_to_index[text] = name
        if not keyed:
            write_index(out, sentence_to_index)
    return Path(output)


def _rows(path: Path, columns: list[str]) -> Iterator[tuple[Any, ...]]:
    """The values of `columns` and the embedding array of each row of a block file, a few
    hundred rows in memory at a time."""
    for batch in pq.ParquetFile(path).iter_batches(ROWS_PER_READ, columns=[*columns,
                                                                           "embedding"]):
        arrays = embedding_arrays(batch.column("embedding"))
        yield from zip(*(batch.column(c).to_pylist() for c in columns), arrays, strict=True)


def _create_record(out: h5py.File, ident: str, array: np.ndarray, source: str, line: int
                   ) -> h5py.Dataset:
    """The dataset of FASTA record number `line` (0-based) of `source`; an id written
    before (by an earlier file: a file's own ids were checked) is an ElmoError naming it."""
    name = dataset_name(ident)
    if name in out:
        raise ElmoError(f"{source}: record {ident!r} (record {line + 1} of the file) has the "
                        "id of a record of an earlier input file; datasets are named by id, so "
                        "the files merged into one HDF5 file need ids that all differ")
    return out.create_dataset(name, data=array)
