"""What sbtf's versions of stable-baselines 2's scripts share: the flags of the Atari scripts and of the DQN
experiments, the policy named by ``--policy``, and the env of the MPI Atari scripts (PPO1, TRPO: one DeepMind-wrapped,
monitored Atari env per MPI rank)."""
from __future__ import annotations

import argparse
import os
from typing import Callable, Dict, List, Optional

import gymnasium

from sbtf import logger
from sbtf.bench import Monitor
from sbtf.common import atari_wrappers
from sbtf.common.cmd_util import atari_arg_parser
from sbtf.common.misc_util import set_global_seeds
from sbtf.common.mpi_util import get_rank


# ----------------------------------------------------------------------------------------- flags
def atari_policy_arg_parser(policies: Dict[str, type], lr_schedule: bool = False) -> argparse.ArgumentParser:
    """
    SB2's Atari flags (``--env``, ``--seed``, ``--num-timesteps``) plus ``--policy`` (default 'cnn') and, with
    ``lr_schedule``, ``--lr_schedule`` ('constant' or 'linear').

    :param policies: ({str: type}) the ``--policy`` choices
    :param lr_schedule: (bool) whether the script takes ``--lr_schedule``
    """
    parser = atari_arg_parser()
    parser.add_argument("--policy", choices=list(policies), default="cnn", help="Policy architecture")
    if lr_schedule:
        parser.add_argument("--lr_schedule", choices=["constant", "linear"], default="constant",
                            help="Learning rate schedule")
    return parser


def policy_choice(policies: Dict[str, type], policy: str) -> type:
    """The policy class named ``policy`` (SB2's error for a name that is not one of ``policies``)."""
    if policy not in policies:
        raise ValueError("Error: policy {} not implemented (choose from {})".format(policy, ", ".join(policies)))
    return policies[policy]


def train_with_atari_flags(train: Callable, argv: Optional[List[str]] = None) -> None:
    """Parse SB2's Atari flags and call ``train(env, num_timesteps=..., seed=...)``."""
    args = atari_arg_parser().parse_args(argv)
    train(args.env, num_timesteps=args.num_timesteps, seed=args.seed)


def max_timesteps_args(description: str, argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The flags of the DQN ``train_*`` experiments: ``--max-timesteps`` (default 100000)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--max-timesteps", default=100000, type=int, help="Maximum number of timesteps")
    return parser.parse_args(argv)


# ----------------------------------------------------------------------------------------- MPI Atari env
def configure_logger_per_rank() -> int:
    """Configure the logger on rank 0 only (the other ranks log nothing), as SB2's MPI scripts did; the rank."""
    rank = get_rank()
    if rank == 0:
        logger.configure()
    else:
        logger.configure(format_strs=[])
    return rank


def make_rank_atari_env(env_id: str, seed: int, rank: int) -> gymnasium.Env:
    """
    ``make_atari`` + ``Monitor`` (file ``<rank>.monitor.csv`` in the logger's folder) + ``wrap_deepmind``, seeded
    with ``seed + 10000 * rank`` (also the global seeds).

    :param env_id: (str) a ``NoFrameskip`` env id
    :param seed: (int) the base seed
    :param rank: (int) the MPI rank
    :return: (gymnasium.Env)
    """
    worker_seed = seed + 10000 * rank
    set_global_seeds(worker_seed)
    env = atari_wrappers.make_atari(env_id)
    log_dir = logger.get_dir()
    env = Monitor(env, log_dir and os.path.join(log_dir, str(rank)))
    env = atari_wrappers.wrap_deepmind(env)
    env.reset(seed=worker_seed)
    env.action_space.seed(worker_seed)
    return env


def mpi_atari_env(env_id: str, seed: int) -> gymnasium.Env:
    """The logger configured per rank (``configure_logger_per_rank``) and this rank's env (``make_rank_atari_env``)."""
    return make_rank_atari_env(env_id, seed, configure_logger_per_rank())
