"""``VecTransposeImage``: channel-last images to channel-first (stable-baselines3); ``VecChannelsLast``: the way back,
which sbtf's models put themselves around an env with channel-first images (their policies are channel-last)."""
from __future__ import annotations

from typing import Any, Optional, Union

import numpy as np
from gymnasium import spaces

from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper

__all__ = ["VecTransposeImage", "VecChannelsLast", "is_image_space", "is_image_space_channels_first",
           "channels_last_space", "observation_to_channels_last"]


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


def _is_channels_first_image(space: spaces.Space) -> bool:
    return is_image_space(space) and is_image_space_channels_first(space)


def _box_channels_last(space: spaces.Box) -> spaces.Box:
    channels, height, width = space.shape
    return spaces.Box(low=0, high=255, shape=(height, width, channels), dtype=space.dtype)


def channels_last_space(space: spaces.Space) -> Optional[spaces.Space]:
    """
    The channel-last form of ``space`` when it is a channel-first image (detected as stable-baselines3 detects them:
    a uint8 Box (C, H, W) in [0, 255] whose smallest dimension comes first, e.g. what ``VecTransposeImage`` makes),
    or a Dict space with such images among its keys; None when there is nothing to transpose.

    :param space: (gymnasium.Space) an observation space
    :return: (gymnasium.Space or None)
    """
    if _is_channels_first_image(space):
        return _box_channels_last(space)
    if isinstance(space, spaces.Dict) and any(_is_channels_first_image(sub) for sub in space.spaces.values()):
        return spaces.Dict({key: _box_channels_last(sub) if _is_channels_first_image(sub) else sub
                            for key, sub in space.spaces.items()})
    return None


def _image_to_channels_last(image: np.ndarray) -> np.ndarray:
    return np.moveaxis(np.asarray(image), -3, -1)


def observation_to_channels_last(observation: Any, space: spaces.Space) -> Any:
    """
    ``observation`` (one or a batch) with the images of the channel-last ``space`` given channel-first (as SB3's
    ``VecTransposeImage`` makes them) moved to channel-last; anything else unchanged. What ``predict`` applies.

    :param observation: (np.ndarray or dict) observation(s)
    :param space: (gymnasium.Space) the model's (channel-last) observation space
    :return: the observation(s), channel-last
    """
    def fix(obs: Any, sub: spaces.Space) -> Any:
        if not is_image_space(sub) or not hasattr(obs, "shape") or len(obs.shape) not in (3, 4):
            return obs
        height, width, channels = sub.shape
        first = (channels, height, width)
        if tuple(obs.shape[-3:]) == first and first != tuple(sub.shape):
            return _image_to_channels_last(obs)
        return obs

    if isinstance(space, spaces.Dict) and isinstance(observation, dict):
        return {key: fix(np.asarray(value), space.spaces[key]) if key in space.spaces else value
                for key, value in observation.items()}
    if isinstance(space, spaces.Box):
        return fix(np.asarray(observation), space)
    return observation


class VecChannelsLast(VecEnvWrapper):
    """
    Re-order channel-first images (C, H, W) to channel-last (H, W, C), for an image observation space or the image
    entries of a Dict one (``terminal_observation`` too): the inverse of :class:`VecTransposeImage`. sbtf's models put
    it around an env whose images are channel-first (stable-baselines3's layout), so that their channel-last
    policies see the images the right way; ``model.get_env()`` still returns the env that was given.

    :param venv: (VecEnv) an env with channel-first images (see :func:`channels_last_space`)
    """

    def __init__(self, venv: VecEnv):
        observation_space = channels_last_space(venv.observation_space)
        if observation_space is None:
            raise ValueError(f"VecChannelsLast needs channel-first images (C, H, W), got {venv.observation_space}")
        self.image_space_keys = ([key for key, sub in venv.observation_space.spaces.items()
                                  if _is_channels_first_image(sub)]
                                 if isinstance(venv.observation_space, spaces.Dict) else [])
        super().__init__(venv, observation_space=observation_space)

    def _to_channels_last(self, observations: Any) -> Any:
        if isinstance(observations, dict):
            observations = dict(observations)
            for key in self.image_space_keys:
                observations[key] = _image_to_channels_last(observations[key])
            return observations
        return _image_to_channels_last(observations)

    def step_wait(self) -> Any:
        observations, rewards, dones, infos = self.venv.step_wait()
        for idx in np.flatnonzero(dones):
            if "terminal_observation" in infos[idx]:
                infos[idx]["terminal_observation"] = self._to_channels_last(infos[idx]["terminal_observation"])
        return self._to_channels_last(observations), rewards, dones, infos

    def reset(self) -> Any:
        return self._to_channels_last(self.venv.reset())
