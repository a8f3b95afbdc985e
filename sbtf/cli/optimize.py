"""``sbtf optimize``: tune an algorithm's hyperparameters on an env with Optuna, as rl-baselines-zoo's
``train.py --optimize`` did.

Each trial samples hyperparameters from the zoo's search space of the algorithm (:mod:`sbtf.cli.search_spaces`) on
top of the shipped ones (and the ``--hyperparams`` overrides), trains for ``-n`` timesteps and is evaluated
``--n-evaluations`` times on a separate env; each evaluation's mean return is reported to Optuna, whose pruner may
stop a poor trial early. The trial's value is its last evaluation. With ``--storage`` (e.g. ``sqlite:///study.db``)
and ``--study-name`` a study is resumable: the same command later adds trials to it. At the end the best
hyperparameters are written as a YAML file that ``sbtf train --hyperparams FILE`` takes, next to a CSV of all trials.
"""
from __future__ import annotations

import argparse
import inspect
import math
import os
import socket
import time
import warnings
from typing import Any, Dict, List

import yaml

from sbtf.cli.envs import add_vec_env_argument, check_vec_env, make_env, wrap_vec_env
from sbtf.cli.errors import CLIError, exc_text
from sbtf.cli.hyperparams import algo_name, default_policy, is_number, model_kwargs, positive_int
from sbtf.cli.plugins import register_subcommand
from sbtf.cli.runs import add_common_arguments
from sbtf.cli.search_spaces import HYPERPARAMS_SAMPLER, SEARCHABLE_ALGOS, sample_her_params
from sbtf.cli.train import dump_yaml, plain, plan_training
from sbtf.common.callbacks import EvalCallback

SAMPLERS = ("tpe", "random")
PRUNERS = ("median", "halving", "none")
#: name of the YAML file of the best hyperparameters, in the output folder
BEST_FILE = "best_hyperparams.yml"


def add_optimize_arguments(parser: argparse.ArgumentParser) -> None:
    """
    Add ``sbtf optimize``'s flags to ``parser`` (the common ones included).

    :param parser: the subcommand's parser
    """
    add_common_arguments(parser)
    parser.add_argument("-n", "--n-timesteps", type=positive_int, default=None, metavar="TIMESTEPS",
                        help="timesteps per trial (default: n_timesteps of the shipped hyperparameters)")
    parser.add_argument("--hyperparams", nargs="+", default=[], metavar="FILE_OR_KEY:VALUE",
                        help="fixed overrides applied before sampling (as for sbtf train)")
    parser.add_argument("--n-envs", type=int, default=None, metavar="N", help="override n_envs")
    add_vec_env_argument(parser)
    parser.add_argument("--n-trials", type=positive_int, default=10, metavar="N",
                        help="trials to run in this call (default: 10)")
    parser.add_argument("--n-jobs", type=positive_int, default=1, metavar="N",
                        help="trials run in parallel threads (default: 1)")
    parser.add_argument("--sampler", default="tpe", choices=SAMPLERS, help="Optuna sampler (default: tpe)")
    parser.add_argument("--pruner", default="median", choices=PRUNERS, help="Optuna pruner (default: median)")
    parser.add_argument("--n-startup-trials", type=int, default=5, metavar="N",
                        help="trials sampled at random before TPE and the median pruner start (default: 5)")
    parser.add_argument("--n-evaluations", type=positive_int, default=20, metavar="N",
                        help="evaluations per trial, the points where a trial can be pruned (default: 20)")
    parser.add_argument("--eval-episodes", type=positive_int, default=5, metavar="N",
                        help="episodes per evaluation (default: 5)")
    parser.add_argument("--storage", default=None, metavar="URL",
                        help="Optuna storage: sqlite:///study.db (one machine), a database URL such as "
                             "postgresql://user:password@host/db (many machines at once), or journal:PATH (Optuna's "
                             "journal file, on a file system every machine shares). The study is kept there, shared "
                             "by every process that names it and resumed by the next call with the same "
                             "--study-name (default: in memory)")
    parser.add_argument("--heartbeat", type=positive_int, default=60, metavar="SECONDS",
                        help="with a database or journal storage: a running trial reports every SECONDS; a trial "
                             "whose process stopped reporting for 2x that is marked failed and run again by another "
                             "process (default: 60)")
    parser.add_argument("--study-name", default=None, metavar="NAME",
                        help="study name (default: <algo>_<ENV_ID>)")
    parser.add_argument("-o", "--output-dir", default=None, metavar="DIR",
                        help="where best_hyperparams.yml and trials.csv go (default: LOG_FOLDER/<algo>/"
                             "optimize_<ENV_ID>)")
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                        help="0: only the result; 1: one line per trial (default); 2: training output too")


#: the prefix of ``--storage`` for Optuna's journal file
JOURNAL_PREFIX = "journal:"
#: how often a failed (interrupted, killed) trial's hyperparameters are tried again
MAX_RETRY = 3


def make_storage(optuna: Any, url: Any, heartbeat: int = 60) -> Any:
    """
    The Optuna storage of ``--storage``: None (in memory), ``journal:PATH`` (a journal file that processes on many
    machines may share through a common file system), or a database URL (SQLite for one machine, PostgreSQL /
    MySQL for many). Journal and database storages get a heartbeat: a trial whose process died is marked failed
    after ``2 * heartbeat`` seconds and enqueued again (at most :data:`MAX_RETRY` times), so no trial is lost.

    :param optuna: the optuna module
    :param url: (str or None) the ``--storage`` value
    :param heartbeat: (int) seconds between a running trial's heartbeats
    """
    if url is None:
        return None
    if url.startswith(JOURNAL_PREFIX):
        path = url[len(JOURNAL_PREFIX):]
        if not path:
            raise CLIError("--storage journal:PATH needs a file path, e.g. journal:/shared/studies/ppo.log")
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        backend = optuna.storages.journal.JournalFileBackend(
            path, lock_obj=optuna.storages.journal.JournalFileOpenLock(path))
        return optuna.storages.JournalStorage(backend)
    # Optuna >= 4.9 names it RetryHeartbeatStaleTrialCallback (RetryFailedTrialCallback before); "experimental"
    retry_class = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or \
        optuna.storages.RetryFailedTrialCallback
    callback_name = ("heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback"
                     in inspect.signature(optuna.storages.RDBStorage).parameters else "failed_trial_callback")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = retry_class(max_retry=MAX_RETRY)
        return _open_rdb_storage(optuna, url, heartbeat, **{callback_name: retry})


def _open_rdb_storage(optuna: Any, url: str, heartbeat: int, attempts: int = 5, **kwargs: Any) -> Any:
    """
    Optuna's RDBStorage on ``url``. Workers started together on an empty database race to create Optuna's tables
    (PostgreSQL then reports a duplicate type or table to all but one): the losers open the storage again, which
    finds the schema the winner made.
    """
    from sqlalchemy.exc import IntegrityError, ProgrammingError
    for attempt in range(attempts):
        try:
            return optuna.storages.RDBStorage(url, heartbeat_interval=heartbeat, grace_period=2 * heartbeat,
                                              **kwargs)
        except (IntegrityError, ProgrammingError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))


def requeue_interrupted(optuna: Any, study: Any, trial_numbers: List[int]) -> int:
    """Enqueue again the hyperparameters of this process's trials that an interruption left failed or running."""
    states = (optuna.trial.TrialState.FAIL, optuna.trial.TrialState.RUNNING)
    requeued = 0
    for trial in study.get_trials(deepcopy=False):
        if trial.number in trial_numbers and trial.state in states and trial.params:
            study.enqueue_trial(trial.params, user_attrs={"retried_from": trial.number}, skip_if_exists=False)
            requeued += 1
    return requeued


def worker_name() -> str:
    """``host:pid`` of this process, stored with each trial it runs."""
    return "{}:{}".format(socket.gethostname(), os.getpid())


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def recover_dead_workers(optuna: Any, study: Any) -> int:
    """
    Trials left RUNNING by a process of this host that no longer exists (killed, machine rebooted) are marked
    failed and their hyperparameters enqueued again. Database storages do this through Optuna's heartbeat, for any
    host; Optuna's journal storage has no heartbeat, so for it this check covers the processes of this host.

    :return: (int) how many trials were enqueued again
    """
    host = socket.gethostname()
    recovered = 0
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = str(trial.user_attrs.get("worker", ""))
        name, _, pid = worker.rpartition(":")
        if name != host or not pid.isdigit() or _process_alive(int(pid)):
            continue
        study._storage.set_trial_state_values(trial._trial_id, state=optuna.trial.TrialState.FAIL)
        if trial.params and int(trial.user_attrs.get("retries", 0)) < MAX_RETRY:
            study.enqueue_trial(trial.params, user_attrs={"retried_from": trial.number,
                                                          "retries": int(trial.user_attrs.get("retries", 0)) + 1},
                                skip_if_exists=False)
            recovered += 1
    return recovered


def _import_optuna() -> Any:
    try:
        import optuna  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise CLIError("sbtf optimize needs Optuna: pip install 'sbtf[optimize]'", exit_code=1) from exc
    return optuna


def make_sampler(optuna: Any, name: str, n_startup_trials: int, seed: int) -> Any:
    """The Optuna sampler called ``name`` ('tpe' or 'random')."""
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(n_startup_trials=n_startup_trials, seed=seed)


def make_pruner(optuna: Any, name: str, n_startup_trials: int, n_evaluations: int) -> Any:
    """The Optuna pruner called ``name``: the zoo's settings ('median', 'halving') or none."""
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=4, min_early_stopping_rate=0)
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=n_startup_trials, n_warmup_steps=n_evaluations // 3)
    return optuna.pruners.NopPruner()


def sample_hyperparams(trial: Any, algo: str, hyperparams: Dict[str, Any]) -> Dict[str, Any]:
    """The hyperparameters a trial samples (HER: from its ``model_class``'s space)."""
    if algo == "her":
        return sample_her_params(trial, str(hyperparams.get("model_class", "sac")).lower())
    return HYPERPARAMS_SAMPLER[algo](trial)


class _TrialEvalCallbackFactory:
    """Builds the evaluation callback that reports to a trial and stops training when Optuna prunes it."""

    @staticmethod
    def build(trial: Any, eval_env: Any, n_eval_episodes: int, eval_freq: int) -> Any:
        class TrialEvalCallback(EvalCallback):
            """``EvalCallback`` that reports each evaluation's mean return to an Optuna trial and stops the training
            when the trial should be pruned."""

            def __init__(self) -> None:
                super().__init__(eval_env, n_eval_episodes=n_eval_episodes, eval_freq=eval_freq, deterministic=True,
                                 verbose=0)
                self.eval_idx = 0
                self.is_pruned = False

            def _on_step(self) -> bool:
                if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
                    super()._on_step()
                    self.eval_idx += 1
                    trial.report(self.last_mean_reward, self.eval_idx)
                    if trial.should_prune():
                        self.is_pruned = True
                        return False
                return True

        return TrialEvalCallback()


def run_optimize(args: argparse.Namespace) -> int:
    """The ``optimize`` subcommand."""

    algo = algo_name(args.algo)
    if algo not in SEARCHABLE_ALGOS:
        raise CLIError("no search space for {} (sbtf optimize tunes: {})".format(algo, ", ".join(SEARCHABLE_ALGOS)))
    optuna = _import_optuna()
    plan = plan_training(args)
    env_id, base = plan.env_id, dict(plan.hyperparams)
    check_vec_env(args.vec_env, env_id, algo)
    if plan.n_timesteps < args.n_evaluations:
        raise CLIError("-n ({}) must be at least --n-evaluations ({})".format(plan.n_timesteps, args.n_evaluations))
    eval_freq = max(plan.n_timesteps // args.n_evaluations // plan.n_envs, 1)
    output_dir = args.output_dir or os.path.join(args.log_folder, algo, "optimize_{}".format(plan.name))
    study_name = args.study_name or "{}_{}".format(algo, plan.name)
    if args.verbose < 2:
        optuna.logging.set_verbosity(optuna.logging.WARNING)

    started: List[int] = []  # the trials this process started (queued again when it is interrupted)

    def objective(trial: Any) -> float:
        started.append(trial.number)
        trial.set_user_attr("worker", worker_name())
        sampled = sample_hyperparams(trial, algo, base)
        hyperparams = {**base, **sampled}
        trial.set_user_attr("hyperparams", plain(sampled))
        envs: List[Any] = []
        try:
            venv = make_env(env_id, plan.n_envs, args.seed + 10 * trial.number, plan.settings, vec_env=args.vec_env)
            envs.append(venv)
            gamma = hyperparams.get("gamma")
            train_env = wrap_vec_env(venv, plan.settings, gamma=gamma if is_number(gamma) else None)
            eval_venv = make_env(env_id, 1, args.seed + 10 * trial.number + 1000, plan.settings,
                                 vec_env="envpool" if args.vec_env == "envpool" else "dummy")
            envs.append(eval_venv)
            eval_env = wrap_vec_env(eval_venv, plan.settings, training=False)
            if "policy" not in hyperparams:
                hyperparams["policy"] = default_policy(train_env.observation_space)
            kwargs = model_kwargs(algo, hyperparams, train_env.action_space, plan.model_class)
            policy = kwargs.pop("policy")
            model = plan.algo_class(policy, venv.envs[0] if algo == "her" else train_env,
                                    verbose=1 if args.verbose >= 2 else 0, seed=args.seed, **kwargs)
            callback = _TrialEvalCallbackFactory.build(trial, eval_env, args.eval_episodes, eval_freq)
            model.learn(plan.n_timesteps, callback=callback)
        except (ValueError, TypeError, AssertionError, FloatingPointError, CLIError) as exc:
            # sampled values that the algorithm refuses or that diverge (NaN): not a result
            if args.verbose >= 1:
                print("Trial {}: failed ({}), counted as pruned".format(trial.number, exc_text(exc)))
            raise optuna.TrialPruned() from exc
        finally:
            for env in envs:
                env.close()
        value = float(callback.last_mean_reward)
        if callback.is_pruned:
            if args.verbose >= 1:
                print("Trial {}: pruned after {} evaluation(s) (last mean return {:.2f})".format(
                    trial.number, callback.eval_idx, value))
            raise optuna.TrialPruned()
        if not math.isfinite(value):
            raise optuna.TrialPruned()
        if args.verbose >= 1:
            print("Trial {}: mean return {:.2f} with {}".format(trial.number, value, plain(sampled)))
        return value

    try:
        storage = make_storage(optuna, args.storage, args.heartbeat)
        study = optuna.create_study(study_name=study_name, storage=storage, load_if_exists=True,
                                    direction="maximize",
                                    sampler=make_sampler(optuna, args.sampler, args.n_startup_trials, args.seed),
                                    pruner=make_pruner(optuna, args.pruner, args.n_startup_trials,
                                                       args.n_evaluations))
    except Exception as exc:  # noqa: BLE001 - a bad storage URL or a study of another direction: one line
        raise CLIError("cannot open the study {!r} in {}: {}".format(study_name, args.storage or "memory",
                                                                    exc_text(exc))) from exc
    if args.storage is not None and args.storage.startswith(JOURNAL_PREFIX):
        recovered = recover_dead_workers(optuna, study)
        if recovered:
            print("{} trial(s) of a process that died are queued again".format(recovered))
    previous = len(study.trials)
    print("Optimizing {} on {}: {} trial(s) of {} timesteps, sampler {}, pruner {}, study {!r}{}".format(
        algo, env_id, args.n_trials, plan.n_timesteps, args.sampler, args.pruner, study_name,
        " ({} earlier trial(s) in {})".format(previous, args.storage) if previous else ""))
    try:
        study.optimize(objective, n_trials=args.n_trials, n_jobs=args.n_jobs)
    except KeyboardInterrupt:
        requeued = requeue_interrupted(optuna, study, started) if args.storage else 0
        print("Interrupted: writing the results of the finished trials" + (
            "; the {} interrupted trial(s) are queued again in the study".format(requeued) if requeued else "") + ".")

    complete = [trial for trial in study.trials if trial.state == optuna.trial.TrialState.COMPLETE]
    pruned = [trial for trial in study.trials if trial.state == optuna.trial.TrialState.PRUNED]
    print("Trials in the study: {} ({} complete, {} pruned)".format(len(study.trials), len(complete), len(pruned)))
    os.makedirs(output_dir, exist_ok=True)
    study.trials_dataframe().to_csv(os.path.join(output_dir, "trials.csv"), index=False)
    if not complete:
        raise CLIError("no trial completed (all were pruned or failed): try more trials, a larger -n or "
                       "--pruner none", exit_code=1)
    best = study.best_trial
    best_path = os.path.join(output_dir, BEST_FILE)
    best_hyperparams = {key: value for key, value in base.items() if key not in ("n_timesteps",)}
    best_hyperparams.update(best.user_attrs.get("hyperparams", {}))
    dump_yaml(best_hyperparams, best_path)
    print("Best trial: {} (mean return {:.2f})".format(best.number, best.value))
    print("  " + yaml.safe_dump(plain(best.user_attrs.get("hyperparams", {})), default_flow_style=False,
                                sort_keys=True).rstrip().replace("\n", "\n  "))
    print("Saved the best hyperparameters to {}".format(best_path))
    print("Train with them: sbtf train --algo {} --env {} --hyperparams {}".format(algo, env_id, best_path))
    return 0


register_subcommand("optimize", run_optimize, add_optimize_arguments,
                    help="tune hyperparameters with Optuna (the rl-baselines-zoo's search spaces)",
                    description="Tune an algorithm's hyperparameters on an env with Optuna: sampled from the "
                                "rl-baselines-zoo's search space, pruned through periodic evaluations, resumable "
                                "with --storage; the best ones are written as a YAML for sbtf train --hyperparams.")
