"""The NLPL vector repository's ELMo models: a ZIP archive holding `model.hdf5`,
`options.json` and `vocab.txt` (or `vocab.txt.gz`), or the directory it was extracted into
(read only).

The two model files are bilm-tf's (`formats/bilm_tf.py`) under other names. The vocabulary,
the training corpus's words by frequency, is not needed: the biLM reads characters. An
archive is read without unpacking it to disk: `model.hdf5` is read into memory, where h5py
opens it.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Collection
from pathlib import Path

from elmo.errors import ModelFileError
from elmo.loading.formats.bilm_tf import load_bilm_tf, parse_options, read_weights
from elmo.modules.bilm import BiLM

OPTIONS_NAME = "options.json"
WEIGHTS_NAME = "model.hdf5"
VOCAB_NAMES = ("vocab.txt", "vocab.txt.gz")
LAYOUT = f"a ZIP archive or directory of {WEIGHTS_NAME}, {OPTIONS_NAME} and {VOCAB_NAMES[0]}"


def holds_nlpl(names: Collection[str]) -> bool:
    """Whether a directory or archive holding the files `names` holds an NLPL model."""
    return OPTIONS_NAME in names and WEIGHTS_NAME in names


def is_zip_archive(path: Path) -> bool:
    """Whether `path` is a ZIP file (as NLPL's models are published)."""
    return path.is_file() and zipfile.is_zipfile(path)


def load_nlpl(path: str | Path) -> BiLM:
    """The biLM of an NLPL model: a ZIP archive (read in memory) or its extracted directory."""
    path = Path(path)
    if path.is_dir():
        return load_bilm_tf(path / OPTIONS_NAME, path / WEIGHTS_NAME)
    with _open_archive(path) as archive:
        if not holds_nlpl(archive.namelist()):
            raise ModelFileError(f"{path} holds no NLPL model ({LAYOUT}); found "
                                 f"{', '.join(sorted(archive.namelist())) or 'no files'}")
        config = parse_options(archive.read(OPTIONS_NAME), f"{path}:{OPTIONS_NAME}")
        weights = io.BytesIO(archive.read(WEIGHTS_NAME))
    return read_weights(config, weights, f"{path}:{WEIGHTS_NAME}")


def _open_archive(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        raise ModelFileError(f"{path} is not a readable ZIP archive ({err}); an NLPL model "
                             f"is {LAYOUT}") from None
