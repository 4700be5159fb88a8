"""The options of `elmo train`, `elmo analyze` (each analysis) and `elmo task` (each action)
as data: names, defaults, choices, how values are read, help. `python -m
tests.helpers.cli_options [COMMAND ...]` writes them (those of COMMAND, e.g. task, the others
kept as they are) to tests/cli_options.json, which tests/test_cli_options.py compares with
today's parsers."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from elmo.cli import build_parser

FIXTURE = Path(__file__).resolve().parents[1] / "cli_options.json"
COMMANDS = ("train", "analyze", "task")
SKIPPED = {"help", "threads", "command_parser"}  # argparse's own and the top level's


def command_options(names: tuple[str, ...] = COMMANDS) -> dict[str, dict[str, dict[str, Any]]]:
    """{"train" | "analyze ANALYSIS" | "task ACTION": {first option string or dest: what it
    is}}, for the commands of `names`."""
    commands = _subparsers(build_parser()).choices
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for command in names:
        parser = commands[command]
        analyses = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        named = {command: parser} if not analyses else {
            f"{command} {name}": child for name, child in analyses[0].choices.items()}
        found.update({name: _options(child) for name, child in named.items()})
    return found


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _options(parser: argparse.ArgumentParser) -> dict[str, dict[str, Any]]:
    options = {}
    for action in parser._actions:
        if action.dest in SKIPPED or isinstance(action, argparse._SubParsersAction):
            continue
        name = action.option_strings[0] if action.option_strings else action.dest
        options[name] = {
            "option_strings": list(action.option_strings), "dest": action.dest,
            "action": type(action).__name__, "default": _plain(action.default),
            "choices": _plain(action.choices), "nargs": action.nargs,
            "required": action.required, "metavar": action.metavar,
            "type": getattr(action.type, "__name__", None), "help": action.help,
            "group": _group(parser, action),
        }
    return options


def _group(parser: argparse.ArgumentParser, action: argparse.Action) -> str | None:
    return next((g.title for g in parser._action_groups if action in g._group_actions), None)


def _plain(value: Any) -> Any:
    """`value` as JSON holds it (choices of a table: its keys, in order)."""
    if isinstance(value, dict):
        return list(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


if __name__ == "__main__":
    wanted = tuple(sys.argv[1:]) or COMMANDS
    kept = json.loads(FIXTURE.read_text(encoding="utf-8")) if FIXTURE.exists() else {}
    captured = command_options(wanted)
    merged = {**{k: v for k, v in kept.items() if k.split()[0] not in wanted}, **captured}
    ordered = {k: merged[k] for command in COMMANDS for k in merged if k.split()[0] == command}
    commands = ",\n".join(  # one line per option, in the parser's order
        f"{json.dumps(command)}: {{\n" + ",\n".join(
            f"  {json.dumps(name)}: {json.dumps(option, sort_keys=True)}"
            for name, option in options.items()) + "\n}"
        for command, options in ordered.items())
    FIXTURE.write_text("{\n" + commands + "\n}\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")
