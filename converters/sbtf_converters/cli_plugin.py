"""The ``sbtf convert`` and ``sbtf export`` subcommands, registered with the ``sbtf`` command line.

sbtf finds this module through the ``sbtf.cli`` entry point (``sbtf_converters.cli_plugin:register_subcommands``)
or, in an installation without entry-point metadata, by importing it (``sbtf.cli.plugins.SUBCOMMAND_MODULES``).
This is the only module of sbtf_converters that imports :mod:`sbtf.cli`. The commands themselves live next to what
they drive -- :mod:`sbtf_converters.convert` (``convert``), :mod:`sbtf_converters.export_cli` (``export``) and
:mod:`sbtf.zoo` (``convert --folder``) -- and the first two also run standalone
(``python -m sbtf_converters.convert convert ...``, ``python -m sbtf_converters.export ...``).

``sbtf convert`` converts one stable-baselines 2 model file, stable-baselines3 / sb3-contrib zip or RL-Zoo3 run
folder (``sbtf convert OLD NEW [--algo ALGO]``), or an rl-baselines-zoo agent folder into an sbtf run folder
(``sbtf convert --folder trained_agents/ --algo A --env E -f LOG_FOLDER``, which :func:`sbtf.zoo.convert_zoo_folder`
writes and ``sbtf enjoy`` plays).
"""
from __future__ import annotations

import argparse
import os
from typing import Optional

from sbtf.cli import DECODER_ERRORS, CLIError, add_zoo_arguments, convert_zoo_run, file_error, register_subcommand
from sbtf.common import save_util
from sbtf.common.file_errors import ModelFileError
from sbtf_converters import convert, export_cli

__all__ = ["register_subcommands"]

CONVERT_HELP = ("convert a stable-baselines 2.x model file, a stable-baselines3 / sb3-contrib zip, an RL-Zoo3 run "
                "folder or an rl-baselines-zoo agent folder to sbtf")
CONVERT_DESCRIPTION = (convert.CLI_DESCRIPTION + " With --folder ZOO_FOLDER --algo ALGO --env ENV_ID: write the "
                       "rl-baselines-zoo agent of that folder (model, normalisation statistics, config) as an sbtf "
                       "run folder LOG_FOLDER/ALGO/ENV_ID_N that 'sbtf enjoy' plays.")


def _run_export(args: argparse.Namespace) -> int:
    try:
        return export_cli.run_command(args)
    except export_cli.CommandError as exc:
        raise CLIError(exc.message, exc.exit_code) from exc
    except (ModelFileError,) + DECODER_ERRORS as exc:  # e.g. the --vecnormalize statistics: one line
        raise file_error(exc, "cannot export {}".format(args.model_path)) from exc


def _add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    convert.add_arguments(parser, paths_optional=True)
    add_zoo_arguments(parser, "convert an rl-baselines-zoo folder (trained_agents/: <algo>/<ENV_ID>.pkl and "
                              "<ENV_ID>/config.yml) instead of one model file; needs --algo and --env")
    parser.add_argument("--algo", default=None, metavar="ALGO",
                        help="with --folder: the agent's algorithm; with a stable-baselines3 file or RL-Zoo3 run "
                             "folder: its algorithm (PPO, qrdqn...; default: read from the file)")
    parser.add_argument("--env", default=None, metavar="ENV_ID", help="with --folder: the agent's env id")
    parser.add_argument("-f", "--log-folder", default="logs", metavar="LOG_FOLDER",
                        help="with --folder: the sbtf log folder to write the run into (default: logs)")
    parser.add_argument("--exp-id", type=int, default=None, metavar="N",
                        help="with --folder: the run of a zoo log folder (ZOO_FOLDER/<algo>/<ENV_ID>_<N>/, 0: the "
                             "latest); default: the trained_agents layout")
    parser.add_argument("--allow-wrapper", action="append", default=[], metavar="MODULE.NAME",
                        help="with --folder: an env_wrapper of config.yml that is neither sbtf's nor gymnasium's and "
                             "that you trust (repeatable)")


def _is_sb3_source(path: Optional[str]) -> bool:
    """Whether ``path`` is a folder (an RL-Zoo3 run) or a stable-baselines3 zip (which ``--algo`` may name)."""
    if path is None:
        return False
    if os.path.isdir(path):
        return True
    try:
        return save_util.inspect_model_bytes(save_util.read_file_bytes(save_util.resolve_load_path(path))) == "sb3-zip"
    except (OSError, ModelFileError):
        return False


def _run_convert(args: argparse.Namespace) -> int:
    if args.folder is None:
        zoo_only = [flag for flag, value in (("--env", args.env), ("--exp-id", args.exp_id),
                                             ("--time-feature / --no-time-feature", args.time_feature is not None),
                                             ("--allow-wrapper", args.allow_wrapper)) if value]
        if args.algo and not _is_sb3_source(args.old_path):
            zoo_only.insert(0, "--algo")
        if zoo_only:
            raise CLIError("{} can only be used with --folder (converting an rl-baselines-zoo folder){}".format(
                ", ".join(zoo_only), " or, for --algo, with a stable-baselines3 zip or RL-Zoo3 run folder"
                if "--algo" in zoo_only else ""))
        if args.old_path is None or args.new_path is None:
            raise CLIError("give OLD_PATH NEW_PATH (a stable-baselines 2.x model file, a stable-baselines3 zip or an "
                           "RL-Zoo3 run folder, and the sbtf file to write), "
                           "or --folder ZOO_FOLDER --algo ALGO --env ENV_ID (an rl-baselines-zoo agent folder)")
        try:
            return convert.run_cli(args)
        except (ModelFileError,) + DECODER_ERRORS as exc:  # e.g. the --vecnormalize-* statistics: one line
            raise file_error(exc, "cannot convert {}".format(args.old_path)) from exc
    single_file = [what for what, value in (("OLD_PATH NEW_PATH", args.old_path),
                                            ("--vecnormalize-folder", args.vecnormalize_folder),
                                            ("--vecnormalize-path", args.vecnormalize_path),
                                            ("--json", args.json)) if value]
    if single_file:
        raise CLIError("--folder converts a whole zoo agent folder: {} cannot be used with it".format(
            ", ".join(single_file)))
    missing = [flag for flag, value in (("--algo", args.algo), ("--env", args.env)) if not value]
    if missing:
        raise CLIError("--folder needs {} (the agent's files are ZOO_FOLDER/<algo>/<ENV_ID>.pkl)".format(
            " and ".join(missing)))
    convert_zoo_run(args, args.algo.strip().lower())
    return 0


def register_subcommands() -> None:
    """Add ``convert`` and ``export`` to the ``sbtf`` command (idempotent: registering again replaces them)."""
    register_subcommand("convert", _run_convert, _add_convert_arguments, help=CONVERT_HELP,
                        description=CONVERT_DESCRIPTION, replace=True)
    register_subcommand("export", _run_export, export_cli.add_cli_arguments, help=export_cli.CLI_HELP,
                        description=export_cli.CLI_DESCRIPTION, replace=True)


register_subcommands()
