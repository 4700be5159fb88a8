"""`embed_files`: text or FASTA files -> a directory of Parquet blocks with Ray Data (`elmo
embed --ray`).

The driver (this process) resolves INPUT to files, decides their format (text or FASTA, all the
same), loads the model once (to check it and take its sha256), counts the sentences of every
file (text: lines; FASTA: records, every record read and checked) and cuts them into blocks of
`block_lines` consecutive sentences of one file. A Ray Data actor pool (`workers` actors of
`threads` CPU threads each, or of one GPU each) then takes the blocks not written yet: an actor
reads its block (`elmo.io.textfile`, `elmo.io.fasta`), embeds it with `Embed` and writes the
block's Parquet file (`elmo.io.parquet_output`: layout, atomic writes, resuming). Actors read
and write the files themselves: on a cluster, INPUT and OUTPUT_DIR must be at the same paths on
every node.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from elmo.data.corpus import expand_paths
from elmo.embed import CHUNK_BATCHES, Embedder, EmbedSettings, batch_size_or_default
from elmo.embed_file import INPUT_FORMATS, check_choices, tell_resumed
from elmo.errors import ElmoError, InputFileError
from elmo.extras import import_extra
from elmo.io.fasta import is_fasta_path, read_fasta, scan_fasta
from elmo.io.parquet_output import (
    MANIFEST_VERSION,
    ParquetOutput,
    block_name,
    claim_parquet_output,
    write_block,
)
from elmo.io.textfile import read_lines, scan_input
from elmo.memory import DeviceMemoryError
from elmo.modules.bilm import model_identity
from elmo.ray.embed import Embed

ray = import_extra("ray", "elmo.ray (embedding with Ray Data)")
import_extra("ray.data", "elmo.ray (embedding with Ray Data)")

FORMAT = "elmo embed --ray"


@dataclass
class RayEmbedRun:
    """What `embed_files` did: the blocks it embedded (not those of an earlier run)."""

    output: Path
    input_format: str = "text"  # or "fasta": `lines` counts records, `tokens` residues
    blocks: int = 0
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


# ---- the input format: which one a run reads (`input_format`), how a file is counted
# (`count_lines`) and how a block is read (`read_block`) --------------------------------------


def input_format(files: Sequence[Path], format: str | None = None) -> str:
    """"text" or "fasta": `format` if given, else what the file names say (.fasta .fa .faa
    .fas, plain or .gz, are FASTA), which must be the same for all files."""
    if format is not None:
        check_choices(("format", format, INPUT_FORMATS))
        return format
    fasta = [f for f in files if is_fasta_path(f)]
    text = [f for f in files if not is_fasta_path(f)]
    if fasta and text:
        raise InputFileError(f"the input mixes FASTA and text files ({fasta[0]}, {text[0]}): "
                             "embed each kind in a run of its own, or give --format to read "
                             "every file as one of them")
    return "fasta" if fasta else "text"


def count_lines(path: Path, format: str, encoding_errors: str) -> tuple[int, str]:
    """The number of sentences of an input file (text: lines; FASTA: records, each one read
    and checked, an InputFileError naming the first bad one), and the sha256 of its bytes."""
    if format == "fasta":
        records = len(scan_fasta(path, encoding_errors))
        return records, scan_input(path)[1]
    return scan_input(path)


def read_block(path: str, lines: range, format: str, encoding_errors: str
               ) -> dict[str, list[Any]]:
    """The sentences numbered `lines` (0-based) of an input file (plain or gzipped) as
    columns: `line` (the number), `text` (the line stripped; FASTA: the record's sequence)
    and, for FASTA, the record's `id` and `description`."""
    if format == "fasta":  # checked whole by count_lines: no set of ids kept here
        records = enumerate(read_fasta(path, encoding_errors, unique_ids=False))
        block = list(islice(records, lines.start, lines.stop))
        return {"line": [n for n, _ in block], "text": [r.sequence for _, r in block],
                "id": [r.id for _, r in block], "description": [r.description for _, r in block]}
    block = list(islice(read_lines(path, encoding_errors), lines.start, lines.stop))
    return {"line": [n for n, _ in block], "text": [text.strip() for _, text in block]}


# ---- the actors and the driver -------------------------------------------------------------


class BlockWriter:
    """The actor of `embed_files`: embeds whole blocks and writes each one's Parquet file.

    Returns one row per block: its name, lines (its sentences: lines or records), tokens,
    seconds and `error`, the message of an ElmoError (a line that is not UTF-8, a model that
    cannot be loaded), empty if none; the driver raises it, so the user sees the message,
    not a Ray traceback. `format`: "text" or "fasta" (`input_format`).
    """

    def __init__(self, directory: str, embed: dict[str, Any], encoding_errors: str,
                 dtype: str, format: str = "text") -> None:
        self.directory, self.encoding_errors, self.dtype = Path(directory), encoding_errors, dtype
        self.format = format
        try:
            self.embed: Embed | None = Embed(**embed)
            self.error = ""
        except ElmoError as err:
            self.embed, self.error = None, str(err)

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
        block = read_block(source, lines, self.format, self.encoding_errors)
        try:
            rows = self.embed({"text": block["text"]})
        except DeviceMemoryError as err:
            noun = "record" if self.format == "fasta" else "line"
            number = block["line"][err.index] + 1
            raise err.changed(subject=f"{source}, {noun} {number:,}") from None
        embeddings = [a.astype(self.dtype, copy=False) for a in rows["embedding"]]
        write_block(self.directory / name, source, block["line"], block["text"],
                    list(rows["tokens"]), embeddings, ids=block.get("id"),
                    descriptions=block.get("description"))
        return len(block["line"]), sum(map(len, rows["tokens"]))


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

    `inputs`: files, globs or directories. `format`: "text" or "fasta"; None decides by the
    file names (`input_format`: all one format). A FASTA file is checked whole before any
    block is embedded; its tokens are its residues (the tokenizer is not used). `workers`
    actors (default: as many as the cluster's CPUs allow, or its GPUs with a cuda `device`)
    of `threads` torch threads each. Ray: the one this process already joined, else
    `ray.init(address)` (None: a local Ray, or the cluster at $RAY_ADDRESS), shut down at the
    end. Re-running after a kill skips the blocks already written; an existing output is
    replaced only with `overwrite`. `settings` (default `EmbedSettings()`: all layers,
    float32) and `encoding_errors` are those of `Embedder.embed_file`, except that every
    token's vectors are kept (no `pool`), stateless, in fp32. `block_lines` (default:
    `CHUNK_BATCHES` x `batch_size`, the Embedder's chunk): the lines (FASTA: records) of a
    block, each block one Parquet file. With a multiple of the chunk, a line is computed with
    the neighbours it has in `Embedder.embed_file`.
    """
    settings = settings or EmbedSettings()
    if settings.pool is not None or settings.stateful or settings.precision != "fp32":
        raise ValueError("embed_files keeps every token's vectors, stateless, in fp32: "
                         "pool, stateful and precision are not for it")
    block_lines = block_lines or CHUNK_BATCHES * batch_size_or_default(settings.batch_size)
    if threads < 1 or block_lines < 1 or (workers is not None and workers < 1):
        raise ValueError(f"threads, block_lines and workers must be at least 1: {threads}, "
                         f"{block_lines}, {workers}")
    files = input_files(inputs)
    format = input_format(files, format)
    checked = Embedder.from_pretrained(model, tokenizer=settings.tokenizer,
                                       quantize=settings.quantize, device="cpu")
    model_sha256 = model_identity(checked.model)
    tokenizer = "chars" if format == "fasta" else checked.tokenizer  # a residue per token
    del checked
    if model is not None and Path(model).exists():  # actors do not start in our directory
        model = str(Path(model).absolute())
    embed = {"model": model, "layers": settings.layers, "tokenizer": tokenizer,
             "quantize": settings.quantize, "threads": threads, "device": settings.device,
             "batch_size": settings.batch_size, "max_tokens": settings.max_tokens}
    noun = "record" if format == "fasta" else "line"
    run = RayEmbedRun(Path(output_dir), input_format=format)
    with claim_parquet_output(output_dir, overwrite) as output:
        scans = [count_lines(f, format, encoding_errors)
                 for f in tqdm(files, desc=f"counting {noun}s", unit="file",
                               disable=not progress or len(files) < 2)]
        if sum(n for n, _ in scans) == 0:
            raise InputFileError(f"{', '.join(map(str, files))}: no {noun}s: nothing to embed")
        out = ParquetOutput(output, _manifest(files, scans, block_lines, {
            "input_format": format, "model_sha256": model_sha256, "layers": settings.layers,
            "dtype": settings.dtype, "tokenizer": tokenizer, "quantize": settings.quantize,
            "encoding_errors": encoding_errors, "batch_size": settings.batch_size,
            "max_tokens": settings.max_tokens}))
        pending = [{**b, "source": str(files[b["source"]])} for b in out.pending()]
        blocks = len(out.manifest["blocks"])
        if progress:
            tell_resumed(out.path, out.restarted, blocks - len(pending), blocks, "block")
        if pending:
            total = sum(n for n, _ in scans)
            bar = {"total": total, "initial": total - sum(b["stop"] - b["start"] for b in pending),
                   "unit": noun, "disable": not progress,
                   "desc": f"embedding {len(files)} file{'s' * (len(files) > 1)} with Ray"}
            writer = {"directory": str(out.path), "embed": embed,
                      "encoding_errors": encoding_errors, "dtype": settings.dtype,
                      "format": format}
            _run_blocks(run, pending, writer, workers, address, bar)
        out.finish()
    return run


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
    embed = writer["embed"]
    threads, gpus = embed["threads"], int(str(embed["device"] or "").startswith("cuda"))
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
