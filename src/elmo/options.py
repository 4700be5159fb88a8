"""Options: fields of a settings record (a dataclass) that carry their command-line flag.

A record's field made by `option` holds, in its metadata, what its flag says and how a value is
read: `elmo.cli.common.add_option` makes the flag from it, so a command's options are the
fields of the records that own them (EmbedSettings, TrainConfig, the analyses' settings), and a
new option is one field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, field
from typing import Any


def option(default: Any = MISSING, help: str = "", *, default_factory: Any = MISSING,
           choices: tuple | dict | None = None, parse: Callable[[str], Any] | None = None,
           metavar: str | None = None, negatable: bool = False, nargs: str | None = None,
           required: bool = False, flag: str | None = None, positional: bool = False,
           **more: Any) -> Any:
    """A field and its flag: `default` (or `default_factory`: no default on the command line);
    `help`, what the flag says (with its default); `choices`, or `parse` (str -> value, a
    ValueError naming a bad one), how a value is read; a bool is a switch (--NAME, or
    --no-NAME where it is on by default; `negatable`: both, None if neither); `nargs`,
    `required`, `metavar` as argparse takes them; `flag`: another spelling than --NAME;
    `positional`: an argument without a flag. `more`: what else the record says of it."""
    return field(default=default, default_factory=default_factory, metadata={
        "help": help, "choices": choices, "parse": parse, "metavar": metavar,
        "negatable": negatable, "nargs": nargs, "required": required, "flag": flag,
        "positional": positional, **more})


def option_as(source: Field, **changes: Any) -> Any:
    """A field of another record with the option of `source` (a field of one record), its
    default and metadata, `changes` applied (help=..., ...)."""
    meta = {**source.metadata, **changes}
    return field(default=source.default, default_factory=source.default_factory,
                 metadata=meta)


def is_option(f: Field) -> bool:
    """Whether the field `f` carries a flag (made by `option`)."""
    return f.init and "help" in f.metadata
