"""The env of the MPI Atari scripts (PPO1, TRPO): one DeepMind-wrapped, monitored Atari env per MPI rank."""
from __future__ import annotations

import os

import gymnasium

from sbtf import logger
from sbtf.bench import Monitor
from sbtf.common import atari_wrappers
from sbtf.common.misc_util import set_global_seeds
from sbtf.common.mpi_util import get_rank


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
