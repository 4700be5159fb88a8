"""The `elmo` command. Each subcommand lives in its own module with `add_parser` and `run`."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from elmo.cli import embed, export, merge, perplexity, task, train, vocab
from elmo.errors import ElmoError
from elmo.hub import DownloadError

SUBCOMMANDS = {
    "embed": embed,
    "merge": merge,
    "train": train,
    "vocab": vocab,
    "perplexity": perplexity,
    "export": export,
    "task": task,
}


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"elmo: warning: {message}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo", description="ELMo: deep contextualized word representations."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        module.add_parser(sub, name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns the process exit status (0 ok, 1 user error, 130 interrupted)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.showwarning = _show_warning
    try:
        return args.run(args, parser) or 0
    except KeyboardInterrupt:
        print("elmo: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except (ElmoError, DownloadError, FileNotFoundError, ValueError) as err:
        if os.environ.get("ELMO_DEBUG"):
            raise
        print(f"elmo: error: {err}", file=sys.stderr)
        return 1
