"""The measured tables of the docs, rendered from their results files; the shipped models' cards
from their `card.json`.

A page marks a table with `<!-- table: NAME -->` ... `<!-- /table -->`, where NAME is the file
`benchmarks/results/NAME.json`:

    {"title": "...", "command": "the command that measured it", "host": "CPU, cores, ...",
     "versions": {"torch": "2.13.0+cpu", ...}, "measured": "YYYY-MM-DD",
     "columns": ["preset", "tokens/s", ...], "formats": [null, ",.0f", ...],
     "rows": [["small", 13435, ...], ...], "note": "optional, one line under the table"}

A number is written with its column's format (Python's format spec; null: as is), a string as
it is. Under each table one line names the command, host and versions, and links the file.

    python tools/render_docs.py           # rewrite every marked table and every model card
    python tools/render_docs.py --check   # list what differs, exit 1 (tests/test_render_docs.py)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

from elmo.io.atomic import atomic_write_text

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
PAGES = ("README.md", "docs/*.md", "benchmarks/README.md")
PRETRAINED = REPO / "src" / "elmo" / "pretrained"
BLOCK = re.compile(r"(<!-- table: (?P<name>[\w./-]+) -->\n)(?P<body>.*?)(<!-- /table -->)",
                   re.DOTALL)


def shown(path: Path) -> str:
    """`path` as messages name it: relative to the repository where it is inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def cell(value: object, spec: str | None) -> str:
    """One table cell: a number in its column's format, anything else as written."""
    if spec and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return "" if value is None else str(value)


def source_line(name: str, result: dict, page: Path) -> str:
    """The line under a table: where the figures come from, linked to the results file."""
    link = os.path.relpath(RESULTS / f"{name}.json", page.parent).replace(os.sep, "/")
    versions = ", ".join(f"{k} {v}" for k, v in result.get("versions", {}).items())
    parts = [f"`{result['command']}`", result["host"], versions]
    return f"Measured with {'; '.join(p for p in parts if p)} ([{name}]({link}))."


def render_table(name: str, page: Path) -> str:
    """The Markdown of results file `name` as it appears on `page`."""
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"{shown(page)}: no results file {shown(path)} for "
                         f"<!-- table: {name} -->")
    result = json.loads(path.read_text(encoding="utf-8"))
    columns, formats = result["columns"], result.get("formats") or [None] * len(result["columns"])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in result["rows"]:
        if len(row) != len(columns):
            raise SystemExit(f"{shown(path)}: a row has {len(row)} cells for "
                             f"{len(columns)} columns: {row}")
        cells = (cell(v, f) for v, f in zip(row, formats, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
    note = f"{result['note']}\n" if result.get("note") else ""
    return "\n".join(lines) + "\n\n" + note + source_line(name, result, page) + "\n"


def render_page(page: Path) -> str:
    """`page` with every marked table rendered from its results file."""
    return BLOCK.sub(lambda m: m.group(1) + render_table(m.group("name"), page) + m.group(4),
                     page.read_text(encoding="utf-8"))


def card_tool():
    """tools/package_default_model.py, which renders a model card from its card.json."""
    spec = importlib.util.spec_from_file_location(
        "package_default_model", REPO / "tools" / "package_default_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rendered() -> dict[Path, str]:
    """Every rendered file and the text the results and cards give it."""
    pages = sorted({p for pattern in PAGES for p in REPO.glob(pattern)})
    texts = {page: render_page(page) for page in pages}
    tool = card_tool()
    for card_file in sorted(PRETRAINED.glob("*/card.json")):
        card = json.loads(card_file.read_text(encoding="utf-8"))
        texts[card_file.parent / tool.CARD_TEXT] = tool.render(card_file.parent, card)
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; list the files that differ and exit 1 if any")
    args = parser.parse_args(argv)
    texts = rendered()
    stale = [path for path, text in texts.items()
             if not path.is_file() or path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"{shown(path)} differs from its results: "
                  "run python tools/render_docs.py", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        atomic_write_text(path, texts[path])
        print(f"wrote {shown(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
