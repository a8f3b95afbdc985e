"""stable-baselines3's ``common.envs``: the small test environments under SB3's names.

The identity, bit-flipping and multi-observation envs are sbtf's own (:mod:`sbtf.common.identity_env`,
:mod:`sbtf.common.bit_flipping_env`, :mod:`sbtf.common.multi_input_envs`); ``FakeImageEnv`` is defined here.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sbtf.common.bit_flipping_env import BitFlippingEnv
from sbtf.common.identity_env import IdentityEnv, IdentityEnvBox, IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from sbtf.common.multi_input_envs import SimpleMultiObsEnv

__all__ = ["BitFlippingEnv", "FakeImageEnv", "IdentityEnv", "IdentityEnvBox", "IdentityEnvMultiBinary",
           "IdentityEnvMultiDiscrete", "SimpleMultiObsEnv"]


class FakeImageEnv(gym.Env):
    """
    An env of random uint8 images and zero rewards, truncated after ``ep_length`` (10) steps: for testing image
    policies (SB3's ``FakeImageEnv``).

    :param action_dim: (int) number of discrete actions
    :param screen_height: (int) image height
    :param screen_width: (int) image width
    :param n_channels: (int) number of colour channels
    :param discrete: (bool) a Discrete action space (else a Box of shape (5,) in [-1, 1])
    :param channel_first: (bool) images shaped (channels, height, width) instead of (height, width, channels)
    """

    def __init__(self, action_dim: int = 6, screen_height: int = 84, screen_width: int = 84, n_channels: int = 1,
                 discrete: bool = True, channel_first: bool = False) -> None:
        shape = (n_channels, screen_height, screen_width) if channel_first else (screen_height, screen_width,
                                                                                 n_channels)
        self.observation_shape = shape
        self.observation_space = spaces.Box(low=0, high=255, shape=shape, dtype=np.uint8)
        if discrete:
            self.action_space: spaces.Space = spaces.Discrete(action_dim)
        else:
            self.action_space = spaces.Box(low=-1, high=1, shape=(5,), dtype=np.float32)
        self.ep_length = 10
        self.current_step = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[np.ndarray, Dict]:
        """Start an episode: a random image."""
        if seed is not None:
            super().reset(seed=seed)
            self.observation_space.seed(seed)
        self.current_step = 0
        return self.observation_space.sample(), {}

    def step(self, action: Union[int, np.ndarray]) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        """A random image, reward 0; truncated once ``ep_length`` steps were taken."""
        self.current_step += 1
        return self.observation_space.sample(), 0.0, False, self.current_step >= self.ep_length, {}

    def render(self, mode: str = "human") -> None:
        """Nothing to show."""
