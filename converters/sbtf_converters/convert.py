"""Convert stable-baselines 2.x files, stable-baselines3 / sb3-contrib zips and RL-Zoo3 run folders to sbtf's format.

Entry points
* :func:`convert` -- one model (an SB2 ``.pkl`` / ``.zip``, an SB3 zip, or an RL-Zoo3 run folder ``ENV_N/`` holding
  ``ENV.zip`` and ``ENV/vecnormalize.pkl``) to an sbtf model file, plus its VecNormalize statistics as an sbtf
  VecNormalize file; returns a :class:`~sbtf_converters.legacy.ConversionReport`;
* :func:`register_cli` / :func:`add_arguments` / :func:`run_cli` / :func:`main` -- the ``convert`` command (``sbtf
  convert`` through :mod:`sbtf_converters.cli_plugin`, or ``python -m sbtf_converters.convert convert OLD NEW``).

Nothing of the old file runs: SB2 files are read by :mod:`sbtf_converters.legacy`, SB3 zips by
:mod:`sbtf_converters.sb3_reader` (no PyTorch). The written file is sbtf's own safe format.
"""
from __future__ import annotations

import argparse
import os
import pickle
import sys
import warnings
from typing import Any, List, Optional, Union

from sbtf.common.file_errors import ModelFileError, WrongAlgorithmError
from sbtf.common.running_mean_std import RunningMeanStd
from sbtf.common.save_util import inspect_model_bytes, read_file_bytes, resolve_load_path, resolve_save_path
from sbtf.common.vec_env.vec_normalize import VecNormalize
from sbtf_converters.legacy import ConversionReport, LegacyModelError, _build_model, parse_sb2
from sbtf_converters.sb2_algos import ALGORITHMS
from sbtf_converters.legacy_stats import read_running_mean_std, read_vec_normalize, write_vecnormalize
from sbtf_converters.sb3_files import find_run_folder, sb3_algorithm_name, sb3_class
from sbtf_converters.sb3_reader import SB3_FILE_KIND, load_sb3_model, read_sb3_zip

__all__ = ["convert", "convert_sb3", "register_cli", "add_arguments", "run_cli", "main", "CLI_HELP",
           "CLI_DESCRIPTION"]

PathLike = Union[str, os.PathLike]


def convert(old_path: PathLike, new_path: PathLike, vecnormalize_folder: Optional[PathLike] = None,
            vecnormalize_path: Optional[PathLike] = None, custom_objects: Optional[dict] = None,
            allow_pickle: bool = False, algo: Optional[str] = None) -> ConversionReport:
    """
    Convert a stable-baselines 2.x model file, a stable-baselines3 / sb3-contrib zip or an RL-Zoo3 run folder to an
    sbtf model file.

    :param old_path: the SB2 ``.pkl`` / ``.zip``, the SB3 ``.zip``, or an RL-Zoo3 run folder (``logs/ppo/ENV_1/``)
    :param new_path: where to write the sbtf ``.zip`` (written atomically)
    :param vecnormalize_folder: a folder with VecNormalize statistics: ``vecnormalize.pkl`` (SB2 >= 2.9 or SB3) or
        SB2's ``obs_rms.pkl`` + ``ret_rms.pkl``; converted to an sbtf VecNormalize file. A run folder's
        ``ENV/vecnormalize.pkl`` is converted without it.
    :param vecnormalize_path: where to write that file (default: ``vecnormalize.pkl`` next to ``new_path``); load
        it with ``VecNormalize.load(path, venv)`` and set ``training=False, norm_reward=False`` to evaluate
    :param custom_objects: as for ``load``
    :param allow_pickle: as for ``load`` (trusted files only)
    :param algo: the algorithm of an SB3 file (``PPO``, ``qrdqn``...); default: read from the file
    :return: (ConversionReport) what was mapped and what could not be
    """
    if os.path.isdir(os.fspath(old_path)):
        run = find_run_folder(old_path)
        folder = vecnormalize_folder if vecnormalize_folder is not None else (
            run.stats_dir if run.vecnormalize else None)
        return convert_sb3(run.model_path, new_path, vecnormalize_folder=folder, vecnormalize_path=vecnormalize_path,
                           custom_objects=custom_objects, allow_pickle=allow_pickle, algo=algo)
    if inspect_model_bytes(read_file_bytes(resolve_load_path(os.fspath(old_path)))) == SB3_FILE_KIND:
        return convert_sb3(old_path, new_path, vecnormalize_folder=vecnormalize_folder,
                           vecnormalize_path=vecnormalize_path, custom_objects=custom_objects,
                           allow_pickle=allow_pickle, algo=algo)
    if algo is not None:
        raise WrongAlgorithmError(f"--algo / algo= names the algorithm of a stable-baselines3 file; {old_path} is a "
                                  "stable-baselines 2 file, whose algorithm sbtf reads from the file: leave it out.")
    return _convert_sb2(old_path, new_path, vecnormalize_folder, vecnormalize_path, custom_objects, allow_pickle)


def _convert_sb2(old_path: PathLike, new_path: PathLike, vecnormalize_folder: Optional[PathLike],
                 vecnormalize_path: Optional[PathLike], custom_objects: Optional[dict],
                 allow_pickle: bool) -> ConversionReport:
    report = ConversionReport(source=os.fspath(old_path))
    parsed = parse_sb2(old_path, custom_objects=custom_objects, allow_pickle=allow_pickle, report=report)
    report.emit_warnings(stacklevel=3)
    cls = ALGORITHMS[parsed.algorithm].sbtf_class()
    model = _build_model(cls, parsed, None, {"verbose": 0})  # no "model without an env" chatter
    model.verbose = parsed.data.get("verbose", 0)
    target = resolve_save_path(os.fspath(new_path))
    model.save(target)
    report.target = str(target)
    if vecnormalize_folder is not None:
        _convert_statistics(report, model, vecnormalize_folder, vecnormalize_path, target)
    return report


def convert_sb3(old_path: PathLike, new_path: PathLike, vecnormalize_folder: Optional[PathLike] = None,
                vecnormalize_path: Optional[PathLike] = None, custom_objects: Optional[dict] = None,
                allow_pickle: bool = False, algo: Optional[str] = None) -> ConversionReport:
    """
    Convert a stable-baselines3 / sb3-contrib zip to an sbtf model file of the ``sbtf.sb3`` / ``sbtf.contrib`` class
    of the same algorithm (see :func:`convert` for the arguments). The weights, spaces and hyperparameters are
    those ``<Class>.load`` reads; the optimizers' state is not carried over (training starts it fresh).
    """
    source = resolve_load_path(os.fspath(old_path))
    payload = read_file_bytes(source)
    sb3 = read_sb3_zip(payload, source, allow_pickle)
    name = algo or sb3_algorithm_name(sb3)
    cls = sb3_class(name)
    module, policy = sb3.policy_class_name()
    report = ConversionReport(source=source, file_format=SB3_FILE_KIND,
                              parameter_storage="policy.pth" + (" + pytorch_variables.pth" if any(
                                  key.startswith("log_ent_coef") for key in sb3.state) else ""),
                              algorithm=cls.__name__, detected_by="--algo" if algo else f"the policy class {module}."
                              f"{policy}" + (" and the hyperparameters" if ".common." in module else ""),
                              sb2_policy=f"{module}.{policy}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_sb3_model(cls, payload, custom_objects=custom_objects, allow_pickle=allow_pickle, source=source,
                               verbose=0)
    # the reader's warnings (e.g. schedules stored as code); not those of the libraries building the network
    verbose = sb3.data.get("verbose", 0)
    model.verbose = verbose if isinstance(verbose, int) and not isinstance(verbose, bool) else 0
    report.warnings.extend(str(item.message) for item in caught if issubclass(item.category, UserWarning)
                           and "sbtf" in item.filename.replace(os.sep, "/").split("/site-packages/")[-1])
    report.emit_warnings(stacklevel=2)
    report.sbtf_policy = f"{cls.__module__.split('.')[1]}.{cls.__name__} {type(model.policy_tf).__name__}"
    report.parameters = [(key, key, tuple(value.shape)) for key, value in sb3.state.items()]
    if sb3.version:
        report.notes.append(f"written by stable-baselines3 {sb3.version}")
    for member in sb3.ignored:
        report.notes.append(f"member {member} not read")
    for member in sorted(sb3.optimizers):
        report.notes.append(f"member {member}: optimizer state not kept (sbtf model files hold weights only): the "
                            "converted model trains on with a fresh optimizer; load the SB3 zip itself to keep it")
    target = resolve_save_path(os.fspath(new_path))
    model.save(target)
    report.target = str(target)
    if vecnormalize_folder is not None:
        _convert_statistics(report, model, vecnormalize_folder, vecnormalize_path, target)
    return report


class _SpacesOnlyVecEnv:  # pylint: disable=too-few-public-methods
    """Just enough of a VecEnv for ``VecNormalize.load`` to check the statistics' shapes (never stepped)."""

    def __init__(self, observation_space: Any, action_space: Any):
        self.num_envs = 1
        self.observation_space = observation_space
        self.action_space = action_space


def _convert_statistics(report: ConversionReport, model: Any, folder: PathLike, out_path: Optional[PathLike],
                        target: str) -> None:
    """Write the VecNormalize statistics of ``folder`` as an sbtf VecNormalize file (``out_path``, default beside
    ``target``) and record it in ``report``."""
    folder = os.fspath(folder)
    out = os.fspath(out_path) if out_path is not None else os.path.join(os.path.dirname(os.path.abspath(target)),
                                                                         "vecnormalize.pkl")
    whole = os.path.join(folder, "vecnormalize.pkl")
    if os.path.exists(whole):
        if report.file_format == SB3_FILE_KIND:  # SB3's VecNormalize pickle, read by sbtf's VecNormalize.load
            VecNormalize.load(whole, _SpacesOnlyVecEnv(model.observation_space, model.action_space)).save(out)
        else:
            write_vecnormalize(read_vec_normalize(whole), out)
        report.vecnormalize.append((whole, out))
        return
    obs_path, ret_path = os.path.join(folder, "obs_rms.pkl"), os.path.join(folder, "ret_rms.pkl")
    if not os.path.exists(obs_path):
        raise FileNotFoundError(f"{folder} has neither vecnormalize.pkl nor obs_rms.pkl")
    stats = {"obs_rms": read_running_mean_std(obs_path)}
    if os.path.exists(ret_path):
        stats["ret_rms"] = read_running_mean_std(ret_path)
    else:
        stats["ret_rms"] = RunningMeanStd(shape=())
        report.notes.append("no ret_rms.pkl: return statistics start fresh")
    report.notes.append("obs_rms.pkl/ret_rms.pkl carry no settings: the VecNormalize file has the defaults "
                        "(clip_obs=10, training=True, norm_reward=True); for evaluation set training=False "
                        "and norm_reward=False after loading")
    write_vecnormalize(stats, out)
    report.vecnormalize.append((obs_path, out))


# ------------------------------------------------------------------------------------------------
# command line: ``sbtf convert`` (sbtf_converters.cli_plugin registers it with the sbtf command)
# ------------------------------------------------------------------------------------------------
CLI_HELP = ("convert a stable-baselines 2.x model file (.pkl/.zip), a stable-baselines3 / sb3-contrib zip or an "
            "RL-Zoo3 run folder to the sbtf format")
CLI_DESCRIPTION = ("Convert a stable-baselines 2.x model file (.pkl or .zip), a stable-baselines3 / sb3-contrib model "
                   "zip, or an RL-Zoo3 run folder (ENV.zip with ENV/config.yml and ENV/vecnormalize.pkl) to an sbtf "
                   "model file (and an sbtf VecNormalize file), without running code from the old file and without "
                   "PyTorch, and print what was mapped and what could not be. Exit codes: 0 done, 2 the file cannot "
                   "be converted (not a model, refused content, algorithm not in sbtf yet).")


def add_arguments(parser: argparse.ArgumentParser, paths_optional: bool = False) -> None:
    """
    The ``convert`` arguments (for ``sbtf.cli.register_subcommand`` or :func:`register_cli`).

    :param parser: (argparse.ArgumentParser)
    :param paths_optional: (bool) OLD and NEW may be left out (a command that converts other things too checks them)
    """
    nargs = "?" if paths_optional else None
    parser.add_argument("old_path", nargs=nargs, help="the stable-baselines 2.x model file, the stable-baselines3 / "
                                                      "sb3-contrib zip, or the RL-Zoo3 run folder (logs/ppo/ENV_1)")
    parser.add_argument("new_path", nargs=nargs, help="the sbtf model file to write (.zip)")
    parser.add_argument("--vecnormalize-folder", default=None,
                        help="folder with vecnormalize.pkl or obs_rms.pkl/ret_rms.pkl to convert too (an RL-Zoo3 run "
                             "folder's ENV/vecnormalize.pkl is converted without it)")
    parser.add_argument("--vecnormalize-path", default=None,
                        help="where to write the sbtf VecNormalize file (default: vecnormalize.pkl next to new_path)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def register_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``convert`` to an ``argparse`` sub-parsers object; its handler is ``args.func(args)`` (:func:`run_cli`)."""
    parser = subparsers.add_parser("convert", help=CLI_HELP, description=CLI_DESCRIPTION)
    add_arguments(parser)
    parser.add_argument("--algo", default=None, metavar="ALGO",
                        help="the algorithm of a stable-baselines3 file (default: read from the file)")
    parser.set_defaults(func=run_cli)
    return parser


def run_cli(args: argparse.Namespace) -> int:
    """Run ``convert`` for parsed arguments; errors are one line on stderr (exit code 2)."""
    try:
        report = convert(args.old_path, args.new_path, vecnormalize_folder=args.vecnormalize_folder,
                         vecnormalize_path=args.vecnormalize_path, algo=getattr(args, "algo", None))
    except (LegacyModelError, ModelFileError, pickle.UnpicklingError, ImportError, FileNotFoundError) as exc:
        print(f"sbtf convert: error: {exc}", file=sys.stderr)
        return 2
    print(report.to_json() if args.json else str(report))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m sbtf_converters.convert convert OLD NEW [...]`` (also ``python -m sbtf_converters.legacy``)."""
    parser = argparse.ArgumentParser(prog="sbtf")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register_cli(subparsers)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
