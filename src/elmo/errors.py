"""Errors caused by the user's input: the CLI prints their message, never a traceback."""


class ElmoError(Exception):
    """A problem with the user's input or environment, with a message that says the fix."""


class InputFileError(ElmoError, ValueError):
    """An input text file that cannot be read as asked (names the file and line)."""
