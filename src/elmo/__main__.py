"""The `elmo` command's entry point (`elmo`, `python -m elmo`). It imports nothing heavy
before it can answer Ctrl-C: an interrupt while torch and the commands are imported ends the
command quietly with status 130, as one during a command does (`elmo.cli.main`)."""

import signal
import sys
import threading


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """`elmo ARGS` (`argv`: sys.argv[1:] if None); `prog` names a command run as a program
    of its own."""
    interrupted: list[int] = []

    def on_interrupt(signum: int, frame: object) -> None:
        interrupted.append(signum)  # kept even where an import's bare `except:` swallows
        raise KeyboardInterrupt  # the exception (seen: Ctrl-C lost, the command ran on)

    watch = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_interrupt) if watch else None
    try:
        from elmo.cli import main as run_command  # torch and every command: seconds
    except KeyboardInterrupt:
        interrupted.append(signal.SIGINT)
    finally:
        if watch:
            signal.signal(signal.SIGINT, previous)
    if interrupted:
        print("elmo: interrupted", file=sys.stderr)
        return 130
    return run_command(argv, prog)


def bio_embeddings() -> int:
    """The `bio_embeddings` console script: bio_embeddings' own command line, which is
    `elmo bio-embeddings`."""
    return main(["bio-embeddings", *sys.argv[1:]], prog="bio_embeddings")


if __name__ == "__main__":
    sys.exit(main())
