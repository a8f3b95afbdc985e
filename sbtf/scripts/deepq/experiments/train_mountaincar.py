"""Train DQN (layer-normalised policy, parameter noise) on MountainCar-v0 and save it as ``mountaincar_model.zip``:
stable-baselines 2's ``deepq/experiments/train_mountaincar.py`` on sbtf::

    python -m sbtf.scripts.deepq.experiments.train_mountaincar --max-timesteps 100000
"""
from __future__ import annotations

import argparse
from typing import List, Optional

import gymnasium

from sbtf.deepq import DQN
from sbtf.scripts._helpers import max_timesteps_args

#: where the model is saved (in the working directory), as in SB2
MODEL_PATH = "mountaincar_model.zip"


def main(args: argparse.Namespace) -> None:
    """
    Train and save the DQN model for MountainCar-v0.

    :param args: (argparse.Namespace) ``max_timesteps``
    """
    env = gymnasium.make("MountainCar-v0")
    # the layer norm policy matters for parameter space noise
    model = DQN(policy="LnMlpPolicy", env=env, learning_rate=1e-3, buffer_size=50000, exploration_fraction=0.1,
                exploration_final_eps=0.1, param_noise=True, policy_kwargs=dict(layers=[64]))
    model.learn(total_timesteps=args.max_timesteps)
    print("Saving model to {}".format(MODEL_PATH))
    model.save(MODEL_PATH)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The flags: ``--max-timesteps`` (default 100000)."""
    return max_timesteps_args("Train DQN on MountainCar", argv)


if __name__ == "__main__":
    main(parse_args())
