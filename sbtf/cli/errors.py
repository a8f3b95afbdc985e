"""The one error type of the ``sbtf`` command: a problem reported as one line, with an exit code."""
from __future__ import annotations

import lzma
import struct
import zipfile
import zlib
from typing import Tuple


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


#: what the decoders below sbtf's readers raise on damaged bytes (the loaders turn these into ModelFileError; the
#: command catches them too, so that a damaged file is one line, never a traceback)
DECODER_ERRORS: Tuple[type, ...] = (EOFError, RecursionError, lzma.LZMAError, zlib.error, struct.error,
                                    zipfile.BadZipFile)
#: what loading a file may raise: the decoders' errors and the ones a malformed value gives
FILE_READ_ERRORS: Tuple[type, ...] = (ValueError, TypeError, KeyError, IndexError, OverflowError,
                                      OSError) + DECODER_ERRORS
#: longest error message printed
MAX_MESSAGE_CHARS = 2000


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, bounded to :data:`MAX_MESSAGE_CHARS`."""
    text = exc_text(exc)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 3] + "..."


def file_error(exc: BaseException, what: str) -> CLIError:
    """
    The one-line error for a file that could not be read (exit code 2: bad input).

    :param exc: (BaseException) what the loader raised (a ``ModelFileError``, or one of :data:`FILE_READ_ERRORS`)
    :param what: (str) what was being done (``"cannot load logs/ppo2/x.zip"``)
    :return: (CLIError)
    """
    from sbtf.common.file_errors import ModelFileError  # pylint: disable=import-outside-toplevel

    detail = one_line(exc)
    if not isinstance(exc, (ModelFileError, OSError)):  # an untyped decoder error: say what kind it was
        detail = "the file is damaged ({}: {})".format(type(exc).__name__, detail or "no detail")
    return CLIError("{}: {}".format(what, detail))
