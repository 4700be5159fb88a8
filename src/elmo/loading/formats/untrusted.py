"""Reading model files from anyone within bounds: what a reader checks before it reads.

A model's files may come from anyone. Each reader takes their contents through these
functions, which refuse, with a ModelFileError naming the file, anything that would read more
than the model can hold or anything outside the file:

- `read_json`: a config file, whose size is checked before it is read (and its nesting by
  the parser); `read_text`: a vocabulary or a card, its size checked so;
- `read_zip_member`: a member of a ZIP archive, whose declared size is checked against what
  the member can hold before it is read, and which must be stored or deflated (the methods
  Python's zipfile inflates a bounded amount at a time), not encrypted, and whole (its CRC);
- `check_torch_file`: a `torch.save` file, whose ZIP records must be stored as `torch.save`
  writes them (torch inflates a compressed record whole, whatever its size);
- `checked_tensor`: a tensor read from a torch file, compared with the architecture (shape,
  floats) and refused when its storage holds fewer values than its shape (a stride of 0, an
  overlapping view), before anything converts it;
- `read_hdf5_dataset`: an HDF5 dataset, read only once it is known to be a plain dataset of
  floats of the expected shape, stored in the file itself (no external storage, external or
  soft link, or virtual dataset, through which a file would read other local files), in
  chunks no larger than itself with only the filters of `HDF5_FILTERS`, which are undone
  here, never producing more than a chunk holds (HDF5's own deflate filter inflates a chunk
  whole, whatever it grows to);
- `own_file`: a model's own file (weights, vocabulary, config, card), read only when it is a
  regular file inside the model's directory; `named_file`: a file that a model's config
  names by its path, looked for only there.
"""

from __future__ import annotations

import stat
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import h5py
import numpy as np
import torch
from h5py import h5d, h5z

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


def read_text(path: Path, max_bytes: int, what: str,
              error: type[ModelFileError] = ModelFileError) -> str:
    """The UTF-8 text of the file `path` (`what` it is: "a vocabulary"), refused unread when
    it is larger than `max_bytes`. FileNotFoundError passes."""
    size = path.stat().st_size
    if size > max_bytes:
        raise error(f"{path} is {size:,} bytes, more than the {max_bytes:,} {what} may take")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{path} is not UTF-8 text (byte {err.start:,}): it is not {what}") from None


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


# The tensor types a weights file may hold: floats (checked before anything converts them).
TORCH_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def checked_tensor(tensor: object, name: str, shape: tuple[int, ...], where: str,
                   described_by: str, error: type[ModelFileError] = ModelFileError,
                   ) -> torch.Tensor:
    """`tensor` (`name` in the torch file `where`), once it is a dense tensor of floats of
    `shape` (what `described_by` describes) whose storage holds each of its values once: a
    stride of 0 or an overlapping view (a few bytes that a conversion would make gigabytes)
    is refused before anything converts it."""
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided:
        kind = f"{tensor.layout} tensor" if isinstance(tensor, torch.Tensor) \
            else type(tensor).__name__
        raise error(f"{where}: {name!r} holds a {kind} where a dense tensor of shape {shape} "
                    "belongs")
    if tuple(tensor.shape) != shape:
        raise error(f"{where}: tensor {name!r} has shape {tuple(tensor.shape)}, but "
                    f"{described_by} describes {shape}; are they from the same model?")
    if tensor.dtype not in TORCH_FLOATS:
        raise error(f"{where}: tensor {name!r} holds {tensor.dtype}, not floating-point "
                    "numbers")
    needed = (tensor.storage_offset() + tensor.numel()) * tensor.element_size()
    if not _dense(tensor) or tensor.untyped_storage().nbytes() < needed:
        raise error(f"{where}: tensor {name!r} of shape {shape} stores "
                    f"{tensor.untyped_storage().nbytes():,} bytes for {needed:,} (a stride of "
                    f"0 or an overlapping view, strides {tensor.stride()}); a saved weight "
                    "stores each of its values: the file is not a model's")
    return tensor


def _dense(tensor: torch.Tensor) -> bool:
    """Whether `tensor`'s elements each have a place of their own, none skipped: its strides,
    from the smallest, are the products of the sizes before them (any order of dimensions)."""
    expected = 1
    for size, stride in sorted(((n, s) for n, s in zip(tensor.shape, tensor.stride(),
                                                        strict=True) if n > 1),
                               key=lambda pair: pair[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def read_hdf5_dataset(f: h5py.File, name: str, shape: tuple[int, ...], where: str,
                      described_by: str, error: type[ModelFileError] = ModelFileError,
                      ) -> np.ndarray:
    """The float32 array of dataset `name` (a path in the open file `f`), read once every
    link on its path is a hard link and it is a dataset of floats of `shape`, stored in the
    file in plain storage (`_read_storage`). `where` names the file in errors (of class
    `error`), `described_by` what gave `shape` (as "the options")."""
    node = _checked_dataset(f, name, shape, where, described_by, error)
    try:
        return np.asarray(_read_storage(node, f"{where}: tensor {name!r}", error),
                          dtype=np.float32)
    except (OSError, KeyError, RuntimeError) as err:  # h5py's, for a damaged file
        raise error(f"{where}: tensor {name!r} cannot be read ({err}); the file is damaged: "
                    "download or copy it again") from None


def _inflate(data: bytes, limit: int, values: tuple[int, ...]) -> bytes:
    """A deflated (zlib) stream's bytes, inflated to at most `limit`; ValueError beyond."""
    stream = zlib.decompressobj()
    out = stream.decompress(data, limit + 1)  # never more than one byte past the bound
    if len(out) > limit or not stream.eof:
        raise ValueError(f"it inflates to more than the {limit:,} bytes its chunk holds"
                         if len(out) > limit else "its deflated stream ends too early")
    return out


def _unshuffle(data: bytes, limit: int, values: tuple[int, ...]) -> bytes:
    """HDF5's shuffle filter undone: byte k of every element was stored in the k-th run."""
    size = values[0] if values else 0
    if not 1 <= size <= 8:
        raise ValueError(f"its element size {size} is not a float's")
    whole = len(data) // size * size
    runs = np.frombuffer(data, np.uint8, whole).reshape(size, whole // size)
    return runs.T.tobytes() + data[whole:]


# The filters a weights dataset may be stored with (h5py's gzip and shuffle, all the official
# files and h5py's users write), by HDF5's code: each undoes one step, `(stored bytes, the
# most it may produce, the filter's values) -> bytes`. Any other filter is refused unread.
HDF5_FILTERS: dict[int, tuple[str, Callable[[bytes, int, tuple[int, ...]], bytes]]] = {
    h5z.FILTER_DEFLATE: ("deflate", _inflate),
    h5z.FILTER_SHUFFLE: ("shuffle", _unshuffle),
}
# What a chunk's stored bytes may take beyond its values: deflate's worst case adds ~0.03%
# and a few bytes per pass over incompressible data.
_CHUNK_SLACK = 4096


def _read_storage(node: h5py.Dataset, tensor: str, error: type[ModelFileError]) -> np.ndarray:
    """The values of `node`, a dataset of the expected shape (`tensor` names it in errors),
    read within what its shape holds: contiguous or compact storage as HDF5 reads it (no
    filter applies), chunks one by one through `HDF5_FILTERS`; refused unread for any other
    layout, a filter not in the table or a chunk larger than the dataset."""
    if node.dtype.itemsize > 8:
        raise error(f"{tensor} holds {node.dtype.itemsize * 8}-bit floats; a weights file "
                    "holds floats of 16, 32 or 64 bits")
    plist = node.id.get_create_plist()
    layout = plist.get_layout()
    if layout in (h5d.CONTIGUOUS, h5d.COMPACT):
        return node[()]
    if layout != h5d.CHUNKED:
        raise error(f"{tensor} has a storage layout ({layout}) a weights file does not use")
    for index in range(plist.get_nfilters()):
        code, _, _, filter_name = plist.get_filter(index)
        if code not in HDF5_FILTERS:
            raise error(f"{tensor} is stored through the HDF5 filter "
                        f"{filter_name.decode(errors='replace')!r} (code {code}), which is not "
                        f"read (only {' and '.join(n for n, _ in HDF5_FILTERS.values())}): "
                        "write the weights again with h5py's gzip or no compression")
    if any(c > s for c, s in zip(node.chunks, node.shape, strict=True)):
        raise error(f"{tensor} is stored in chunks of shape {node.chunks}, larger than the "
                    f"tensor's {node.shape}: the file is not a weights file as h5py writes one")
    return _read_chunks(node, tensor, error)


def _read_chunks(node: h5py.Dataset, tensor: str, error: type[ModelFileError]) -> np.ndarray:
    """A chunked dataset's values, each chunk's stored bytes undone through `HDF5_FILTERS`
    (in the reverse of the order they were applied, skipping those its mask says were not),
    none producing more than the chunk holds."""
    dataset = node.id
    plist = dataset.get_create_plist()
    pipeline = [plist.get_filter(i) for i in range(plist.get_nfilters())]
    chunk_bytes = int(np.prod(node.chunks)) * node.dtype.itemsize
    limit = chunk_bytes + chunk_bytes // 1000 * len(pipeline) + _CHUNK_SLACK
    out = np.full(node.shape, node.fillvalue, dtype=node.dtype)
    places = int(np.prod([-(-s // c) for s, c in zip(node.shape, node.chunks, strict=True)]))
    if dataset.get_num_chunks() > places:
        raise error(f"{tensor} lists {dataset.get_num_chunks():,} chunks where its shape has "
                    f"room for {places:,}: the file is damaged")
    for index in range(dataset.get_num_chunks()):
        info = dataset.get_chunk_info(index)
        if any(o % c or o >= s for o, c, s in zip(info.chunk_offset, node.chunks, node.shape,
                                                  strict=True)):
            raise error(f"{tensor} lists a chunk at {info.chunk_offset}, not one of its own: "
                        "the file is damaged")
        if info.size > limit:
            raise error(f"{tensor} stores a chunk of {info.size:,} bytes, more than the "
                        f"{chunk_bytes:,} its values take: the file is damaged or not a model")
        mask, data = dataset.read_direct_chunk(info.chunk_offset)
        for step, (code, _, values, _) in reversed(list(enumerate(pipeline))):
            if not mask & (1 << step):
                try:
                    data = HDF5_FILTERS[code][1](data, limit, tuple(values))
                except (ValueError, zlib.error) as err:
                    raise error(f"{tensor}: a chunk cannot be read through "
                                f"{HDF5_FILTERS[code][0]} ({err}): the file is damaged or "
                                "not a model") from None
        if len(data) != chunk_bytes:
            raise error(f"{tensor}: a chunk holds {len(data):,} bytes where its shape "
                        f"{node.chunks} takes {chunk_bytes:,}: the file is damaged")
        region = tuple(slice(o, min(o + c, s))
                       for o, c, s in zip(info.chunk_offset, node.chunks, node.shape, strict=True))
        values = np.frombuffer(data, node.dtype).reshape(node.chunks)
        out[region] = values[tuple(slice(0, r.stop - r.start) for r in region)]
    return out


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


def own_file(model_dir: Path, name: str, named_by: str | None = None) -> Path:
    """`model_dir / name`, a model's own file (weights, vocabulary, config, card), once it is
    known to be a regular file in the model's directory: a ModelFileError for a symbolic link
    that leads out of it (huggingface_hub's links from a snapshot into its repo's blobs
    excepted) or anything but a regular file (a FIFO, a device, a directory). A missing file
    is returned as it is: its reader says what is missing. `named_by`: the config that names
    `name`, for the message."""
    path = model_dir / name
    what = f"{named_by} names {name!r}," if named_by else f"{path} is"
    real = path.resolve()
    if not _within(real, model_dir):
        raise ModelFileError(f"{what} a link to {real}, outside the model's directory "
                             f"{model_dir}: a model reads only its own files; copy the file "
                             "into the directory")
    if path.exists() and not stat.S_ISREG(path.stat().st_mode):
        raise ModelFileError(f"{what} not a regular file (a directory, FIFO or device): "
                             "a model's files are regular files")
    return path


def named_file(model_dir: Path, named: str, where: str) -> Path | None:
    """The file that a model's config (`where`, in errors) names by the path `named`,
    relative to the model's directory; None for a path that leads out of it lexically, an
    absolute one (another machine's, as released configs record) or one through `..` (the
    caller looks for the file's name in the directory instead); else `own_file`'s."""
    posix = PurePosixPath(named.replace("\\", "/"))
    if posix.is_absolute() or PureWindowsPath(named).drive or ".." in posix.parts:
        return None
    return own_file(model_dir, str(posix), named_by=where)


def _within(real: Path, model_dir: Path) -> bool:
    """Whether the resolved path `real` is in `model_dir`, or in the blobs of the Hub cache
    repo whose snapshot `model_dir` is in (`REPO/snapshots/COMMIT/...` -> `REPO/blobs/`)."""
    model_dir = model_dir.absolute()
    if real.is_relative_to(model_dir.resolve()):
        return True
    snapshot = next((d for d in (model_dir, *model_dir.parents) if d.parent.name == "snapshots"),
                    None)
    return snapshot is not None and real.parent == (snapshot.parent.parent / "blobs").resolve()
