"""The ``sbtf convert`` and ``sbtf export`` subcommands, registered with the ``sbtf`` command line.

sbtf finds this module through the ``sbtf.cli`` entry point (``sbtf_converters.cli_plugin:register_subcommands``)
or, in an installation without entry-point metadata, by importing it (``sbtf.cli.plugins.SUBCOMMAND_MODULES``).
This is the only module of sbtf_converters that imports :mod:`sbtf.cli`. The commands themselves live next to what
they drive -- :mod:`sbtf_converters.legacy` (``convert``) and :mod:`sbtf_converters.export` (``export``) -- and also
run standalone (``python -m sbtf_converters.legacy convert ...``, ``python -m sbtf_converters.export ...``).
"""
from __future__ import annotations

import argparse

from sbtf.cli import CLIError, register_subcommand
from sbtf_converters import export, legacy

__all__ = ["register_subcommands"]


def _run_export(args: argparse.Namespace) -> int:
    try:
        return export.run_command(args)
    except export.CommandError as exc:
        raise CLIError(exc.message, exc.exit_code) from exc


def register_subcommands() -> None:
    """Add ``convert`` and ``export`` to the ``sbtf`` command (idempotent: registering again replaces them)."""
    register_subcommand("convert", legacy.run_cli, legacy.add_arguments, help=legacy.CLI_HELP,
                        description=legacy.CLI_DESCRIPTION, replace=True)
    register_subcommand("export", _run_export, export.add_cli_arguments, help=export.CLI_HELP,
                        description=export.CLI_DESCRIPTION, replace=True)


register_subcommands()
