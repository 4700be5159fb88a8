"""Errors caused by the user's input: the CLI prints their message, never a traceback."""


class ElmoError(Exception):
    """A problem with the user's input or environment, with a message that says the fix."""


class InputFileError(ElmoError, ValueError):
    """An input text file that cannot be read as asked (names the file and line)."""


class ModelNotFoundError(ElmoError, FileNotFoundError):
    """A model name or path that names no model, or a model file that is missing."""


class ModelFileError(ElmoError, ValueError):
    """A model file that is unreadable or does not fit the rest of the model (names it)."""


def raise_failed(checks: list[tuple[bool, str]], error: type[Exception] = ElmoError) -> None:
    """Raise `error` naming every message whose condition is false; nothing if all hold."""
    failed = [message for ok, message in checks if not ok]
    if failed:
        raise error("; ".join(failed))
