"""The ``sbtf`` command line tool (rl-baselines-zoo style).

Subcommands::

    sbtf train --algo ppo2 --env CartPole-v1 [-n TIMESTEPS] [-f logs] [--hyperparams FILE.yml | KEY:VALUE ...] ...
    sbtf enjoy --algo ppo2 --env CartPole-v1 [-f logs] [--exp-id N] [--episodes N] [--gif out.gif] ...
    sbtf enjoy --folder trained_agents/ --algo trpo --env BipedalWalker-v2   (an rl-baselines-zoo folder)
    sbtf plot -f logs --algo ppo2 a2c --env CartPole-v1 [-x episodes] [-w 50] [-o curves.png]
    sbtf optimize --algo ppo2 --env CartPole-v1 --n-trials 50 [--sampler tpe] [--pruner median] [--storage URL]
    sbtf convert OLD.pkl NEW.zip ...           (from sbtf_converters, when installed)
    sbtf convert --folder trained_agents/ --algo A --env E -f logs   (a zoo agent as an sbtf run folder)
    sbtf export MODEL.zip --format onnx ...    (from sbtf_converters, when installed)

``python -m sbtf`` runs the same program. ``docs/cli.md`` documents every flag and the hyperparameter file format.

The package, one module per part:

* :mod:`sbtf.cli.train`, :mod:`sbtf.cli.enjoy`, :mod:`sbtf.cli.plot`, :mod:`sbtf.cli.optimize` -- built-in
  subcommands (:mod:`sbtf.cli.search_spaces`: the search spaces of ``optimize``);
* :mod:`sbtf.cli.hyperparams` -- shipped and user hyperparameters, their checks, the model's arguments (what each
  algorithm accepts comes from :mod:`sbtf.algorithms`);
* :mod:`sbtf.cli.envs` -- env ids, env settings (normalize, frame_stack, env_wrapper, env_kwargs), the VecEnvs;
* :mod:`sbtf.cli.runs` -- the run folders ``LOG_FOLDER/<algo>/<ENV_ID>_<run_id>/``;
* :mod:`sbtf.cli.zoo_folders` -- rl-baselines-zoo folders (``enjoy --folder``, ``convert --folder``, ``zoo.yml``);
* :mod:`sbtf.cli.plugins` -- the subcommand table: :func:`register_subcommand` and how other packages
  (``sbtf_converters``: ``convert``, ``export``) add theirs;
* :mod:`sbtf.cli.errors` -- :class:`CLIError`.

Exit codes: 0 success; 1 the work could not be done (an env needs a package that is missing, rendering failed...);
2 bad input (unknown algorithm / env / hyperparameter, a value of the wrong type, an algorithm this version of sbtf
does not have, no trained model where one was asked for, a file or run folder sbtf cannot or will not read -- any
:class:`~sbtf.common.file_errors.ModelFileError`); 130 training interrupted with Ctrl-C (the model trained so far is
saved). Errors are one line on stderr, never a traceback.

The names of the submodules that scripts and plugins use are importable from ``sbtf.cli`` itself.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from sbtf import __version__

from sbtf.cli.errors import DECODER_ERRORS, FILE_READ_ERRORS, CLIError, file_error, one_line
from sbtf.common.file_errors import ModelFileError
from sbtf.cli.plugins import (ENTRY_POINT_GROUP, SUBCOMMAND_MODULES, Subcommand, register_subcommand,
                              registered_subcommands)
from sbtf.cli.hyperparams import (ALGOS, ENV_KEYS, FLAG_KEYS, GAIL_KEYS, HER_KEYS, HER_MODEL_CLASSES,
                                  HYPERPARAMS_FOLDER, HYPERPARAMS_PACKAGE, MULTI_ENV_ALGOS, NOISE_ALGOS, NOISE_KEYS,
                                  NOISE_TYPES, OFF_POLICY_ALGOS, SCHEDULE_ALGOS, SCHEDULE_KEYS, ZOO_POLICIES,
                                  check_hyperparameter_names, find_env_entry, her_model_class, hyperparams_file,
                                  load_algorithm, load_default_hyperparams, load_overrides, model_kwargs, parse_value,
                                  safe_eval, valid_hyperparameters)
from sbtf.cli.envs import (SBTF_ENVS, VEC_NORMALIZE_KEYS, ZOO_WRAPPERS, EnvSettings, env_settings, make_env,
                           resolve_env, wrap_vec_env, wrapper_class)
from sbtf.cli.runs import find_run_dir
from sbtf.cli.zoo_folders import (ZOO_RECORD, ZooRecord, add_zoo_arguments, convert_zoo_run, open_zoo_agent,
                                  read_zoo_record)
# the built-in subcommands register themselves on import, in this order (``sbtf --help`` lists them so)
from sbtf.cli.train import TrainPlan, plan_training, run_train
from sbtf.cli.enjoy import make_play_env, run_enjoy
from sbtf.cli.plot import find_runs, run_plot, save_run_curve
from sbtf.cli.optimize import run_optimize

__all__ = [
    "main", "build_parser", "CLIError", "DECODER_ERRORS", "FILE_READ_ERRORS", "file_error", "Subcommand",
    "register_subcommand", "registered_subcommands",
    "ENTRY_POINT_GROUP", "SUBCOMMAND_MODULES", "ALGOS", "MULTI_ENV_ALGOS", "OFF_POLICY_ALGOS", "SCHEDULE_ALGOS",
    "SCHEDULE_KEYS", "NOISE_ALGOS", "NOISE_TYPES", "HER_MODEL_CLASSES", "ENV_KEYS", "NOISE_KEYS", "HER_KEYS",
    "GAIL_KEYS", "FLAG_KEYS", "VEC_NORMALIZE_KEYS", "ZOO_POLICIES", "ZOO_WRAPPERS", "SBTF_ENVS", "HYPERPARAMS_PACKAGE",
    "HYPERPARAMS_FOLDER", "load_algorithm", "hyperparams_file", "load_default_hyperparams", "find_env_entry",
    "safe_eval", "parse_value", "load_overrides", "valid_hyperparameters", "check_hyperparameter_names",
    "model_kwargs", "her_model_class", "resolve_env", "EnvSettings", "env_settings", "wrapper_class", "make_env",
    "wrap_vec_env", "find_run_dir", "TrainPlan", "plan_training", "run_train", "make_play_env", "run_enjoy",
    "ZOO_RECORD", "ZooRecord", "add_zoo_arguments", "convert_zoo_run", "open_zoo_agent", "read_zoo_record",
    "find_runs", "run_plot", "save_run_curve", "run_optimize",
]


def build_parser() -> argparse.ArgumentParser:
    """The ``sbtf`` argument parser, with every registered subcommand."""
    parser = argparse.ArgumentParser(prog="sbtf", description="Stable Baselines on TensorFlow 2: train and play "
                                                              "RL agents (rl-baselines-zoo style).")
    parser.add_argument("--version", action="version", version="sbtf {}".format(__version__))
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in registered_subcommands().items():
        sub = subparsers.add_parser(name, help=command.help, description=command.description or command.help)
        if command.add_arguments is not None:
            command.add_arguments(sub)
        sub.set_defaults(_subcommand=command)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """
    Run the ``sbtf`` command.

    :param argv: ([str]) the arguments (default: ``sys.argv[1:]``)
    :return: (int) the exit code
    """
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # --help, --version, or a usage error (already printed by argparse)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    command: Optional[Subcommand] = getattr(args, "_subcommand", None)
    if command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code = command.run(args)
    except CLIError as exc:
        print("sbtf {}: error: {}".format(command.name, exc.message), file=sys.stderr)
        return exc.exit_code
    except ModelFileError as exc:  # a file (model, statistics, run folder, YAML) sbtf cannot or will not read
        print("sbtf {}: error: {}".format(command.name, one_line(exc)), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sbtf {}: interrupted".format(command.name), file=sys.stderr)
        return 130
    return 0 if code is None else int(code)
