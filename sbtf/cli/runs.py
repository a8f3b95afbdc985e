"""Where ``sbtf train`` puts its runs and ``sbtf enjoy`` finds them: ``LOG_FOLDER/<algo>/<ENV_ID>_<run id>/``, and
the arguments both commands share.
"""
from __future__ import annotations

import argparse
import os
import re
from typing import List, Tuple

from sbtf.cli.errors import CLIError
from sbtf.cli.hyperparams import ALGOS
from sbtf.zoo.config import check_seed
from sbtf.zoo.errors import ZooConfigError


def safe_name(env_id: str) -> str:
    """An env id as a file / folder name."""
    return env_id.replace("/", "-").replace(":", "-").replace(os.sep, "-")


def _run_ids(algo_dir: str, name: str) -> List[int]:
    if not os.path.isdir(algo_dir):
        return []
    pattern = re.compile(r"^{}_(\d+)$".format(re.escape(name)))
    ids = []
    for entry in os.listdir(algo_dir):
        match = pattern.match(entry)
        if match and os.path.isdir(os.path.join(algo_dir, entry)):
            ids.append(int(match.group(1)))
    return sorted(ids)


def new_run_dir(algo_dir: str, name: str) -> Tuple[str, int]:
    """Create the next run folder ``algo_dir/<name>_<id>``: ``(path, id)``."""
    os.makedirs(algo_dir, exist_ok=True)
    run_id = max(_run_ids(algo_dir, name), default=0) + 1
    while True:
        path = os.path.join(algo_dir, "{}_{}".format(name, run_id))
        try:
            os.makedirs(path)
            return path, run_id
        except FileExistsError:
            run_id += 1


def find_run_dir(log_folder: str, algo: str, name: str, exp_id: int) -> str:
    """
    The folder of a trained run: ``LOG_FOLDER/<algo>/<name>_<exp_id>`` (exp_id 0: the latest).

    :return: (str)
    """
    algo_dir = os.path.join(log_folder, algo)
    ids = _run_ids(algo_dir, name)
    if not ids:
        raise CLIError("no trained {} agent for {} in {} (train one with: sbtf train --algo {} --env {} -f {})".format(
            algo, name, algo_dir, algo, name, log_folder))
    if exp_id == 0:
        exp_id = ids[-1]
    elif exp_id not in ids:
        raise CLIError("no run {}_{} in {}; runs found: {}".format(name, exp_id, algo_dir,
                                                                  ", ".join(str(i) for i in ids)))
    return os.path.join(algo_dir, "{}_{}".format(name, exp_id))


def seed_int(text: str) -> int:
    """argparse type: a seed, an integer 0 .. 2**32 - 1 (what numpy's generators take)."""
    try:
        return check_seed(int(text.strip()), "--seed")
    except (ValueError, ZooConfigError) as exc:
        raise argparse.ArgumentTypeError("expected an integer from 0 to 2**32 - 1, got {!r}".format(
            text[:40])) from exc


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``train`` and ``enjoy``: algorithm, env, log folder, seed, extra env packages, wrappers."""
    parser.add_argument("--algo", required=True, metavar="ALGO",
                        help="RL algorithm: {}".format(", ".join(sorted(ALGOS))))
    parser.add_argument("--env", required=True, metavar="ENV_ID", help="gymnasium env id (e.g. CartPole-v1)")
    parser.add_argument("-f", "--log-folder", default="logs", metavar="LOG_FOLDER",
                        help="root folder of the runs (default: logs)")
    parser.add_argument("--seed", type=seed_int, default=0, help="random seed, 0 .. 2**32 - 1 (default: 0)")
    parser.add_argument("--gym-packages", nargs="+", default=[], metavar="MODULE",
                        help="Python modules to import first (they register extra envs)")
    parser.add_argument("--allow-wrapper", action="append", default=[], metavar="MODULE.NAME",
                        help="an env_wrapper named by the hyperparameters or the run's config.yml that is neither "
                             "sbtf's nor gymnasium's and that you trust (repeatable)")
