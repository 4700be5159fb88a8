"""The file job of `elmo embed`: an input file -> HDF5, resumable and shardable.

`Embedder.embed_file(INPUT, OUTPUT, EmbedFileOptions(...))` runs the job that `file_job` makes:
INPUT read as the input kind it is (`elmo.io.inputs`: each kind with `entries`, text and
FASTA), embedded (`Embedder.run_job`) into an `HDF5Sink`, in the layout of
AllenNLP's `elmo` command: one dataset per entry, named by its 0-based line number (or by its
text with sentence keys), and `sentence_to_index`; for a kind whose entries have keys of their
own (FASTA), one dataset per entry named by its key (`elmo.io.fasta.dataset_name`, or
biotrainer's hash of the sequence), with the entry's attributes (FASTA: `id` and
`description`), and no sentence index. Each dataset holds what the layer choice keeps
(`elmo.layer_choice`): all (L+1, n, D), or one vector per token (n, width) (top, average,
sum, ...); pooled (`pool="mean"`), their mean over the tokens: (L+1, D) or (width,).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py

from elmo.embedding.hdf5_sink import HDF5Sink
from elmo.embedding.job import Item, Progress
from elmo.embedding.settings import EMBEDDER_SETTINGS, EmbedSettings, check_choices
from elmo.errors import ElmoError, InputFileError
from elmo.io.atomic import claim_output
from elmo.io.fasta import (
    FASTA_KEYS,
    biotrainer_key,
    check_unique_sequences,
    dataset_name,
    read_fasta,
)
from elmo.io.hdf5_output import shard_range, write_index
from elmo.io.inputs import EMBED_FORMATS, Entry, InputKind, embedded_kind
from elmo.io.textfile import ENCODING_ERRORS, is_stdin
from elmo.io.textfile import read_lines as read_text_lines
from elmo.tokenize import DEFAULT_TOKENIZER, Tokenizer, get_tokenizer


@dataclass
class InputLine:
    """One line of an input file: 0-based number, stripped text and tokens."""

    number: int
    text: str
    tokens: list[str]


def read_lines(
    path: str | Path,
    encoding_errors: str = "strict",
    tokenizer: Tokenizer | str = DEFAULT_TOKENIZER,
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


@dataclass(frozen=True)
class EmbedFileOptions(EmbedSettings):
    """How a file is embedded and stored: the Python names of `elmo embed`'s options.

    The embedding settings (`EmbedSettings`; the file job reads what is kept of the layers,
    `Embedder.from_pretrained(model, **options.embedder_options())` the rest), and:
    `format`: an input kind that `elmo embed` reads (`elmo.io.inputs.EMBED_FORMATS`: text,
    fasta); None decides by the input (.fasta .fa .faa .fas, plain or .gz, are FASTA).
    `encoding_errors`: "strict" or "replace". `num_shards`/`shard_index`: embed only that
    block of the input. `overwrite`: replace an existing output. Text only:
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
        check_choices(("format", self.format, (None, *EMBED_FORMATS)),
                      ("encoding_errors", self.encoding_errors, ENCODING_ERRORS),
                      ("fasta_keys", self.fasta_keys, FASTA_KEYS))

    def identity(self) -> dict[str, str]:
        """The file job's settings that change a stored number."""
        return {**self.kept(), "encoding_errors": self.encoding_errors,
                **({"fasta_keys": self.fasta_keys} if self.fasta_keys != "id" else {})}


def file_options(options: EmbedFileOptions | None, keywords: dict[str, Any]
                 ) -> EmbedFileOptions:
    """`options`, or the options of these `keywords` (a TypeError for both, or for a setting
    of the Embedder, which is given when it is made)."""
    if options is not None and keywords:
        raise TypeError("give options or keyword arguments, not both")
    made = sorted(set(keywords) & set(EMBEDDER_SETTINGS))
    if made:
        raise TypeError(f"{', '.join(made)}: the Embedder's settings, given when it is "
                        "made, not to embed_file")
    return options or EmbedFileOptions(**keywords)


@dataclass(frozen=True)
class FileJob:
    """The embedding job of a file: `Embedder.run_job(items, sink, identity, progress)`."""

    items: Callable[[int], Iterator[Item]]
    sink: HDF5Sink
    identity: dict[str, str]
    progress: Progress


@contextmanager
def file_job(
    input_path: str | Path,
    output_path: str | Path,
    options: EmbedFileOptions,
    *,
    tokenizer: Tokenizer | str,
    chunk_size: int,
    stateful: bool,
) -> Iterator[FileJob]:
    """The job that embeds an input file into HDF5 (see the module docstring) with an
    Embedder of this `tokenizer`, `chunk_size` and `stateful`, run inside the block (OUTPUT
    claimed meanwhile); empty lines are warned about once it is done.

    Work is saved to the directory `OUTPUT.partial` chunk by chunk, and OUTPUT is assembled
    from it at the end; re-running after a kill (at any moment) resumes it. An existing OUTPUT
    is replaced only with `overwrite`; an OUTPUT that is also the input never. A problem with
    the input (or a tokenizer that is not installed) is found before anything is written, or
    the partial work is removed. With `num_shards` > 1 only the `shard_index`-th block is
    embedded; `hdf5_output.merge_shards` joins the parts into the file one process writes.
    """
    if options.num_shards > 1 and stateful:
        raise ElmoError("--stateful carries state through the whole file: it cannot be "
                        "split into shards")
    if is_stdin(input_path):
        raise ElmoError("embed reads INPUT several times (to count, resume and index its "
                        "lines): save the text to a file and give its name")
    input_path, output_path = Path(input_path), Path(output_path)
    kind = embedded_kind(input_path, options.format)
    entries = kind.entries
    if entries.keyed and (options.use_sentence_keys or options.forget_sentences):
        raise ElmoError(f"--use-sentence-keys and --forget-sentences are for text lines: a "
                        f"{kind.name} {entries.noun}'s dataset is named by its id, with no "
                        "sentence index")
    # Before anything is written: a tokenizer whose package is missing fails here.
    chosen = entries.tokenizer or tokenizer
    tokenize = get_tokenizer(chosen) if isinstance(chosen, str) else chosen
    with claim_output(output_path, inputs=[input_path], overwrite=options.overwrite):
        job = _job(kind, tokenizer, tokenize, chunk_size, input_path, output_path, options)
        yield job
    if job.sink.empty:
        empty = job.sink.empty
        first = min(map(int, empty)) if not options.use_sentence_keys else \
            _first_line(input_path, options.encoding_errors, empty)
        _warn_empty(input_path, len(empty), first)


def _job(kind: InputKind, tokenizer: Tokenizer | str, tokenize: Tokenizer, chunk_size: int,
         input_path: Path, output_path: Path, options: EmbedFileOptions) -> FileJob:
    """The job once the output is claimed: the file scanned whole (its problems found before
    anything is written), its identity, items, sink and progress."""
    entries, encoding_errors = kind.entries, options.encoding_errors
    scan = entries.scan(input_path, encoding_errors)
    if scan.count == 0:
        raise InputFileError(f"{input_path} {entries.nothing}: there is nothing to embed")
    keys = "sentence" if options.use_sentence_keys else "line"
    biotrainer = entries.keyed and options.fasta_keys == "biotrainer"
    sizes = scan.sizes  # the bar counts tokens (residues) where the scan counted them
    if options.use_sentence_keys:
        _check_sentence_keys(input_path, encoding_errors)
    if biotrainer:  # FASTA's own keys
        check_unique_sequences(read_fasta(input_path, encoding_errors), input_path,
                               "a dataset keyed by its sequence holds both: remove duplicates "
                               "(e.g. `seqkit rmdup -s`), or name datasets by id")
    index = not (entries.keyed or options.forget_sentences or options.use_sentence_keys)
    identity = {"input_sha256": scan.sha256, f"total_{entries.noun}s": str(scan.count),
                **_read_identity(kind, tokenizer, tokenize, keys, index), **options.identity()}
    own = shard_range(scan.count, options.num_shards, options.shard_index, align=chunk_size)
    if options.num_shards > 1:
        identity.update(num_shards=str(options.num_shards), shard_index=str(options.shard_index))

    def items(start: int) -> Iterator[Item]:
        for entry in entries.read(input_path, encoding_errors):
            if entry.number >= own.stop:
                return
            if entry.number >= start:
                yield _item(entry, tokenize, f"{input_path}, {entries.noun}", options,
                            biotrainer, sizes is not None)

    def complete(out: h5py.File) -> None:
        if index:  # built from a second pass so that memory stays flat while embedding
            write_index(out, _sentence_to_index(input_path, encoding_errors, own))
        if options.num_shards > 1:  # its identity, for merging
            out.attrs.update(sink.identity)

    sink = HDF5Sink(output_path, options.reduce, start=own.start, complete=complete)
    counted = (lambda done: sum(sizes[own.start:done])) if sizes is not None else None
    return FileJob(items, sink, identity, Progress(
        f"embedding {input_path.name}", entries.noun, len(own),
        unit=entries.token if sizes is not None else None,
        total=sum(sizes[own.start:own.stop]) if sizes is not None else len(own),
        before=counted, first=own.start, enabled=options.progress))


def _read_identity(kind: InputKind, tokenizer: Tokenizer | str, tokenize: Tokenizer,
                   keys: str, index: bool) -> dict[str, str]:
    """What a run records of how its input is read: the kind (but text: runs recorded before
    other kinds stay resumable), the tokenizer where the kind has none of its own, and the
    keys and index where its entries have no keys of their own."""
    identity = {"format": kind.name} if kind.name != "text" else {}
    if kind.entries.tokenizer is None:
        identity["tokenizer"] = tokenizer if isinstance(tokenizer, str) \
            else f"{type(tokenize).__module__}.{type(tokenize).__qualname__}"
    if not kind.entries.keyed:
        identity.update(keys=keys, sentence_to_index=str(index))
    return identity


def _item(entry: Entry, tokenize: Tokenizer, where: str, options: EmbedFileOptions,
          biotrainer: bool, count_tokens: bool) -> Item:
    """An entry as the job's item: named by its text (sentence keys), biotrainer's hash of its
    sequence (with its attribute `original_id`) or its key; `where`: "FILE, line"."""
    tokens = tokenize(entry.text)
    name, attrs = dataset_name(entry.key), entry.attrs
    if options.use_sentence_keys:
        name = entry.text
    elif biotrainer:
        name, attrs = biotrainer_key(entry.text), {**attrs, "original_id": entry.key}
    return Item(entry.number, name, tokens, len(tokens) if count_tokens else 1, attrs,
                entry.text, f"{where} {entry.number + 1:,}")


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
