"""Reading model files from anyone within bounds: what a reader checks before it reads.

A model's files may come from anyone. Each reader takes their contents through these
functions, which refuse, with a ModelFileError naming the file, anything that would read more
than the model can hold or anything outside the file:

- `read_json`: a config file, whose size is checked before it is read (and its nesting by
  the parser);
- `read_zip_member`: a member of a ZIP archive, whose declared size is checked against what
  the member can hold before it is read, and which must be stored or deflated (the methods
  Python's zipfile inflates a bounded amount at a time), not encrypted, and whole (its CRC);
- `check_torch_file`: a `torch.save` file, whose ZIP records must be stored as `torch.save`
  writes them (torch inflates a compressed record whole, whatever its size);
- `read_hdf5_dataset`: an HDF5 dataset, read only once it is known to be a plain dataset of
  floats of the expected shape, stored in the file itself (no external storage, external or
  soft link, or virtual dataset, through which a file would read other local files);
- `named_file`: a file that a model's config names by its path, looked for only in the
  model's directory.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import h5py
import numpy as np

from elmo.config import parse_json
from elmo.errors import ModelFileError

MIB = 2**20
# A config file (options.json, an EfML or AllenNLP configuration, a shard index, a model
# card): a few KB in every released model.
MAX_CONFIG_BYTES = 16 * MIB
# A vocabulary file, or a config that lists one (a model converted from ELMoForManyLangs):
# a million words take about 20 MB.
MAX_VOCABULARY_BYTES = 256 * MIB
# The ZIP compression methods read: those zipfile inflates a bounded amount at a time.
ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
_ENCRYPTED = 0x1  # bit 0 of a ZIP entry's general purpose flags


def weights_bytes(n_parameters: int) -> int:
    """The most bytes a file holding `n_parameters` weights takes: 8 bytes each (float64,
    the widest float a reader converts) plus 64 MiB for the format's own records."""
    return 8 * n_parameters + 64 * MIB


def read_json(source: Path | bytes, where: str | None = None,
              max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """The JSON value in the file `source` (or in bytes read already, checked by their
    reader), refused when it is larger than `max_bytes` (before it is read), not UTF-8 JSON,
    or nested too deeply to parse; `where` names it (default: the path). FileNotFoundError
    passes."""
    where = where or str(source)
    if isinstance(source, Path):
        size = source.stat().st_size
        if size > max_bytes:
            raise ModelFileError(f"{where} is {size:,} bytes, more than the {max_bytes:,} a "
                                 "config file may take: it is not a model's config")
        source = source.read_bytes()
    try:
        return parse_json(source, where)
    except ValueError as err:
        raise ModelFileError(str(err)) from None


def read_zip_member(archive: zipfile.ZipFile, name: str, max_bytes: int, where: str) -> bytes:
    """The bytes of member `name` of `archive` (`where`: the archive, in errors), once its
    entry declares at most `max_bytes`, no encryption and a method of `ZIP_METHODS`; read so
    that no more than the declared size is ever decompressed, and checked against its CRC."""
    info = archive.getinfo(name)
    member = f"{where}:{name}"
    if info.flag_bits & _ENCRYPTED:
        raise ModelFileError(f"{member} is encrypted: unpack the archive with its password and "
                             "give the directory")
    if info.compress_type not in ZIP_METHODS:
        raise ModelFileError(f"{member} is compressed with method {info.compress_type}, which "
                             f"is not read (only {' or '.join(ZIP_METHODS.values())}): unpack "
                             "the archive with a tool that knows it and give the directory")
    if info.file_size > max_bytes:
        raise ModelFileError(f"{member} declares {info.file_size:,} bytes, more than the "
                             f"{max_bytes:,} it can hold for this model: the archive is "
                             "damaged or not a model")
    try:
        with archive.open(info) as stream:
            # read(n) inflates at most n bytes; read() would ask zlib for up to 2 GB at once.
            return stream.read(info.file_size)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as err:
        raise ModelFileError(f"{member} is damaged ({err}): download the archive "
                             "again") from None


def check_torch_file(path: Path) -> None:
    """Refuse a `torch.save` file in the ZIP layout whose records are compressed, or declare
    more bytes than the file holds: torch would inflate them whole before any check. (The
    legacy layout is read by torch with each storage's size checked against the file.)"""
    if not zipfile.is_zipfile(path):
        return
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError) as err:
        raise ModelFileError(f"{path} is a damaged torch file ({err}): download or copy the "
                             "model again") from None
    size = path.stat().st_size
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size \
                or info.file_size > size:
            raise ModelFileError(f"{path}: its record {info.filename} is compressed or "
                                 f"declares {info.file_size:,} bytes in a file of {size:,}; "
                                 "torch.save stores records as they are: the file is not one "
                                 "it wrote")


def read_hdf5_dataset(f: h5py.File, name: str, shape: tuple[int, ...], where: str,
                      described_by: str, error: type[ModelFileError] = ModelFileError,
                      ) -> np.ndarray:
    """The float32 array of dataset `name` (a path in the open file `f`), read once every
    link on its path is a hard link and it is a dataset of floats of `shape`, stored in the
    file. `where` names the file in errors (of class `error`), `described_by` what gave
    `shape` (as "the options")."""
    try:
        return np.asarray(_checked_dataset(f, name, shape, where, described_by, error)[()],
                          dtype=np.float32)
    except (OSError, KeyError, RuntimeError) as err:  # h5py's, for a damaged file
        raise error(f"{where}: tensor {name!r} cannot be read ({err}); the file is damaged: "
                    "download or copy it again") from None


def _checked_dataset(f: h5py.File, name: str, shape: tuple[int, ...], where: str,
                     described_by: str, error: type[ModelFileError]) -> h5py.Dataset:
    """Dataset `name` of `f`, unread, once `read_hdf5_dataset`'s checks hold."""
    node: h5py.HLObject = f
    parts = name.split("/")
    for depth, part in enumerate(parts):
        here = "/".join(parts[: depth + 1])
        link = node.get(part, getlink=True) if isinstance(node, h5py.Group) else None
        if link is None:
            raise error(f"{where}: tensor {name!r} is missing (expected shape {shape})")
        if isinstance(link, h5py.ExternalLink):
            raise error(f"{where}: {here!r} is a link to {link.path!r} in another file "
                        f"({link.filename}); a weights file holds its tensors itself")
        if not isinstance(link, h5py.HardLink):
            raise error(f"{where}: {here!r} is a soft link to {link.path!r}; a weights file "
                        "holds its tensors under their own names")
        node = node[part]
    if not isinstance(node, h5py.Dataset):
        raise error(f"{where}: {name!r} is a {type(node).__name__.lower()} where a tensor "
                    f"(a dataset of shape {shape}) belongs")
    if node.external:
        raise error(f"{where}: tensor {name!r} stores its data in other files "
                    f"({', '.join(str(e[0]) for e in node.external)}); a weights file holds "
                    "its tensors itself")
    if node.is_virtual:
        raise error(f"{where}: tensor {name!r} is a virtual dataset (its data is read from "
                    "other datasets or files); a weights file holds its tensors itself")
    if node.dtype.kind != "f":
        raise error(f"{where}: tensor {name!r} holds values of type {node.dtype}, not "
                    "floating-point numbers")
    if node.shape != shape:
        raise error(f"{where}: tensor {name!r} has shape {node.shape}, but {described_by} "
                    f"describe {shape}; are they from the same model?")
    return node


def named_file(model_dir: Path, named: str, where: str) -> Path | None:
    """The file that a model's config (`where`, in errors) names by the path `named`,
    relative to the model's directory; None for a path that leads out of it lexically, an
    absolute one (another machine's, as released configs record) or one through `..` (the
    caller looks for the file's name in the directory instead); a ModelFileError for a
    symbolic link to a file outside the directory (huggingface_hub's links from a snapshot
    into its repo's blobs excepted)."""
    posix = PurePosixPath(named.replace("\\", "/"))
    if posix.is_absolute() or PureWindowsPath(named).drive or ".." in posix.parts:
        return None
    path = model_dir / posix
    if path.exists() and not _within(path.resolve(), model_dir):
        raise ModelFileError(f"{where} names {named!r}, a link to {path.resolve()}, outside "
                             f"the model's directory {model_dir}: a model reads only its own "
                             "files")
    return path


def _within(real: Path, model_dir: Path) -> bool:
    """Whether the resolved path `real` is in `model_dir`, or in the blobs of the Hub cache
    repo whose snapshot `model_dir` is in (`REPO/snapshots/COMMIT/...` -> `REPO/blobs/`)."""
    model_dir = model_dir.absolute()
    if real.is_relative_to(model_dir.resolve()):
        return True
    snapshot = next((d for d in (model_dir, *model_dir.parents) if d.parent.name == "snapshots"),
                    None)
    return snapshot is not None and real.parent == (snapshot.parent.parent / "blobs").resolve()
