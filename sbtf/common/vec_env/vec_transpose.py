"""``VecTransposeImage``: channel-last images to channel-first (stable-baselines3)."""
from __future__ import annotations

from typing import Any, Union

import numpy as np
from gymnasium import spaces

from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper

__all__ = ["VecTransposeImage", "is_image_space", "is_image_space_channels_first"]


def is_image_space(space: spaces.Space) -> bool:
    """stable-baselines3's image test: a 3-D ``uint8`` Box with bounds [0, 255]."""
    return (isinstance(space, spaces.Box) and len(space.shape) == 3 and space.dtype == np.uint8
            and bool(np.all(space.low == 0)) and bool(np.all(space.high == 255)))


def is_image_space_channels_first(space: spaces.Box) -> bool:
    """stable-baselines3's heuristic: the channels are the smallest dimension; True when that one comes first."""
    return int(np.argmin(space.shape)) == 0


class VecTransposeImage(VecEnvWrapper):
    """
    Re-order image channels from HxWxC to CxHxW (stable-baselines3's ``VecTransposeImage``), for an image observation
    space or the image entries of a Dict one; ``terminal_observation`` in the infos is transposed too. sbtf's own
    CNN policies take channel-last images (as TensorFlow does); this wrapper is for code and networks written for
    channel-first input.

    :param venv: (VecEnv) the vectorized environment
    :param skip: (bool) do nothing (the wrapper is applied by a heuristic in stable-baselines3; this turns it off)
    """

    def __init__(self, venv: VecEnv, skip: bool = False):
        observation_space = venv.observation_space
        if not (is_image_space(observation_space) or isinstance(observation_space, spaces.Dict)):
            raise ValueError("The observation space must be an image or dictionary observation space, got "
                             f"{observation_space}")
        self.skip = skip
        self.image_space_keys: list = []
        if skip:
            super().__init__(venv)
            return
        if isinstance(observation_space, spaces.Dict):
            new_spaces = dict(observation_space.spaces)
            for key, space in observation_space.spaces.items():
                if is_image_space(space):
                    self.image_space_keys.append(key)
                    new_spaces[key] = self.transpose_space(space, key)
            observation_space = spaces.Dict(new_spaces)
        else:
            observation_space = self.transpose_space(observation_space)
        super().__init__(venv, observation_space=observation_space)

    @staticmethod
    def transpose_space(observation_space: spaces.Box, key: str = "") -> spaces.Box:
        """
        The channel-first space of a channel-last image space.

        :param observation_space: (spaces.Box) an image space (H, W, C)
        :param key: (str) its key in a Dict space (for the error message)
        :return: (spaces.Box) the space (C, H, W)
        """
        if not is_image_space(observation_space):
            raise ValueError(f"The observation space {key} must be an image (uint8 Box of 3 dimensions in [0, 255])")
        if is_image_space_channels_first(observation_space):
            raise ValueError(f"The observation space {key} must follow the channel last convention, got shape "
                             f"{observation_space.shape}")
        height, width, channels = observation_space.shape
        return spaces.Box(low=0, high=255, shape=(channels, height, width), dtype=observation_space.dtype)

    @staticmethod
    def transpose_image(image: np.ndarray) -> np.ndarray:
        """
        An image (H, W, C) or a batch of images (N, H, W, C) with the channels first.

        :param image: (np.ndarray)
        :return: (np.ndarray) (C, H, W) or (N, C, H, W)
        """
        if len(image.shape) == 3:
            return np.transpose(image, (2, 0, 1))
        return np.transpose(image, (0, 3, 1, 2))

    def transpose_observations(self, observations: Union[np.ndarray, dict]) -> Union[np.ndarray, dict]:
        """
        The observations with their images transposed (the input is not modified).

        :param observations: (np.ndarray or dict) a batch of observations (or one terminal observation)
        :return: (np.ndarray or dict)
        """
        if self.skip:
            return observations
        if isinstance(observations, dict):
            observations = dict(observations)
            for key in self.image_space_keys:
                observations[key] = self.transpose_image(observations[key])
            return observations
        return self.transpose_image(observations)

    def step_wait(self) -> Any:
        observations, rewards, dones, infos = self.venv.step_wait()
        for idx in np.flatnonzero(dones):
            if "terminal_observation" in infos[idx]:
                infos[idx]["terminal_observation"] = self.transpose_observations(infos[idx]["terminal_observation"])
        return self.transpose_observations(observations), rewards, dones, infos

    def reset(self) -> Any:
        return self.transpose_observations(self.venv.reset())
