"""Embedder: tokenized sentences -> numpy layer representations; text files -> HDF5."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import torch
from tqdm import tqdm

from elmo.chars import BOS_TOKEN, EOS_TOKEN, batch_to_ids
from elmo.device import resolve_device
from elmo.errors import ElmoError, InputFileError
from elmo.hdf5_output import SHARD_ATTRS, keep_only_attrs, open_partial, shard_range, write_index
from elmo.modules.bilm import BiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.pretrained import load_bilm

LAYER_MODES = ("all", "top", "average")
ENCODING_ERRORS = ("strict", "replace")


@dataclass
class InputLine:
    """One line of an input file: 0-based number, stripped text and tokens."""

    number: int
    text: str
    tokens: list[str]


def read_lines(path: str | Path, encoding_errors: str = "strict") -> Iterator[InputLine]:
    """Stream a UTF-8 file of one sentence per line, tokens separated by white space.

    A line that is not UTF-8 raises InputFileError naming the file and 1-based line number,
    unless `encoding_errors="replace"` (invalid bytes become U+FFFD).
    """
    if encoding_errors not in ENCODING_ERRORS:
        raise ValueError(f"encoding_errors must be one of {ENCODING_ERRORS}")
    path = Path(path)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise InputFileError(f"input file not found: {path}") from None
    except IsADirectoryError:
        raise InputFileError(f"input {path} is a directory, not a text file") from None
    with f:
        for number, raw in enumerate(f):
            try:
                text = raw.decode("utf-8", errors=encoding_errors).strip()
            except UnicodeDecodeError as err:
                raise InputFileError(
                    f"{path}, line {number + 1}: not valid UTF-8 ({err.reason} at byte "
                    f"{err.start}); convert the file to UTF-8 or pass --encoding-errors replace"
                ) from None
            yield InputLine(number, text, text.split())


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

    def __init__(self, encoder: CharCNNEncoder, max_size: int) -> None:
        self.encoder, self.max_size = encoder, max_size
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
            ids = batch_to_ids([missing], self.encoder.config.max_characters_per_token)[0]
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
    ) -> None:
        if batch_size < 1 or max_tokens < 1:
            raise ValueError(f"batch_size and max_tokens must be >= 1: {batch_size}, {max_tokens}")
        self.device = resolve_device(device)  # None: cuda if available, else cpu
        self.model = model.to(self.device).eval()
        self.model.stateful = stateful
        self.model.reset_states()
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.token_cache = TokenVectorCache(self.model.token_encoder, token_cache_size) \
            if token_cache_size > 0 else None

    @classmethod
    def from_pretrained(
        cls,
        model: str | Path | None = None,
        *,
        options: str | Path | None = None,
        weights: str | Path | None = None,
        **kwargs,
    ) -> Embedder:
        """An Embedder for a released name, a model directory, or an options/weights pair;
        with no argument, the small model that ships with the package."""
        return cls(load_bilm(model, options=options, weights=weights), **kwargs)

    @property
    def stateful(self) -> bool:
        return self.model.stateful

    # ---- sentences -------------------------------------------------------------------

    def embed_batch(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """The layers of each sentence, computed in one call: a list of (L+1, n_i, 2P)."""
        if not sentences:
            return []
        with torch.inference_mode():
            if self.token_cache is None:
                ids = batch_to_ids(sentences, self.model.config.max_characters_per_token)
                layers = self.model(ids.to(self.device)).layers
            else:
                layers = self._contextualize_cached(sentences)
            layers = layers.float().cpu().numpy()
        return [np.ascontiguousarray(layers[:, b, : len(s)]) for b, s in enumerate(sentences)]

    def _contextualize_cached(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Layers (L+1, B, T, 2P) with token vectors from the cache."""
        wrapped = [[BOS_TOKEN, *s, EOS_TOKEN] for s in sentences]
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
        return self.embed_sentences([tokens])[0]

    def embed_sentences(self, sentences: Iterable[Sequence[str]]) -> list[np.ndarray]:
        """The layers of many sentences, in input order."""
        return [layers for _, layers in self.iter_embeddings(sentences)]

    def iter_embeddings(
        self, sentences: Iterable[Sequence[str]]
    ) -> Iterator[tuple[int, np.ndarray]]:
        """(index, layers) for each sentence, in input order, computed in batches."""
        chunk = self.batch_size if self.stateful else 16 * self.batch_size
        start = 0
        for part in _chunks(sentences, chunk):
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
    ) -> Path:
        """Embed a text file into HDF5 in the layout of AllenNLP's `elmo` command.

        One float32 dataset per input line, named by its 0-based number, and a dataset
        `sentence_to_index` holding JSON that maps each line's text to its number. Output goes
        to `OUTPUT.partial` and is renamed when complete; re-running after a kill resumes it.
        With `num_shards` > 1 only the `shard_index`-th block of lines is embedded;
        `hdf5_output.merge_shards` joins the parts into the file one process would write.
        """
        if layers not in LAYER_MODES:
            raise ValueError(f"layers must be one of {LAYER_MODES}, got {layers!r}")
        if num_shards > 1 and self.stateful:
            raise ElmoError("--stateful carries state through the whole file: it cannot be "
                            "split into shards")
        input_path, output_path = Path(input_path), Path(output_path)
        partial = output_path.with_name(output_path.name + ".partial")
        n_lines = _count_lines(input_path)
        own = shard_range(n_lines, num_shards, shard_index)
        identity = self._run_identity(input_path, layers)
        if num_shards > 1:
            shard = {"num_shards": num_shards, "shard_index": shard_index,
                     "total_lines": n_lines, "layers": layers}
            identity.update({k: str(v) for k, v in shard.items()})
        lines = read_lines(input_path, encoding_errors)
        chunk = self.batch_size if self.stateful else 16 * self.batch_size
        try:
            with open_partial(partial, identity) as out:
                done = max(int(out.attrs["lines_done"]), own.start)

                n_empty, first_empty = 0, 0

                def new_lines() -> Iterator[InputLine]:
                    nonlocal n_empty, first_empty
                    for line in lines:
                        if line.number >= own.stop:
                            break
                        if line.number < done:
                            continue
                        if not line.tokens:
                            first_empty = first_empty if n_empty else line.number
                            n_empty += 1
                        yield line

                with tqdm(total=len(own), initial=done - own.start, unit="line",
                          disable=not progress, desc=f"embedding {input_path.name}") as bar:
                    for part in _chunks(new_lines(), chunk):
                        self._write(out, part, layers)
                        out.attrs["lines_done"] = part[-1].number + 1
                        out.flush()
                        bar.update(len(part))
                if n_empty:  # one warning per run: one per line would fill the warnings registry
                    warnings.warn(f"{input_path} has {n_empty} empty line{'s' * (n_empty > 1)} "
                                  f"(the first: line {first_empty + 1}); each is written as a "
                                  "dataset with 0 tokens to keep the numbering aligned",
                                  stacklevel=2)
                # Built from a second pass so that memory stays flat while embedding.
                write_index(out, {line.text: str(line.number)
                                  for line in read_lines(input_path, encoding_errors)
                                  if line.number in own})
                keep_only_attrs(out, SHARD_ATTRS if num_shards > 1 else ())
                if num_shards > 1:
                    out.attrs.update(shard)
        except InputFileError:
            partial.unlink(missing_ok=True)  # a user error: nothing worth resuming
            raise
        os.replace(partial, output_path)
        return output_path

    def _write(self, out: h5py.File, lines: list[InputLine], layers: str) -> None:
        for i, array in self._iter_chunk([ln.tokens for ln in lines]):
            name = str(lines[i].number)
            if name in out:  # left over from a killed run
                del out[name]
            data = select_layers(array, layers).astype(np.float32, copy=False)
            out.create_dataset(name, data=data)

    def _run_identity(self, input_path: Path, layers: str) -> dict[str, str]:
        """What a partial output must have been made from to be resumed."""
        stat = input_path.stat() if input_path.is_file() else None
        digest = hashlib.sha256()
        for tensor in self.model.state_dict().values():
            digest.update(tensor.float().sum().cpu().numpy().tobytes())
        return {
            "input": str(input_path.resolve()),
            "input_size": str(stat.st_size if stat else -1),
            "input_mtime": str(stat.st_mtime_ns if stat else -1),
            "layers": layers,
            "stateful": str(self.stateful),
            "batch_size": str(self.batch_size) if self.stateful else "",
            "model": digest.hexdigest()[:16],
        }


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


def _count_lines(path: Path) -> int:
    """Lines in a file (a last line without a newline counts); 0 if it cannot be read."""
    try:
        with open(path, "rb") as f:
            count, last = 0, b""
            for block in iter(lambda: f.read(1 << 20), b""):
                count += block.count(b"\n")
                last = block
            return count + (1 if last and not last.endswith(b"\n") else 0)
    except OSError:
        return 0
