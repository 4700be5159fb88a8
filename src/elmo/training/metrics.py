"""metrics.jsonl: one JSON object per line, each with the `step` it describes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from elmo.io.atomic import atomic_write_text

METRICS_NAME = "metrics.jsonl"


class MetricsLog:
    """Appends records to a JSON-lines file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def append(self, record: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def truncate_after(self, step: int) -> None:
        """Drop records of steps after `step` (written after the checkpoint a run resumes)."""
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a kill
                continue
            if record.get("step", 0) <= step:
                kept.append(line + "\n")
        atomic_write_text(self.path, "".join(kept))
