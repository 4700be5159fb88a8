"""The shipped models' perplexities, reproduced: every figure of each card (each text of
`card.json`'s "perplexity", whole and its first sentences alone) scored again by the command the
card names, `elmo perplexity NAME FILE --json`, and compared with the card.

    python benchmarks/shipped_perplexity.py [NAME ...]    # default: every shipped model
    python benchmarks/shipped_perplexity.py --quick       # the first sentences only (seconds)

The tests check only `default` on the first sentences of WikiText-2 test (seconds); the whole
texts take minutes (WikiText-2 test alone about 6 on 2 CPU cores). A card's texts under
`../shared` are read from there ($ELMO_SHARED); a text not on this machine (e.g. `runs/...`, the
split of the run that made the model) is reported missing. Prints a table, writes
benchmarks/results/shipped_perplexity.json, and exits 1 if a token count differs from the card
or a perplexity by more than 1e-4 (relative).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, SHARED, machine_info, results_file, write_json

from elmo.loading.resolve import CARD_NAME, shipped_models, shipped_root

DIRECTIONS = ("forward", "backward", "average")


def card_path(shown: str) -> Path:
    """A text as the card names it (relative to the repository; data as `../shared/...`)."""
    path = Path(shown)
    if path.parts[:2] == ("..", "shared"):
        return SHARED.joinpath(*path.parts[2:])
    return REPO / path


def perplexity_command(name: str, text: Path) -> dict[str, Any]:
    """`elmo perplexity NAME TEXT --json`, what it printed and how long it took."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "elmo", "perplexity", name, str(text), "--json",
                           "--quiet"], capture_output=True, text=True, check=True)
    return {**json.loads(done.stdout), "seconds": round(time.perf_counter() - start, 1)}


def compare(card: dict[str, Any], now: dict[str, Any]) -> bool:
    return now["tokens"] == card["tokens"] and all(
        abs(now[d] - card[d]) <= 1e-4 * abs(card[d]) for d in DIRECTIONS)


def check_model(name: str, work: Path, quick: bool) -> list[dict[str, Any]]:
    """One row per figure of NAME's card (quick: the first sentences only): the card's, now's,
    and whether they agree."""
    card = json.loads((shipped_root() / name / CARD_NAME).read_text())
    rows = []
    for text, recorded in card["perplexity"].items():
        path = card_path(recorded["file"])
        parts = [] if quick else [("whole", recorded, path)]
        if first := recorded.get("first_sentences"):
            first_file = work / f"{name}-{text}-first.txt".replace(" ", "_")
            if path.exists():
                lines = [line for line in path.read_text(encoding="utf-8").splitlines()
                         if line.strip()]
                first_file.write_text("\n".join(lines[: first["sentences"]]) + "\n",
                                      encoding="utf-8")
            parts.append((f"first {first['sentences']} sentences", first, first_file))
        for part, figures, file in parts:
            row = {"model": name, "text": text, "part": part, "file": recorded["file"],
                   "card": {k: figures[k] for k in (*DIRECTIONS, "tokens")}}
            if not file.exists():
                row["missing"] = str(path)
            else:
                row["now"] = perplexity_command(name, file)
                row["agrees"] = compare(row["card"], row["now"])
            rows.append(row)
            print(table_row(row), flush=True)
    return rows


def table_row(row: dict[str, Any]) -> str:
    card = " / ".join(f"{row['card'][d]:.2f}" for d in DIRECTIONS)
    if "missing" in row:
        return f"| {row['model']} | {row['text']} | {row['part']} | {card} | missing | | |"
    now = " / ".join(f"{row['now'][d]:.2f}" for d in DIRECTIONS)
    return (f"| {row['model']} | {row['text']} | {row['part']} | {card} | {now} | "
            f"{row['now']['seconds']} | {'yes' if row['agrees'] else 'NO'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", metavar="NAME",
                        help="shipped models (default: all of them)")
    parser.add_argument("--quick", action="store_true",
                        help="only the first sentences of each text (seconds, not minutes)")
    parser.add_argument("--out", type=Path, help="JSON results (default: benchmarks/results/; "
                        "quick: under $TMPDIR/elmo-bench-quick/)")
    args = parser.parse_args()
    print("| model | text | part | card (fwd / bwd / avg) | now | seconds | agrees |\n"
          "|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [row for name in args.models or shipped_models()
                for row in check_model(name, Path(tmp), args.quick)]
    write_json(args.out or results_file("shipped_perplexity.json", args.quick),
               {"machine": machine_info(), "rows": rows})
    if any(row.get("agrees") is False for row in rows):
        sys.exit("some figures differ from their card")


if __name__ == "__main__":
    main()
