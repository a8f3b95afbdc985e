"""sbtf's version: one source, ``version`` in pyproject.toml, read from the installed package's metadata."""
from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

__all__ = ["read_version"]

#: the version reported when neither the package metadata nor a source tree's pyproject.toml gives one
UNKNOWN_VERSION = "0+unknown"


def _source_tree_version(pyproject: Path) -> str | None:
    """``project.version`` of a source tree's pyproject.toml when it is sbtf's, else None."""
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    version = project.get("version")
    return version if project.get("name") == "sbtf" and isinstance(version, str) else None


def read_version(distribution: str = "sbtf", pyproject: Path | None = None) -> str:
    """
    The installed distribution's version (``importlib.metadata``); running from a source tree that was never
    installed, the ``version`` of its pyproject.toml; ``"0+unknown"`` when neither exists.

    :param distribution: (str) the distribution name
    :param pyproject: (Path) the source tree's pyproject.toml (default: the one beside the ``sbtf`` package)
    :return: (str) the version
    """
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        pass
    pyproject = pyproject if pyproject is not None else Path(__file__).resolve().parents[1] / "pyproject.toml"
    return _source_tree_version(pyproject) or UNKNOWN_VERSION
