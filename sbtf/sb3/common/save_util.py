"""stable-baselines3's ``common.save_util`` pickle helpers: ``save_to_pkl`` / ``load_from_pkl`` (used for replay
buffers) and ``open_path``. ``load_from_pkl`` unpickles: read only files you trust (sbtf's own model files are zip
archives read without pickle; see docs/security.md)."""
from __future__ import annotations

import io
import pathlib
import pickle
import warnings
from typing import Any, Optional, Union

__all__ = ["open_path", "save_to_pkl", "load_from_pkl"]


def open_path(path: Union[str, pathlib.Path, io.BufferedIOBase], mode: str, verbose: int = 0,
              suffix: Optional[str] = None) -> Any:
    """
    Open ``path`` in binary mode for reading (``"r"``) or writing (``"w"``), as SB3's ``open_path``. An open file
    object is returned as is (a ``ValueError`` if it is closed or does not allow ``mode``). Reading tries the path
    as given, then with ``.{suffix}``; writing appends ``.{suffix}`` to a path without an extension, writes to
    ``{path}_2`` (with a warning) when the path is a folder, and creates a missing parent folder (with a warning).

    :param path: (str, Path or file object) where to read or write
    :param mode: (str) ``"r"``/``"read"`` or ``"w"``/``"write"``
    :param verbose: (int) 2: warn when a suffix is tried or a file is overwritten
    :param suffix: (str) the extension to try (reading) or add (writing) when the path has none, e.g. ``"pkl"``
    """
    if not isinstance(path, (str, pathlib.Path, io.IOBase)):
        raise TypeError(f"open_path takes a str, a pathlib.Path or an open binary file, not {type(path).__name__}")
    mode = {"read": "r", "write": "w", "rb": "r", "wb": "w"}.get(mode, mode)
    if mode not in ("r", "w"):
        raise ValueError(f"mode {mode!r} is not 'r' (read) or 'w' (write)")
    if isinstance(path, io.IOBase):
        if path.closed:
            raise ValueError("the file object given to open_path is closed: open it again")
        if (mode == "r" and not path.readable()) or (mode == "w" and not path.writable()):
            raise ValueError(f"the file object given cannot be used in mode {mode!r}")
        return path
    path = pathlib.Path(path)
    if mode == "r":
        if path.exists() or not suffix:
            return open(path, "rb")
        fallback = pathlib.Path(f"{path}.{suffix}")
        if verbose >= 2:
            warnings.warn(f"Path '{path}' not found. Attempting {fallback}.")
        return open(fallback, "rb")
    if suffix and path.suffix == "":
        path = pathlib.Path(f"{path}.{suffix}")
    if path.is_dir():
        warnings.warn(f"Path '{path}' is a folder. Will save instead to {path}_2")
        return open_path(pathlib.Path(f"{path}_2"), "w", verbose)
    if not path.parent.exists():
        warnings.warn(f"The folder '{path.parent}' does not exist: creating it.")
        path.parent.mkdir(parents=True, exist_ok=True)
    elif path.is_file() and verbose >= 2:
        warnings.warn(f"Path '{path}' exists, will overwrite it.")
    return open(path, "wb")


def save_to_pkl(path: Union[str, pathlib.Path, io.BufferedIOBase], obj: Any, verbose: int = 0) -> None:
    """
    Pickle ``obj`` to ``path`` (``.pkl`` added when it has no extension).

    :param path: (str, Path or file object) where to write
    :param obj: the object to save
    :param verbose: (int) verbosity of :func:`open_path`
    """
    with open_path(path, "w", verbose=verbose, suffix="pkl") as file_handler:
        pickle.dump(obj, file_handler, protocol=pickle.HIGHEST_PROTOCOL)


def load_from_pkl(path: Union[str, pathlib.Path, io.BufferedIOBase], verbose: int = 0) -> Any:
    """
    Unpickle the object saved at ``path`` (``.pkl`` added when it has no extension). Unpickling runs code: only
    for files you trust.

    :param path: (str, Path or file object) where to read
    :param verbose: (int) verbosity of :func:`open_path`
    """
    with open_path(path, "r", verbose=verbose, suffix="pkl") as file_handler:
        return pickle.load(file_handler)
