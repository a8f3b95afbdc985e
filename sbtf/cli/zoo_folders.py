"""rl-baselines-zoo folders on the command line: ``sbtf enjoy --folder`` and ``sbtf convert --folder``.

Both drive :mod:`sbtf.zoo` (``load_zoo_agent`` / ``convert_zoo_folder``); this module holds what they share: the
flags, the mapping of the zoo's errors to :class:`~sbtf.cli.errors.CLIError` (one line, exit code 2 for bad input,
1 when an env needs a package that is not installed), and the reading of ``zoo.yml``, the record that
``convert_zoo_folder`` leaves in a run folder (the zoo's deterministic choice, Atari) for ``sbtf enjoy``.
"""
from __future__ import annotations

import argparse
import os
import warnings
from dataclasses import dataclass
from typing import Any, Optional

import gymnasium

from sbtf.cli.errors import FILE_READ_ERRORS, CLIError, one_line
from sbtf.common.file_errors import describe_value
from sbtf.common.fileio.safe_yaml import read_yaml
from sbtf.zoo import convert_zoo_folder, load_zoo_agent
from sbtf.zoo.errors import MissingTimeFeatureError, ObservationMismatchError

__all__ = ["ZOO_RECORD", "ZooRecord", "add_zoo_arguments", "read_zoo_record", "zoo_cli_error", "open_zoo_agent",
           "convert_zoo_run"]

#: the file ``convert_zoo_folder`` writes into a run folder: how the zoo played the agent
ZOO_RECORD = "zoo.yml"


def add_zoo_arguments(parser: argparse.ArgumentParser, folder_help: str) -> None:
    """
    The zoo-folder flags: ``--folder`` and ``--time-feature`` / ``--no-time-feature``.

    :param parser: (argparse.ArgumentParser) the subcommand's parser
    :param folder_help: (str) what ``--folder`` does in that subcommand
    """
    parser.add_argument("--folder", default=None, metavar="ZOO_FOLDER", help=folder_help)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--time-feature", dest="time_feature", action="store_true", default=None,
                       help="with --folder: append the time feature (TimeFeatureWrapper) even when config.yml does "
                            "not name it (folders without config.yml)")
    group.add_argument("--no-time-feature", dest="time_feature", action="store_false",
                       help="with --folder: leave out a TimeFeatureWrapper that config.yml names")


def zoo_cli_error(exc: BaseException, what: str) -> CLIError:
    """
    The one-line error for a failure while loading a zoo agent.

    :param exc: (BaseException) what :func:`sbtf.zoo.load_zoo_agent` raised
    :param what: (str) what was being done (``"cannot play ..."``)
    :return: (CLIError) exit code 1 when a package is missing (an env's, ale-py, an algorithm's), else 2
    """

    if isinstance(exc, (gymnasium.error.DependencyNotInstalled, ImportError)):
        return CLIError("{}: {}".format(what, one_line(exc)), exit_code=1)
    if isinstance(exc, gymnasium.error.Error):
        return CLIError("{}: {} (register the env first, e.g. with --gym-packages MODULE)".format(
            what, one_line(exc)))

    hint = ""
    if isinstance(exc, MissingTimeFeatureError):
        hint = " (on the command line: --time-feature)"
    elif isinstance(exc, ObservationMismatchError) and "time_feature=False" in str(exc):
        hint = " (on the command line: --no-time-feature)"
    detail = one_line(exc)
    if not isinstance(exc, (ValueError, OSError)):  # an untyped decoder error: say what kind it was
        detail = "the file is damaged ({}: {})".format(type(exc).__name__, detail or "no detail")
    return CLIError("{}: {}{}".format(what, detail, hint))


#: what loading a zoo agent may raise that is the user's input or installation, not a bug
_LOAD_ERRORS = FILE_READ_ERRORS + (ImportError,)
#: the warning of ``resolve_env_id`` for a retired env id (the zoo loader prints a note saying the same)
_RETIRED_ID_WARNING = r"Env id .* was retired by gymnasium"


def open_zoo_agent(args: argparse.Namespace, algo: str, render_mode: Optional[str] = None, verbose: int = 1) -> Any:
    """
    :func:`sbtf.zoo.load_zoo_agent` for parsed arguments (``folder``, ``env``, ``exp_id``, ``time_feature``,
    ``allow_wrapper``, ``seed``, ``deterministic``), with its errors as :class:`CLIError`.

    :param args: (argparse.Namespace)
    :param algo: (str) the algorithm (a checked CLI name)
    :param render_mode: (str) gymnasium render mode of the env
    :param verbose: (int) 1: print what the loader decided (normalisation, wrappers, ignored statistics)
    :return: (sbtf.zoo.ZooAgent)
    """

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_RETIRED_ID_WARNING, category=UserWarning)
            return load_zoo_agent(args.folder, algo, args.env.strip(), exp_id=args.exp_id,
                                  seed=getattr(args, "seed", 0),
                                  deterministic=getattr(args, "deterministic", None),
                                  time_feature=args.time_feature,
                                  allowed_wrappers=tuple(args.allow_wrapper or ()), render_mode=render_mode,
                                  verbose=verbose)
    except _LOAD_ERRORS + (gymnasium.error.Error,) as exc:
        raise zoo_cli_error(exc, "cannot load the {} agent for {} from {}".format(algo, args.env, args.folder)) \
            from exc


def convert_zoo_run(args: argparse.Namespace, algo: str) -> str:
    """
    :func:`sbtf.zoo.convert_zoo_folder` for parsed arguments (``folder``, ``env``, ``log_folder``, ``exp_id``,
    ``time_feature``, ``allow_wrapper``), with its errors as :class:`CLIError`.

    :param args: (argparse.Namespace)
    :param algo: (str) the algorithm
    :return: (str) the run folder written
    """

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_RETIRED_ID_WARNING, category=UserWarning)
            return convert_zoo_folder(args.folder, algo, args.env.strip(), args.log_folder, exp_id=args.exp_id,
                                      time_feature=args.time_feature,
                                      allowed_wrappers=tuple(args.allow_wrapper or ()), verbose=1)
    except _LOAD_ERRORS + (gymnasium.error.Error,) as exc:
        raise zoo_cli_error(exc, "cannot convert the {} agent for {} from {}".format(algo, args.env, args.folder)) \
            from exc


@dataclass(frozen=True)
class ZooRecord:
    """What ``zoo.yml`` in a run folder says about playing the agent."""

    #: the zoo's choice of deterministic (True) or sampled (False) actions
    deterministic: Optional[bool] = None
    #: whether the agent plays a DeepMind-wrapped Atari env (4 stacked frames)
    atari: bool = False
    #: where it was read
    path: Optional[str] = None


def read_zoo_record(run_dir: str) -> ZooRecord:
    """
    Read ``run_dir/zoo.yml`` (plain YAML written by :func:`sbtf.zoo.convert_zoo_folder`, read with sbtf's bounded
    YAML reader); an empty record when the folder has none.

    :param run_dir: (str) a run folder
    :return: (ZooRecord)
    :raises ModelFileError: the file is not a mapping of plain YAML data (or too big, deep, aliased)
    :raises CLIError: ``deterministic`` or ``atari`` is not a boolean
    """
    path = os.path.join(run_dir, ZOO_RECORD)
    if not os.path.isfile(path):
        return ZooRecord()
    data = read_yaml(path)
    deterministic = data.get("deterministic")
    atari = data.get("atari", False)
    for key, value in (("deterministic", deterministic), ("atari", atari)):
        if value is not None and not isinstance(value, bool):
            raise CLIError("{}: {} must be true or false, got {}".format(path, key, describe_value(value)))
    return ZooRecord(deterministic=deterministic, atari=bool(atari), path=path)
