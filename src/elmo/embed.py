"""Embedder: tokenized sentences -> numpy layer representations; text files -> HDF5."""

from __future__ import annotations

import shutil
import sys
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from elmo.chars import check_sentences, check_tokens
from elmo.device import resolve_device
from elmo.errors import ElmoError, InputFileError
from elmo.io.atomic import claim_output
from elmo.io.hdf5_output import PartialOutput, shard_range, write_index
from elmo.io.textfile import is_stdin, scan_input
from elmo.io.textfile import read_lines as read_text_lines
from elmo.loading.load import load_model
from elmo.loading.resolve import ModelFiles
from elmo.modules.bilm import BiLM, model_identity
from elmo.modules.quantize import check_quantize
from elmo.tokenize import Tokenizer, get_tokenizer

LAYER_MODES = ("all", "top", "average")
OUTPUT_DTYPES = ("float32", "float16")


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


def select_layers(layers: np.ndarray, mode: str) -> np.ndarray:
    """(L+1, n, 2P) -> all of it, the top layer (n, 2P), or the layer average (n, 2P)."""
    if mode == "all":
        return layers
    if mode == "top":
        return layers[-1]
    if mode == "average":
        return layers.mean(axis=0)
    raise ValueError(f"layers must be one of {LAYER_MODES}, got {mode!r}")


class TokenVectorCache:
    """Bounded least-recently-used map from a word to its char-CNN vector (P,).

    Exact, not an approximation: a word's token vector does not depend on its context. It is
    only valid for the weights it was filled with; `clear()` after changing them.
    """

    def __init__(self, model: BiLM, max_size: int) -> None:
        self.encoder, self.indexer, self.max_size = model.token_encoder, model.indexer, max_size
        self._vectors: OrderedDict[str, torch.Tensor] = OrderedDict()

    def clear(self) -> None:
        self._vectors.clear()

    def __len__(self) -> int:
        return len(self._vectors)

    def lookup(self, words: Sequence[str]) -> torch.Tensor:
        """Distinct words -> their vectors (len(words), P), computing only the missing ones."""
        missing = [w for w in words if w not in self._vectors]
        if missing:
            device = self.encoder.projection.weight.device
            ids = self.indexer.batch_to_ids([missing])[0]
            computed = self.encoder(ids.to(device))
        found = {w: self._vectors[w] for w in words if w in self._vectors}
        if missing:
            found.update(zip(missing, computed, strict=True))
        for w in words:
            self._vectors[w] = found[w]
            self._vectors.move_to_end(w)
        while len(self._vectors) > self.max_size:
            self._vectors.popitem(last=False)
        return torch.stack([found[w] for w in words])


class Embedder:
    """Turns tokenized sentences into the L+1 layer representations of a biLM.

    Stateless by default: a sentence's vectors do not depend on the other sentences embedded
    with it, so sentences are regrouped by length into batches of at most `batch_size`
    sentences and `max_tokens` padded positions (results still come in input order).
    `stateful=True` reproduces the original implementation's protocol instead: input order,
    batches of exactly `batch_size` sentences, LSTM state carried per batch row.
    Token vectors come from a cache of `token_cache_size` words (0 turns it off).
    `quantize="int8"` quantizes the model in place for int8 inference on the CPU
    (docs/speed.md).
    `tokenizer` (a name from `elmo.TOKENIZER_NAMES` or a callable) splits the lines of the
    files given to `embed_file`; sentences given directly are already lists of tokens.
    """

    def __init__(
        self,
        model: BiLM,
        *,
        device: str | torch.device | None = None,
        batch_size: int = 64,
        max_tokens: int = 4096,
        stateful: bool = False,
        token_cache_size: int = 20000,
        tokenizer: Tokenizer | str = "whitespace",
        quantize: str | None = None,
    ) -> None:
        if not isinstance(model, BiLM):
            raise TypeError(f"model must be a BiLM, not {type(model).__name__}; "
                            "use Embedder.from_pretrained(name_or_directory)")
        if batch_size < 1 or max_tokens < 1:
            raise ValueError(f"batch_size and max_tokens must be >= 1: {batch_size}, {max_tokens}")
        self.tokenizer = tokenizer
        # None: cuda if available, else cpu; int8 runs on the cpu.
        quantization = quantize or model.quantization
        self.device = resolve_device("cpu" if device is None and quantization else device)
        check_quantize(quantization, self.device)
        self.model = model.to(self.device).eval().quantize_(quantize)
        self.model.stateful = stateful
        self.model.reset_states()
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.token_cache = TokenVectorCache(self.model, token_cache_size) \
            if token_cache_size > 0 else None

    @classmethod
    def from_pretrained(
        cls,
        model: str | Path | ModelFiles | None = None,
        *,
        options: str | Path | None = None,
        weights: str | Path | None = None,
        tokenizer: Tokenizer | str | None = None,
        quantize: str | None = None,
        **kwargs,
    ) -> Embedder:
        """An Embedder for any MODEL `elmo.load_model` takes (a released name, a model
        directory, ...) or an options/weights pair; with no argument, the small model that
        ships with the package. `tokenizer` defaults to the one the model records, else
        whitespace. `quantize`: None (fp32) or "int8" (CPU only)."""
        loaded = load_model(model, options=options, weights=weights, quantize=quantize)
        return cls(loaded.bilm, tokenizer=tokenizer or loaded.tokenizer or "whitespace",
                   **kwargs)

    @property
    def stateful(self) -> bool:
        return self.model.stateful

    @property
    def chunk_size(self) -> int:
        """Sentences regrouped by length together (stateful: one batch). Files are cut into
        chunks at multiples of it from their first line, whatever a run resumes or a shard
        starts at, so every run computes a line in the same batch: bit-identical results."""
        return self.batch_size if self.stateful else 16 * self.batch_size

    # ---- sentences -------------------------------------------------------------------

    def embed_batch(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """The layers of each sentence, computed in one call: a list of (L+1, n_i, 2P)."""
        check_sentences(sentences)
        if not sentences:
            return []
        with torch.inference_mode():
            if self.token_cache is None:
                ids = self.model.batch_to_ids(sentences)
                layers = self.model(ids.to(self.device)).layers
            else:
                layers = self._contextualize_cached(sentences)
            layers = layers.float().cpu().numpy()
        return [np.ascontiguousarray(layers[:, b, : len(s)]) for b, s in enumerate(sentences)]

    def _contextualize_cached(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Layers (L+1, B, T, 2P) with token vectors from the cache."""
        bos, eos = self.model.indexer.bos_token, self.model.indexer.eos_token
        wrapped = [[bos, *s, eos] for s in sentences]
        vocab = list(dict.fromkeys(w for s in wrapped for w in s))
        position = {w: i + 1 for i, w in enumerate(vocab)}  # 0: the zero padding row
        table = self.token_cache.lookup(vocab)  # (V, P)
        table = torch.cat([table.new_zeros(1, table.shape[1]), table])
        longest = max(len(s) for s in wrapped)
        index = torch.zeros(len(wrapped), longest, dtype=torch.long)
        for b, s in enumerate(wrapped):
            index[b, : len(s)] = torch.tensor([position[w] for w in s])
        lengths = torch.tensor([len(s) for s in wrapped], device=self.device)
        return self.model.contextualize(table[index.to(self.device)], lengths).layers

    def embed_sentence(self, tokens: Sequence[str]) -> np.ndarray:
        """The layers of one tokenized sentence: (L+1, n, 2P)."""
        check_tokens(tokens, "embed_sentence's argument")
        return self.embed_sentences([tokens])[0]

    def embed_sentences(self, sentences: Iterable[Sequence[str]]) -> list[np.ndarray]:
        """The layers of many tokenized sentences, in input order (none: an empty list)."""
        return [layers for _, layers in self.iter_embeddings(sentences)]

    def iter_embeddings(
        self, sentences: Iterable[Sequence[str]]
    ) -> Iterator[tuple[int, np.ndarray]]:
        """(index, layers) for each sentence, in input order, computed in batches."""
        if isinstance(sentences, str):
            check_sentences(sentences)
        start = 0
        for part in _chunks(sentences, self.chunk_size):
            check_sentences(part, start)
            yield from enumerate(self._embed_chunk(part), start)
            start += len(part)

    def _embed_chunk(self, sentences: list[Sequence[str]]) -> list[np.ndarray]:
        """The layers of a chunk of sentences, in input order."""
        results = dict(self._iter_chunk(sentences))
        return [results[i] for i in range(len(sentences))]

    def _iter_chunk(self, sentences: list[Sequence[str]]) -> Iterator[tuple[int, np.ndarray]]:
        """(index, layers) in computation order. Stateless: length-sorted batches under the
        token budget; stateful: the chunk is one batch, in input order."""
        batches = [list(range(len(sentences)))] if self.stateful else \
            self._plan_batches([len(s) for s in sentences])
        for batch in batches:
            yield from zip(batch, self.embed_batch([sentences[i] for i in batch]), strict=True)

    def _plan_batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices grouped longest first into batches of <= batch_size sentences and
        <= max_tokens padded positions (boundaries included)."""
        batches: list[list[int]] = []
        for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
            if batches:
                batch = batches[-1]
                width = lengths[batch[0]] + 2
                if len(batch) < self.batch_size and (len(batch) + 1) * width <= self.max_tokens:
                    batch.append(i)
                    continue
            batches.append([i])
        return batches

    # ---- files -----------------------------------------------------------------------

    def embed_file(
        self,
        input_path: str | Path,
        output_path: str | Path,
        *,
        layers: str = "all",
        encoding_errors: str = "strict",
        progress: bool = True,
        num_shards: int = 1,
        shard_index: int = 0,
        dtype: str = "float32",
        overwrite: bool = False,
        forget_sentences: bool = False,
        use_sentence_keys: bool = False,
    ) -> Path:
        """Embed a text file into HDF5 in the layout of AllenNLP's `elmo` command.

        One dataset per input line (`dtype` float32, or float16 for half the size), named by
        its 0-based number, and a dataset `sentence_to_index` holding JSON that maps each
        line's text to its number (left out with `forget_sentences`). `use_sentence_keys`
        names each dataset by its line's text instead (no index); the lines must then be
        distinct, not empty and without "/". Lines are split by `self.tokenizer`. Work is
        saved to the directory `OUTPUT.partial` every `chunk_size` lines, and OUTPUT is
        assembled from it at the end; re-running after a kill (at any moment) resumes it. An
        existing OUTPUT is replaced only if `overwrite`; an OUTPUT that is also the input never.
        With `num_shards` > 1 only the `shard_index`-th block of lines is embedded;
        `hdf5_output.merge_shards` joins the parts into the file one process would write.
        """
        if layers not in LAYER_MODES:
            raise ValueError(f"layers must be one of {LAYER_MODES}, got {layers!r}")
        if dtype not in OUTPUT_DTYPES:
            raise ValueError(f"dtype must be one of {OUTPUT_DTYPES}, got {dtype!r}")
        if num_shards > 1 and self.stateful:
            raise ElmoError("--stateful carries state through the whole file: it cannot be "
                            "split into shards")
        if is_stdin(input_path):
            raise ElmoError("embed reads INPUT several times (to count, resume and index its "
                            "lines): save the text to a file and give its name")
        input_path, output_path = Path(input_path), Path(output_path)
        keys = "sentence" if use_sentence_keys else "line"
        index = not (forget_sentences or use_sentence_keys)
        with claim_output(output_path, inputs=[input_path], overwrite=overwrite):
            return self._embed_file(input_path, output_path, layers, encoding_errors, progress,
                                    num_shards, shard_index, dtype, keys, index)

    def _embed_file(self, input_path: Path, output_path: Path, layers: str,
                    encoding_errors: str, progress: bool, num_shards: int, shard_index: int,
                    dtype: str, keys: str, index: bool) -> Path:
        """`embed_file` once the output is claimed; datasets named by line number or
        sentence (`keys`), with or without the sentence index."""
        n_lines, input_digest = scan_input(input_path)
        if n_lines == 0:
            raise InputFileError(f"{input_path} is empty: there is nothing to embed")
        if keys == "sentence":
            _check_sentence_keys(input_path, encoding_errors)
        own = shard_range(n_lines, num_shards, shard_index, align=self.chunk_size)
        identity = self._run_identity(input_digest, n_lines, layers, encoding_errors, dtype)
        identity.update(keys=keys, sentence_to_index=str(index))
        if num_shards > 1:
            identity.update(num_shards=str(num_shards), shard_index=str(shard_index))
        partial = PartialOutput(output_path.with_name(output_path.name + ".partial"),
                                identity, start=own.start)
        if progress and partial.restarted:
            print(f"elmo: {partial.path} was left by a run of another input, model or "
                  "setting: starting anew", file=sys.stderr)
        if progress and partial.done > own.start:
            print(f"elmo: resuming {partial.path}: {partial.done - own.start:,} of "
                  f"{len(own):,} lines were embedded before", file=sys.stderr)
        lines = read_lines(input_path, encoding_errors, self.tokenizer,
                           range(partial.done, own.stop))
        try:
            with tqdm(total=len(own), initial=partial.done - own.start, unit="line",
                      disable=not progress, desc=f"embedding {input_path.name}") as bar:
                for part in _chunks(lines, self.chunk_size):
                    partial.save(part[-1].number + 1, self._arrays(part, layers, dtype, keys))
                    bar.update(len(part))
        except InputFileError:
            shutil.rmtree(partial.path)  # a user error: nothing worth resuming
            raise
        with partial.final(output_path) as out:
            empty = partial.assemble(out)
            if index:  # built from a second pass so that memory stays flat while embedding
                write_index(out, _sentence_to_index(input_path, encoding_errors, own))
            if num_shards > 1:  # its identity, for merging
                out.attrs.update(identity)
        if empty:
            _warn_empty(input_path, len(empty), _first_line(input_path, encoding_errors, empty,
                                                            keys))
        return output_path

    def _arrays(self, lines: list[InputLine], layers: str, dtype: str, keys: str
                ) -> list[tuple[str, np.ndarray]]:
        """(name, array) of each line, in input order; named by number or text (`keys`)."""
        arrays = self._embed_chunk([ln.tokens for ln in lines])
        return [(ln.text if keys == "sentence" else str(ln.number),
                 select_layers(a, layers).astype(dtype))
                for ln, a in zip(lines, arrays, strict=True)]

    def _run_identity(self, input_digest: str, n_lines: int, layers: str, encoding_errors: str,
                      dtype: str) -> dict[str, str]:
        """What a partial output must have been made from to be resumed, and the shards of
        one run to be merged: the input's text, the model's weights, every setting that
        changes a number, and the batch size (a line's batch changes its last bits)."""
        tokenizer = self.tokenizer if isinstance(self.tokenizer, str) else \
            f"{type(self.tokenizer).__module__}.{type(self.tokenizer).__qualname__}"
        return {
            "input_sha256": input_digest,
            "total_lines": str(n_lines),
            "model_sha256": model_identity(self.model),
            "layers": layers,
            "dtype": dtype,
            "tokenizer": tokenizer,
            "encoding_errors": encoding_errors,
            "stateful": str(self.stateful),
            "batch_size": str(self.batch_size),
            "max_tokens": str(self.max_tokens),
        }


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


def _first_line(path: Path, encoding_errors: str, names: list[str], keys: str) -> int:
    """The smallest 0-based line number among the datasets `names` (line numbers, or the
    lines' text with sentence keys)."""
    if keys == "line":
        return min(map(int, names))
    texts = set(names)
    return next(number for number, raw in read_text_lines(path, encoding_errors)
                if raw.strip() in texts)


def _warn_empty(input_path: Path, count: int, first: int) -> None:
    """One warning for all empty lines: one per line would fill the warnings registry."""
    if count:
        warnings.warn(f"{input_path} has {count} empty line{'s' * (count > 1)} (the first: "
                      f"line {first + 1}); each is written as a dataset with 0 tokens to keep "
                      "the numbering aligned", stacklevel=4)


def _chunks(items: Iterable, size: int) -> Iterator[list]:
    """Consecutive lists of `size` items (the last may be shorter)."""
    chunk: list = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
