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

from elmo.bio.layout import StagePlan, StageRun, csv_text
from elmo.errors import ElmoError
from elmo.extras import import_extra
from elmo.io.atomic import atomic_output, atomic_write_text

PROJECTED_CSV = "projected_embeddings_file"
PROJECTED_H5 = "projected_reduced_embeddings_file"
INPUTS = ("projected_reduced_embeddings_file", "projected_embeddings_file",
          "reduced_embeddings_file")


def project_outputs(options: dict[str, Any]) -> dict[str, str]:
    """The output parameters the stage adds: name -> its file in the stage's directory."""
    return {PROJECTED_H5: f"{PROJECTED_H5}.h5"}


def check_project_stage(plan: StagePlan) -> None:
    """What the options, the stages it depends on and the number of proteins must agree on:
    vectors to project, the projection's own rules (scikit-learn's for t-SNE, umap-learn's
    for UMAP), and enough proteins for them."""
    options, where, n = plan.options, plan.where, plan.n_proteins
    source = _source(plan.parameters)
    if source is None:
        raise ElmoError(f"{where('depends_on')}: {_NO_VECTORS}")
    if source not in plan.coming and not Path(source).is_file():
        raise ElmoError(f"{where()}: {source} is not a file (per-protein vectors, HDF5)")
    if plan.protocol == "tsne":
        manifold = import_extra("sklearn.manifold", "the project stage's tsne")
        try:
            manifold.TSNE(**_settings(plan.protocol, options))._validate_params()
        except (TypeError, ValueError) as err:
            raise ElmoError(f"{where()}: scikit-learn's t-SNE refuses these options ({err}; "
                            "its max_iter is the option n_iter)") from None
        if options["perplexity"] >= n:
            raise ElmoError(f"{where('perplexity')}: t-SNE's perplexity must be less than the "
                            f"number of proteins, {n}; set a lower perplexity "
                            f"(bio_embeddings' default is 6)")
        # Barnes-Hut t-SNE draws in at most 3 components, its PCA start in at most n
        most = min(3, n) if n >= 2 else 0
    else:
        import_extra("umap", "the project stage's umap")
        distances = import_extra("umap.distances", "the project stage's umap")
        pynndescent = import_extra("pynndescent.distances", "the project stage's umap")
        if options["metric"] not in {*distances.named_distances, *pynndescent.named_distances}:
            raise ElmoError(f"{where('metric')}: umap-learn has no metric "
                            f"{options['metric']!r} (bio_embeddings' default: cosine)")
        if options["n_neighbors"] < 2:
            raise ElmoError(f"{where('n_neighbors')}: n_neighbors must be at least 2")
        if not 0 <= options["min_dist"] <= options["spread"]:
            raise ElmoError(f"{where('min_dist')}: min_dist must be between 0 and spread "
                            f"({options['spread']:g})")
        most = n - 2  # UMAP's spectral start needs n_components + 2 proteins
    if most < 1:
        raise ElmoError(f"{where()}: {plan.protocol} cannot project {n} protein"
                        f"{'s' * (n != 1)}; give more proteins or remove the stage")
    if not 1 <= options["n_components"] <= most:
        raise ElmoError(f"{where('n_components')}: {plan.protocol} draws {n} proteins in 1 to "
                        f"{most} components here, not {options['n_components']}")


def run_project_stage(run: StageRun) -> dict[str, str]:
    """Project the per-protein vectors named in the stage's input parameters; returns the
    output parameters it adds."""
    stage_dir, parameters = run.directory, run.parameters
    source = _source(parameters)
    if source is None:
        raise ElmoError(f"stage {stage_dir.name!r}: {_NO_VECTORS}")
    mapping = _read_mapping(Path(parameters["mapping_file"]))
    with h5py.File(source, "r") as f:
        vectors = np.stack([f[key][...].astype(np.float32) for key, _, _ in mapping])
    coordinates = _project(run.protocol, run.options, vectors, stage_dir.name)
    components = [f"component_{i}" for i in range(coordinates.shape[1])]
    atomic_write_text(run.place / f"{PROJECTED_CSV}.csv", csv_text(
        ["", "original_id", "sequence_length", *components],
        ([*row, *map(float, point)] for row, point in zip(mapping, coordinates, strict=True))))
    run.saved()
    files = project_outputs(run.options)
    with atomic_output(run.place / files[PROJECTED_H5]) as tmp, h5py.File(tmp, "w") as out:
        for (key, original_id, _), point in zip(mapping, coordinates, strict=True):
            out.create_dataset(key, data=point).attrs["original_id"] = original_id
    return {name: str(stage_dir / file) for name, file in files.items()}


_NO_VECTORS = ("no per-protein vectors to project; make it depend on an embed stage with "
               "'reduce: True' (depends_on: STAGE)")


def _source(parameters: dict[str, Any]) -> str | None:
    """The per-protein vectors (HDF5) the parameters name, if any."""
    return next((str(parameters[name]) for name in INPUTS
                 if str(parameters.get(name, "")).endswith(".h5")), None)


def _read_mapping(path: Path) -> list[tuple[str, str, str]]:
    """The rows of a mapping file: (new id, original id, sequence length)."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    return [(key, original_id, length) for key, original_id, length in rows[1:]]


def _settings(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options as the projection's class takes them."""
    settings = dict(options)
    if protocol == "tsne":
        settings["max_iter"] = settings.pop("n_iter")  # scikit-learn's newer name
    return settings


def _project(protocol: str, options: dict[str, Any], vectors: np.ndarray, stage: str
             ) -> np.ndarray:
    """(N, D) -> (N, n_components) by `protocol`, with bio_embeddings' options."""
    if protocol == "tsne":
        manifold = import_extra("sklearn.manifold", "the project stage's tsne")
        model = manifold.TSNE(**_settings(protocol, options))
    else:
        umap = import_extra("umap", "the project stage's umap")
        model = umap.UMAP(**_settings(protocol, options))
    try:
        return np.asarray(model.fit_transform(vectors), dtype=np.float32)
    except ValueError as err:
        raise ElmoError(f"stage {stage!r} ({protocol}) cannot project {len(vectors)} "
                        f"proteins with these options: {err}; change the option it names "
                        "(e.g. a perplexity below the number of proteins)") from None
