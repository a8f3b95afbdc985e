"""Train DQN on CartPole-v0 and save it as ``cartpole_model.zip``: stable-baselines 2's
``deepq/experiments/train_cartpole.py`` on sbtf (training stops early once the last 100 episodes average 199)::

    python -m sbtf.scripts.deepq.experiments.train_cartpole --max-timesteps 100000
"""
from __future__ import annotations

import argparse
from typing import List, Optional

import gymnasium
import numpy as np

from sbtf.bench import Monitor
from sbtf.common.callbacks import BaseCallback
from sbtf.deepq import DQN, MlpPolicy
from sbtf.scripts._helpers import max_timesteps_args

#: where the model is saved (in the working directory), as in SB2
MODEL_PATH = "cartpole_model.zip"


class StopWhenSolved(BaseCallback):
    """Stop training once more than 100 steps were taken and the last 100 episodes average at least 199."""

    def __init__(self, monitor: Monitor):
        super().__init__()
        self.monitor = monitor

    def _on_step(self) -> bool:
        rewards = self.monitor.get_episode_rewards()[-100:]
        solved = self.num_timesteps > 100 and len(rewards) > 0 and round(float(np.mean(rewards)), 1) >= 199
        return not solved


def main(args: argparse.Namespace) -> None:
    """
    Train and save the DQN model for CartPole-v0.

    :param args: (argparse.Namespace) ``max_timesteps``
    """
    env = Monitor(gymnasium.make("CartPole-v0"), None)
    model = DQN(env=env, policy=MlpPolicy, learning_rate=1e-3, buffer_size=50000, exploration_fraction=0.1,
                exploration_final_eps=0.02)
    model.learn(total_timesteps=args.max_timesteps, callback=StopWhenSolved(env))
    print("Saving model to {}".format(MODEL_PATH))
    model.save(MODEL_PATH)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The flags: ``--max-timesteps`` (default 100000)."""
    return max_timesteps_args("Train DQN on cartpole", argv)


if __name__ == "__main__":
    main(parse_args())
