"""The run folder shared by `elmo train` and `elmo task train`: its claim (one writer, a
marker saying what kind of run it holds), the same-run check on resume, the metrics log and
the checkpoint of plain state."""

from elmo.runs.checkpoint import (
    CHECKPOINT_NAME,
    capture_rng,
    load_checkpoint,
    read_checkpoint_meta,
    restore_rng,
    save_checkpoint,
)
from elmo.runs.folder import (
    MARKER_NAME,
    PRETRAINING,
    TASK,
    changed_options,
    claim_run_folder,
    mark_run_folder,
    run_kind,
)
from elmo.runs.metrics import METRICS_NAME, MetricsLog

__all__ = [
    "CHECKPOINT_NAME",
    "MARKER_NAME",
    "METRICS_NAME",
    "PRETRAINING",
    "TASK",
    "MetricsLog",
    "capture_rng",
    "changed_options",
    "claim_run_folder",
    "load_checkpoint",
    "mark_run_folder",
    "read_checkpoint_meta",
    "restore_rng",
    "run_kind",
    "save_checkpoint",
]
