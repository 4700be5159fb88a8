"""The one loader: any MODEL -> a BiLM and what callers need beside it.

`load_model` resolves a MODEL once (`elmo.loading.resolve`), brings its files to this machine,
reads them in their format and quantizes the biLM if asked. Every entry point that takes a
MODEL (the Embedder, both Elmo classes, tasks, serve, analyze, `train --init-from`, export,
info, perplexity) calls it. Each format's record in `elmo.loading.formats.registry.FORMATS`
says how its files are read: a new format is one record there and its module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch

from elmo.loading.formats.registry import FORMATS
from elmo.loading.model_files import ModelFiles
from elmo.loading.resolve import resolve_model
from elmo.modules.bilm import BiLM, model_identity
from elmo.modules.quantize import check_quantize


@dataclass
class LoadedModel:
    """A biLM in eval mode and what came with it: its `files` (on this machine), the
    `tokenizer` it records (None when it records none) and the other tensors stored with it
    (`extra`: `softmax.weight` and `softmax.bias` when `elmo train` wrote it)."""

    bilm: BiLM
    files: ModelFiles
    tokenizer: str | None = None
    extra: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def format(self) -> str:
        """The name of its format (a key of `elmo.loading.formats.registry.FORMATS`)."""
        return self.files.format

    @cached_property
    def identity(self) -> str:
        """sha256 of the architecture and every weight (a key for caches of its outputs)."""
        return model_identity(self.bilm)


def load_model(
    model: str | Path | ModelFiles | None = None,
    *,
    options: str | Path | None = None,
    weights: str | Path | None = None,
    quantize: str | None = None,
    progress: bool = True,
) -> LoadedModel:
    """Load `model` (a name or path as `elmo.loading.resolve` describes; None: `default`; or
    a `resolve_model` result) or the official pair `options` + `weights`.
    `quantize="int8"`: int8 CPU inference (see `BiLM.quantize_`); checked before anything is
    read, so a machine without the kernels fails at once. `progress`: a download's bar."""
    check_quantize(quantize)
    files = resolve_model(model, options=options, weights=weights).local(progress=progress)
    bilm, extra = FORMATS[files.format].load(files)
    return LoadedModel(bilm.quantize_(quantize), files, files.recorded_tokenizer(), extra)


def load_pretrained(
    model: str | Path | None = None, *, progress: bool = True
) -> tuple[BiLM, dict[str, torch.Tensor]]:
    """A biLM in eval mode and the other tensors stored with it (such as `softmax.weight`;
    none for official files): `load_model`'s two main parts."""
    loaded = load_model(model, progress=progress)
    return loaded.bilm, loaded.extra

