"""``sbtf train``: train an agent with the tuned hyperparameters shipped in ``sbtf/hyperparams/<algo>.yml``.

The hyperparameters are merged (shipped defaults, then the ``--hyperparams`` items in order, then ``-n`` /
``--n-envs``), checked against the algorithm's constructor, and the run is saved into
``LOG_FOLDER/<algo>/<ENV_ID>_<run_id>/``: ``<ENV_ID>.zip`` (the model), ``config.yml`` (the final hyperparameters,
reusable with ``--hyperparams``), ``args.yml`` (the command's arguments), ``vecnormalize.pkl`` (when ``normalize`` is
on), ``best_model.zip`` + ``evaluations.npz`` (when evaluating), ``checkpoints/`` (with ``--save-freq``), the
``Monitor`` files ``<rank>.monitor.csv`` and ``learning_curve.png`` (their episode returns, drawn at the end).
"""
from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import shutil
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import yaml

from sbtf import algorithms
from sbtf.cli.envs import (EnvSettings, add_vec_env_argument, check_vec_env, env_settings, import_gym_packages,
                           make_env, resolve_env, wrap_vec_env, wrapper_class)
from sbtf.cli.errors import CLIError, exc_text
from sbtf.cli.hyperparams import (MULTI_ENV_ALGOS, algo_name, as_int, check_hyperparameter_names, default_policy,
                                  find_env_entry, her_model_class, hyperparams_file, is_atari_id, is_number,
                                  load_algorithm, load_default_hyperparams, load_overrides, model_kwargs, positive_int,
                                  valid_hyperparameters)
from sbtf.cli.plot import save_run_curve
from sbtf.cli.plugins import register_subcommand
from sbtf.cli.runs import add_common_arguments, new_run_dir, safe_name
from sbtf.cli.train_output import one_line_logs
from sbtf.common.callbacks import CheckpointCallback, EvalCallback, ProgressBarCallback
from sbtf.common.file_errors import describe_value
from sbtf.zoo.agent import ATARI_FRAME_STACK
from sbtf.zoo.config import check_n_envs


def plain(value: Any) -> Any:
    """A YAML-safe copy (tuples as lists, numpy scalars as Python numbers)."""
    if isinstance(value, dict):
        return {str(key): plain(val) for key, val in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(val) for val in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    return value


def dump_yaml(data: Dict[str, Any], path: str) -> None:
    """Write ``data`` as YAML (plain types, sorted keys)."""
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(plain(data), handle, default_flow_style=False, sort_keys=True)


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """
    Add ``sbtf train``'s flags to ``parser`` (the common ones included).

    :param parser: the subcommand's parser
    """
    add_common_arguments(parser)
    parser.add_argument("-n", "--n-timesteps", type=positive_int, default=None, metavar="TIMESTEPS",
                        help="number of timesteps to train (default: n_timesteps of the hyperparameters)")
    parser.add_argument("--hyperparams", nargs="+", default=[], metavar="FILE_OR_KEY:VALUE",
                        help="overrides: YAML files (flat, or keyed by env id as the shipped files) and/or "
                             "KEY:VALUE pairs (e.g. learning_rate:lin_0.001 n_steps:64), applied in order")
    parser.add_argument("--n-envs", type=int, default=None, metavar="N", help="override n_envs")
    add_vec_env_argument(parser)
    parser.add_argument("--eval-freq", type=int, default=10000, metavar="N",
                        help="evaluate every N timesteps and keep the best model (<= 0: no evaluation; "
                             "default: 10000)")
    parser.add_argument("--eval-episodes", type=int, default=5, metavar="N",
                        help="episodes per evaluation (default: 5)")
    parser.add_argument("--save-freq", type=int, default=-1, metavar="N",
                        help="save a checkpoint every N timesteps in <run>/checkpoints (<= 0: none; default)")
    parser.add_argument("--log-interval", type=int, default=None, metavar="N",
                        help="log_interval of learn() (default: the algorithm's)")
    parser.add_argument("-tb", "--tensorboard-log", default=None, metavar="DIR",
                        help="TensorBoard log folder (runs go to DIR/<ENV_ID>)")
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                        help="0: quiet, 1: one summary line per log interval (default), 2: the algorithm's full "
                             "log tables and debug output")
    parser.add_argument("--no-progress", action="store_true", help="do not show the progress bar")


@dataclass
class TrainPlan:
    """What ``sbtf train`` will do, worked out before anything is built."""

    algo: str
    env_id: str
    name: str
    hyperparams: Dict[str, Any]
    n_timesteps: int
    n_envs: int
    settings: EnvSettings
    algo_class: type
    model_class: Optional[Tuple[str, type]]
    tuned: bool


def plan_training(args: argparse.Namespace) -> TrainPlan:
    """
    Check the algorithm, the env and the hyperparameters of a ``train`` command, and merge the hyperparameters
    (shipped defaults, then ``--hyperparams`` items in order, then ``-n`` / ``--n-envs``).

    :param args: (argparse.Namespace) parsed ``train`` arguments
    :return: (TrainPlan)
    """
    algo = algo_name(args.algo)
    import_gym_packages(args.gym_packages)
    defaults = load_default_hyperparams(algo)
    env_id = resolve_env(args.env, algo, sorted(defaults))
    entry = find_env_entry(defaults, env_id, args.env)
    hyperparams: Dict[str, Any] = dict(entry) if entry is not None else {}
    for item in args.hyperparams:
        hyperparams.update(load_overrides(item, env_id, args.env))
    if args.n_timesteps is not None:
        if args.n_timesteps <= 0:
            raise CLIError("-n/--n-timesteps must be positive, got {}".format(args.n_timesteps))
        hyperparams["n_timesteps"] = args.n_timesteps
    if args.n_envs is not None:
        hyperparams["n_envs"] = args.n_envs
    if "n_timesteps" not in hyperparams:
        raise CLIError("no tuned {} hyperparameters for {} (tuned envs: {}); give the number of timesteps with -n "
                       "(and hyperparameters with --hyperparams) to train with the algorithm's defaults".format(
                           algo, env_id, ", ".join(sorted(defaults)) or "none"))
    n_timesteps = hyperparams["n_timesteps"]
    if not is_number(n_timesteps) or n_timesteps < 1:
        raise CLIError("n_timesteps must be a positive number, got {}".format(describe_value(n_timesteps)))
    n_timesteps = int(n_timesteps)
    hyperparams["n_timesteps"] = n_timesteps
    n_envs = check_n_envs(as_int(hyperparams.get("n_envs", 1), "n_envs", 1), "the hyperparameters")
    hyperparams["n_envs"] = n_envs
    if n_envs > 1 and algo not in MULTI_ENV_ALGOS:
        raise CLIError("{} trains on a single env: n_envs must be 1, got {} (multi-env algorithms: {})".format(
            algo, n_envs, ", ".join(sorted(MULTI_ENV_ALGOS))))
    if is_atari_id(env_id) and "frame_stack" not in hyperparams:  # the zoo's train.py stacked 4 Atari frames
        hyperparams["frame_stack"] = ATARI_FRAME_STACK
    settings = env_settings(hyperparams, getattr(args, "allow_wrapper", ()), "the hyperparameters")
    wrapper_class(settings.env_wrapper, settings)  # names and arguments checked before anything is made
    if algo == "her" and (settings.normalize or settings.frame_stack):
        raise CLIError("her does not support normalize or frame_stack (HER wraps the env itself)")

    algo_class = load_algorithm(algo)
    info = algorithms.get(algo)
    model_class = None
    delegate = None
    if info.wraps:  # HER: the wrapped algorithm takes the other hyperparameters
        model_class = her_model_class(hyperparams)
        delegate = model_class[1]
    elif info.extends:  # GAIL: its **kwargs go to TRPO
        delegate = load_algorithm(algorithms.get(info.extends).cli_name)
    valid = valid_hyperparameters(algo, algo_class, delegate, model_class[0] if model_class else None)
    check_hyperparameter_names(algo, hyperparams, valid)
    return TrainPlan(algo, env_id, safe_name(env_id), hyperparams, n_timesteps, n_envs, settings, algo_class,
                     model_class, entry is not None)


def _learn(model: Any, n_timesteps: int, callbacks: List[Any], progress: bool, log_interval: Optional[int],
           verbose: int = 1) -> None:
    """Run ``model.learn``: at ``verbose`` 1 one summary line per log interval, at 2 the algorithm's tables."""
    learn_params = inspect.signature(model.learn).parameters
    kwargs: Dict[str, Any] = {}
    if log_interval is not None:
        kwargs["log_interval"] = log_interval
    if progress:
        if "progress_bar" in learn_params:
            kwargs["progress_bar"] = True
        else:
            callbacks = callbacks + [ProgressBarCallback()]
    with one_line_logs() if verbose == 1 else contextlib.nullcontext():
        model.learn(n_timesteps, callback=callbacks or None, **kwargs)


def _save_learning_curve(run_dir: str, title: str) -> None:
    """Write ``learning_curve.png`` (a drawing failure is a warning: the trained model is what matters)."""

    try:
        path = save_run_curve(run_dir, title)
    except Exception as exc:  # noqa: BLE001 - e.g. a matplotlib problem; the run is saved already
        print("sbtf: warning: could not draw the learning curve: {}".format(exc_text(exc)), file=sys.stderr)
        return
    if path is None:
        print("No episode finished: no learning curve drawn")
    else:
        print("Saved the learning curve to {}".format(path))


def run_train(args: argparse.Namespace) -> int:
    """The ``train`` subcommand."""
    plan = plan_training(args)
    algo, env_id, name, hyperparams = plan.algo, plan.env_id, plan.name, plan.hyperparams
    check_vec_env(args.vec_env, env_id, algo)
    if args.verbose >= 1:
        source = hyperparams_file(algo) if plan.tuned else "no tuned entry: the algorithm's defaults"
        print("Hyperparameters for {} on {} ({}{}):".format(
            algo, env_id, source, ", with overrides" if args.hyperparams else ""))
        print("  " + yaml.safe_dump(plain(hyperparams), default_flow_style=False, sort_keys=True)
              .rstrip().replace("\n", "\n  "))

    algo_dir = os.path.join(args.log_folder, algo)
    new_dirs = [path for path in (args.log_folder, algo_dir) if not os.path.isdir(path)]
    run_dir, run_id = new_run_dir(algo_dir, name)
    envs_to_close: List[Any] = []
    try:
        venv = make_env(env_id, plan.n_envs, args.seed, plan.settings, monitor_dir=run_dir, vec_env=args.vec_env)
        envs_to_close.append(venv)
        gamma = hyperparams.get("gamma")
        train_env = wrap_vec_env(venv, plan.settings, gamma=gamma if is_number(gamma) else None)
        if "policy" not in hyperparams:
            hyperparams["policy"] = default_policy(train_env.observation_space)
        kwargs = model_kwargs(algo, hyperparams, train_env.action_space, plan.model_class)
        policy = kwargs.pop("policy")
        model_env = venv.envs[0] if algo == "her" else train_env
        tensorboard_log = os.path.join(args.tensorboard_log, name) if args.tensorboard_log else None
        try:
            model = plan.algo_class(policy, model_env, verbose=args.verbose, seed=args.seed,
                                    tensorboard_log=tensorboard_log, **kwargs)
        except (ValueError, TypeError, NotImplementedError, KeyError) as exc:
            raise CLIError("cannot create the {} model with these hyperparameters: {}".format(
                algo, exc_text(exc))) from exc

        callbacks: List[Any] = []
        if args.eval_freq and args.eval_freq > 0:
            if args.eval_episodes < 1:
                raise CLIError("--eval-episodes must be at least 1, got {}".format(args.eval_episodes))
            # one eval env in this process; EnvPool's when training on EnvPool (its Atari frames are its own)
            eval_venv = make_env(env_id, 1, args.seed + 1000, plan.settings,
                                 vec_env="envpool" if args.vec_env == "envpool" else "dummy")
            envs_to_close.append(eval_venv)
            eval_env = wrap_vec_env(eval_venv, plan.settings, training=False)
            callbacks.append(EvalCallback(eval_env, n_eval_episodes=args.eval_episodes,
                                          eval_freq=max(args.eval_freq // plan.n_envs, 1), log_path=run_dir,
                                          best_model_save_path=run_dir, deterministic=True,
                                          verbose=1 if args.verbose >= 1 else 0))
        if args.save_freq and args.save_freq > 0:
            callbacks.append(CheckpointCallback(save_freq=max(args.save_freq // plan.n_envs, 1),
                                                save_path=os.path.join(run_dir, "checkpoints"),
                                                name_prefix="rl_model", verbose=args.verbose))
    except BaseException:
        for env in envs_to_close:
            env.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        for path in reversed(new_dirs):  # folders this run created, if they are still empty
            try:
                os.rmdir(path)
            except OSError:
                pass
        raise

    exit_code = 0
    try:
        _learn(model, plan.n_timesteps, callbacks, not args.no_progress, args.log_interval, args.verbose)
    except KeyboardInterrupt:
        print("\nTraining interrupted: saving the model trained so far ({} timesteps).".format(
            getattr(model, "num_timesteps", "?")), file=sys.stderr)
        exit_code = 130
    if getattr(model, "num_timesteps", 1) == 0:
        print("sbtf: warning: the model made no training step: n_timesteps ({}) may be smaller than one rollout of "
              "{}".format(plan.n_timesteps, algo), file=sys.stderr)

    model_path = os.path.join(run_dir, "{}.zip".format(name))
    model.save(model_path)
    config_path = os.path.join(run_dir, "config.yml")
    dump_yaml(hyperparams, config_path)
    dump_yaml({"algo": algo, "env": env_id, "seed": args.seed, "n_timesteps": plan.n_timesteps,
                "log_folder": args.log_folder, "hyperparams": list(args.hyperparams), "eval_freq": args.eval_freq,
                "eval_episodes": args.eval_episodes, "save_freq": args.save_freq,
                "tensorboard_log": args.tensorboard_log, "gym_packages": list(args.gym_packages),
                "vec_env": args.vec_env},
               os.path.join(run_dir, "args.yml"))
    print("Saved the model to {}".format(model_path))
    print("Saved the hyperparameters to {}".format(config_path))
    if plan.settings.normalize:
        from sbtf.common.vec_env import unwrap_vec_normalize  # pylint: disable=import-outside-toplevel
        vec_normalize = unwrap_vec_normalize(train_env)
        stats_path = os.path.join(run_dir, "vecnormalize.pkl")
        vec_normalize.save(stats_path)
        print("Saved the VecNormalize statistics to {}".format(stats_path))
    best = os.path.join(run_dir, "best_model.zip")
    if os.path.isfile(best):
        print("Saved the best evaluated model to {} (evaluations: {})".format(
            best, os.path.join(run_dir, "evaluations.npz")))
    for env in envs_to_close:
        env.close()
    _save_learning_curve(run_dir, "{} on {}".format(algo, env_id))
    print("Watch it with: sbtf enjoy --algo {} --env {} -f {} --exp-id {}".format(algo, env_id, args.log_folder,
                                                                                  run_id))
    return exit_code


register_subcommand("train", run_train, add_train_arguments,
                    help="train an agent with tuned hyperparameters",
                    description="Train an agent with the tuned hyperparameters shipped in sbtf/hyperparams/<algo>.yml "
                                "(overridable) and save it in LOG_FOLDER/<algo>/<ENV_ID>_<run_id>/.")
