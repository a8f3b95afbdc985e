"""The subcommand table of the ``sbtf`` command, and how other packages add to it.

A module adds a subcommand with one call, :func:`register_subcommand`::

    from sbtf.cli import CLIError, register_subcommand

    def _add_arguments(parser):               # parser: the subcommand's argparse.ArgumentParser
        parser.add_argument("path")

    def _run(args):                           # args: the parsed argparse.Namespace
        ...                                   # raise CLIError("one-line message", exit_code) on bad input
        return 0                              # the exit code

    register_subcommand("convert", _run, _add_arguments, help="convert a stable-baselines 2 model")

sbtf's own subcommands (``train``, ``enjoy``) register when :mod:`sbtf.cli` is imported. Other packages are found
when the command line is built (:func:`registered_subcommands`): through the entry points of the group
:data:`ENTRY_POINT_GROUP` (``sbtf.cli``), whose target is a function to call or a module to import::

    [project.entry-points."sbtf.cli"]
    converters = "sbtf_converters.cli_plugin:register_subcommands"

and, for an installation whose metadata has no such entry point (an old editable install, a checkout on
``PYTHONPATH``), by importing the modules of :data:`SUBCOMMAND_MODULES` that no entry point named. A plugin that is
not installed is skipped silently (an optional subcommand may be absent); one that fails is skipped with a warning.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Set

#: entry-point group through which other packages add subcommands
ENTRY_POINT_GROUP = "sbtf.cli"
#: plugin modules imported when no entry point names them (importing one registers its subcommands; a function
#: ``register_subcommands()`` in it is called too)
SUBCOMMAND_MODULES = ("sbtf_converters.cli_plugin",)


@dataclass(frozen=True)
class Subcommand:
    """A registered subcommand (see :func:`register_subcommand`)."""

    name: str
    run: Callable[[argparse.Namespace], Optional[int]]
    add_arguments: Optional[Callable[[argparse.ArgumentParser], None]] = None
    help: Optional[str] = None
    description: Optional[str] = None


_SUBCOMMANDS: Dict[str, Subcommand] = {}
_plugins_loaded = False


def register_subcommand(name: str, run: Callable[[argparse.Namespace], Optional[int]],  # pylint: disable=W0622
                        add_arguments: Optional[Callable[[argparse.ArgumentParser], None]] = None,
                        help: Optional[str] = None, description: Optional[str] = None,
                        replace: bool = False) -> None:
    """
    Add a subcommand to the ``sbtf`` command.

    :param name: (str) the subcommand name (``sbtf NAME ...``)
    :param run: (callable) ``run(args) -> exit code`` (None means 0); raise :class:`CLIError` for a one-line error
    :param add_arguments: (callable) ``add_arguments(parser)`` adds the subcommand's arguments to its parser
    :param help: (str) one line shown in ``sbtf --help``
    :param description: (str) shown in ``sbtf NAME --help`` (defaults to ``help``)
    :param replace: (bool) replace a subcommand already registered under this name (otherwise: ValueError)
    """
    if not re.match(r"^[a-z][a-z0-9-]*$", name):
        raise ValueError("subcommand names are lower-case words (letters, digits, '-'), got {!r}".format(name))
    if name in _SUBCOMMANDS and not replace:
        raise ValueError("the subcommand {!r} is already registered (pass replace=True to replace it)".format(name))
    if not callable(run):
        raise TypeError("run must be callable, got {!r}".format(run))
    _SUBCOMMANDS[name] = Subcommand(name, run, add_arguments, help, description)


def registered_subcommands() -> Dict[str, Subcommand]:
    """The registered subcommands, by name (plugins included)."""
    _load_subcommand_plugins()
    return dict(_SUBCOMMANDS)


def _warn(what: str, exc: BaseException) -> None:
    print("sbtf: warning: {}: {}".format(what, exc), file=sys.stderr)


def _run_plugin(target: object) -> None:
    """Call a plugin's registration function (a module target registers when it is imported)."""
    if inspect.ismodule(target):
        target = getattr(target, "register_subcommands", None)
        if target is None:
            return
    if callable(target):
        target()


def _load_subcommand_plugins() -> None:
    global _plugins_loaded  # pylint: disable=global-statement
    if _plugins_loaded:
        return
    _plugins_loaded = True
    try:
        from importlib.metadata import entry_points  # pylint: disable=import-outside-toplevel
        found = list(entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # pylint: disable=broad-except  # broken metadata must not break the command
        found = []
    named: Set[str] = set()
    for entry_point in found:
        named.add(entry_point.value.partition(":")[0].strip())
        try:
            _run_plugin(entry_point.load())
        except Exception as exc:  # pylint: disable=broad-except
            _warn("subcommand plugin {} could not be loaded".format(entry_point.value), exc)
    for module_name in SUBCOMMAND_MODULES:
        if module_name in named:
            continue
        try:
            _run_plugin(importlib.import_module(module_name))
        except ModuleNotFoundError as exc:
            if not exc.name or not (module_name == exc.name or module_name.startswith(exc.name + ".")):
                _warn("subcommand module {} could not be imported".format(module_name), exc)
        except Exception as exc:  # pylint: disable=broad-except
            _warn("subcommand module {} could not be imported".format(module_name), exc)
