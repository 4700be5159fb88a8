"""AllenNLP's ELMo names over this package: `Elmo` (reads options and weight files, saves
and loads AllenNLP's state-dict layout) and `ElmoEmbedder` (AllenNLP <= 0.9's
`allennlp.commands.elmo.ElmoEmbedder`). Code written for AllenNLP runs with its imports changed
to `from elmo import Elmo, ElmoEmbedder, batch_to_ids`; see docs/allennlp.md.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

import numpy as np
import torch
from torch import nn

from elmo.embedding import Embedder
from elmo.errors import ElmoError
from elmo.loading.formats import allennlp as layout
from elmo.loading.load import load_model
from elmo.modules.bilm import BiLM
from elmo.modules.elmo import MixedBiLM
from elmo.modules.scalar_mix import ScalarMix

BILM = "_elmo_lstm."
WORDS = "_word_embedding.weight"  # the vocab_to_cache table: ours beside the biLM, AllenNLP's in it
DEFAULT_BATCH_SIZE = 64  # AllenNLP's
ALLENNLP_DEFAULT_MODEL = "original"  # ElmoEmbedder's default options and weights in AllenNLP


class Elmo(MixedBiLM):
    """AllenNLP's `Elmo`: the biLM of `options_file` and `weight_file` (official bilm-tf or
    AllenNLP files), or `module`, and `num_output_representations` mixes of its layers, with
    AllenNLP's constructor and call. The rest is `elmo.modules.elmo.MixedBiLM`'s (see there):
    stateless unless `stateful=True`; layer-norm statistics over the words and `<S>`/`</S>`
    (AllenNLP's) unless `layer_norm_boundaries=False` (bilm-tf's); no dropout inside the biLM
    when the options have no "dropout" key.

    Its state dict has AllenNLP's keys and tensors (`_elmo_lstm._token_embedder.*`,
    `_elmo_lstm._elmo_lstm.*`, `scalar_mix_{k}.scalar_parameters.{j}`, `scalar_mix_{k}.gamma`),
    so a fine-tuned AllenNLP model's weights load into it, and its saved weights into
    AllenNLP; the layout of earlier versions of this package loads too.
    """

    def __init__(
        self,
        options_file: str | Path | None,
        weight_file: str | Path | None,
        num_output_representations: int,
        requires_grad: bool = False,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        vocab_to_cache: list[str] | None = None,
        keep_sentence_boundaries: bool = False,
        scalar_mix_parameters: list[float] | None = None,
        module: nn.Module | None = None,
        **ours,
    ) -> None:
        if module is not None and (options_file is not None or weight_file is not None):
            raise ElmoError("Elmo takes options_file and weight_file, or module=, not both")
        if module is None:
            if options_file is None or weight_file is None:
                raise ElmoError("Elmo needs options_file and weight_file (or a biLM as module=)")
            module = load_model(options=options_file, weights=weight_file).bilm
        super().__init__(module, num_output_representations, requires_grad, do_layer_norm,
                         dropout, vocab_to_cache, keep_sentence_boundaries,
                         scalar_mix_parameters, **ours)

    @classmethod
    def from_pretrained(
        cls, model: str | Path | None, num_output_representations: int, **kwargs
    ) -> Elmo:
        """Elmo over any MODEL `elmo.load_model` takes: None/"default", a released name or a
        model directory (ours, ELMoForManyLangs or an official options/weights pair)."""
        return cls(None, None, num_output_representations, module=load_model(model).bilm,
                   **kwargs)

    @property
    def _scalar_mixes(self) -> list[ScalarMix]:
        """AllenNLP's name for the list of mixes, `scalar_mix_0` ... (here also `mixes`)."""
        return self.mixes

    def write_layout(self, state: dict[str, torch.Tensor], prefix: str) -> None:
        if not isinstance(self._elmo_lstm, BiLM):
            return
        ours = {k.removeprefix(prefix + BILM): state.pop(k) for k in list(state)
                if k.startswith(prefix + BILM)}
        state.update({prefix + BILM + k: v for k, v in layout.to_allennlp(ours).items()})
        if prefix + WORDS in state:
            state[prefix + BILM + WORDS] = state.pop(prefix + WORDS)

    def read_layout(self, state: dict[str, torch.Tensor], prefix: str) -> None:
        super().read_layout(state, prefix)
        if not isinstance(self._elmo_lstm, BiLM):
            return
        if prefix + BILM + WORDS in state:
            state[prefix + WORDS] = state.pop(prefix + BILM + WORDS)
        inner = [k for k in state if k.startswith(prefix + BILM)]
        if layout.is_allennlp_layout(k.removeprefix(prefix + BILM) for k in inner):
            theirs = {k.removeprefix(prefix + BILM): state.pop(k) for k in inner}
            state.update({prefix + BILM + k: v for k, v in layout.from_allennlp(theirs).items()})


class ElmoEmbedder:
    """AllenNLP's `ElmoEmbedder` (AllenNLP <= 0.9, `allennlp.commands.elmo`): the L+1 layers
    (3 for the released models) of tokenized sentences as numpy arrays (L+1, n, 2P).

    `options_file`/`weight_file`: an official pair (default: the `original` model, AllenNLP's
    default, downloaded on first use); or any model alone, as the first argument: a name
    (`ElmoEmbedder("default")`, the shipped model) or a directory. `cuda_device` -1 for the
    CPU, else the GPU's number.

    Stateless by default: a sentence gets the same vectors whatever it is embedded with.
    AllenNLP's embedder carried the LSTM state from batch to batch (row by row), so a
    sentence's vectors depended on the sentences before it; `stateful=True` does that and
    reproduces its numbers. The work is done by an `Embedder` (`self.embedder`).
    """

    def __init__(
        self,
        options_file: str | Path | None = None,
        weight_file: str | Path | None = None,
        cuda_device: int = -1,
        *,
        stateful: bool = False,
    ) -> None:
        if options_file is None and weight_file is not None:
            raise ElmoError("ElmoEmbedder: weight_file needs its options_file (an official "
                            "bilm-tf pair); or give a model alone, as the first argument: a "
                            "name such as 'default', or a directory")
        if weight_file is None:  # a model alone, or AllenNLP's default
            model, options_file = options_file or ALLENNLP_DEFAULT_MODEL, None
        else:
            model = None
        device = "cpu" if cuda_device < 0 else f"cuda:{cuda_device}"
        self.embedder = Embedder.from_pretrained(
            model, options=options_file, weights=weight_file, device=device,
            batch_size=DEFAULT_BATCH_SIZE, stateful=stateful)

    def embed_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """One tokenized sentence -> its layers (L+1, n, 2P)."""
        return self.embed_batch([sentence])[0]

    def embed_batch(self, batch: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Tokenized sentences, run as one batch -> their layers, each (L+1, n_i, 2P)."""
        return self.embedder.embed_batch(batch)

    def embed_sentences(
        self, sentences: Iterable[Sequence[str]], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> Iterator[np.ndarray]:
        """The layers of each sentence, in input order, computed `batch_size` at a time (a
        generator: sentences are read as they are needed)."""
        self._set_batch_size(batch_size)
        for _, layers in self.embedder.iter_embeddings(sentences):
            yield layers

    def embed_file(
        self,
        input_file: IO[str] | str | Path,
        output_file_path: str | Path,
        output_format: str = "all",
        batch_size: int = DEFAULT_BATCH_SIZE,
        forget_sentences: bool = False,
        use_sentence_keys: bool = False,
        *,
        overwrite: bool = False,
    ) -> None:
        """A file of whitespace-tokenized sentences, one per line (an open file, closed
        afterwards as AllenNLP does, or a path) -> HDF5 in AllenNLP's layout: one dataset per
        line named by its 0-based number (or by the sentence, `use_sentence_keys`), and the
        JSON `sentence_to_index` unless `forget_sentences` or `use_sentence_keys`.
        `output_format`: "all" (L+1, n, 2P), "top" or "average" (n, 2P). Written atomically and
        resumable (`Embedder.embed_file`); an existing output is replaced only if `overwrite`.
        """
        self._set_batch_size(batch_size)
        kwargs = dict(layers=output_format, forget_sentences=forget_sentences,
                      use_sentence_keys=use_sentence_keys, overwrite=overwrite)
        if isinstance(input_file, (str, os.PathLike)):
            self.embedder.embed_file(input_file, output_file_path, **kwargs)
            return
        with input_file:
            path = _path_on_disk(input_file)
            if path is not None:
                self.embedder.embed_file(path, output_file_path, **kwargs)
                return
            # Not a file on disk (io.StringIO, a pipe): its text goes to a temporary file,
            # which Embedder.embed_file reads (it makes several passes).
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "input.txt"
                with open(path, "w", encoding="utf-8") as copy:
                    for line in input_file:
                        copy.write(line.decode("utf-8") if isinstance(line, bytes) else line)
                self.embedder.embed_file(path, output_file_path, **kwargs)

    def _set_batch_size(self, batch_size: int) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ElmoError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
        self.embedder.batch_size = batch_size



def _path_on_disk(file: IO) -> str | None:
    """The path of an open file that is a file on disk still at its start, else None."""
    name = getattr(file, "name", None)
    try:
        at_start = file.tell() == 0
    except (OSError, ValueError):  # a pipe or a terminal
        return None
    return name if isinstance(name, str) and at_start and Path(name).is_file() else None
