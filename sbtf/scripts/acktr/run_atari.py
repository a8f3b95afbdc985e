"""ACKTR on an Atari game: stable-baselines 2's ``acktr/run_atari.py`` on sbtf.

::

    python -m sbtf.scripts.acktr.run_atari --env BreakoutNoFrameskip-v4 --num-timesteps 1000000

Atari envs need ale-py (``pip install "sbtf[atari]"``).
"""
from __future__ import annotations

from typing import List, Optional

from sbtf import logger
from sbtf.acktr import ACKTR
from sbtf.common.cmd_util import atari_arg_parser, make_atari_env
from sbtf.common.policies import CnnPolicy
from sbtf.common.vec_env import VecFrameStack


def train(env_id: str, num_timesteps: int, seed: int, num_cpu: int) -> None:
    """
    Train ACKTR with a CNN policy on an Atari game (4 stacked DeepMind frames), for ``1.1 * num_timesteps``.

    :param env_id: (str) a ``NoFrameskip`` env id
    :param num_timesteps: (int) the number of timesteps
    :param seed: (int) the seed
    :param num_cpu: (int) the number of envs
    """
    env = VecFrameStack(make_atari_env(env_id, num_cpu, seed), 4)
    model = ACKTR(CnnPolicy, env, nprocs=num_cpu, seed=seed)
    model.learn(total_timesteps=int(num_timesteps * 1.1))
    env.close()


def main(argv: Optional[List[str]] = None) -> None:
    """Parse the flags (``--env``, ``--seed``, ``--num-timesteps``) and train with 32 envs."""
    args = atari_arg_parser().parse_args(argv)
    logger.configure()
    train(args.env, num_timesteps=args.num_timesteps, seed=args.seed, num_cpu=32)


if __name__ == "__main__":
    main()
