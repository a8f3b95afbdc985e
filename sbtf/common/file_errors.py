"""The error family for files sbtf cannot or will not open, and the resource limits of every read.

Every way a model, statistics, replay-buffer or dataset file can be wrong raises a subclass of
:class:`ModelFileError` (itself a ``ValueError``, as sbtf's loaders raised before), with a message that
says what was wrong and what to do:

* :class:`CorruptedFileError` — truncated, damaged or not the kind of file expected;
* :class:`UnsafeFileError` — the file asks for code to run (a pickled function or class that is not on
  sbtf's allow-list, a class that is not registered); only ``allow_pickle=True`` opens that door;
* :class:`FileLimitError` — the file would take more memory, nesting or time than a real file of that
  kind can (a zip bomb, an array header announcing gigabytes, a pickle building huge containers);
* :class:`ModelDataError` — the model's ``data`` does not match the declared schema of its algorithm
  (wrong type, impossible value);
* :class:`WrongAlgorithmError` — a valid file of another algorithm.

:class:`LoadLimits` holds the limits; :func:`load_limits` changes them for a block of code and
:func:`set_load_limits` for the process.
"""
from __future__ import annotations

import contextlib
import dataclasses
import reprlib
import threading
from typing import Any, Iterator

__all__ = [
    "ModelFileError", "CorruptedFileError", "UnsafeFileError", "FileLimitError", "ModelDataError",
    "WrongAlgorithmError", "ParameterShapeError", "MissingParametersError", "LoadLimits", "get_load_limits",
    "set_load_limits", "load_limits",
    "describe_value",
]


class _BoundedRepr(reprlib.Repr):
    """``reprlib`` with small limits everywhere: its cost and its output stay bounded whatever the value holds."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 4  # at most 6 ** 4 leaves of 60 characters are ever formatted
        self.maxtuple = self.maxlist = self.maxarray = self.maxset = self.maxfrozenset = self.maxdeque = 6
        self.maxdict = 6
        self.maxstring = 60
        self.maxlong = 40
        self.maxother = 60

    def repr_ndarray(self, value: Any, level: int) -> str:  # numpy arrays: shape and dtype, never the data
        return f"<array shape={tuple(value.shape)!r} dtype={value.dtype}>"


_BOUNDED = _BoundedRepr()


def describe_value(value: Any, limit: int = 200) -> str:
    """
    A short, bounded text for a value read from an untrusted file, for error messages.

    Never formats more than a few elements of any container, nor more than ``limit`` characters in all, so a
    hostile value (a huge string shared a million times, a deep nest) costs nothing to report.

    :param value: the value to describe
    :param limit: (int) most characters returned
    :return: (str) e.g. ``"['aaaa...aaa', 'aaaa...aaa', ...] (list)"``
    """
    try:
        text = _BOUNDED.repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    if len(text) > limit:
        text = text[: max(limit - 3, 0)] + "..."
    return text


class ModelFileError(ValueError):
    """A file that sbtf cannot or will not load (base class of every file error)."""


class CorruptedFileError(ModelFileError):
    """The file is truncated, damaged, or not the kind of file that was expected."""


class UnsafeFileError(ModelFileError):
    """The file asks for code to run (only ``allow_pickle=True`` allows that, for files you trust)."""


class FileLimitError(ModelFileError):
    """The file would need more memory, nesting depth or items than the configured limits allow."""


class ModelDataError(ModelFileError):
    """A value in the model's data does not have the type its algorithm declares."""


class WrongAlgorithmError(ModelFileError):
    """The file holds a model of another algorithm."""


class ParameterShapeError(ModelDataError):
    """A stored parameter does not have the shape the model needs (``name``, ``stored_shape``, ``model_shape``)."""

    def __init__(self, message: str, name: str = "", stored_shape: tuple = (), model_shape: tuple = ()):
        super().__init__(message)
        self.name = name
        self.stored_shape = tuple(stored_shape)
        self.model_shape = tuple(model_shape)


class MissingParametersError(ModelDataError, RuntimeError):
    """The parameters to load lack some of the model's (``missing``: their names). Also a ``RuntimeError``, as in
    stable-baselines 2.x's ``load_parameters``."""

    def __init__(self, message: str, missing: tuple = ()):
        super().__init__(message)
        self.missing = tuple(missing)


@dataclasses.dataclass(frozen=True)
class LoadLimits:
    """
    Resource limits applied while reading any file (see ``docs/security.md``).

    :param max_file_bytes: (int) largest file (or zip member, decompressed) read at all
    :param max_array_bytes: (int) largest total of array data one file may hold when the expected sizes are
        not known from the model (parameters are also checked against the model's own shapes)
    :param max_json_bytes: (int) largest JSON member (``data``, ``parameter_list``, ``sbtf_format``)
    :param max_depth: (int) deepest nesting of JSON values or pickled containers
    :param max_items: (int) most items in one decoded file: container elements, pickle memo entries, every object
        a pickle pushes (an empty set counts 4), JSON values counted before parsing (an object or array counts 4),
        the probes of keys that share a hash value
    :param max_nonstring_keys: (int) most non-string dict keys / set elements per container (their hashes can
        be chosen to collide, which would make loading quadratic)
    :param max_string_bytes: (int) longest single string or bytes value in a pickle
    :param max_compression_ratio: (int) largest decompressed/compressed size ratio of a zip member bigger than
        16 MiB (real weights compress about 1.1x; a zip bomb thousands of times); all the members of one archive
        together may inflate to 16 MiB + this ratio x the archive's size. Whatever the ratio, no member ever
        inflates past the size it declares (``sbtf.common.fileio.safe_zip``)
    :param max_space_elements: (int) most elements of one observation/action space read from a file (its
        parameters bound it further: ``sbtf.common.fileio.load_budget``)
    :param space_elements_floor: (int) spaces up to this many elements are accepted whatever parameters the file
        stores (beyond it, a space may not have more elements than the file's largest parameter array)
    """

    max_file_bytes: int = 4 << 30
    max_array_bytes: int = 2 << 30
    max_json_bytes: int = 64 << 20
    max_depth: int = 64
    max_items: int = 2_000_000
    max_nonstring_keys: int = 4096
    max_string_bytes: int = 1 << 30
    max_compression_ratio: int = 50
    max_space_elements: int = 1 << 24
    space_elements_floor: int = 1 << 16


_STATE = threading.local()
_PROCESS_LIMITS = [LoadLimits()]


def get_load_limits() -> LoadLimits:
    """The limits in force (the innermost :func:`load_limits` block, else the process-wide ones)."""
    stack = getattr(_STATE, "stack", None)
    return stack[-1] if stack else _PROCESS_LIMITS[0]


def set_load_limits(**changes: int) -> LoadLimits:
    """
    Change the process-wide limits, e.g. ``set_load_limits(max_array_bytes=8 << 30)`` for a huge replay buffer.

    :return: (LoadLimits) the previous limits
    """
    previous = _PROCESS_LIMITS[0]
    _PROCESS_LIMITS[0] = dataclasses.replace(previous, **changes)
    return previous


@contextlib.contextmanager
def load_limits(**changes: int) -> Iterator[LoadLimits]:
    """Change the limits inside a ``with`` block (this thread only)."""
    stack = getattr(_STATE, "stack", None)
    if stack is None:
        stack = _STATE.stack = []
    limits = dataclasses.replace(get_load_limits(), **changes)
    stack.append(limits)
    try:
        yield limits
    finally:
        stack.pop()
