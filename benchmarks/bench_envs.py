"""Envs of the benchmark cases that are not registered gymnasium ids, importable in both interpreters.

The worker imports these by a case's ``Side.env_entry`` (``"bench_envs:Class"``) in the sbtf interpreter and in the
SB3 venv alike, so this module needs only gymnasium and NumPy (never sbtf, SB3 or a deep-learning framework).
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np


class NoVelocityCartPole(gym.ObservationWrapper):
    """
    CartPole-v1 with the velocities hidden: only the cart position and the pole angle are observed
    (rl-baselines3-zoo's ``CartPoleNoVel-v1``, the env its ``ppo_lstm`` hyperparameters are tuned on; the same
    wrapper as ``tests/test_recurrent_ppo.py``).

    :param kwargs: keyword arguments of ``gymnasium.make("CartPole-v1", ...)``
    """

    def __init__(self, **kwargs):
        super().__init__(gym.make("CartPole-v1", **kwargs))
        low, high = self.env.observation_space.low, self.env.observation_space.high
        self.observation_space = gym.spaces.Box(low[[0, 2]], high[[0, 2]], dtype=np.float32)

    def observation(self, observation):
        return np.asarray(observation)[[0, 2]].astype(np.float32)
