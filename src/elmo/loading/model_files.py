"""A resolved MODEL: where it comes from (its `ModelSource`), its format and where its files
are (`ModelFiles`). The sources themselves, and the resolver that tries them, are in
`elmo.loading.resolve`; the formats in `elmo.loading.formats.registry`."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elmo.errors import ElmoError
from elmo.loading.formats.native import CARD_NAME, RUN_NAME
from elmo.loading.formats.registry import FORMATS
from elmo.loading.formats.untrusted import own_file, read_json


class ModelSource(ABC):
    """A source of models (a record of `SOURCES` in `elmo.loading.resolve`): `name` says it;
    `help()` is its phrase in the MODEL help and in the error for a MODEL no source takes;
    `resolve(name)`, the ModelFiles of a MODEL that names one of its models, their format
    decided without downloading (None for a name that is not its; an error for one that is
    but does not resolve); `local(files)` brings them to this machine (as they are where they
    are local already); `facts(files)`, what `elmo info` says of them beyond their format, and
    `describe_unloaded(files)`, whether it says only that, downloading nothing."""

    name = ""

    @abstractmethod
    def help(self) -> str: ...

    @abstractmethod
    def resolve(self, name: str) -> ModelFiles | None: ...

    def local(self, files: ModelFiles, *, progress: bool) -> ModelFiles:
        return files

    def facts(self, files: ModelFiles) -> dict[str, Any]:
        return {}

    def describe_unloaded(self, files: ModelFiles) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<model source {self.name}>"


@dataclass(frozen=True)
class ModelFiles:
    """A resolved MODEL: its `format` (the name of its record in
    `elmo.loading.formats.registry.FORMATS`), where it comes from (`source`) and, once on this
    machine, where its files are: `directory` (the model's directory, or an NLPL model's ZIP
    archive; for an official pair, the directory holding it, which may record its tokenizer),
    `options` and `weights` (the two files of a format read as a pair). A Hub model also has
    the commit its name resolved to (`revision`) and the repo files it reads, with their sizes
    (`remote`)."""

    name: str
    format: str
    source: ModelSource
    directory: Path | None = None
    options: Path | None = None
    weights: Path | None = None
    revision: str | None = None
    remote: tuple[tuple[str, int], ...] = ()

    @property
    def paths(self) -> list[Path]:
        """The files or directory the weights are read from: the pair, else the directory."""
        pair = [p for p in (self.options, self.weights) if p is not None]
        return pair or ([self.directory] if self.directory is not None else [])

    def local(self, *, progress: bool = True) -> ModelFiles:
        """These files on this machine: a released or Hub model is downloaded into its cache
        on first use (a progress bar unless `progress` is False)."""
        return self if self.paths else self.source.local(self, progress=progress)

    def with_pair(self, names: Collection[str]) -> ModelFiles:
        """These files with `options` and `weights` found among the names of the files of
        `directory`, for a format read as a pair (as they are for any other)."""
        fmt = FORMATS[self.format]
        if fmt.pair is None or self.directory is None:
            return self
        options, weights = fmt.pair(names, str(self.directory))
        return dataclasses.replace(self, options=own_file(self.directory, options),
                                   weights=own_file(self.directory, weights))

    @property
    def vocab_file(self) -> Path | None:
        """The words of the softmax stored with the model (`vocab.txt` of ours), if any."""
        name = FORMATS[self.format].vocab_name
        if name is None or self.directory is None:
            return None
        vocab = own_file(self.directory, name)
        return vocab if vocab.is_file() else None

    def recorded_tokenizer(self) -> str | None:
        """The tokenizer the model was trained with, as its directory records it: `run.json`
        of an `elmo train` run, or the `card.json` of a shipped or exported model (an official
        pair's directory too); None when nothing is recorded (or the files are not local)."""
        if self.directory is None:
            return None
        for record, keys in ((own_file(self.directory, RUN_NAME), ("config", "tokenizer")),
                             (own_file(self.directory, CARD_NAME), ("tokenizer",))):
            if record.is_file():
                try:
                    value = read_json(record)
                    for key in keys:
                        value = value[key]
                    return value
                except (ValueError, KeyError, TypeError) as err:
                    raise ElmoError(f"{record} does not record the tokenizer ({err!r}); pass "
                                    "--tokenizer") from None
        return None
