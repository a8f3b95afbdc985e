"""stable-baselines3's ``common.save_util`` pickle helpers: ``save_to_pkl`` / ``load_from_pkl`` (used for replay
buffers) and ``open_path``. ``load_from_pkl`` unpickles: read only files you trust (sbtf's own model files are zip
archives read without pickle; see docs/security.md)."""
from __future__ import annotations

import io
import pathlib
import pickle
from typing import Any, Union

__all__ = ["open_path", "save_to_pkl", "load_from_pkl"]


def open_path(path: Union[str, pathlib.Path, io.BufferedIOBase], mode: str, verbose: int = 0,
              suffix: "str | None" = None) -> Any:
    """
    Open ``path`` for reading (``"r"``) or writing (``"w"``) in binary mode; an open file object is returned as is.
    A missing ``suffix`` is appended to a path that has none; writing creates the parent folders.

    :param path: (str, Path or file object) where to read or write
    :param mode: (str) ``"r"``/``"read"`` or ``"w"``/``"write"``
    :param verbose: (int) 2: say when the suffix was added
    :param suffix: (str) the file extension to add when the path has none (e.g. ``"pkl"``)
    """
    mode = {"read": "r", "write": "w", "rb": "r", "wb": "w"}.get(mode, mode)
    if mode not in ("r", "w"):
        raise ValueError(f"mode {mode!r} is not 'r' (read) or 'w' (write)")
    if isinstance(path, io.IOBase):
        if (mode == "r" and not path.readable()) or (mode == "w" and not path.writable()):
            raise ValueError(f"the file object given cannot be opened in mode {mode!r}")
        return path
    path = pathlib.Path(path)
    if suffix and not path.suffix:
        if verbose >= 2:
            print(f"Adding the suffix .{suffix} to {path}")
        path = path.with_suffix(f".{suffix}")
    if mode == "w":
        path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, f"{mode}b")


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
