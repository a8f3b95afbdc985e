"""PPO2 on an Atari game: stable-baselines 2's ``ppo2/run_atari.py`` on sbtf.

::

    python -m sbtf.scripts.ppo2.run_atari --env BreakoutNoFrameskip-v4 --policy cnn

Atari envs need ale-py (``pip install "sbtf[atari]"``).
"""
from __future__ import annotations

from typing import List, Optional

from sbtf import logger
from sbtf.common.cmd_util import make_atari_env
from sbtf.common.policies import CnnLnLstmPolicy, CnnLstmPolicy, CnnPolicy, MlpPolicy
from sbtf.common.vec_env import VecFrameStack
from sbtf.ppo2 import PPO2
from sbtf.scripts._helpers import atari_policy_arg_parser, policy_choice

#: the ``--policy`` choices
POLICIES = {"cnn": CnnPolicy, "lstm": CnnLstmPolicy, "lnlstm": CnnLnLstmPolicy, "mlp": MlpPolicy}


def train(env_id: str, num_timesteps: int, seed: int, policy: str, n_envs: int = 8, nminibatches: int = 4,
          n_steps: int = 128) -> None:
    """
    Train PPO2 on an Atari game (4 stacked DeepMind frames; learning rate and clip range annealed linearly).

    :param env_id: (str) a ``NoFrameskip`` env id
    :param num_timesteps: (int) the number of timesteps
    :param seed: (int) the seed
    :param policy: (str) 'cnn', 'lstm', 'lnlstm' or 'mlp'
    :param n_envs: (int) the number of envs
    :param nminibatches: (int) minibatches per update (recurrent policies: n_envs must be a multiple of it)
    :param n_steps: (int) steps per env and update
    """
    env = VecFrameStack(make_atari_env(env_id, n_envs, seed), 4)
    model = PPO2(policy=policy_choice(POLICIES, policy), env=env, n_steps=n_steps, nminibatches=nminibatches,
                 lam=0.95, gamma=0.99,
                 noptepochs=4, ent_coef=.01, learning_rate=lambda f: f * 2.5e-4, cliprange=lambda f: f * 0.1,
                 verbose=1)
    model.learn(total_timesteps=num_timesteps)
    env.close()


def main(argv: Optional[List[str]] = None) -> None:
    """Parse the flags (``--env``, ``--seed``, ``--num-timesteps``, ``--policy``) and train."""
    args = atari_policy_arg_parser(POLICIES).parse_args(argv)
    logger.configure()
    train(args.env, num_timesteps=args.num_timesteps, seed=args.seed, policy=args.policy)


if __name__ == "__main__":
    main()
