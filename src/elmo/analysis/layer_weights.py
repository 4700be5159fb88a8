"""The learned mix weights of trained task runs (the paper's Figure 2).

A run directory of `elmo task train` holds `layer_weights.json`: {"input": [w_0..w_L],
"output": [...]}, softmax-normalised, one list per mix the run used.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elmo.errors import ElmoError

from .plots import heatmap

WEIGHTS_FILE = "layer_weights.json"


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
    mixes = []
    for placement, weights in data.items():
        if not (isinstance(weights, list) and weights
                and all(isinstance(w, int | float) for w in weights)):
            raise ElmoError(f"{path}: {placement!r} should be a list of layer weights")
        mixes.append(MixWeights(name or run_dir.name, placement, [float(w) for w in weights]))
    return mixes


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
