"""Plot helpers: a saved figure checked as a real image."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image


def check_png(path: Path, min_width: int = 200, min_height: int = 100) -> None:
    """Non-empty, a PNG signature, and decodes to an image of plausible size."""
    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(path)
    assert image.shape[0] >= min_height and image.shape[1] >= min_width
    assert image.std() > 0.01  # not a blank canvas
