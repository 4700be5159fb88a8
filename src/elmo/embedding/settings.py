"""EmbedSettings: how sentences are embedded and what is kept of their layers.

One record for every entry point that embeds (`elmo embed` with or without `--ray`, `elmo
serve`, `elmo.ray.Embed`, the feature cache), checked once here. Each field carries its help,
its choices and how a command-line value is read (`help`, `choices`, `parse`, `metavar` in the
field's metadata): the commands make their flags from it (`elmo.cli.common.add_setting`), so a
new setting is one field here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from elmo.device import PRECISIONS, precisions_described
from elmo.layer_choice import LAYER_CHOICES, LayerChoice, forms_help, parse_layer_choice
from elmo.memory import AUTO
from elmo.modules.quantize import QUANTIZE_MODES
from elmo.options import option
from elmo.tokenize import TOKENIZERS, Tokenizer, tokenizers_described

if TYPE_CHECKING:
    import torch

POOL_MODES = ("mean",)
OUTPUT_DTYPES = ("float32", "float16")
# Sentences a batch holds by default: 256 (each LSTM step multiplies more rows at once: fp32
# 1.0-1.3x the speed of 64 on a CPU, docs/speed.md); stateful, 64 as AllenNLP's (its batches
# change the numbers).
BATCH_SIZE, STATEFUL_BATCH_SIZE = 256, 64


def batch_size_or_default(batch_size: int | None, stateful: bool = False) -> int:
    """`batch_size` as given, or the default where it is None (stateful: AllenNLP's)."""
    if batch_size is not None:
        return batch_size
    return STATEFUL_BATCH_SIZE if stateful else BATCH_SIZE


def layers_spelling(text: str) -> str:
    """A command line's layer choice, once a record of `LAYER_CHOICES` accepts it
    (LayerChoiceError, a ValueError, naming it otherwise)."""
    parse_layer_choice(text)
    return text


def max_tokens_value(text: str) -> int | str:
    """A command line's max_tokens: "auto", or a whole number >= 1."""
    if text == AUTO:
        return AUTO
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{text!r} is neither auto nor a whole number >= 1")
    return int(text)


def _setting(default: Any, help: str, *, embedder: bool = False, **flag: Any) -> Any:
    """A field of EmbedSettings and its flag (`elmo.options.option`: `help`, `choices`,
    `parse`, `metavar`, `negatable`); `embedder`: a keyword of the Embedder (the others say
    what is kept)."""
    return option(default, help, embedder=embedder, **flag)


@dataclass(frozen=True)
class EmbedSettings:
    """How sentences are embedded and what is kept of their layers (see the fields' help).

    What is kept (`reduce`): `layers` a layer choice (`elmo.layer_choice`: all, top, average,
    sum, concat, a layer number, a task run's learned mix); `pool` None, or "mean" for one
    vector per sentence (the mean over its tokens of the chosen layers); `dtype` float32, or
    float16 for half the size. The Embedder's (`embedder_options`): `tokenizer` (None: the
    model's, else whitespace), `batch_size` (sentences per batch; None: the Embedder's
    default), `max_tokens` (padded tokens per batch, "auto" or a number), `device` (None: cuda
    if available), `quantize` (None or "int8"), `precision` (a key of `elmo.device.PRECISIONS`;
    None: the device's default), `stateful` (the original's protocol) and `cuda_graphs` (None:
    the model's, off unless set), which the Embedder checks when it is made.
    """

    layers: str | int = _setting(
        "all", f"{forms_help()}. Default: all", parse=layers_spelling,
        metavar="|".join(kind.form for kind in LAYER_CHOICES))
    pool: str | None = _setting(
        None, "mean: one vector per line or record, the mean over its tokens of the chosen "
        "layers (--layers sum --pool mean: SeqVec's per-protein vectors)", choices=POOL_MODES)
    dtype: str = _setting(
        "float32", "type of the stored vectors; float16 halves the file (relative error up to "
        "5e-4). Default: float32", choices=OUTPUT_DTYPES)
    tokenizer: Tokenizer | str | None = _setting(
        None, f"how lines become tokens ({tokenizers_described()}; default: the one MODEL was "
        "trained with, recorded in its run.json by `elmo train`; else whitespace)",
        choices=TOKENIZERS, embedder=True)
    batch_size: int | None = _setting(
        None, f"sentences per batch (default {BATCH_SIZE}; with --stateful "
        f"{STATEFUL_BATCH_SIZE}, AllenNLP's)", parse=int, embedder=True)
    max_tokens: int | str = _setting(
        AUTO, "padded tokens per batch; a longer sentence or protein runs alone. auto: 16384 on "
        "the CPU, on a GPU what half of its free memory holds (default auto)",
        parse=max_tokens_value, embedder=True)
    device: str | torch.device | None = _setting(
        None, "torch device, e.g. cpu or cuda:0 (default: cuda if available, else cpu)",
        embedder=True)
    quantize: str | None = _setting(
        None, "int8: int8 weights and dynamically quantized activations on the CPU: faster "
        "than fp32 for large models (original), little for small ones, vectors close to "
        "fp32; the speed-up and the error of each layer, by model and CPU: docs/speed.md. "
        "Default: fp32",
        choices=QUANTIZE_MODES, embedder=True)
    precision: str | None = _setting(
        None, f"{precisions_described('embed')}. On a GPU tf32 and bf16 are faster for "
        "large models and slightly less exact than fp32; how much: docs/speed.md",
        choices=PRECISIONS, embedder=True)
    stateful: bool = _setting(
        False, "the original's protocol: file order, batches of --batch-size, LSTM state "
        "carried per batch row (reproduces its numbers)", embedder=True)
    cuda_graphs: bool | None = _setting(
        None, "replay CUDA graphs of the LSTM for batches of at most 8,192 padded positions "
        "(stateless, on CUDA; no effect on the CPU). Default: off, eager was as fast or faster "
        "in every run measured (docs/speed.md)", negatable=True, embedder=True)
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

    def kept(self) -> dict[str, str]:
        """What is kept of the layers, as a run's identity records it."""
        return {"layers": self.layer_choice.spelling(), "dtype": self.dtype,
                **({"pool": self.pool} if self.pool else {})}

    def asked(self) -> dict[str, Any]:
        """The Embedder's settings as given (None: its default), but the device: what a run
        records where each worker makes its own Embedder (and resolves "auto" on its device)."""
        return {name: getattr(self, name) for name in EMBEDDER_SETTINGS if name != "device"}


# The fields of EmbedSettings that the Embedder takes (the others say what is kept).
EMBEDDER_SETTINGS = tuple(f.name for f in fields(EmbedSettings) if f.metadata.get("embedder"))


def check_choices(*choices: tuple[str, object, tuple[object, ...]]) -> None:
    """ValueError for the first (name, value, allowed) whose value is not allowed."""
    for name, value, allowed in choices:
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
