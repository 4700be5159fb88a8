"""Embedder: tokenized sentences -> numpy layer representations; and the one resumable job.

The Embedder owns the job: `Embedder.run_job(items, sink, identity, progress)` embeds items
into a sink (an HDF5 file, a Parquet block, bio_embeddings' layout, an index) a chunk of its
own at a time, resuming the work of a killed run (`elmo.embedding.job`: what a job is made of;
the sinks and the file job's reading sit there and below, and never call back into the
Embedder). `Embedder.embed_file` runs the file job of `elmo embed` (`elmo.embedding.files`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from elmo.chars import check_sentences, check_tokens
from elmo.device import check_precision, computing_in, default_precision, resolve_device
from elmo.embedding.files import EmbedFileOptions, file_job, file_options
from elmo.embedding.job import Compute, Item, Progress, Sink, tell_resumed
from elmo.embedding.settings import batch_size_or_default
from elmo.errors import ElmoError, InputFileError
from elmo.loading.load import load_model
from elmo.loading.model_files import ModelFiles
from elmo.memory import AUTO, DeviceMemoryError, compute_halving, resolve_max_tokens
from elmo.modules.bilm import BiLM, model_identity
from elmo.modules.elmo import contextualize_words
from elmo.modules.quantize import check_quantize
from elmo.tokenize import DEFAULT_TOKENIZER, Tokenizer

T = TypeVar("T")
# A chunk (regrouped by length together) holds CHUNK_BATCHES batches' worth: 1,024 sentences
# and 65,536 tokens by default, as 16 batches of 64 and 4,096 did before 2026-11-26.
CHUNK_BATCHES = 4


def unpad(layers: torch.Tensor, lengths: Sequence[int]) -> list[np.ndarray]:
    """layers (L+1, B, T, D) on any device -> per sentence a contiguous float32 array
    (L+1, lengths[b], D). One gather on the device lays the sentences' blocks end to end and
    one copy brings exactly them to the host: no padding is copied, nothing copied twice."""
    n_layers, b, t, d = layers.shape
    lengths_t = torch.tensor(lengths, dtype=torch.long)
    # Row (l * B + b) * T + i of layers.view(-1, D) is layer l, sentence b, token i: the
    # output holds, per sentence, its L+1 segments of lengths[b] rows each.
    starts = (torch.arange(n_layers) * b + torch.arange(b)[:, None]) * t  # (B, L+1)
    counts = lengths_t[:, None].expand(b, n_layers).reshape(-1)
    ends = counts.cumsum(0)
    offsets = torch.arange(int(ends[-1])) - torch.repeat_interleave(ends - counts, counts)
    rows = torch.repeat_interleave(starts.reshape(-1), counts) + offsets
    flat = layers.reshape(-1, d).index_select(0, rows.to(layers.device)).float()
    if flat.is_cuda:  # into page-locked memory that torch's host allocator reuses: a copy
        # into fresh pageable memory ran at 0.3 GB/s on an H200 machine (2026-11-26)
        flat = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True).copy_(flat)
    flat = flat.numpy()
    blocks = np.split(flat, np.cumsum(n_layers * lengths_t.numpy())[:-1])
    return [block.reshape(n_layers, n, d) for block, n in zip(blocks, lengths, strict=True)]


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
    sentences (default 256) and `max_tokens` padded positions (results still come in input
    order). `max_tokens="auto"`: 16,384 on the CPU, on CUDA what half of the free memory holds
    (`elmo.memory.token_budget`); a number is used as given. A batch that runs out of device
    memory is halved and computed again, down to one sentence, which raises
    `elmo.memory.DeviceMemoryError` naming it if it does not fit alone.
    `stateful=True` reproduces the original implementation's protocol instead: input order,
    batches of exactly `batch_size` sentences (default 64), LSTM state carried per batch row
    (a batch that does not fit raises DeviceMemoryError: it cannot be split).
    Token vectors come from a cache of `token_cache_size` words (0 turns it off).
    `quantize="int8"` quantizes the model in place for int8 inference on the CPU
    (docs/speed.md). `precision`: a key of `elmo.device.PRECISIONS` (None: the device's
    default for embedding, fp32 on every device): "fp32" (no TF32), "tf32" (CUDA products in
    TF32) or "bf16" (autocast): on a GPU 1.4-1.8x fp32's speed for `original`, within ~4e-4
    (TF32) and ~4e-3 (bf16) relative to it (docs/speed.md, "On a GPU").
    `cuda_graphs`: True replays CUDA graphs of the LSTM for batches of at most 8,192 padded
    positions (stateless, on CUDA; no effect on the CPU), False runs eagerly, None keeps the
    model's `cuda_graphs` (off unless set: eager was as fast or faster in every run measured,
    docs/speed.md).
    `tokenizer` (a key of `elmo.tokenize.TOKENIZERS` or a callable) splits the lines of the
    files given to `embed_file`; sentences given directly are already lists of tokens.
    """

    def __init__(
        self,
        model: BiLM,
        *,
        device: str | torch.device | None = None,
        batch_size: int | None = None,
        max_tokens: int | str = AUTO,
        stateful: bool = False,
        token_cache_size: int = 20000,
        tokenizer: Tokenizer | str = DEFAULT_TOKENIZER,
        quantize: str | None = None,
        precision: str | None = None,
        cuda_graphs: bool | None = None,
    ) -> None:
        if not isinstance(model, BiLM):
            raise TypeError(f"model must be a BiLM, not {type(model).__name__}; "
                            "use Embedder.from_pretrained(name_or_directory)")
        batch_size = batch_size_or_default(batch_size, stateful)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if precision is not None:
            check_precision(precision)
        if cuda_graphs and stateful:
            raise ElmoError("CUDA graphs run stateless inference only: stateful mode carries "
                            "each row's LSTM state from batch to batch, eagerly; drop "
                            "--cuda-graphs (cuda_graphs=True) or --stateful (stateful=True)")
        self.tokenizer = tokenizer
        # None: cuda if available, else cpu; int8 runs on the cpu.
        quantization = quantize or model.quantization
        self.device = resolve_device("cpu" if device is None and quantization else device)
        check_quantize(quantization, self.device)
        self.precision = precision or default_precision("embed", self.device)
        self.model = model.to(self.device).eval().quantize_(quantize)
        self.model.stateful = stateful
        if cuda_graphs is not None:
            self.model.cuda_graphs = cuda_graphs
        self.model.reset_states()
        self.batch_size = batch_size
        self.max_tokens = resolve_max_tokens(max_tokens, self.model.config, self.device,
                                             next(self.model.parameters()).dtype)
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
        return cls(loaded.bilm, tokenizer=tokenizer or loaded.tokenizer or DEFAULT_TOKENIZER,
                   **kwargs)

    @property
    def stateful(self) -> bool:
        return self.model.stateful

    @property
    def chunk_size(self) -> int:
        """The most sentences regrouped by length together (stateful: one batch)."""
        return self.batch_size if self.stateful else CHUNK_BATCHES * self.batch_size

    def chunks(self, items: Iterable[T], tokens: Callable[[T], Sequence[str]] = lambda s: s,
               start: int = 0) -> Iterator[list[T]]:
        """Consecutive lists of items computed together. Stateful: `batch_size` items.
        Stateless: at most `chunk_size` items and CHUNK_BATCHES x `max_tokens` tokens (a longer
        item alone), so that memory stays bounded however long the items are. A chunk never
        crosses a multiple of `chunk_size` counted from item 0 (`start`: the number of the
        first item): a resumed run or a shard starting there computes every item in the same
        batch as one run from the start, bit for bit."""
        budget = None if self.stateful else CHUNK_BATCHES * self.max_tokens
        chunk: list[T] = []
        used = 0
        for number, item in enumerate(items, start):
            size = len(tokens(item))
            if chunk and (number % self.chunk_size == 0
                          or (budget is not None and used + size > budget)):
                yield chunk
                chunk, used = [], 0
            chunk.append(item)
            used += size
        if chunk:
            yield chunk

    def settings(self) -> dict[str, str]:
        """What changes this embedder's numbers (for resuming and merging file jobs): the
        model's weights and the batching (a sentence's batch changes its last bits)."""
        settings = {"model_sha256": model_identity(self.model), "stateful": str(self.stateful),
                    "batch_size": str(self.batch_size), "max_tokens": str(self.max_tokens)}
        if self.precision != "fp32":  # runs recorded before the option stay resumable
            settings["precision"] = self.precision
        if self.device.type == "cuda" and self.model.cuda_graphs and not self.stateful:
            # graphs pad a batch to its bucket, which may change the last bits
            settings["cuda_graphs"] = "True"
        return settings

    # ---- sentences -------------------------------------------------------------------

    def embed_batch(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """The layers of each sentence, computed in one call (in halves where that runs out
        of device memory): a list of (L+1, n_i, 2P)."""
        check_sentences(sentences)
        return compute_halving(self._compute, sentences, self.device, self._too_large,
                               split=not self.stateful)

    def _too_large(self, sentences: Sequence[Sequence[str]], index: int) -> DeviceMemoryError:
        """The error for sentences (from number `index` on) that do not fit and cannot be
        split (one, or a stateful batch)."""
        return DeviceMemoryError(self.device, max(map(len, sentences)), index,
                                 rows=len(sentences))

    def _compute(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """The layers of each sentence, computed in one call."""
        if not sentences:
            return []
        with torch.inference_mode(), computing_in(self.precision, self.device):
            if self.token_cache is None:
                ids = self.model.batch_to_ids(sentences)
                layers = self.model(ids.to(self.device)).layers
            else:
                layers = self._contextualize_cached(sentences)
            return unpad(layers, [len(s) for s in sentences])

    def _contextualize_cached(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Layers (L+1, B, T, 2P) with token vectors from the cache."""
        bos, eos = self.model.indexer.bos_token, self.model.indexer.eos_token
        vocab = list(dict.fromkeys(w for s in sentences for w in (bos, *s, eos)))
        position = {w: i + 1 for i, w in enumerate(vocab)}  # 0: the zero padding row
        table = self.token_cache.lookup(vocab)  # (V, P)
        table = torch.cat([table.new_zeros(1, table.shape[1]), table])
        word_ids = torch.zeros(len(sentences), max(map(len, sentences)), dtype=torch.long)
        for b, s in enumerate(sentences):
            word_ids[b, : len(s)] = torch.tensor([position[w] for w in s], dtype=torch.long)
        boundaries = table[[position[bos], position[eos]]]  # (2, P)
        return contextualize_words(self.model, table, word_ids.to(self.device), boundaries).layers

    def embed_sentence(self, tokens: Sequence[str]) -> np.ndarray:
        """The layers of one tokenized sentence: (L+1, n, 2P)."""
        check_tokens(tokens, "embed_sentence's argument")
        return self.embed_sentences([tokens])[0]

    def embed_sentences(self, sentences: Iterable[Sequence[str]]) -> list[np.ndarray]:
        """The layers of many tokenized sentences, in input order (none: an empty list)."""
        return [layers for _, layers in self.iter_embeddings(sentences)]

    def iter_embeddings(
        self, sentences: Iterable[Sequence[str]], start: int = 0
    ) -> Iterator[tuple[int, np.ndarray]]:
        """(index, layers) for each sentence, in input order, computed in batches; indices
        count from `start`, the number of the first sentence (where chunks end, see `chunks`,
        and what a DeviceMemoryError names)."""
        if isinstance(sentences, str):
            check_sentences(sentences)
        for part in self.chunks(sentences, start=start):
            check_sentences(part, start)
            yield from enumerate(self._embed_chunk(part, start), start)
            start += len(part)

    def _embed_chunk(self, sentences: list[Sequence[str]], start: int) -> list[np.ndarray]:
        """The layers of a chunk of sentences (numbered from `start`), in input order."""
        results = dict(self._iter_chunk(sentences, start))
        return [results[i] for i in range(len(sentences))]

    def _iter_chunk(self, sentences: list[Sequence[str]], start: int
                    ) -> Iterator[tuple[int, np.ndarray]]:
        """(index, layers) in computation order. Stateless: length-sorted batches under the
        token budget; stateful: the chunk is one batch, in input order."""
        batches = [list(range(len(sentences)))] if self.stateful else \
            self._plan_batches([len(s) for s in sentences])
        for batch in batches:
            try:
                layers = self.embed_batch([sentences[i] for i in batch])
            except DeviceMemoryError as err:  # numbered in the batch: number it in the input
                raise err.changed(index=start + batch[err.index]) from None
            yield from zip(batch, layers, strict=True)

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

    # ---- the job --------------------------------------------------------------------

    def run_job(self, items: Callable[[int], Iterable[Item]], sink: Sink,
                identity: dict[str, str], progress: Progress, compute: Compute | None = None
                ) -> None:
        """Embed `items(start)` (the items from number `start` on, in order) into `sink`, a
        chunk at a time (`elmo.embedding.job`), resuming the work saved by a run of the same
        `identity` and `settings()`. `compute(tokens, start)`: the layers of a chunk
        (default: `iter_embeddings`). A problem found in the input on the way (InputFileError)
        discards the sink's work; a DeviceMemoryError names its item where it is
        (`Item.where`), the work before it kept, to resume once memory is free."""
        compute = compute or (lambda tokens, start: [
            layers for _, layers in self.iter_embeddings(tokens, start=start)])
        done = sink.open({**identity, **self.settings()})
        if progress.enabled:
            tell_resumed(sink.path, sink.restarted, done - progress.first, progress.count,
                         progress.noun)
        part: list[Item] = []
        try:
            with progress.bar(done) as bar:
                for part in self.chunks(items(done), lambda item: item.tokens, start=done):
                    sink.save(part, compute([item.tokens for item in part], part[0].number))
                    bar.update(sum(item.size for item in part))
        except InputFileError:
            sink.discard()
            raise
        except DeviceMemoryError as err:
            where = next((item.where for item in part if item.number == err.index), "")
            if not where:
                raise
            raise err.changed(subject=where) from None
        sink.finish()

    def embed_file(self, input_path: str | Path, output_path: str | Path,
                   options: EmbedFileOptions | None = None, **kwargs) -> Path:
        """Embed a text file (a sentence per line, split by `self.tokenizer`) or a FASTA file
        into HDF5: the file job (`elmo.embedding.files`) with this embedder. Give `options`,
        or its fields as keywords (`layers="top"`, `overwrite=True`, ...; see
        `EmbedFileOptions`); the Embedder's own settings (`batch_size`, ...) are those it was
        made with."""
        options = file_options(options, kwargs)
        options.layer_choice.check(self.model.num_layers)
        with file_job(input_path, output_path, options, tokenizer=self.tokenizer,
                      chunk_size=self.chunk_size, stateful=self.stateful) as job:
            self.run_job(job.items, job.sink, job.identity, job.progress)
        return Path(output_path)


def embed_file(embedder: Embedder, input_path: str | Path, output_path: str | Path,
               options: EmbedFileOptions | None = None, **kwargs) -> Path:
    """`embedder.embed_file(input_path, output_path, options, **kwargs)`."""
    return embedder.embed_file(input_path, output_path, options, **kwargs)
