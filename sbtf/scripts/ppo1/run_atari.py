"""PPO1 on an Atari game: stable-baselines 2's ``ppo1/run_atari.py`` on sbtf (one env per MPI rank).

::

    mpirun -np 4 python -m sbtf.scripts.ppo1.run_atari --env BreakoutNoFrameskip-v4

Atari envs need ale-py (``pip install "sbtf[atari]"``); several ranks need mpi4py (``pip install "sbtf[mpi]"``).
"""
from __future__ import annotations

from typing import List, Optional

from sbtf.common.policies import CnnPolicy
from sbtf.ppo1 import PPO1
from sbtf.scripts._helpers import mpi_atari_env, train_with_atari_flags


def train(env_id: str, num_timesteps: int, seed: int) -> None:
    """
    Train PPO1 with a CNN policy on an Atari game; every MPI rank runs one env (seed ``seed + 10000 * rank``).

    :param env_id: (str) a ``NoFrameskip`` env id
    :param num_timesteps: (int) the number of timesteps
    :param seed: (int) the base seed
    """
    env = mpi_atari_env(env_id, seed)
    model = PPO1(CnnPolicy, env, timesteps_per_actorbatch=256, clip_param=0.2, entcoeff=0.01, optim_epochs=4,
                 optim_stepsize=1e-3, optim_batchsize=64, gamma=0.99, lam=0.95, schedule="linear", verbose=2)
    model.learn(total_timesteps=num_timesteps)
    env.close()


def main(argv: Optional[List[str]] = None) -> None:
    """Parse the flags (``--env``, ``--seed``, ``--num-timesteps``) and train."""
    train_with_atari_flags(train, argv)


if __name__ == "__main__":
    main()
