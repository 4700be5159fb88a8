"""metrics.jsonl: one JSON object per line, each with the count it describes (the `step` of
pretraining, the `epoch` of a task run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from elmo.io.atomic import atomic_write_text

METRICS_NAME = "metrics.jsonl"


class MetricsLog:
    """Appends records to a JSON-lines file; `counter` names the key that orders them."""

    def __init__(self, path: str | Path, counter: str) -> None:
        self.path, self.counter = Path(path), counter

    def append(self, record: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def truncate_after(self, count: int) -> None:
        """Drop the records after `count` (written after the checkpoint a run resumes)."""
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a kill
                continue
            if record.get(self.counter, 0) <= count:
                kept.append(line + "\n")
        atomic_write_text(self.path, "".join(kept))
