"""The file job: a text file (a sentence per line) or a FASTA file (a record per sequence) ->
HDF5, resumable and shardable; the save loop that the feature cache shares; and
`EmbedSettings`, the embedding settings of every entry point (`elmo embed`, `--ray`,
`elmo serve`, the feature cache), which `EmbedFileOptions` extends with the file's.

`embed_file(embedder, INPUT, OUTPUT, EmbedFileOptions(...))` is `elmo embed` (and
`Embedder.embed_file`). It takes any embedder with the few methods of `SentenceEmbedder`
(`elmo.embed.Embedder` is the one), so it sits below the Embedder, which calls it.

Text: one dataset per input line, named by its 0-based number (or by its text with sentence
keys), and `sentence_to_index`, as AllenNLP's `elmo` command writes. FASTA: one dataset per
record, named by its id (`elmo.io.fasta.dataset_name`), with the attributes `id` and
`description`. Each dataset holds what the layer choice keeps (`elmo.layer_choice`): all
(L+1, n, D), or one vector per token (n, width) (top, average, sum, ...); pooled
(`pool="mean"`), their mean over the tokens: (L+1, D) or (width,).
"""

from __future__ import annotations

import shutil
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
from tqdm import tqdm

from elmo.errors import ElmoError, InputFileError
from elmo.io.atomic import claim_output
from elmo.io.fasta import (
    FASTA_KEYS,
    check_unique_sequences,
    is_fasta_path,
    read_fasta,
    record_key,
    scan_records,
)
from elmo.io.hdf5_output import PartialOutput, shard_range, write_index
from elmo.io.textfile import ENCODING_ERRORS, is_stdin, scan_input
from elmo.io.textfile import read_lines as read_text_lines
from elmo.layer_choice import LayerChoice, parse_layer_choice
from elmo.memory import AUTO, DeviceMemoryError
from elmo.tokenize import Tokenizer, get_tokenizer

if TYPE_CHECKING:
    import torch

POOL_MODES = ("mean",)
OUTPUT_DTYPES = ("float32", "float16")
INPUT_FORMATS = ("text", "fasta")
# The fields of EmbedSettings that the Embedder takes (the others say what is kept).
EMBEDDER_SETTINGS = ("tokenizer", "batch_size", "max_tokens", "device", "quantize", "precision",
                     "stateful", "cuda_graphs")

T = TypeVar("T")


@dataclass
class InputLine:
    """One line of an input file: 0-based number, stripped text and tokens."""

    number: int
    text: str
    tokens: list[str]


def read_lines(
    path: str | Path,
    encoding_errors: str = "strict",
    tokenizer: Tokenizer | str = "whitespace",
    numbers: range | None = None,
) -> Iterator[InputLine]:
    """Stream a UTF-8 file (plain or gzipped) of one sentence per line, tokenized by
    `tokenizer` (default: tokens separated by white space); only the lines whose 0-based
    number is in `numbers`, if given. Read with `elmo.io.textfile.read_lines`: a line that is
    not UTF-8 raises InputFileError naming the file and line, unless
    `encoding_errors="replace"`."""
    tokenize = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    for number, raw in read_text_lines(path, encoding_errors):
        if numbers is not None and number >= numbers.stop:
            return
        if numbers is None or number in numbers:
            text = raw.strip()
            yield InputLine(number, text, tokenize(text))


class SentenceEmbedder(Protocol):
    """What the file job needs of an embedder (`elmo.embed.Embedder`)."""

    tokenizer: Tokenizer | str
    stateful: bool
    chunk_size: int

    def chunks(self, items: Iterable[T], tokens: Callable[[T], Sequence[str]] = ...,
               start: int = 0) -> Iterator[list[T]]: ...

    def iter_embeddings(self, sentences: Iterable[Sequence[str]], start: int = 0
                        ) -> Iterator[tuple[int, np.ndarray]]: ...

    def settings(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class EmbedSettings:
    """How sentences are embedded and what is kept of their layers: the settings that
    `elmo embed` (with or without `--ray`), `elmo serve`, `elmo.ray.Embed` and the feature
    cache share, checked once here.

    What is kept (`reduce`): `layers` a layer choice (`elmo.layer_choice`: all, top, average,
    sum, concat, a layer number, a task run's learned mix); `pool` None, or "mean" for one
    vector per sentence (the mean over its tokens of the chosen layers); `dtype` float32, or
    float16 for half the size. The Embedder's (`embedder_options`): `tokenizer` (None: the
    model's, else whitespace), `batch_size` (sentences per batch; None: the Embedder's
    default), `max_tokens` (padded tokens per batch, "auto" or a number), `device` (None: cuda
    if available), `quantize` (None or "int8"), `precision` (fp32, tf32 or bf16),
    `stateful` (the original's protocol) and `cuda_graphs` (None: the model's, off unless set),
    which the Embedder checks when it is made.
    """

    layers: str | int = "all"
    pool: str | None = None
    dtype: str = "float32"
    tokenizer: Tokenizer | str | None = None
    batch_size: int | None = None
    max_tokens: int | str = AUTO
    device: str | torch.device | None = None
    quantize: str | None = None
    precision: str = "fp32"
    stateful: bool = False
    cuda_graphs: bool | None = None
    # what `layers` keeps, parsed once (a LayerChoiceError, a ValueError, names a bad one)
    layer_choice: LayerChoice = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_choices(("pool", self.pool, (None, *POOL_MODES)),
                      ("dtype", self.dtype, OUTPUT_DTYPES))
        object.__setattr__(self, "layer_choice", parse_layer_choice(self.layers))

    def reduce(self, layers: np.ndarray) -> np.ndarray:
        """(L+1, n, D) -> what is kept: the chosen layers, pooled if asked, in `dtype`."""
        selected = self.layer_choice.numpy(layers)
        if self.pool == "mean":  # over the token axis; no tokens: NaN
            selected = selected.mean(axis=-2) if selected.shape[-2] else \
                np.full(selected.shape[:-2] + selected.shape[-1:], np.nan, selected.dtype)
        return selected.astype(self.dtype, copy=False)

    def embedder_options(self) -> dict[str, Any]:
        """The keywords of `Embedder` (and `Embedder.from_pretrained`) these settings give."""
        options = {name: getattr(self, name) for name in EMBEDDER_SETTINGS}
        if self.tokenizer is None:  # the Embedder's default: the model's, else whitespace
            del options["tokenizer"]
        return options


@dataclass(frozen=True)
class EmbedFileOptions(EmbedSettings):
    """How a file is embedded and stored: the Python names of `elmo embed`'s options.

    The embedding settings (`EmbedSettings`; the file job reads what is kept of the layers,
    `Embedder.from_pretrained(model, **options.embedder_options())` the rest), and:
    `format`: "text" or "fasta"; None decides by the input's name (.fasta .fa .faa .fas, plain
    or .gz, are FASTA). `encoding_errors`: "strict" or "replace". `num_shards`/`shard_index`:
    embed only that block of the input. `overwrite`: replace an existing output. Text only:
    `forget_sentences` leaves out `sentence_to_index`; `use_sentence_keys` names datasets by
    their line's text. FASTA only: `fasta_keys` "biotrainer" names datasets by biotrainer's
    hash of the sequence (`elmo.io.fasta.biotrainer_key`), not the id. `progress`: a progress
    bar.
    """

    format: str | None = None
    encoding_errors: str = "strict"
    num_shards: int = 1
    shard_index: int = 0
    overwrite: bool = False
    forget_sentences: bool = False
    use_sentence_keys: bool = False
    fasta_keys: str = "id"
    progress: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choices(("format", self.format, (None, *INPUT_FORMATS)),
                      ("encoding_errors", self.encoding_errors, ENCODING_ERRORS),
                      ("fasta_keys", self.fasta_keys, FASTA_KEYS))

    def identity(self) -> dict[str, str]:
        """The file job's settings that change a stored number."""
        return {"layers": self.layer_choice.spelling(), "dtype": self.dtype,
                "encoding_errors": self.encoding_errors,
                **({"pool": self.pool} if self.pool else {}),
                **({"fasta_keys": self.fasta_keys} if self.fasta_keys != "id" else {})}


def check_choices(*choices: tuple[str, object, tuple[object, ...]]) -> None:
    """ValueError for the first (name, value, allowed) whose value is not allowed."""
    for name, value, allowed in choices:
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def tell_resumed(path: Path, restarted: bool, done: int, total: int, noun: str) -> None:
    """Say on stderr that the work left at `path` by another run was dropped (`restarted`),
    or that `done` of its `total` `noun`s are kept."""
    if restarted:
        print(f"elmo: {path} was left by a run of another input, model or setting: "
              "starting anew", file=sys.stderr)
    if done:
        print(f"elmo: resuming {path}: {done:,} of {total:,} {noun}s were embedded before",
              file=sys.stderr)


@dataclass
class Item:
    """One line or record: its 0-based number, dataset name, tokens, what the progress bar
    counts for it, and its dataset's attributes."""

    number: int
    name: str
    tokens: list[str]
    size: int = 1
    attrs: dict[str, str] = field(default_factory=dict)


def save_embeddings(
    embedder: SentenceEmbedder,
    partial: PartialOutput,
    items: Iterable[Item],
    options: EmbedFileOptions,
    *,
    total: int,
    initial: int,
    unit: str,
    desc: str,
) -> None:
    """Embed `items` (numbered on from `partial.done`) into `partial`, a segment per chunk of
    the embedder, each item's layers reduced as `options` says; a progress bar of `total`
    units (`initial` of them done before). Items are numbered for the embedder by their
    `number` (what a DeviceMemoryError names)."""
    with tqdm(total=total, initial=initial, unit=unit, unit_scale=unit == "residue",
              disable=not options.progress, desc=desc) as bar:
        for part in embedder.chunks(items, lambda item: item.tokens, start=partial.done):
            layers = [a for _, a in embedder.iter_embeddings([item.tokens for item in part],
                                                             start=part[0].number)]
            partial.save(part[-1].number + 1,
                         [(item.name, options.reduce(a)) for item, a in zip(part, layers,
                                                                            strict=True)],
                         attrs={item.name: item.attrs for item in part if item.attrs},
                         empty=[item.name for item in part if not item.tokens])
            bar.update(sum(item.size for item in part))


def embed_file(
    embedder: SentenceEmbedder,
    input_path: str | Path,
    output_path: str | Path,
    options: EmbedFileOptions | None = None,
) -> Path:
    """Embed a text or FASTA file into HDF5 (see the module docstring); returns OUTPUT.

    Work is saved to the directory `OUTPUT.partial` chunk by chunk, and OUTPUT is assembled
    from it at the end; re-running after a kill (at any moment) resumes it. An existing OUTPUT
    is replaced only with `overwrite`; an OUTPUT that is also the input never. A problem with
    the input (or a tokenizer that is not installed) is found before anything is written, or
    the partial work is removed. With `num_shards` > 1 only the `shard_index`-th block is
    embedded; `hdf5_output.merge_shards` joins the parts into the file one process writes.
    """
    options = options or EmbedFileOptions()
    if options.num_shards > 1 and embedder.stateful:
        raise ElmoError("--stateful carries state through the whole file: it cannot be "
                        "split into shards")
    if is_stdin(input_path):
        raise ElmoError("embed reads INPUT several times (to count, resume and index its "
                        "lines): save the text to a file and give its name")
    input_path, output_path = Path(input_path), Path(output_path)
    fasta = options.format == "fasta" or (options.format is None and is_fasta_path(input_path))
    if fasta and (options.use_sentence_keys or options.forget_sentences):
        raise ElmoError("--use-sentence-keys and --forget-sentences are for text lines: a FASTA "
                        "record's dataset is named by its id, with no sentence index")
    # Before anything is written: a tokenizer whose package is missing fails here.
    tokenizer = None if fasta else embedder.tokenizer
    tokenize = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    with claim_output(output_path, inputs=[input_path], overwrite=options.overwrite):
        if fasta:
            _embed_fasta(embedder, input_path, output_path, options)
        else:
            _embed_text(embedder, tokenize, input_path, output_path, options)
    return output_path


def _embed_text(embedder: SentenceEmbedder, tokenize: Tokenizer, input_path: Path,
                output_path: Path, options: EmbedFileOptions) -> None:
    """A text file once the output is claimed."""
    n_lines, input_digest = scan_input(input_path)
    if n_lines == 0:
        raise InputFileError(f"{input_path} is empty: there is nothing to embed")
    if options.use_sentence_keys:
        _check_sentence_keys(input_path, options.encoding_errors)
    index = not (options.forget_sentences or options.use_sentence_keys)
    tokenizer = embedder.tokenizer if isinstance(embedder.tokenizer, str) else \
        f"{type(tokenize).__module__}.{type(tokenize).__qualname__}"
    own, identity, partial = _start(embedder, output_path, options, n_lines, "line", {
        "input_sha256": input_digest, "total_lines": str(n_lines), "tokenizer": tokenizer,
        "keys": "sentence" if options.use_sentence_keys else "line",
        "sentence_to_index": str(index)})
    lines = read_lines(input_path, options.encoding_errors, tokenize,
                       range(partial.done, own.stop))
    items = (Item(ln.number, ln.text if options.use_sentence_keys else str(ln.number),
                  ln.tokens) for ln in lines)
    _save(embedder, partial, items, options, f"{input_path}, line", total=len(own),
          initial=partial.done - own.start, unit="line", desc=f"embedding {input_path.name}")
    with partial.final(output_path) as out:
        empty = partial.assemble(out)
        if index:  # built from a second pass so that memory stays flat while embedding
            write_index(out, _sentence_to_index(input_path, options.encoding_errors, own))
        if options.num_shards > 1:  # its identity, for merging
            out.attrs.update(identity)
    if empty:
        first = min(map(int, empty)) if not options.use_sentence_keys else \
            _first_line(input_path, options.encoding_errors, empty)
        _warn_empty(input_path, len(empty), first)


def _embed_fasta(embedder: SentenceEmbedder, input_path: Path, output_path: Path,
                 options: EmbedFileOptions) -> None:
    """A FASTA file once the output is claimed: the whole file is checked first."""
    summary = scan_records(input_path, options.encoding_errors)
    if options.fasta_keys == "biotrainer":
        check_unique_sequences(read_fasta(input_path, options.encoding_errors), input_path,
                               "a dataset keyed by its sequence holds both: remove duplicates "
                               "(e.g. `seqkit rmdup -s`), or name datasets by id")
    _, input_digest = scan_input(input_path)
    own, identity, partial = _start(embedder, output_path, options, len(summary), "record", {
        "input_sha256": input_digest, "total_records": str(len(summary)), "format": "fasta"})
    _save(embedder, partial, _records(input_path, options.encoding_errors,
                                      range(partial.done, own.stop), options.fasta_keys), options,
          f"{input_path}, record", total=summary.residues(own),
          initial=summary.residues(range(own.start, partial.done)), unit="residue",
          desc=f"embedding {input_path.name}")
    with partial.final(output_path) as out:
        partial.assemble(out)
        if options.num_shards > 1:
            out.attrs.update(identity)


def _records(path: Path, encoding_errors: str, numbers: range, keys: str) -> Iterator[Item]:
    """The records numbered `numbers` (0-based), as items: a residue per token, named as
    `keys` says (biotrainer's keys: with its attribute `original_id` too)."""
    for number, record in enumerate(read_fasta(path, encoding_errors)):
        if number >= numbers.stop:
            return
        if number >= numbers.start:
            attrs = {"id": record.id, "description": record.description}
            if keys == "biotrainer":
                attrs["original_id"] = record.id
            yield Item(number, record_key(record, keys), list(record.sequence),
                       len(record.sequence), attrs)


def _start(embedder: SentenceEmbedder, output_path: Path, options: EmbedFileOptions,
           count: int, noun: str, input_identity: dict[str, str]
           ) -> tuple[range, dict[str, str], PartialOutput]:
    """This process's block of the `count` items, the run's identity, and its partial output
    (resumed when it was left by the same run; said on stderr with a progress bar)."""
    own = shard_range(count, options.num_shards, options.shard_index, align=embedder.chunk_size)
    identity = {**input_identity, **embedder.settings(), **options.identity()}
    if options.num_shards > 1:
        identity.update(num_shards=str(options.num_shards), shard_index=str(options.shard_index))
    partial = PartialOutput(output_path.with_name(output_path.name + ".partial"), identity,
                            start=own.start)
    if options.progress:
        tell_resumed(partial.path, partial.restarted, partial.done - own.start, len(own), noun)
    return own, identity, partial


def _save(embedder: SentenceEmbedder, partial: PartialOutput, items: Iterable[Item],
          options: EmbedFileOptions, noun: str, **bar: int | str) -> None:
    """`save_embeddings`; a problem found in the input on the way removes the partial work
    (nothing worth resuming). A sentence that does not fit in the device's memory is named
    `noun` and its 1-based number ("FILE, line 12"); the work before it is kept, to resume
    once memory is free."""
    try:
        save_embeddings(embedder, partial, items, options, **bar)
    except InputFileError:
        shutil.rmtree(partial.path)
        raise
    except DeviceMemoryError as err:
        raise err.changed(subject=f"{noun} {err.index + 1:,}") from None


def _sentence_to_index(path: Path, encoding_errors: str, numbers: range) -> dict[str, str]:
    """Each line's text -> its number (a repeated line: its last number), for `numbers`."""
    index = {}
    for number, text in read_text_lines(path, encoding_errors):
        if number >= numbers.stop:
            break
        if number >= numbers.start:
            index[text.strip()] = str(number)
    return index


def _check_sentence_keys(path: Path, encoding_errors: str) -> None:
    """ElmoError naming the first line that cannot be a dataset name of its own: empty, ".",
    holding "/" (HDF5 reads these as paths), or equal to an earlier line."""
    seen: dict[str, int] = {}
    for number, raw in read_text_lines(path, encoding_errors):
        text = raw.strip()
        problem = "is empty" if not text else 'is "."' if text == "." else \
            'holds "/"' if "/" in text else \
            f"repeats line {seen[text] + 1}" if text in seen else None
        if problem:
            raise ElmoError(f"{path} line {number + 1} {problem}: with sentence keys each line "
                            "names its own dataset; use line-number keys (the default)")
        seen[text] = number


def _first_line(path: Path, encoding_errors: str, texts: list[str]) -> int:
    """The smallest 0-based number of a line whose text is one of `texts`."""
    wanted = set(texts)
    return next(number for number, raw in read_text_lines(path, encoding_errors)
                if raw.strip() in wanted)


def _warn_empty(input_path: Path, count: int, first: int) -> None:
    """One warning for all empty lines: one per line would fill the warnings registry."""
    warnings.warn(f"{input_path} has {count} empty line{'s' * (count > 1)} (the first: "
                  f"line {first + 1}); each is written as a dataset with 0 tokens (pooled: "
                  "NaN) to keep the numbering aligned", stacklevel=5)
