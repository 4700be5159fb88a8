"""The `elmo` command's entry point (`elmo`, `python -m elmo`). It imports nothing heavy
before it can answer Ctrl-C: an interrupt while torch and the commands are imported ends the
command quietly with status 130, as one during a command does (`elmo.cli.main`)."""

import sys


def main() -> int:
    try:
        from elmo.cli import main as run_command  # torch and every command: seconds
    except KeyboardInterrupt:
        print("elmo: interrupted", file=sys.stderr)
        return 130
    return run_command()


if __name__ == "__main__":
    sys.exit(main())
