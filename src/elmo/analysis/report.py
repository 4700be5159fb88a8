"""Plain-text tables for the analyses' console output."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]], digits: int = 1) -> str:
    """Columns padded to their widest cell: numbers right-aligned (floats with `digits`
    decimals), text left-aligned."""
    def cell(value: object) -> str:
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    numeric = [all(isinstance(row[i], int | float) for row in rows) for i in range(len(header))]
    cells = [list(header)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.rjust(w) if right else c.ljust(w)
                  for c, w, right in zip(row, widths, numeric, strict=True)).rstrip()
        for row in cells)
