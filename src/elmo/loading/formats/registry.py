"""The model formats, one `ModelFormat` record each, in `FORMATS`.

A model directory's format is the first record, in `FORMATS`' order, whose `detect` accepts
the names of its files (`format_of_files`); a model file's (an archive read as it is), the
first whose `detect_file` accepts it (`format_of_file`). Resolving, loading, `elmo info`, the
MODEL help, `elmo export`, `elmo perplexity`, `train --init-from` and the Hub's file listing all
read this table: a new format is one record here and its module beside this one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from elmo.errors import ElmoError
from elmo.loading.formats import allennlp_archive as archive
from elmo.loading.formats import bilm_tf, efml, native, nlpl
from elmo.modules.bilm import BiLM


class LocalFiles(Protocol):
    """Where a model's files are on this machine (a resolved `ModelFiles` once local): its
    `directory` (or archive), and the `options` and `weights` of a format read as a pair."""

    @property
    def directory(self) -> Path | None: ...
    @property
    def options(self) -> Path | None: ...
    @property
    def weights(self) -> Path | None: ...


@dataclass(frozen=True)
class ModelFormat:
    """A model format: its `name` (what `elmo info`, its --json and serve's /info say) and
    `description` (what it is and its files, as help text and `elmo info` print it);
    `detect(top)`: whether a directory whose files (at its top) are named `top` holds a model
    of this format; `files_read(names, where)`: which of a directory's files (relative paths)
    such a model reads, an error naming `where` when they make no one model; `load(files)`:
    the biLM in local files and the other tensors stored with it.

    Optional: `detect_file(path)`, whether the file `path` is such a model, read as it is (an
    archive; an error for a broken one); `pair(names, where)`, the options and weights files
    among a directory's names, for a format read as such a pair (a ModelFiles' `options` and
    `weights`); `vocab_name`, the words of the softmax a model of this format may carry
    (`elmo perplexity` and `train --init-from` read them; None: it carries no softmax);
    `tokenizer_note`, what `elmo info` adds when the model records no tokenizer. A format that
    `elmo export` writes has `save(bilm, directory)`, which writes the files `saved_files`,
    and `save_note` for the command's help; `export_default`: the one written when neither
    --format nor OUTDIR says which."""

    name: str
    description: str
    detect: Callable[[set[str]], bool]
    files_read: Callable[[Collection[str], str], list[str]]
    load: Callable[[LocalFiles], tuple[BiLM, dict[str, torch.Tensor]]]
    detect_file: Callable[[Path], bool] | None = None
    pair: Callable[[Collection[str], str], tuple[str, str]] | None = None
    vocab_name: str | None = None
    tokenizer_note: str = ""
    save: Callable[[BiLM, Path], object] | None = None
    saved_files: tuple[str, ...] = ()
    save_note: str = ""
    export_default: bool = False


NATIVE = ModelFormat(
    "native", f"this package's: {native.CONFIG_NAME} + {native.WEIGHTS_NAME}, or + "
    f"{native.INDEX_NAME} and its shards",
    detect=native.holds_native,
    files_read=lambda names, where: native.native_files(names),
    load=lambda files: native.load_native(files.directory),
    vocab_name=native.VOCAB_NAME,
    save=native.save_pretrained, saved_files=(native.CONFIG_NAME, native.WEIGHTS_NAME),
    save_note="what `elmo embed OUTDIR` loads fastest")
EFML = ModelFormat(
    "efml", f"ELMoForManyLangs: {', '.join(efml.REQUIRED_FILES)}, {efml.WORD_DIC}",
    detect=efml.holds_efml,
    files_read=lambda names, where: efml.efml_files(names),
    load=lambda files: (efml.load_efml(files.directory), {}),
    tokenizer_note="ELMoForManyLangs models expect words segmented as in UD (see docs/efml.md)")
ALLENNLP = ModelFormat(
    "allennlp", f"AllenNLP: an archive's {archive.CONFIG_NAME} + {archive.WEIGHTS_NAME}, or an "
    f"Elmo's {archive.WEIGHTS_NAME} alone",
    detect=archive.holds_archive,
    files_read=lambda names, where: archive.archive_files(names),
    load=lambda files: (archive.load_allennlp_archive(files.directory), {}))
NLPL = ModelFormat(  # before bilm-tf, whose detection its directories pass too
    "nlpl", f"the NLPL vector repository's: {nlpl.LAYOUT}",
    detect=nlpl.holds_nlpl,
    files_read=lambda names, where: [nlpl.OPTIONS_NAME, nlpl.WEIGHTS_NAME],
    load=lambda files: (nlpl.load_nlpl(files.directory), {}),
    detect_file=nlpl.is_zip_archive)
BILM_TF = ModelFormat(
    "bilm-tf", "bilm-tf / AllenNLP: one options .json + one weights .hdf5",
    detect=bilm_tf.holds_official_pair,
    files_read=lambda names, where: list(bilm_tf.official_pair(
        [n for n in names if "/" not in n], where)),
    load=lambda files: (bilm_tf.load_bilm_tf(files.options, files.weights), {}),
    pair=bilm_tf.official_pair,
    save=bilm_tf.save_bilm_tf, saved_files=(bilm_tf.OPTIONS_NAME, bilm_tf.WEIGHTS_NAME),
    save_note="byte-level models only: ELMoForManyLangs models export to native",
    export_default=True)

# In the order detection tries them: a directory's format is the first that accepts its files.
FORMATS: dict[str, ModelFormat] = {f.name: f for f in (NATIVE, EFML, ALLENNLP, NLPL, BILM_TF)}


def formats_described() -> str:
    """The formats, each with its description, as help text and errors list them."""
    described = [f"{f.name} ({f.description})" for f in FORMATS.values()]
    return ", ".join(described[:-1]) + " or " + described[-1]


def export_formats() -> dict[str, ModelFormat]:
    """The formats `elmo export` writes (those with `save`), by name."""
    return {name: f for name, f in FORMATS.items() if f.save is not None}


def format_of_file(path: Path) -> ModelFormat | None:
    """The format of the model file `path` (an archive read as it is), if it is one."""
    return next((f for f in FORMATS.values() if f.detect_file and f.detect_file(path)), None)


def format_of_files(names: Collection[str], where: str) -> ModelFormat:
    """The format of a model directory that holds the files `names` (paths relative to it;
    those in sub-directories count for no format). An error names `where` and lists the
    files and the formats when none fits."""
    top = {n for n in names if "/" not in n}
    fmt = next((f for f in FORMATS.values() if f.detect(top)), None)
    if fmt is None:
        raise ElmoError(f"{where} holds no model: a model is in one of the formats "
                        f"{formats_described()}; found {bilm_tf.found_files(top) or 'no files'}")
    return fmt
