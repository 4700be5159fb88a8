"""How much training data a task needs with and without ELMo (the paper's Figure 1).

One task of `elmo task` is trained on growing fractions of its training set, the task model
alone and +ELMo, with several seeds. For a seed the samples are nested (the 1% sample lies
inside the 10% one: `elmo.tasks.data.nested_sample`). Each run has its own directory, so an
interrupted study resumes where it stopped (finished runs return their stored result). Runs
can go several at a time, one process each (`jobs`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from elmo.errors import ElmoError
from elmo.tasks.config import TaskConfig
from elmo.tasks.parallel import TrainFunction, train_tasks
from elmo.tasks.recipe import train_task
from elmo.tasks.run import resolve_config

from .plots import error_bar_plot

BASELINE = "task model alone"


@dataclass
class RunSpec:
    system: str  # BASELINE or "+ELMo"
    fraction: float
    seed: int
    elmo: str | None

    @property
    def name(self) -> str:
        kind = "elmo" if self.elmo else "base"
        return f"{kind}-frac{self.fraction:g}-seed{self.seed}"


def plan_runs(fractions: Sequence[float], seeds: Sequence[int], model: str) -> list[RunSpec]:
    """Every (system, fraction, seed), smallest fractions first."""
    for f in fractions:
        if not 0 < f <= 1:
            raise ElmoError(f"fractions must be in (0, 1]; got {f}")
    if not seeds:
        raise ElmoError("give at least one seed")
    return [RunSpec(system, f, s, elmo)
            for f in sorted(set(fractions)) for system, elmo in ((BASELINE, None),
                                                                  ("+ELMo", model))
            for s in seeds]


def run_study(
    base: TaskConfig, specs: Sequence[RunSpec], out: str | Path, jobs: int = 1,
    threads: int | None = None, train: TrainFunction = train_task,
) -> list[dict[str, Any]]:
    """Train every planned run (in OUT/NAME), `jobs` at a time (`elmo.tasks.parallel`), and
    return one row per run, in plan order: system, fraction, seed, n_train, updates (optimizer
    steps; `--min-updates` raises them for small fractions), metric, split ("test" when a test
    file is given, else "dev"), score."""
    parallel = jobs > 1  # then one bar over the runs, none from the workers
    base = resolve_config(base)  # one tokenizer for both systems: the one `base` resolves to
    configs = [dataclasses.replace(base, elmo=spec.elmo, train_fraction=spec.fraction,
                                   seed=spec.seed, out=str(Path(out) / spec.name),
                                   progress=base.progress and not parallel)
               for spec in specs]
    rows: list[dict[str, Any]] = [{} for _ in specs]
    runs = tqdm(train_tasks(configs, jobs, threads, train), total=len(specs), unit="run",
                desc="sample-efficiency runs", disable=not (base.progress and parallel))
    for i, result in runs:
        spec = specs[i]
        split = "test" if result.get("test") is not None else "dev"
        rows[i] = {"system": spec.system, "fraction": spec.fraction, "seed": spec.seed,
                   "n_train": result["n_train"], "updates": result.get("updates"),
                   "metric": result["metric"],
                   "split": split, "score": float(result[split]), "run": spec.name}
    return rows


def summarize(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and sample standard deviation (0 for one seed) per (system, fraction)."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["system"], row["fraction"]), []).append(row)
    summary = []
    for (system, fraction), group in groups.items():
        scores = [r["score"] for r in group]
        mean = sum(scores) / len(scores)
        var = sum((s - mean) ** 2 for s in scores) / (len(scores) - 1) if len(scores) > 1 else 0
        summary.append({"system": system, "fraction": fraction,
                        "n_train": round(sum(r["n_train"] for r in group) / len(group)),
                        "updates": round(sum(r.get("updates") or 0 for r in group) / len(group)),
                        "mean": mean, "std": math.sqrt(var), "seeds": len(scores)})
    return sorted(summary, key=lambda r: (r["system"] != BASELINE, r["fraction"]))


def plot_sample_efficiency(
    summary: Sequence[dict[str, Any]], path: str | Path, metric: str, split: str
) -> Path:
    """Score against training examples (log scale), one line per system, error bars = std."""
    series: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for row in summary:
        x, mean, std = series.setdefault(row["system"], ([], [], []))
        x.append(row["n_train"])
        mean.append(row["mean"])
        std.append(row["std"])
    return error_bar_plot(series, path, title="Sample efficiency: task model alone vs +ELMo",
                          xlabel="training examples (log scale)",
                          ylabel=f"{split} {metric} (mean ± std over seeds)")
