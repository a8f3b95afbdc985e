"""``sbtf plot``: the learning curves of trained runs (their ``Monitor`` files) as a PNG.

``sbtf plot -f logs --algo ppo2 a2c --env CartPole-v1`` draws, for each algorithm and env, the runs found in
``LOG_FOLDER/<algo>/<ENV_ID>_<N>/``: one run as its episode returns and their moving average, several runs (seeds)
as the mean of their smoothed curves with a +/- one standard deviation band. ``sbtf train`` writes the curve of the
run it trained as ``learning_curve.png`` in the run folder (:func:`save_run_curve`).
"""
from __future__ import annotations

import argparse
import os
from typing import List, Optional, Sequence, Tuple

from sbtf.bench.monitor import get_monitor_files
from sbtf.cli.errors import CLIError
from sbtf.cli.hyperparams import algo_name
from sbtf.cli.plugins import register_subcommand
from sbtf.cli.runs import _run_ids, safe_name
from sbtf.results_plotter import EPISODES_WINDOW, POSSIBLE_X_AXES, X_TIMESTEPS, load_curve, plot_learning_curves

#: the file ``sbtf train`` writes in each run folder
LEARNING_CURVE_FILE = "learning_curve.png"


def add_plot_arguments(parser: argparse.ArgumentParser) -> None:
    """
    Add ``sbtf plot``'s flags to ``parser``.

    :param parser: the subcommand's parser
    """
    parser.add_argument("-f", "--log-folder", default="logs", metavar="LOG_FOLDER",
                        help="root folder of the runs (default: logs)")
    parser.add_argument("--algo", nargs="+", required=True, metavar="ALGO", help="one or more algorithms")
    parser.add_argument("--env", nargs="+", required=True, metavar="ENV_ID", help="one or more env ids")
    parser.add_argument("--exp-id", nargs="+", type=int, default=None, metavar="N",
                        help="only these run numbers (default: every run of each algorithm and env)")
    parser.add_argument("-x", "--x-axis", default="timesteps", choices=POSSIBLE_X_AXES,
                        help="x axis (default: timesteps)")
    parser.add_argument("-w", "--window", type=int, default=EPISODES_WINDOW, metavar="EPISODES",
                        help="moving-average window in episodes (1: raw returns; default: {})".format(EPISODES_WINDOW))
    parser.add_argument("--max", type=float, default=None, metavar="X", help="plot only up to this x")
    parser.add_argument("-o", "--output", default=None, metavar="OUT.png",
                        help="the image file (default: LOG_FOLDER/<ENV_ID>_<algos>.png)")
    parser.add_argument("--title", default=None, help="figure title (default: the env ids)")
    parser.add_argument("--figsize", nargs=2, type=float, default=(8.0, 4.5), metavar=("WIDTH", "HEIGHT"),
                        help="figure size in inches (default: 8 4.5)")


def find_runs(log_folder: str, algo: str, env_id: str, exp_ids: Optional[Sequence[int]] = None) -> List[str]:
    """
    The run folders of an algorithm on an env that hold monitor files: ``LOG_FOLDER/<algo>/<ENV_ID>_<N>``.

    :param log_folder: (str) root folder of the runs
    :param algo: (str) algorithm name
    :param env_id: (str) env id
    :param exp_ids: ([int]) only these run numbers (None: all)
    :return: ([str]) the folders, by run number
    """

    algo_dir = os.path.join(log_folder, algo)
    name = safe_name(env_id)
    runs = []
    for run_id in _run_ids(algo_dir, name):
        if exp_ids and run_id not in exp_ids:
            continue
        folder = os.path.join(algo_dir, "{}_{}".format(name, run_id))
        if get_monitor_files(folder):
            runs.append(folder)
    return runs


def _load_curves(folders: Sequence[str], xaxis: str, max_x: Optional[float]) -> List[Tuple[object, object]]:
    curves = []
    for folder in folders:
        try:
            curves.append(load_curve(folder, xaxis, max_x))
        except Exception as exc:  # noqa: BLE001 - a broken monitor file: say which, one line
            raise CLIError("cannot read the monitor files of {}: {}".format(folder, exc)) from exc
    return curves


def save_run_curve(run_dir: str, title: str, path: Optional[str] = None) -> Optional[str]:
    """
    Draw the learning curve of one run (its monitor files, x = timesteps) to ``run_dir/learning_curve.png``.

    :param run_dir: (str) a run folder with monitor files
    :param title: (str) the figure's title
    :param path: (str) the image file (default: ``run_dir/learning_curve.png``)
    :return: (str or None) the file written; None when the run finished no episode
    """

    x_var, y_var = load_curve(run_dir, X_TIMESTEPS)
    if len(x_var) == 0:
        return None
    window = max(1, min(EPISODES_WINDOW, len(y_var) // 5))
    fig = plot_learning_curves([(os.path.basename(os.path.normpath(run_dir)), [(x_var, y_var)])], X_TIMESTEPS,
                               title, window=window)
    path = path or os.path.join(run_dir, LEARNING_CURVE_FILE)
    fig.savefig(path, dpi=100)
    return path


def run_plot(args: argparse.Namespace) -> int:
    """The ``plot`` subcommand."""

    if args.window < 1:
        raise CLIError("--window must be at least 1, got {}".format(args.window))
    algos = [algo_name(algo) for algo in args.algo]
    groups = []
    missing = []
    for env_id in args.env:
        for algo in algos:
            folders = find_runs(args.log_folder, algo, env_id, args.exp_id)
            if not folders:
                missing.append("{}/{}_*".format(algo, safe_name(env_id)))
                continue
            curves = _load_curves(folders, args.x_axis, args.max)
            label = algo if len(args.env) == 1 else "{} {}".format(algo, env_id)
            groups.append((label, curves))
            print("{} on {}: {} run(s) ({})".format(algo, env_id, len(folders), ", ".join(
                "{} episodes".format(len(curve[0])) for curve in curves)))
    if not groups:
        raise CLIError("no runs with monitor files in {} for {} (train one with: sbtf train --algo {} --env {} -f "
                       "{})".format(args.log_folder, ", ".join(missing), algos[0], args.env[0], args.log_folder))
    if not any(len(curve[0]) for _, curves in groups for curve in curves):
        raise CLIError("the runs found have no finished episode yet{}".format(
            "" if args.max is None else " up to --max {}".format(args.max)))
    for pattern in missing:
        print("sbtf plot: no runs for {} in {}".format(pattern, args.log_folder))
    output = args.output or os.path.join(args.log_folder, "{}_{}.png".format(
        "_".join(safe_name(env) for env in args.env), "_".join(algos)))
    fig = plot_learning_curves(groups, args.x_axis, args.title if args.title is not None else ", ".join(args.env),
                               window=args.window, figsize=tuple(args.figsize))
    folder = os.path.dirname(os.path.abspath(output))
    os.makedirs(folder, exist_ok=True)
    fig.savefig(output, dpi=100)
    print("Saved the learning curves to {}".format(output))
    return 0


register_subcommand("plot", run_plot, add_plot_arguments,
                    help="plot learning curves of trained runs to a PNG",
                    description="Draw the learning curves (episode returns from the Monitor files) of the runs in "
                                "LOG_FOLDER/<algo>/<ENV_ID>_<N>/: one run as its smoothed returns, several runs as "
                                "their mean +/- standard deviation.")
