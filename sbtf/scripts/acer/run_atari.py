"""ACER on an Atari game: stable-baselines 2's ``acer/run_atari.py`` on sbtf.

::

    python -m sbtf.scripts.acer.run_atari --env BreakoutNoFrameskip-v4 --policy cnn --lr_schedule constant

Atari envs need ale-py (``pip install "sbtf[atari]"``).
"""
from __future__ import annotations

from typing import List, Optional

from sbtf import logger
from sbtf.acer import ACER
from sbtf.common.cmd_util import make_atari_env
from sbtf.common.policies import CnnLstmPolicy, CnnPolicy
from sbtf.common.vec_env import VecFrameStack
from sbtf.scripts._helpers import atari_policy_arg_parser, policy_choice

#: the ``--policy`` choices
POLICIES = {"cnn": CnnPolicy, "lstm": CnnLstmPolicy}


def train(env_id: str, num_timesteps: int, seed: int, policy: str, lr_schedule: str, num_cpu: int) -> None:
    """
    Train ACER on an Atari game (4 stacked DeepMind frames, a replay buffer of 5000), for ``1.1 * num_timesteps``.

    :param env_id: (str) a ``NoFrameskip`` env id
    :param num_timesteps: (int) the number of timesteps
    :param seed: (int) the seed
    :param policy: (str) 'cnn' or 'lstm'
    :param lr_schedule: (str) the learning rate schedule ('constant', 'linear', ...)
    :param num_cpu: (int) the number of envs
    """
    env = VecFrameStack(make_atari_env(env_id, num_cpu, seed), 4)
    model = ACER(policy_choice(POLICIES, policy), env, lr_schedule=lr_schedule, buffer_size=5000, seed=seed)
    model.learn(total_timesteps=int(num_timesteps * 1.1))
    env.close()


def main(argv: Optional[List[str]] = None) -> None:
    """Parse the flags (``--env``, ``--seed``, ``--num-timesteps``, ``--policy``, ``--lr_schedule``) and train."""
    args = atari_policy_arg_parser(POLICIES, lr_schedule=True).parse_args(argv)
    logger.configure()
    train(args.env, num_timesteps=args.num_timesteps, seed=args.seed, policy=args.policy,
          lr_schedule=args.lr_schedule, num_cpu=16)


if __name__ == "__main__":
    main()
