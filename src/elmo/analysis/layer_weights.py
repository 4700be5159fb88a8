"""The learned mix weights of trained task runs (the paper's Figure 2).

A run directory of `elmo task train` holds `layer_weights.json`: {"input": [w_0..w_L],
"output": [...]}, softmax-normalised, one list per mix the run used (read by
`elmo.layer_choice.read_mixes`, which the spaCy pipe's learned mix reads too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elmo.errors import ElmoError
from elmo.layer_choice import read_mixes

from .plots import heatmap


@dataclass
class MixWeights:
    """One mix of one run: where it goes (input/output) and softmax(s) per layer."""

    run: str
    placement: str
    weights: list[float]

    @property
    def label(self) -> str:
        return f"{self.run} ({self.placement})"


def run_names(run_dirs: Sequence[str | Path]) -> list[str]:
    """Each run directory's shortest trailing path that no other of them shares: `pos` and
    `ner` for runs/pos and runs/ner, `pos/seed0` and `ner/seed0` for runs/{pos,ner}/seed0."""
    parts = [Path(d).resolve().parts for d in run_dirs]
    for k in range(1, max(map(len, parts), default=0) + 1):
        names = ["/".join(p[-k:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [str(d) for d in run_dirs]  # a directory given twice


def read_layer_weights(run_dir: str | Path, name: str | None = None) -> list[MixWeights]:
    """The mixes of one run directory, in file order, labelled `name` (default: its name)."""
    return [MixWeights(name or Path(run_dir).name, placement, weights)
            for placement, weights in read_mixes(run_dir).items()]


def weights_matrix(mixes: list[MixWeights]) -> np.ndarray:
    """(mixes, layers): each mix's weights (all mixes must have the same number of layers)."""
    sizes = {len(m.weights) for m in mixes}
    if len(sizes) != 1:
        raise ElmoError(f"the runs mix different numbers of layers ({sorted(sizes)}): compare "
                        f"runs of biLMs with the same depth")
    return np.array([m.weights for m in mixes])


def plot_layer_weights(mixes: list[MixWeights], path: str | Path) -> Path:
    """Heat map: one row per run and placement, one column per layer."""
    values = weights_matrix(mixes)
    return heatmap(values, [m.label for m in mixes],
                   [str(k) for k in range(values.shape[1])], path,
                   title="Learned ELMo layer weights, softmax(s)", xlabel="biLM layer",
                   ylabel="task run (mix placement)", colorbar="weight")
