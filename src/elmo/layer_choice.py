"""Layer choices: what is kept of a sentence's biLM layers h_0 .. h_L, (L+1, n, D).

One record per kind in `LAYER_CHOICES`: a frozen dataclass that parses its own spellings
(`parse`: its choice, or None when the spelling is not its kind's) and applies itself to numpy
arrays (`numpy`) and to an ONNX graph being built (`onnx`); it tells the shape it gives
(`stacked`: the layer axis kept, (L+1, n, width), else (n, width); `width`, `shape`), whether
it fits a model (`check`) and, for the torch `ScalarMix`, whether a mix computes it
(`fixed_mix`) and the one layer it keeps (`one_layer`).

`parse_layer_choice(spelling)` is the first record's choice that accepts `spelling` (or an
error, saying what is wrong where a record's `unmet` tells it): `elmo
embed --layers`, `elmo serve --layers`, `elmo export --layers` (ONNX), the Embedder's file
job, `elmo.ray.Embed`, the spaCy pipe's `layers`, flair's `embedding_mode`, simple_elmo's
`layers` and ScalarMix's fixed modes all read it, so a new kind is one record here.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

import numpy as np

from elmo.errors import ElmoError

WEIGHTS_FILE = "layer_weights.json"  # a task run's learned mixes (`elmo task train`)


class LayerChoiceError(ElmoError, ValueError):
    """A layer choice that no record accepts, or that does not fit the model."""


class GraphOps(Protocol):
    """What a layer choice adds to an ONNX graph with (`elmo.onnx.graph.GraphBuilder`)."""

    def op(self, op_type: str, *inputs: str, **attributes) -> str: ...

    def const(self, value: np.ndarray | list | float | int, hint: str = ...) -> str: ...


@dataclass(frozen=True)
class LayerChoice(ABC):
    """What is kept of the layers (L+1, n, D); a subclass is one kind of choice."""

    form: ClassVar[str]  # how it is spelled, for help and messages: "top", "N", ...
    help: ClassVar[str]  # what it gives, one short line
    stacked: ClassVar[bool] = False  # keeps the layer axis: (L+1, n, width), else (n, width)
    # a ScalarMix computes it with s fixed: the average (s = 0) or one layer (`one_layer`)
    fixed_mix: ClassVar[bool] = False
    # a spelling of it may name a file, which `parse` reads (refused where files are not)
    reads_files: ClassVar[bool] = False

    @classmethod
    def parse(cls, spelling: str | int) -> LayerChoice | None:
        """This kind's choice that `spelling` names, None when it names no choice of it."""
        return cls() if spelling == cls.form else None

    @classmethod
    def unmet(cls, spelling: str | int | Sequence[float]) -> str | None:
        """What is wrong with `spelling` when it is written as this kind's but names no
        choice of it (a path to no file), for the error; None when it is not written so."""
        return None

    def spelling(self) -> str:
        """The choice as a string, which a run's identity records."""
        return self.form

    def check(self, n_layers: int) -> None:  # noqa: B027 (most choices fit every model)
        """LayerChoiceError when the choice does not fit a model of `n_layers` (L+1)."""

    def width(self, n_layers: int, dim: int) -> int:
        """The length of each token's vector, from a model's L+1 layers of `dim` values."""
        return dim

    def shape(self, n_layers: int, tokens: int | str, dim: int) -> tuple[int | str, ...]:
        """What is kept of `tokens` tokens' L+1 layers of `dim` values: ([L+1,] tokens, width)."""
        return (*([n_layers] if self.stacked else []), tokens, self.width(n_layers, dim))

    def one_layer(self, n_layers: int) -> int | None:
        """The one layer kept, where the choice is one layer (a ScalarMix's fixed mode)."""
        return None

    @abstractmethod
    def numpy(self, layers: np.ndarray) -> np.ndarray:
        """layers (L+1, n, D) -> (L+1, n, width) if `stacked`, else (n, width)."""

    @abstractmethod
    def onnx(self, g: GraphOps, layers: str, n_layers: int) -> str:
        """The graph's value of `numpy` over `layers` (L+1, B, T, D): (L+1, B, T, width)
        if `stacked`, else (B, T, width)."""


@dataclass(frozen=True)
class AllLayers(LayerChoice):
    form, help, stacked = "all", "every layer, (L+1, n, D)", True

    def numpy(self, layers: np.ndarray) -> np.ndarray:
        return layers

    def onnx(self, g: GraphOps, layers: str, n_layers: int) -> str:
        return layers


@dataclass(frozen=True)
class TopLayer(LayerChoice):
    form, help, fixed_mix = "top", "the top layer, (n, D)", True

    def one_layer(self, n_layers: int) -> int | None:
        return n_layers - 1

    def numpy(self, layers: np.ndarray) -> np.ndarray:
        return layers[-1]

    def onnx(self, g: GraphOps, layers: str, n_layers: int) -> str:
        return g.op("Gather", layers, g.const(n_layers - 1), axis=0)


@dataclass(frozen=True)
class LayerAverage(LayerChoice):
    form, help, fixed_mix = "average", "the layers' mean, (n, D)", True

    def numpy(self, layers: np.ndarray) -> np.ndarray:
        return layers.mean(axis=0)

    def onnx(self, g: GraphOps, layers: str, n_layers: int) -> str:
        return g.op("ReduceMean", layers, g.const([0]), keepdims=0)


@dataclass(frozen=True)
class LayerSum(LayerChoice):
    form, help = "sum", "the layers' sum, (n, D) (SeqVec's per-residue vectors)"

    def numpy(self, layers: np.ndarray) -> np.ndarray:
        return layers.sum(axis=0)

    def onnx(self, g: GraphOps, layers: str, n_layers: int) -> str:
        return g.op("ReduceSum", layers, g.const([0]), keepdims=0)


@dataclass(frozen=True)
class LayersSideBySide(LayerChoice):
    form, help = "concat", "each token's layers side by side, the lowest first, (n, (L+1) x D)"

    def width(self, n_layers: int, dim: int) -> int:
        return n_layers * dim

    def numpy(self, layers: np.ndarray) -> np.ndarray:
        n_layers, n, dim = layers.shape  # (L+1, n, D) -> (n, (L+1) D); n may be 0
        return layers.transpose(1, 0, 2).reshape(n, n_layers * dim)

    def onnx(self, g: GraphOps, layers: str, n_layers: int) -> str:
        return g.op("Reshape", g.op("Transpose", layers, perm=[1, 2, 0, 3]),
                    g.const([0, 0, -1]))  # (B, T, L+1, D) -> (B, T, (L+1) x D)


@dataclass(frozen=True)
class OneLayer(LayerChoice):
    """Layer K: an int, a string of digits, or ScalarMix's "layer:K"."""

    form, help, fixed_mix = "N", "layer N alone (0: the token layer), (n, D)", True
    layer: int = 0

    @classmethod
    def parse(cls, spelling: str | int) -> LayerChoice | None:
        if isinstance(spelling, int) and not isinstance(spelling, bool):
            return cls(spelling)
        digits = spelling.removeprefix("layer:") if isinstance(spelling, str) else ""
        return cls(int(digits)) if digits.isascii() and digits.isdigit() else None

    def spelling(self) -> str:
        return str(self.layer)

    def check(self, n_layers: int) -> None:
        if not 0 <= self.layer < n_layers:
            raise LayerChoiceError(f"layers={self.layer}: the model has layers 0 to "
                                   f"{n_layers - 1}")

    def one_layer(self, n_layers: int) -> int | None:
        return self.layer

    def numpy(self, layers: np.ndarray) -> np.ndarray:
        return layers[self.layer]

    def onnx(self, g: GraphOps, layers: str, n_layers: int) -> str:
        return g.op("Gather", layers, g.const(self.layer), axis=0)


@dataclass(frozen=True)
class LearnedMix(LayerChoice):
    """The weights a task run learned (its layer_weights.json: the "input" mix, else its
    first), spelled as the file's path or its run directory's, or as the weights (a list of
    numbers, as the file and `spelling` give them)."""

    form, help = "RUN", f"the mix a task run learned, (n, D): its {WEIGHTS_FILE} or directory"
    reads_files = True
    weights: tuple[float, ...] = ()
    source: str = field(default="", compare=False)  # where the weights were read

    @classmethod
    def parse(cls, spelling: str | int | Sequence[float]) -> LayerChoice | None:
        if isinstance(spelling, list | tuple) and spelling and all(
                isinstance(w, int | float) and not isinstance(w, bool) for w in spelling):
            return cls(tuple(float(w) for w in spelling), json.dumps(list(spelling)))
        if not isinstance(spelling, str) or not spelling or not Path(spelling).exists():
            return None
        path = Path(spelling)
        mixes = read_mixes(path.parent if path.is_file() else path)
        return cls(tuple(mixes.get("input", next(iter(mixes.values())))), spelling)

    @classmethod
    def unmet(cls, spelling: str | int | Sequence[float]) -> str | None:
        looks_like_a_path = isinstance(spelling, str) and (
            spelling.endswith(".json") or "/" in spelling or os.sep in spelling)
        return (f"no such file or directory: {spelling!r} (a {cls.form} is a task run's "
                f"{WEIGHTS_FILE} or its directory)") if looks_like_a_path else None

    def spelling(self) -> str:
        return json.dumps(list(self.weights))

    def check(self, n_layers: int) -> None:
        if len(self.weights) != n_layers:
            raise LayerChoiceError(f"{self.source}: its mix weighs {len(self.weights)} layers, "
                                   f"but the model has {n_layers}: give the mix learned with "
                                   "this model")

    def numpy(self, layers: np.ndarray) -> np.ndarray:
        return np.tensordot(np.array(self.weights, dtype=np.float32), layers, axes=1)

    def onnx(self, g: GraphOps, layers: str, n_layers: int) -> str:
        weights = np.array(self.weights, dtype=np.float32).reshape(-1, 1, 1, 1)
        return g.op("ReduceSum", g.op("Mul", layers, g.const(weights)), g.const([0]),
                    keepdims=0)


# In the order tried: the first record whose `parse` accepts a spelling makes the choice.
LAYER_CHOICES: list[type[LayerChoice]] = [AllLayers, TopLayer, LayerAverage, LayerSum,
                                          LayersSideBySide, OneLayer, LearnedMix]


def forms(files: bool = True) -> str:
    """The spellings of every kind, for messages: "all, top, ..., N, RUN" (`files` False:
    RUN as the mix's weights, not a file)."""
    return ", ".join(kind.form if files or not kind.reads_files else f"{kind.form}'s weights"
                     for kind in LAYER_CHOICES)


def forms_help() -> str:
    """Every kind with what it gives, for help texts."""
    return "; ".join(f"{kind.form}: {kind.help}" for kind in LAYER_CHOICES)


def parse_layer_choice(spelling: str | int | Sequence[float] | LayerChoice, what: str = "layers",
                       files: bool = True) -> LayerChoice:
    """The choice that `spelling` names (a LayerChoice is taken as it is); LayerChoiceError
    naming `what` (the caller's name of the setting) when no record accepts it. `files`
    False: a string names no file (a server's request does not read the server's files), so
    the kinds that read files take only their other spellings."""
    if isinstance(spelling, LayerChoice):
        return spelling
    for kind in LAYER_CHOICES:
        if kind.reads_files and not files and isinstance(spelling, str):
            continue
        choice = kind.parse(spelling)
        if choice is not None:
            return choice
    unmet = next((why for kind in LAYER_CHOICES if (files or not kind.reads_files)
                  and (why := kind.unmet(spelling))), None)
    raise LayerChoiceError(f"{what}: {unmet}" if unmet else
                           f"{what} must be one of {forms(files)}; got {spelling!r}")


def token_vectors_choice(spelling: str | int | LayerChoice, what: str) -> LayerChoice:
    """A choice of one vector per token, as flair and spaCy spell it: "all" is every layer
    side by side ("concat"); a choice that keeps the layer axis is refused."""
    side_by_side = spelling == AllLayers.form
    choice = parse_layer_choice(LayersSideBySide() if side_by_side else spelling, what)
    if choice.stacked:
        raise LayerChoiceError(f"{what}={spelling!r} keeps the layer axis; give a choice of "
                               f"one vector per token ({forms()})")
    return choice


def select_layers(layers: np.ndarray, spelling: str | int | LayerChoice) -> np.ndarray:
    """layers (L+1, n, D) -> what the choice `spelling` keeps of them."""
    return parse_layer_choice(spelling).numpy(layers)


def read_mixes(run_dir: str | Path) -> dict[str, list[float]]:
    """The mixes of a task run directory's layer_weights.json: {placement: [w_0 .. w_L]}."""
    run_dir = Path(run_dir)
    path = run_dir / WEIGHTS_FILE
    if not path.is_file():
        what = "is not a directory" if not run_dir.is_dir() else f"has no {WEIGHTS_FILE}"
        raise ElmoError(f"{run_dir} {what}; give run directories of `elmo task train "
                        f"--elmo MODEL` (a run with --elmo none has no mix)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ElmoError(f"{path}: not JSON ({err}); train the run again to rewrite it") from None
    if not isinstance(data, dict) or not data:
        raise ElmoError(f"{path}: no mixes; expected {{\"input\": [w_0, ...], \"output\": "
                        f"[...]}} (a run with --elmo none has none)")
    for placement, weights in data.items():
        if not (isinstance(weights, list) and weights
                and all(isinstance(w, int | float) for w in weights)):
            raise ElmoError(f"{path}: {placement!r} should be a list of layer weights")
    return {placement: [float(w) for w in weights] for placement, weights in data.items()}
