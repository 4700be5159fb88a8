"""The `project` stage: per-protein vectors -> 2 or 3 coordinates, by t-SNE or UMAP.

Reads the `reduced_embeddings_file` of the stage it depends on (or a
`projected_reduced_embeddings_file`, to chain projections), in the mapping file's order, and
writes into the stage's directory `projected_embeddings_file.csv` (the mapping file's columns,
then `component_0`, `component_1`, ...) and `projected_reduced_embeddings_file.h5` (a dataset
of the coordinates per protein, attribute `original_id`). t-SNE is scikit-learn's, UMAP
umap-learn's, with bio_embeddings' defaults (`elmo.bio.pipeline_config.PROJECT_OPTIONS`).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from elmo.bio.layout import StageRun, csv_text
from elmo.errors import ElmoError
from elmo.extras import import_extra
from elmo.io.atomic import atomic_output, atomic_write_text

PROJECTED_CSV = "projected_embeddings_file"
PROJECTED_H5 = "projected_reduced_embeddings_file"
INPUTS = ("projected_reduced_embeddings_file", "projected_embeddings_file",
          "reduced_embeddings_file")


def run_project_stage(run: StageRun) -> dict[str, str]:
    """Project the per-protein vectors named in the stage's input parameters; returns the
    output parameters it adds."""
    stage_dir, parameters = run.directory, run.parameters
    source = next((parameters[name] for name in INPUTS
                   if str(parameters.get(name, "")).endswith(".h5")), None)
    if source is None:
        raise ElmoError(f"stage {stage_dir.name!r}: no per-protein vectors to project; make it "
                        "depend on an embed stage with 'reduce: True' (depends_on: STAGE)")
    mapping = _read_mapping(Path(parameters["mapping_file"]))
    with h5py.File(source, "r") as f:
        vectors = np.stack([f[key][...].astype(np.float32) for key, _, _ in mapping])
    coordinates = _project(run.protocol, run.options, vectors, stage_dir.name)
    components = [f"component_{i}" for i in range(coordinates.shape[1])]
    atomic_write_text(stage_dir / f"{PROJECTED_CSV}.csv", csv_text(
        ["", "original_id", "sequence_length", *components],
        ([*row, *map(float, point)] for row, point in zip(mapping, coordinates, strict=True))))
    h5_path = stage_dir / f"{PROJECTED_H5}.h5"
    with atomic_output(h5_path) as tmp, h5py.File(tmp, "w") as out:
        for (key, original_id, _), point in zip(mapping, coordinates, strict=True):
            out.create_dataset(key, data=point).attrs["original_id"] = original_id
    return {PROJECTED_H5: str(h5_path)}


def _read_mapping(path: Path) -> list[tuple[str, str, str]]:
    """The rows of a mapping file: (new id, original id, sequence length)."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    return [(key, original_id, length) for key, original_id, length in rows[1:]]


def _project(protocol: str, options: dict[str, Any], vectors: np.ndarray, stage: str
             ) -> np.ndarray:
    """(N, D) -> (N, n_components) by `protocol`, with bio_embeddings' options."""
    settings = dict(options)
    if protocol == "tsne":
        manifold = import_extra("sklearn.manifold", "the project stage's tsne")
        settings["max_iter"] = settings.pop("n_iter")  # scikit-learn's newer name
        model = manifold.TSNE(**settings)
    else:
        umap = import_extra("umap", "the project stage's umap")
        model = umap.UMAP(**settings)
    try:
        return np.asarray(model.fit_transform(vectors), dtype=np.float32)
    except ValueError as err:
        raise ElmoError(f"stage {stage!r} ({protocol}) cannot project {len(vectors)} "
                        f"proteins with these options: {err}; change the option it names "
                        "(e.g. a perplexity below the number of proteins)") from None
