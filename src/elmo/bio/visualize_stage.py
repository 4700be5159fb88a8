"""The `visualize` stage with protocol `plotly`: an interactive scatter plot of the projected
proteins, coloured by their label in an annotation file.

Reads the `projected_reduced_embeddings_file` of the stage it depends on and, if given, the
`annotation_file` (a CSV with the columns `identifier` and `label`; identifiers are original
ids, or new ids with `merge_via_index`). Writes into the stage's directory
`input_annotation_file.csv` (the annotations, indexed by identifier), `merged_annotation_file.csv`
(each point's coordinates and label; with `display_unknown`, proteins without a label are
`UNKNOWN` and every annotation is kept) and `plot_file.html` (a plotly page, self-contained:
3D with 3 components, 2D with 2; a trace per label, named by it).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import h5py

from elmo.bio.layout import StagePlan, StageRun, csv_text
from elmo.errors import ElmoError
from elmo.extras import import_extra
from elmo.io.atomic import atomic_output, atomic_write_text

UNKNOWN = "UNKNOWN"
COMPONENTS = ("component_0", "component_1", "component_2")


def visualize_outputs(options: dict[str, Any]) -> dict[str, str]:
    """The output parameters the stage adds: name -> its file in the stage's directory."""
    files = {"input_annotation_file": "input_annotation_file.csv",
             "merged_annotation_file": "merged_annotation_file.csv", "plot_file": "plot_file.html"}
    if options["annotation_file"] is None:
        del files["input_annotation_file"]
    return files


def check_visualize_stage(plan: StagePlan) -> None:
    """What the options and the stages it depends on must agree on: a projection to plot, in
    2 or 3 components (those of the projection, where a stage of the config draws it), and an
    annotation file with the columns identifier and label."""
    import_extra("plotly.graph_objects", "the visualize stage's plotly")
    options, where = plan.options, plan.where
    source = _source(plan.parameters)
    if source is None:
        raise ElmoError(f"{where('depends_on')}: {_NO_PROJECTION}")
    if source not in plan.coming and not Path(source).is_file():
        raise ElmoError(f"{where()}: {source} is not a file (a projection, HDF5)")
    n = options["n_components"]
    if n not in (2, 3):
        raise ElmoError(f"{where('n_components')}: n_components is {n}; a plot has 2 or 3")
    drawn = plan.carried.get("n_components", n)
    if drawn != n:
        raise ElmoError(f"{where('n_components')}: n_components is {n}, but the projection "
                        f"it plots has {drawn}; remove the option or make them equal")
    if options["annotation_file"] is not None:
        _read_annotations(Path(options["annotation_file"]))


def run_visualize_stage(run: StageRun) -> dict[str, str]:
    """Plot the projection named in the stage's input parameters; returns the output
    parameters it adds."""
    stage_dir, options, parameters = run.directory, run.options, run.parameters
    go = import_extra("plotly.graph_objects", "the visualize stage's plotly")
    source = _source(parameters)
    if source is None:
        raise ElmoError(f"stage {stage_dir.name!r}: {_NO_PROJECTION}")
    n = options["n_components"]
    files = visualize_outputs(options)
    paths = {name: run.place / file for name, file in files.items()}
    points = _read_points(Path(source), n)  # new id -> (original id, coordinates)
    if options["annotation_file"] is not None:
        header, rows = _read_annotations(Path(options["annotation_file"]))
        annotations = {row[0]: row for row in rows}
        atomic_write_text(paths["input_annotation_file"], csv_text(header, rows))
        run.saved()
        by_id = points if options["merge_via_index"] else \
            {original: (key, xyz) for key, (original, xyz) in points.items()}
        ids = sorted(set(by_id) | set(annotations)) if options["display_unknown"] else \
            list(annotations)
        label_column = header.index("label")
        unlabelled = [UNKNOWN if i == label_column else "" for i in range(len(header))]
        merged_header = [*header, *COMPONENTS[:n]]
        merged = [[identifier, *annotations.get(identifier, unlabelled)[1:],
                   *(by_id[identifier][1] if identifier in by_id else [math.nan] * n)]
                  for identifier in ids]
    else:
        merged_header = ["sequence_id", "original_id", *COMPONENTS[:n], "label"]
        merged = [[key, original, *xyz, UNKNOWN] for key, (original, xyz) in points.items()]
        label_column = len(merged_header) - 1
    atomic_write_text(paths["merged_annotation_file"], csv_text(merged_header, merged))
    run.saved()
    figure = _figure(go, merged, merged_header, label_column, n)
    with atomic_output(paths["plot_file"]) as tmp:
        figure.write_html(str(tmp), include_plotlyjs=True, full_html=True, div_id="plot")
    return {name: str(stage_dir / file) for name, file in files.items()}


_NO_PROJECTION = "no projection to plot; make it depend on a project stage (depends_on: STAGE)"


def _source(parameters: dict[str, Any]) -> str | None:
    """The projection (HDF5) the parameters name, if any."""
    source = parameters.get("projected_reduced_embeddings_file") or \
        parameters.get("projected_embeddings_file")
    return str(source) if source and str(source).endswith(".h5") else None


def _read_points(path: Path, n: int) -> dict[str, tuple[str, list[float]]]:
    with h5py.File(path, "r") as f:
        points = {key: (str(d.attrs["original_id"]), [float(x) for x in d[...]])
                  for key, d in f.items()}
    wrong = next((key for key, (_, xyz) in points.items() if len(xyz) != n), None)
    if wrong is not None:
        raise ElmoError(f"{path}: {wrong} has {len(points[wrong][1])} coordinates, not "
                        f"n_components {n}; give the plot stage the project stage's "
                        "n_components")
    return points


def _read_annotations(path: Path) -> tuple[list[str], list[list[str]]]:
    """The annotation file's header (the identifier column first) and rows."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0] if rows else []
    if "identifier" not in header or "label" not in header:
        raise ElmoError(f"{path}, line 1: an annotation file has the columns identifier and "
                        f"label (found: {', '.join(header) or 'none'})")
    first = header.index("identifier")
    order = [first, *(i for i in range(len(header)) if i != first)]
    return [header[i] for i in order], [[row[i] for i in order] for row in rows[1:] if row]


def _figure(go: Any, merged: list[list[Any]], header: list[str], label_column: int, n: int
            ) -> Any:
    """A scatter plot, a trace per label, of the rows that have coordinates."""
    axes = [header.index(c) for c in COMPONENTS[:n]]
    traces: dict[str, list[list[Any]]] = {}
    for row in merged:
        if not any(math.isnan(row[i]) for i in axes):
            traces.setdefault(str(row[label_column]), []).append(row)
    figure = go.Figure()
    scatter = go.Scatter3d if n == 3 else go.Scatter
    for label, rows in sorted(traces.items()):
        coordinates = dict(zip("xyz", ([row[i] for row in rows] for i in axes), strict=False))
        figure.add_trace(scatter(**coordinates, mode="markers", name=label,
                                 text=[str(row[0]) for row in rows],
                                 hovertemplate="%{text}<br>" + label + "<extra></extra>"))
    hidden = dict(showticklabels=False, showspikes=False, title="")
    figure.update_layout(scene=dict(xaxis=hidden, yaxis=hidden, zaxis=hidden),
                         legend_title_text="label")
    return figure
