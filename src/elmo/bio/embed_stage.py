"""The `embed` stage with protocol `seqvec`: per-residue and per-protein HDF5 files.

Writes into the stage's directory `embeddings_file.h5` (unless
`discard_per_amino_acid_embeddings`): a dataset per protein named by its new id, with the
attribute `original_id`, holding its (L+1, n, D) layers (SeqVec: (3, n, 1024)), float32 or
float16 with `half_precision`; and with `reduce`, `reduced_embeddings_file.h5`: (D,) per
protein, the sum over layers averaged over residues (computed in float32, then stored).

Proteins are embedded longest first in batches of at most `max_amino_acids` padded residues
(bio_embeddings' default for SeqVec: 15,000). On a GPU, a batch that runs out of memory is
halved and computed again, down to one protein, and a protein that does not fit alone is
computed on the CPU; each step says so in the log. The work is saved in a hidden directory
of the stage, a chunk of proteins at a time (`elmo.io.hdf5_output.PartialOutput`), so a killed
run resumes where it stopped; the files are assembled from it at the end: the embedding job
(`Embedder.run_job`) into a `StageSink`.
"""

from __future__ import annotations

import copy
import logging
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from elmo.bio.layout import StagePlan, StageRun, proteins_digest
from elmo.bio.seqvec import SeqVecEmbedder
from elmo.embedding import Embedder, Item, PartialSink, Progress
from elmo.errors import ElmoError
from elmo.io.atomic import atomic_output
from elmo.io.hdf5_output import NEW_FILE, PartialOutput
from elmo.memory import DeviceMemoryError

EMBEDDINGS = "embeddings_file"
REDUCED = "reduced_embeddings_file"
PARTIAL = ".embed.partial"

logger = logging.getLogger(__name__)


def embed_outputs(options: dict[str, Any]) -> dict[str, str]:
    """The output parameters the stage adds: name -> its file in the stage's directory."""
    files = {EMBEDDINGS: not options["discard_per_amino_acid_embeddings"],
             REDUCED: options["reduce"]}
    return {name: f"{name}.h5" for name, on in files.items() if on}


def check_embed_stage(plan: StagePlan) -> None:
    """What the options must agree on."""
    options, where = plan.options, plan.where
    if options["discard_per_amino_acid_embeddings"] and not options["reduce"]:
        raise ElmoError(f"{where('discard_per_amino_acid_embeddings')}: with "
                        "discard_per_amino_acid_embeddings the stage would write nothing; also "
                        "set 'reduce: True'")
    if options["use_cpu"] and options["device"] not in (None, "cpu"):
        raise ElmoError(f"{where('use_cpu')}: use_cpu and device {options['device']!r} "
                        "disagree; keep one")
    if options["max_amino_acids"] < 1:
        raise ElmoError(f"{where('max_amino_acids')}: max_amino_acids is the most residues in "
                        "a batch, a whole number >= 1")
    if (options["weights_file"] is None) != (options["options_file"] is None):
        raise ElmoError(f"{where()}: give both weights_file and options_file (or "
                        "model_directory, or neither for the released seqvec)")


def run_embed_stage(run: StageRun) -> dict[str, str]:
    """Embed the proteins as the stage's options say; returns the output parameters it adds
    (the paths of the files written)."""
    stage_dir, options, proteins = run.directory, run.options, run.proteins
    seqvec = _seqvec(options)
    files = embed_outputs(options)
    dtype = np.float16 if options["half_precision"] else np.float32
    identity = {"proteins_sha256": proteins_digest(proteins), "dtype": np.dtype(dtype).name,
                **{name: str(name in files) for name in (EMBEDDINGS, REDUCED)}}
    written = {name: run.place / file for name, file in files.items()}
    lengths = [len(p.record.sequence) for p in proteins]

    def items(start: int) -> Iterator[Item]:
        for number in range(start, len(proteins)):
            protein = proteins[number]
            yield Item(number, protein.key, list(protein.record.sequence), lengths[number],
                       {"original_id": protein.record.id})

    seqvec.embedder.run_job(
        items, StageSink(run.place / PARTIAL, written, dtype, run.saved), identity,
        Progress(f"embedding ({stage_dir.name})", "protein", len(proteins), unit="residue",
                 total=sum(lengths), before=lambda done: sum(lengths[:done]),
                 enabled=run.progress),
        compute=_LayersWithFallback(seqvec.embedder))
    return {name: str(stage_dir / file) for name, file in files.items()}


class StageSink(PartialSink):
    """The job's `Sink` of the stage: per chunk of proteins a segment in the stage's hidden
    directory `path`, holding what each file of `files` (name -> path) stores of a protein
    (`FILE/KEY`, with its `original_id`); at the end each file assembled from its datasets,
    in order, written atomically. `saved()` is called after each file it completes."""

    def __init__(self, path: Path, files: dict[str, Path], dtype: type,
                 saved: Callable[[], None]) -> None:
        super().__init__(path)
        self.files, self.dtype, self.saved = files, dtype, saved

    def open(self, identity: dict[str, str]) -> int:
        done = super().open(identity)
        self.saved()
        return done

    def save(self, items: Sequence[Item], layers: Sequence[np.ndarray]) -> None:
        datasets, attrs = [], {}
        for item, protein_layers in zip(items, layers, strict=True):
            for name, data in _stored(protein_layers, self.files, self.dtype):
                datasets.append((f"{name}/{item.name}", data))
                attrs[f"{name}/{item.name}"] = item.attrs
        self.partial.save(items[-1].number + 1, datasets, attrs)
        self.saved()

    def finish(self) -> None:
        for name, path in self.files.items():
            _assemble(self.partial, name, path)
            self.saved()
        shutil.rmtree(self.path)


def _seqvec(options: dict[str, Any]) -> SeqVecEmbedder:
    """The model the options name: weights_file and options_file, model_directory (with
    bio_embeddings' file names `weights_file` and `options_file`, or any model directory of
    ours), or the released seqvec."""
    files = {"options_file": options["options_file"], "weights_file": options["weights_file"]}
    directory = options["model_directory"]
    if directory is not None and all((Path(directory) / name).is_file() for name in files):
        files = {name: str(Path(directory) / name) for name in files}
        directory = None
    device = "cpu" if options["use_cpu"] else options["device"]
    return SeqVecEmbedder(model_directory=directory, device=device,
                          max_tokens=options["max_amino_acids"], **files)


def _stored(layers: np.ndarray, files: dict[str, Path], dtype: type) -> list[tuple[str, Any]]:
    """What each file stores of a protein's layers."""
    stored = []
    if EMBEDDINGS in files:
        stored.append((EMBEDDINGS, layers.astype(dtype)))
    if REDUCED in files:
        stored.append((REDUCED, SeqVecEmbedder.reduce_per_protein(layers).astype(dtype)))
    return stored


def _assemble(partial: PartialOutput, name: str, path: Path) -> None:
    """Copy the saved datasets of `name`, in order, into the file `path`."""
    with atomic_output(path) as tmp, h5py.File(tmp, "w", **NEW_FILE) as out:
        for segment in partial.segments:
            with h5py.File(segment, "r") as f:
                for key, dataset in f[name].items():
                    f.copy(dataset, out, key)


class _LayersWithFallback:
    """The layers of proteins on the embedder's device; a protein that does not fit in the
    device's memory even alone is computed on the CPU (said in the log)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.cpu: Embedder | None = None

    def __call__(self, sequences: list[list[str]], start: int) -> list[np.ndarray]:
        """The layers of `sequences` (their residues), numbered from `start`, in order."""
        done: dict[int, np.ndarray] = {}
        while len(done) < len(sequences):
            todo = [i for i in range(len(sequences)) if i not in done]
            try:
                for number, layers in self.embedder.iter_embeddings(
                        [sequences[i] for i in todo], start=start + todo[0]):
                    done[todo[number - start - todo[0]]] = layers
            except DeviceMemoryError as err:
                i = todo[err.index - start - todo[0]]
                logger.warning("protein %d (%d residues) does not fit in the memory of %s "
                               "even alone: computing it on the CPU, which is slow",
                               start + i, len(sequences[i]), self.embedder.device)
                done[i] = self._on_cpu().embed_sentence(sequences[i])
        return [done[i] for i in range(len(sequences))]

    def _on_cpu(self) -> Embedder:
        if self.cpu is None:
            self.cpu = Embedder(copy.deepcopy(self.embedder.model).cpu(), device="cpu",
                                max_tokens=self.embedder.max_tokens)
        return self.cpu
