"""TRPO on an Atari game: stable-baselines 2's ``trpo_mpi/run_atari.py`` on sbtf (one env per MPI rank).

::

    mpirun -np 4 python -m sbtf.scripts.trpo_mpi.run_atari --env BreakoutNoFrameskip-v4

Atari envs need ale-py (``pip install "sbtf[atari]"``); several ranks need mpi4py (``pip install "sbtf[mpi]"``).
"""
from __future__ import annotations

from typing import List, Optional

from sbtf.common.policies import CnnPolicy
from sbtf.scripts._helpers import mpi_atari_env, train_with_atari_flags
from sbtf.trpo_mpi import TRPO


def train(env_id: str, num_timesteps: int, seed: int) -> None:
    """
    Train TRPO with a CNN policy on an Atari game for ``1.1 * num_timesteps``; every MPI rank runs one env.

    :param env_id: (str) a ``NoFrameskip`` env id
    :param num_timesteps: (int) the number of timesteps
    :param seed: (int) the base seed
    """
    env = mpi_atari_env(env_id, seed)
    model = TRPO(CnnPolicy, env, timesteps_per_batch=512, max_kl=0.001, cg_iters=10, cg_damping=1e-3, entcoeff=0.0,
                 gamma=0.98, lam=1, vf_iters=3, vf_stepsize=1e-4)
    model.learn(total_timesteps=int(num_timesteps * 1.1))
    env.close()


def main(argv: Optional[List[str]] = None) -> None:
    """Parse the flags (``--env``, ``--seed``, ``--num-timesteps``) and train."""
    train_with_atari_flags(train, argv)


if __name__ == "__main__":
    main()
