"""The one error type of the ``sbtf`` command: a problem reported as one line, with an exit code."""
from __future__ import annotations


class CLIError(Exception):
    """
    A problem to report to the user as one line (no traceback).

    :param message: (str) what went wrong, and what would be valid
    :param exit_code: (int) 2 for bad input, 1 when the work could not be done
    """

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def exc_text(exc: BaseException) -> str:
    """An exception's message on one line, without SB2's 'Error: ' prefix."""
    text = " ".join(str(exc).split())
    return text[len("Error: "):] if text.startswith("Error: ") else text
