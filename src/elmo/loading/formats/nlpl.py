"""The NLPL vector repository's ELMo models: a ZIP archive holding `model.hdf5`,
`options.json` and `vocab.txt` (or `vocab.txt.gz`), or the directory it was extracted into
(read only).

The two model files are bilm-tf's (`formats/bilm_tf.py`) under other names. The vocabulary,
the training corpus's words by frequency, is not needed: the biLM reads characters. An
archive is read without unpacking it to disk: `model.hdf5` is read into memory, where h5py
opens it. Each member's declared size is checked before it is read: `options.json` may take
what any config file may, `model.hdf5` what the weights of the architecture the options
declare take (`untrusted.weights_bytes`).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Collection
from pathlib import Path

from elmo.errors import ModelFileError
from elmo.loading.formats.bilm_tf import load_bilm_tf, parse_options, read_weights
from elmo.loading.formats.untrusted import (
    MAX_CONFIG_BYTES,
    own_file,
    read_json,
    read_zip_member,
    weights_bytes,
)
from elmo.modules.bilm import BiLM

OPTIONS_NAME = "options.json"
WEIGHTS_NAME = "model.hdf5"
VOCAB_NAMES = ("vocab.txt", "vocab.txt.gz")
LAYOUT = f"a ZIP archive or directory of {WEIGHTS_NAME}, {OPTIONS_NAME} and {VOCAB_NAMES[0]}"


def holds_nlpl(names: Collection[str]) -> bool:
    """Whether a directory or archive holding the files `names` holds an NLPL model."""
    return OPTIONS_NAME in names and WEIGHTS_NAME in names


def is_zip_archive(path: Path) -> bool:
    """Whether `path` is a ZIP file (as NLPL's models are published). A file named `.zip`, or
    that starts as a ZIP file does, but is not a complete one (a truncated download, a page
    saved under the archive's name, an empty file) is a ModelFileError."""
    if not path.is_file():
        return False
    if zipfile.is_zipfile(path):
        return True
    with path.open("rb") as f:
        starts_as_zip = f.read(len(_ZIP_MAGIC)) == _ZIP_MAGIC
    if starts_as_zip or path.suffix.lower() == ".zip":
        raise ModelFileError(f"{path} is not a complete ZIP archive (truncated download?): "
                             f"download it again; an NLPL model is {LAYOUT}")
    return False


_ZIP_MAGIC = b"PK\x03\x04"  # a ZIP file's first local header


def load_nlpl(path: str | Path) -> BiLM:
    """The biLM of an NLPL model: a ZIP archive (read in memory) or its extracted directory."""
    path = Path(path)
    if path.is_dir():
        return load_bilm_tf(own_file(path, OPTIONS_NAME), own_file(path, WEIGHTS_NAME))
    with _open_archive(path) as archive:
        if not holds_nlpl(archive.namelist()):
            raise ModelFileError(f"{path} holds no NLPL model ({LAYOUT}); found "
                                 f"{', '.join(sorted(archive.namelist())) or 'no files'}")
        options = read_zip_member(archive, OPTIONS_NAME, MAX_CONFIG_BYTES, str(path))
        where = f"{path}:{OPTIONS_NAME}"
        config = parse_options(read_json(options, where), where)
        weights = read_zip_member(archive, WEIGHTS_NAME, weights_bytes(config.n_parameters),
                                  str(path))
    return read_weights(config, io.BytesIO(weights), f"{path}:{WEIGHTS_NAME}")


def _open_archive(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        raise ModelFileError(f"{path} is not a readable ZIP archive ({err}); an NLPL model "
                             f"is {LAYOUT}") from None
