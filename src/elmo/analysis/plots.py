"""Figures of the analyses: matplotlib (the `analysis` extra) with the Agg backend, written
atomically as PNG. Each figure's axes are labelled before it is saved (checked)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from elmo.extras import import_extra
from elmo.io.atomic import atomic_output


def _pyplot() -> Any:
    matplotlib = import_extra("matplotlib", "plotting")
    matplotlib.use("Agg")  # files only, no display
    return import_extra("matplotlib.pyplot", "plotting")


def _save(figure: Any, path: str | Path) -> Path:
    """Check that every axes is labelled, then write PNG to `path` atomically."""
    for axes in figure.axes:
        if axes.get_label() == "<colorbar>":
            continue
        if not axes.get_xlabel() or not axes.get_ylabel():
            raise ValueError(f"unlabelled axes in the figure for {path}")
    figure.tight_layout()
    with atomic_output(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    _pyplot().close(figure)
    return Path(path)


def heatmap(
    values: np.ndarray, row_labels: Sequence[str], column_labels: Sequence[str],
    path: str | Path, title: str, xlabel: str, ylabel: str, colorbar: str,
) -> Path:
    """A heat map of values (rows, columns), each cell annotated, saved as PNG."""
    plt = _pyplot()
    rows, columns = values.shape
    label_inches = 0.08 * max(map(len, row_labels), default=0)  # room for the row labels
    height = max(1.2 + 0.45 * rows, 0.8 + 0.1 * len(ylabel))  # room for the y label
    figure, axes = plt.subplots(figsize=(2.4 + 0.9 * columns + label_inches, height))
    image = axes.imshow(values, cmap="viridis", vmin=0.0, vmax=max(1.0, float(values.max())),
                        aspect="auto")
    axes.set_xticks(range(columns), labels=list(column_labels))
    axes.set_yticks(range(rows), labels=list(row_labels))
    for r in range(rows):
        for c in range(columns):
            axes.text(c, r, f"{values[r, c]:.2f}", ha="center", va="center",
                      color="white" if values[r, c] < 0.6 else "black", fontsize=8)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    figure.colorbar(image, ax=axes, label=colorbar)
    return _save(figure, path)


def error_bar_plot(
    series: dict[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
    path: str | Path, title: str, xlabel: str, ylabel: str, log_x: bool = True,
) -> Path:
    """Lines with error bars: {name: (x, mean, std)}, saved as PNG."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6, 4))
    for name, (x, mean, std) in series.items():
        axes.errorbar(x, mean, yerr=std, marker="o", capsize=3, label=name)
    if log_x:
        axes.set_xscale("log")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    axes.legend()
    return _save(figure, path)
