"""Feature cache: a dataset's biLM layers computed once, stored in HDF5, read per batch.

With a frozen biLM every run over a dataset (other seeds, mixes, placements, task models)
needs the same L+1 layers of the same sentences. `cached_layers` computes them once with the
Embedder and stores them in the layout of `elmo embed --layers all` (one dataset per sentence,
named by its index, (L+1, n_i, 2P), plus `sentence_to_index`) under a key of the model's
weights, the sentences' content and the options. Work is saved in the directory
`KEY.hdf5.partial` (resumed after a kill at any moment) and `KEY.hdf5` is assembled from it
when complete, so a later run trusts only complete entries.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import h5py
import numpy as np
import torch

from elmo.embedding import Embedder, EmbedFileOptions, HDF5Sink, Item, Progress
from elmo.errors import ElmoError
from elmo.io.atomic import output_lock
from elmo.io.hdf5_output import write_index
from elmo.loading.load import load_model
from elmo.loading.releases import cache_dir as model_cache_dir
from elmo.modules.bilm import BiLM, model_identity

FORMAT_VERSION = "2"


def default_cache_dir() -> Path:
    """`features/` in the model cache (`$ELMO_CACHE`, else `$XDG_CACHE_HOME/elmo`, else
    `~/.cache/elmo`)."""
    return model_cache_dir() / "features"


def cache_key(bilm: BiLM, sentences: Sequence[Sequence[str]], dtype: str) -> str:
    """The name of a cache entry: model identity + sentences' content + storage options."""
    digest = hashlib.sha256(f"elmo-features {FORMAT_VERSION} {dtype}\n".encode())
    digest.update(model_identity(bilm).encode())
    digest.update(json.dumps([list(s) for s in sentences], ensure_ascii=False).encode())
    return digest.hexdigest()[:32]


class LayerStore:
    """A complete cache entry, read one sentence or one batch at a time.

    `store[i]` -> (L+1, n_i, 2P) float32; `store.batch(indices)` -> layers (L+1, B, T, 2P)
    and mask (B, T), padded to the batch's longest sentence. `store.layer_rms` (L+1 floats):
    each layer's root mean square element over all the sentences (for `ScalarMix`'s
    `layer_scales`, 1 / rms). Only the asked-for sentences are
    read, so memory does not grow with the dataset. The file opens lazily (again in a forked
    worker process).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: h5py.File | None = None
        self._pid = -1
        attrs = self._h5().attrs
        try:
            self.num_sentences = int(attrs["num_sentences"])
            self.num_layers = int(attrs["num_layers"])
            self.dim = int(attrs["dim"])
            self.layer_rms = [float(x) for x in attrs["layer_rms"]]
        except KeyError:
            self.close()
            raise

    def _h5(self) -> h5py.File:
        if self._file is None or self._pid != os.getpid():
            self._file, self._pid = h5py.File(self.path, "r"), os.getpid()
        return self._file

    def close(self) -> None:
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file = None

    def __enter__(self) -> LayerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.num_sentences

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < self.num_sentences:
            raise IndexError(f"sentence {i} of a store of {self.num_sentences}")
        return self._h5()[str(i)][...].astype(np.float32, copy=False)

    def length(self, i: int) -> int:
        """The number of tokens of sentence i (read from the file's metadata, not its data)."""
        return int(self._h5()[str(i)].shape[1])

    def batch(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The sentences `indices` as layers (L+1, B, T, 2P) float32 and mask (B, T) bool."""
        arrays = [self[i] for i in indices]
        longest = max((a.shape[1] for a in arrays), default=0)
        layers = torch.zeros(self.num_layers, len(arrays), longest, self.dim)
        mask = torch.zeros(len(arrays), longest, dtype=torch.bool)
        for b, a in enumerate(arrays):
            layers[:, b, : a.shape[1]] = torch.from_numpy(a)
            mask[b, : a.shape[1]] = True
        return layers, mask


def cached_layers(
    model: str | Path | BiLM | None,
    sentences: Sequence[Sequence[str]],
    cache_dir: str | Path | None = None,
    device: str | torch.device | None = None,
    *,
    dtype: str = "float32",
    batch_size: int = 64,
    progress: bool = True,
) -> LayerStore:
    """The L+1 layers of every sentence, computed once per (model, sentences, dtype).

    `model` is anything `elmo embed` takes (a name or a directory; None for the shipped
    model) or a BiLM. The first call embeds the sentences (stateless, so each sentence's
    layers do not depend on the others) into `cache_dir` (default `default_cache_dir()`);
    later calls with the same model weights, sentences and `dtype` only open the file.
    `dtype="float16"` halves the file (values rounded to fp16; read back as float32).
    """
    try:  # all layers, not pooled
        options = EmbedFileOptions(dtype=dtype, batch_size=batch_size, device=device,
                                   progress=progress)
    except ValueError as err:
        raise ElmoError(f"feature cache {err}") from None
    bilm = model if isinstance(model, BiLM) else load_model(model, progress=progress).bilm
    key = cache_key(bilm, sentences, dtype)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = directory / f"{key}.hdf5"
    store = _open_complete(path, key, len(sentences))
    if store is not None:
        return store
    directory.mkdir(parents=True, exist_ok=True)
    with output_lock(path, wait=True):  # another process computing it: wait, then read it
        store = _open_complete(path, key, len(sentences))
        if store is None:
            _compute(Embedder(bilm, **options.embedder_options()), sentences, path, key,
                     options)
            store = _open_complete(path, key, len(sentences))
    if store is None:
        raise ElmoError(f"the feature cache entry {path} was written but cannot be read back")
    return store


def _open_complete(path: Path, key: str, n: int) -> LayerStore | None:
    """The entry at `path` if it is a complete one for `key` with `n` sentences, else None."""
    if not path.exists():
        return None
    try:
        store = LayerStore(path)
        key_ok = store._h5().attrs.get("key") == key
    except (OSError, KeyError):  # unreadable or not one of ours: recompute it
        return None
    if key_ok and len(store) == n:
        return store
    store.close()
    return None


def _compute(
    embedder: Embedder,
    sentences: Sequence[Sequence[str]],
    path: Path,
    key: str,
    options: EmbedFileOptions,
) -> None:
    """Embed `sentences` into `path.partial` (resuming a killed run of the same key) with the
    embedding job, then rename it to `path`."""
    bilm = embedder.model

    def items(start: int) -> Iterator[Item]:
        return (Item(i, str(i), list(sentences[i])) for i in range(start, len(sentences)))

    def complete(out: h5py.File) -> None:
        write_index(out, {" ".join(s): str(i) for i, s in enumerate(sentences)})
        out.attrs.update({"key": key, "num_sentences": len(sentences),
                          "num_layers": bilm.num_layers, "dim": bilm.config.output_dim,
                          "dtype": options.dtype,
                          "layer_rms": layer_rms((out[str(i)][...]
                                                  for i in range(len(sentences))),
                                                 bilm.num_layers)})

    sink = HDF5Sink(path, options.reduce, complete=complete)
    embedder.run_job(items, sink, {"key": key}, Progress(
        "caching biLM layers", "sentence", len(sentences), total=len(sentences),
        enabled=options.progress))


def layer_rms(sentence_layers: Iterable[np.ndarray], num_layers: int) -> list[float]:
    """Each layer's root mean square element over the sentences' layers (L+1, n_i, 2P), read
    one by one."""
    squares, count = np.zeros(num_layers), 0
    for layers in sentence_layers:
        layers = layers.astype(np.float64)
        squares += (layers**2).sum(axis=(1, 2))
        count += layers[0].size
    return ((squares / max(count, 1)) ** 0.5).tolist()
