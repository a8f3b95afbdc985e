"""Registers ``sbtf convert`` with the ``sbtf`` command line.

Importing this module adds the subcommand (``sbtf.cli.register_subcommand``); list ``"sbtf_converters.convert_cli"``
in ``sbtf.cli.SUBCOMMAND_MODULES`` (or import it) to make ``sbtf convert OLD.pkl NEW.zip`` available.
"""
from sbtf.cli import register_subcommand
from sbtf_converters.legacy import CLI_DESCRIPTION, CLI_HELP, add_arguments, run_cli

try:
    register_subcommand("convert", run_cli, add_arguments, help=CLI_HELP, description=CLI_DESCRIPTION)
except ValueError:  # already registered (the module was loaded under two names)
    pass
