"""`embed_files`: input files (text or FASTA, any kind that `elmo embed` reads) -> a directory
of Parquet blocks with Ray Data (`elmo embed --ray`).

The driver (this process) resolves INPUT to files, decides their input kind (`elmo.io.inputs`,
all the same), loads the model once (to check it and take its sha256), scans every file (text:
its lines; FASTA: its records, every record read and checked) and cuts them into blocks of
`block_lines` consecutive entries of one file. A Ray Data actor pool (`workers` actors of
`threads` CPU threads each, or of one GPU each) then takes the blocks not written yet: for each
block an actor runs the embedding job (`Embedder.run_job`, as `elmo embed` does) on
the block's entries into a `ParquetBlockSink`, which writes the block's Parquet file
(`elmo.io.parquet_output`: layout, atomic writes, resuming). Actors read and write the files
themselves: on a cluster, INPUT and OUTPUT_DIR must be at the same paths on every node.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from elmo.data.corpus import expand_paths
from elmo.device import PRECISIONS
from elmo.embedding import Embedder, EmbedSettings, Item, Progress
from elmo.embedding.embedder import CHUNK_BATCHES
from elmo.embedding.job import tell_resumed
from elmo.embedding.parquet_sink import ParquetBlockSink
from elmo.embedding.settings import batch_size_or_default
from elmo.errors import ElmoError, InputFileError
from elmo.extras import import_extra
from elmo.io.inputs import INPUT_KINDS, InputKind, embedded_kind
from elmo.io.parquet_output import (
    MANIFEST_VERSION,
    ParquetOutput,
    block_name,
    claim_parquet_output,
)
from elmo.modules.bilm import model_identity
from elmo.tokenize import get_tokenizer

ray = import_extra("ray", "elmo.ray (embedding with Ray Data)")
import_extra("ray.data", "elmo.ray (embedding with Ray Data)")

FORMAT = "elmo embed --ray"


@dataclass
class RayEmbedRun:
    """What `embed_files` did: the blocks it embedded (not those of an earlier run)."""

    output: Path
    input_format: str = "text"  # the input kind: with "fasta", `lines` counts records,
    blocks: int = 0             # `tokens` residues
    lines: int = 0
    tokens: int = 0
    block_seconds: list[float] = field(default_factory=list)  # each block, inside its actor
    startup_seconds: float = 0.0  # starting or joining Ray
    job_seconds: float = 0.0  # from the job's start to its last block
    workers: int = 0


def input_files(inputs: str | Path | Sequence[str | Path]) -> list[Path]:
    """Files, globs (each sorted) and directories (their files, sorted, hidden ones left
    out), in the order given, as absolute paths."""
    if isinstance(inputs, str | os.PathLike):
        inputs = [inputs]
    files: list[Path] = []
    for item in inputs:
        path = Path(os.path.expanduser(os.fspath(item)))
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and
                           not p.name.startswith("."))
            if not found:
                raise InputFileError(f"the input directory {path} holds no files")
            files += found
        else:
            files += expand_paths([path])
    return [f.absolute() for f in files]


def input_kind(files: Sequence[Path], format: str | None = None) -> InputKind:
    """The input kind of every file (`elmo.io.inputs.embedded_kind`): `format`'s if given,
    else the one each file is detected as, which must be the same for all files."""
    if format is not None:
        return embedded_kind(files[0], format)
    kinds = [embedded_kind(f) for f in files]
    other = next((i for i, kind in enumerate(kinds) if kind != kinds[0]), None)
    if other is not None:
        raise InputFileError(f"the input mixes {kinds[0].name} and {kinds[other].name} files "
                             f"({files[0]}, {files[other]}): embed each kind in a run of its "
                             "own, or give --format to read every file as one of them")
    return kinds[0]


# ---- the actors and the driver -------------------------------------------------------------


class BlockWriter:
    """The actor of `embed_files`: runs the embedding job on whole blocks, each into its
    Parquet file.

    Made with the output `directory`, the `model`, the fields of its `EmbedSettings`
    (`settings`), the input kind's name (`format`), `encoding_errors` and the torch
    `threads` of the actor. Returns one row per block: its name, lines (its entries: lines
    or records), tokens, seconds and `error`, the message of an ElmoError (a line that is not
    UTF-8, a model that cannot be loaded), empty if none; the driver raises it, so the user
    sees the message, not a Ray traceback.
    """

    def __init__(self, directory: str, model: str | None, settings: dict[str, Any],
                 format: str = "text", encoding_errors: str = "strict",
                 threads: int = 1) -> None:
        self.directory, self.encoding_errors = Path(directory), encoding_errors
        self.settings, self.kind = EmbedSettings(**settings), INPUT_KINDS[format]
        torch.set_num_threads(threads)  # Ray gives an actor OMP_NUM_THREADS=1
        try:
            self.embedder: Embedder | None = Embedder.from_pretrained(
                model, **self.settings.embedder_options())
            self.settings.layer_choice.check(self.embedder.model.num_layers)
            self.error = ""
        except ElmoError as err:
            self.embedder, self.error = None, str(err)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows = []
        for name, source, start, stop in zip(batch["name"], batch["source"], batch["start"],
                                             batch["stop"], strict=True):
            began = time.perf_counter()
            lines = tokens = 0
            error = self.error
            if not error:
                try:
                    lines, tokens = self._write(str(name), str(source), range(start, stop))
                except ElmoError as err:
                    error = str(err)
            rows.append((name, lines, tokens, time.perf_counter() - began, error))
        names, lines, tokens, seconds, errors = zip(*rows, strict=True)
        return {"name": np.array(names), "lines": np.array(lines), "tokens": np.array(tokens),
                "seconds": np.array(seconds), "error": np.array(errors)}

    def _write(self, name: str, source: str, lines: range) -> tuple[int, int]:
        """The job on the entries `lines` of `source`, numbered from 0 in the block (a chunk
        of the embedder does not cross the block's start); returns its entries and tokens."""
        entries = self.kind.entries
        tokenizer = entries.tokenizer or self.embedder.tokenizer
        tokenize = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer

        def items(start: int) -> Iterator[Item]:
            block = islice(entries.read(Path(source), self.encoding_errors), lines.start,
                           lines.stop)
            for number, entry in enumerate(block):
                yield Item(number, entry.key, tokenize(entry.text), attrs=entry.attrs,
                           text=entry.text,
                           where=f"{source}, {entries.noun} {entry.number + 1:,}")

        sink = ParquetBlockSink(self.directory / name, source, lines.start,
                                self.settings.reduce)
        self.embedder.run_job(items, sink, {"block": name}, Progress(name, enabled=False))
        return sink.items, sink.tokens


def embed_files(
    model: str | Path | None,
    inputs: str | Path | Sequence[str | Path],
    output_dir: str | Path,
    settings: EmbedSettings | None = None,
    *,
    encoding_errors: str = "strict",
    format: str | None = None,
    workers: int | None = None,
    threads: int = 1,
    block_lines: int | None = None,
    address: str | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> RayEmbedRun:
    """Embed text files (one sentence per line) or FASTA files (a record per sentence, a
    residue per token), plain or gzipped, into the Parquet directory `output_dir` (layout:
    `elmo.io.parquet_output`) with Ray Data.

    `inputs`: files, globs or directories. `format`: an input kind that `elmo embed` reads
    (text, fasta); None decides by the files (`input_kind`: all one kind). A FASTA file is
    checked whole before any block is embedded; its tokens are its residues (the tokenizer is
    not used). `workers` actors (default: as many as the cluster's CPUs allow, or its GPUs
    with a cuda `device`) of `threads` torch threads each. Ray: the one this process already
    joined, else `ray.init(address)` (None: a local Ray, or the cluster at $RAY_ADDRESS),
    shut down at the end. Re-running after a kill skips the blocks already written; an
    existing output is replaced only with `overwrite`. `settings` (default `EmbedSettings()`:
    all layers, float32) and `encoding_errors` are those of `Embedder.embed_file`, except
    that every token's vectors are kept (no `pool`), stateless, in fp32; the run's manifest
    records them all (`EmbedSettings.kept` and `asked`). `block_lines` (default:
    `CHUNK_BATCHES` x `batch_size`, the Embedder's chunk): the lines (FASTA: records) of a
    block, each block one Parquet file. With a multiple of the chunk, a line is computed with
    the neighbours it has in `Embedder.embed_file`.
    """
    settings = settings or EmbedSettings()
    block_lines = _checked(settings, threads, block_lines, workers)
    files = input_files(inputs)
    kind = input_kind(files, format)
    entries = kind.entries
    identity = _identity(model, kind, settings, encoding_errors)
    if model is not None and Path(model).exists():  # actors do not start in our directory
        model = str(Path(model).absolute())
    noun = entries.noun
    run = RayEmbedRun(Path(output_dir), input_format=kind.name)
    with claim_parquet_output(output_dir, overwrite) as output:
        scans = [entries.scan(f, encoding_errors)
                 for f in tqdm(files, desc=f"counting {noun}s", unit="file",
                               disable=not progress or len(files) < 2)]
        if sum(scan.count for scan in scans) == 0:
            raise InputFileError(f"{', '.join(map(str, files))}: no {noun}s: nothing to embed")
        out = ParquetOutput(output, _manifest(files, [(scan.count, scan.sha256)
                                                      for scan in scans], block_lines,
                                              identity))
        pending = [{**b, "source": str(files[b["source"]])} for b in out.pending()]
        blocks = len(out.manifest["blocks"])
        if progress:
            tell_resumed(out.path, out.restarted, blocks - len(pending), blocks, "block")
        if pending:
            total = sum(scan.count for scan in scans)
            bar = {"total": total, "initial": total - sum(b["stop"] - b["start"] for b in pending),
                   "unit": noun, "disable": not progress,
                   "desc": f"embedding {len(files)} file{'s' * (len(files) > 1)} with Ray"}
            writer = {"directory": str(out.path), "model": model, "format": kind.name,
                      "settings": {f.name: getattr(settings, f.name)
                                   for f in fields(EmbedSettings) if f.init},
                      "encoding_errors": encoding_errors, "threads": threads}
            _run_blocks(run, pending, writer, workers, address, bar)
        out.finish()
    return run


def _checked(settings: EmbedSettings, threads: int, block_lines: int | None,
             workers: int | None) -> int:
    """`embed_files`' settings and numbers checked (ValueError naming the wrong one); the
    lines of a block."""
    plain = settings.precision is None or PRECISIONS[settings.precision].plain
    if settings.pool is not None or settings.stateful or not plain:
        raise ValueError("embed_files keeps every token's vectors, stateless, in fp32: "
                         "pool, stateful and precision are not for it")
    block_lines = block_lines or CHUNK_BATCHES * batch_size_or_default(settings.batch_size)
    if threads < 1 or block_lines < 1 or (workers is not None and workers < 1):
        raise ValueError(f"threads, block_lines and workers must be at least 1: {threads}, "
                         f"{block_lines}, {workers}")
    return block_lines


def _identity(model: str | Path | None, kind: InputKind, settings: EmbedSettings,
              encoding_errors: str) -> dict[str, Any]:
    """What decides the run's vectors, as its manifest records them (the model loaded once
    here, on the CPU, for its identity and tokenizer)."""
    checked = Embedder.from_pretrained(model, tokenizer=settings.tokenizer,
                                       quantize=settings.quantize, device="cpu")
    return {"input_format": kind.name, "model_sha256": model_identity(checked.model),
            **settings.kept(), **settings.asked(),
            "tokenizer": kind.entries.tokenizer or checked.tokenizer,
            "encoding_errors": encoding_errors}


def _manifest(files: list[Path], scans: list[tuple[int, str]], block_lines: int,
              settings: dict[str, Any]) -> dict[str, Any]:
    """What the run is made of: the inputs (their `lines`: FASTA, records), the settings, and
    the blocks of `block_lines` lines of one file (the last of each file shorter), in input
    order."""
    starts = [(i, start) for i, (n, _) in enumerate(scans) for start in range(0, n, block_lines)]
    return {
        "format": FORMAT, "version": MANIFEST_VERSION,
        "inputs": [{"path": str(f), "lines": n, "sha256": digest}
                   for f, (n, digest) in zip(files, scans, strict=True)],
        **settings, "block_lines": block_lines,
        "blocks": [{"name": block_name(b), "source": i, "start": start,
                    "stop": min(start + block_lines, scans[i][0])}
                   for b, (i, start) in enumerate(starts)],
    }


def _run_blocks(run: RayEmbedRun, blocks: list[dict[str, Any]], writer: dict[str, Any],
                workers: int | None, address: str | None, bar: dict[str, Any]) -> None:
    """Embed and write `blocks` with a Ray Data actor pool of `BlockWriter(**writer)`; fills
    in `run`. `bar`: the progress bar's options."""
    threads = writer["threads"]
    gpus = int(str(writer["settings"]["device"] or "").startswith("cuda"))
    began = time.perf_counter()
    with _ray_session(address) as local:
        run.startup_seconds = time.perf_counter() - began
        run.workers = workers or _default_workers(threads, gpus)
        if local:
            _check_resources(run.workers, threads, gpus)
        ray.data.DataContext.get_current().enable_progress_bars = False  # ours instead
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        # ... without the warning that Ray's own bars are off
        logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)
        results = ray.data.from_items(blocks, override_num_blocks=len(blocks)).map_batches(
            BlockWriter, batch_size=1, num_cpus=threads, num_gpus=gpus,
            compute=ray.data.ActorPoolStrategy(size=run.workers),
            fn_constructor_kwargs=writer)
        began = time.perf_counter()
        with tqdm(**bar) as lines_done:
            for row in results.iter_rows():
                if row["error"]:
                    raise ElmoError(str(row["error"]))
                run.blocks += 1
                run.lines += int(row["lines"])
                run.tokens += int(row["tokens"])
                run.block_seconds.append(float(row["seconds"]))
                lines_done.update(int(row["lines"]))
        run.job_seconds = time.perf_counter() - began


@contextmanager
def _ray_session(address: str | None) -> Iterator[bool]:
    """The Ray this process joined already, else `ray.init(address)`, shut down after.
    Yields whether it is a Ray of our own on this machine, whose size we know."""
    if ray.is_initialized():
        yield False
        return
    ray.init(address=address, include_dashboard=False, log_to_driver=False,
             logging_level=logging.WARNING)
    try:
        yield address is None and not os.environ.get("RAY_ADDRESS")
    finally:
        ray.shutdown()


def _default_workers(threads: int, gpus: int) -> int:
    resources = ray.cluster_resources()
    if gpus:
        return max(1, int(resources.get("GPU", 0)))
    return max(1, int(resources.get("CPU", 1)) // threads)


def _check_resources(workers: int, threads: int, gpus: int) -> None:
    """Refuse actors that this Ray can never place (they would wait forever)."""
    resources = ray.cluster_resources()
    needs = {"CPU": workers * threads, "GPU": workers * gpus}
    short = {k: v for k, v in needs.items() if v > resources.get(k, 0)}
    if short:
        have = ", ".join(f"{resources.get(k, 0):g} {k}s" for k in short)
        raise ElmoError(f"{workers} workers of {threads} thread(s){' and 1 GPU' * gpus} need "
                        f"{', '.join(f'{v} {k}s' for k, v in short.items())}; this Ray has "
                        f"{have}: lower --workers or --threads")
