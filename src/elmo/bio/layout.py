"""bio_embeddings' output folder: its file names, and the files of the `global` stage.

Under PREFIX: `input_parameters_file.yml` (the config as written), `sequences_file.fasta`
(the input records, in file order), `remapped_sequences_file.fasta` (the records longest
first, each under its new id: the MD5 of its sequence, or 0, 1, ... with simple remapping),
`mapping_file.csv` (new id -> `original_id`, `sequence_length`, in the remapped order) and,
last, `output_parameters_file.yml`. Each stage writes into PREFIX/STAGE/ its
`input_parameters_file.yml` when it starts, its files, and its `output_parameters_file.yml`
when it ends. FASTA is written as Biopython wrote it (60 residues a line); every file is
written under a temporary name and renamed.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elmo.extras import import_extra
from elmo.io.atomic import atomic_write_text
from elmo.io.fasta import FastaRecord, check_unique_sequences

INPUT_PARAMETERS = "input_parameters_file.yml"
OUTPUT_PARAMETERS = "output_parameters_file.yml"
SEQUENCES = "sequences_file.fasta"
REMAPPED_SEQUENCES = "remapped_sequences_file.fasta"
MAPPING = "mapping_file.csv"
# PREFIX's own files, in the order they are written.
PREFIX_FILES = (INPUT_PARAMETERS, SEQUENCES, REMAPPED_SEQUENCES, MAPPING, OUTPUT_PARAMETERS)
FASTA_WIDTH = 60


@dataclass(frozen=True)
class RemappedProtein:
    """A record under its new id (`key`), as the stages see it."""

    key: str
    record: FastaRecord

    @property
    def header(self) -> str:
        """The remapped FASTA header: the new id, then the original header."""
        return f"{self.key} {original_header(self.record)}"


@dataclass(frozen=True)
class StagePlan:
    """A stage as planned before anything runs, what its type's check sees: its name,
    protocol and options (one it does not set taken from the stages it depends on, then the
    default); `carried`: the parameters it takes from those stages; `parameters`: its input
    parameters but `start_time`; `files`: the output parameters its files add (name ->
    path); `n_proteins`; `coming`: the paths of the files the stages before it will write;
    `where(option)`: its place in the config, for errors ("FILE, line N (option O of
    STAGE)"); `identity`: the digest of what its files are made of."""

    name: str
    protocol: str
    options: dict[str, Any]
    carried: dict[str, Any]
    parameters: dict[str, Any]
    files: dict[str, str]
    n_proteins: int
    coming: frozenset[str]
    where: Callable[..., str]
    identity: str


@dataclass(frozen=True)
class StageRun:
    """What a stage runs on: its directory (the path its output parameters name), protocol
    and options (defaults filled in), its input parameters, the proteins in their remapped
    order, whether to show progress; `place`: the path to write its directory through
    (`elmo.bio.folders`), and `saved()`, to call after each file it completes (PREFIX's
    record then names it)."""

    directory: Path
    protocol: str
    options: dict[str, Any]
    parameters: dict[str, Any]
    proteins: Sequence[RemappedProtein]
    progress: bool
    place: Path
    saved: Callable[[], None]


def original_header(record: FastaRecord) -> str:
    """A record's header line without '>'."""
    return f"{record.id} {record.description}" if record.description else record.id


def remap(records: Sequence[FastaRecord], simple: bool, source: Path) -> list[RemappedProtein]:
    """The records longest first (a stable sort), each keyed by the MD5 of its sequence or,
    with `simple`, by its position in that order. Two records with the same sequence cannot
    share an MD5 key: InputFileError naming both (bio_embeddings refused them too)."""
    ordered = sorted(records, key=lambda record: -len(record.sequence))
    if simple:
        return [RemappedProtein(str(n), record) for n, record in enumerate(ordered)]
    check_unique_sequences(ordered, source, "datasets are keyed by the MD5 of the sequence, so "
                           "remove duplicates (e.g. `seqkit rmdup -s`) or set "
                           "'simple_remapping: True' under global")
    return [RemappedProtein(hashlib.md5(record.sequence.encode()).hexdigest(), record)
            for record in ordered]


def proteins_digest(proteins: Sequence[RemappedProtein]) -> str:
    """The sha256 of the proteins as the stages see them: new id, original id, sequence."""
    digest = hashlib.sha256()
    for protein in proteins:
        digest.update(f"{protein.key}\t{protein.record.id}\t{protein.record.sequence}\n"
                      .encode())
    return digest.hexdigest()


def fasta_text(entries: Iterable[tuple[str, str]]) -> str:
    """(header, sequence) pairs as FASTA, 60 residues a line."""
    out = io.StringIO()
    for header, sequence in entries:
        out.write(f">{header}\n")
        for start in range(0, len(sequence), FASTA_WIDTH):
            out.write(sequence[start:start + FASTA_WIDTH] + "\n")
    return out.getvalue()


def write_global_files(prefix: Path, config_text: str, records: Sequence[FastaRecord],
                       proteins: Sequence[RemappedProtein]) -> None:
    """The files of PREFIX that come before the stages."""
    atomic_write_text(prefix / INPUT_PARAMETERS, config_text)
    atomic_write_text(prefix / SEQUENCES,
                      fasta_text((original_header(r), r.sequence) for r in records))
    atomic_write_text(prefix / REMAPPED_SEQUENCES,
                      fasta_text((p.header, p.record.sequence) for p in proteins))
    atomic_write_text(prefix / MAPPING, csv_text(
        ["", "original_id", "sequence_length"],
        ([p.key, p.record.id, len(p.record.sequence)] for p in proteins)))


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A CSV as pandas' `to_csv` writes it: a header row, minimal quoting, LF line ends."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def global_parameters(prefix: Path, written: dict[str, Any], simple_remapping: bool
                      ) -> dict[str, Any]:
    """The parameters every stage starts from: the global section as written, with the
    paths of PREFIX's files."""
    return {**written, "sequences_file": str(prefix / SEQUENCES),
            "simple_remapping": simple_remapping, "mapping_file": str(prefix / MAPPING),
            "remapped_sequences_file": str(prefix / REMAPPED_SEQUENCES)}


def write_parameters(path: Path, parameters: dict[str, Any]) -> None:
    """A parameters file: YAML, in the parameters' order."""
    yaml = import_extra("yaml", "a bio_embeddings pipeline")
    atomic_write_text(path, yaml.safe_dump(parameters, default_flow_style=False,
                                           sort_keys=False, allow_unicode=True))


def read_parameters(path: Path) -> dict[str, Any] | None:
    """A parameters file written by `write_parameters`; None where it is missing or is no
    such file."""
    yaml = import_extra("yaml", "a bio_embeddings pipeline")
    try:
        parameters = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return parameters if isinstance(parameters, dict) else None
