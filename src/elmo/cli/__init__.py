"""The `elmo` command. Each subcommand lives in its own module with `add_parser` and `run`."""

from __future__ import annotations

import argparse
import os
import select
import sys
import warnings
from collections.abc import Sequence

import torch

from elmo import __version__
from elmo.cli import (
    analyze,
    embed,
    export,
    info,
    merge,
    perplexity,
    prepare_corpus,
    serve,
    task,
    train,
    vocab,
)
from elmo.cli import bio_embeddings as bio_embeddings_command
from elmo.device import default_threads
from elmo.errors import ElmoError

SUBCOMMANDS = {
    "embed": embed,
    "merge": merge,
    "train": train,
    "vocab": vocab,
    "prepare-corpus": prepare_corpus,
    "perplexity": perplexity,
    "export": export,
    "task": task,
    "analyze": analyze,
    "info": info,
    "serve": serve,
    "bio-embeddings": bio_embeddings_command,
}

# Commands whose models are small: one thread is as fast, and a second one, on a host whose
# cores are busy, makes them several times slower (OpenMP threads wait for each other).
SMALL_MODEL_COMMANDS = ("task", "analyze")


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"elmo: warning: {message}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo", description="ELMo: deep contextualized word representations."
    )
    parser.add_argument("--version", action="version", version=f"elmo {__version__}")
    threads_help = ("CPU threads for torch (default: 1 for task and analyze, whose models "
                    "are small; for the others one per idle core at start: one per core on "
                    "an idle machine, fewer on a busy one, with a note)")
    # before or after COMMAND; two names, as a subcommand's default would hide the first
    parser.add_argument("--threads", type=int, metavar="N", dest="threads_before",
                        help=threads_help)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        module.add_parser(sub, name)
    for command_parser in sub.choices.values():
        command_parser.add_argument("--threads", type=int, metavar="N", help=threads_help)
        # errors found after parsing print this subcommand's usage, not the top-level one
        command_parser.set_defaults(command_parser=command_parser)
        for action_parser in _actions_of(command_parser):  # `elmo task train`, ...
            # here too; SUPPRESS: no default hides a --threads given before the action
            action_parser.add_argument("--threads", type=int, metavar="N",
                                       default=argparse.SUPPRESS, help=threads_help)
            action_parser.set_defaults(command_parser=action_parser)
    return parser


def _actions_of(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of a command's actions (`elmo analyze probe`), however deeply nested."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _actions_of(child) or [child]
    return found


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """The command: returns the process exit status (0 ok, 1 user error, 130 interrupted).
    A reader of stdout that leaves early (`elmo info | head -3`) ends the command quietly
    with status 1, as Python's docs recommend for SIGPIPE. `prog`: the name of a command
    run as a program of its own (`bio_embeddings`; argv[0] names the command), which its
    usage and errors show."""
    try:
        try:
            return _main(argv, prog)
        finally:
            sys.stdout.flush()  # meet a reader that left here, not at the interpreter's exit
    except BrokenPipeError:
        # what is still buffered goes nowhere, and the flush at exit raises nothing again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:  # outside the command's run: parsing, flushing
        print("elmo: interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None, prog: str | None) -> int:
    parser = build_parser()
    if prog is not None and argv:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[argv[0]].prog = prog
    args = parser.parse_args(argv)
    threads = args.threads if args.threads is not None else args.threads_before
    if threads is None:
        chosen = default_threads(small_model=args.command in SMALL_MODEL_COMMANDS)
        threads = chosen.threads
        if chosen.note and not getattr(args, "quiet", False):
            print(f"elmo: note: {chosen.note}", file=sys.stderr)
    if threads is not None:
        if threads < 1:
            args.command_parser.error("--threads must be at least 1")
        torch.set_num_threads(threads)
    warnings.showwarning = _show_warning
    try:
        return args.run(args, args.command_parser) or 0
    except KeyboardInterrupt:
        print("elmo: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except (ElmoError, ValueError, OSError) as err:
        if os.environ.get("ELMO_DEBUG") or isinstance(err, BrokenPipeError) and _stdout_gone():
            raise
        print(f"elmo: error: {_describe(err)}", file=sys.stderr)
        return 1


def _describe(err: Exception) -> str:
    """An error's message; for an OSError from the system, what failed on which file."""
    if isinstance(err, OSError) and err.strerror and err.filename:
        return f"{err.filename}: {err.strerror}"
    return str(err)


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (polled as an error), as opposed
    to a broken pipe to another process or a socket, which is an error to report."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
    except (AttributeError, ValueError, OSError):  # no poll (Windows), or no file behind stdout
        return False
    return any(event & select.POLLERR for _, event in poller.poll(0))
