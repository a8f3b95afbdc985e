"""stable-baselines3's ``common.preprocessing`` on NumPy: which spaces are images (channel-first or channel-last,
detected as SB3 detects them), observation shapes and flattened sizes, action sizes."""
from __future__ import annotations

from typing import Dict, Tuple, Union

import numpy as np
from gymnasium import spaces

from sbtf.common.vec_env.vec_transpose import is_image_space_channels_first

__all__ = ["is_image_space", "is_image_space_channels_first", "get_obs_shape", "get_flattened_obs_dim",
           "get_action_dim", "check_for_nested_spaces"]


def is_image_space(observation_space: spaces.Space, check_channels: bool = False,
                   normalized_image: bool = False) -> bool:
    """
    Whether ``observation_space`` holds images: a 3-D Box, of dtype uint8 with bounds [0, 255] unless
    ``normalized_image``; with ``check_channels`` the channel axis (the smallest one, first or last) has 1, 3 or 4
    entries.

    :param observation_space: (gymnasium.Space) the space
    :param check_channels: (bool) also check the number of channels
    :param normalized_image: (bool) the images are already normalised: skip the dtype and bounds checks
    """
    if not (isinstance(observation_space, spaces.Box) and len(observation_space.shape) == 3):
        return False
    if not normalized_image and (observation_space.dtype != np.uint8 or np.any(observation_space.low != 0)
                                 or np.any(observation_space.high != 255)):
        return False
    if not check_channels:
        return True
    channels = observation_space.shape[0 if is_image_space_channels_first(observation_space) else -1]
    return channels in (1, 3, 4)


def get_obs_shape(observation_space: spaces.Space) -> Union[Tuple[int, ...], Dict[str, Tuple[int, ...]]]:
    """
    The shape of one observation as a buffer stores it (Discrete: ``(1,)``; MultiDiscrete: ``(n,)``; Dict: per key).

    :param observation_space: (gymnasium.Space) the space
    """
    if isinstance(observation_space, spaces.Box):
        return observation_space.shape
    if isinstance(observation_space, spaces.Discrete):
        return (1,)
    if isinstance(observation_space, spaces.MultiDiscrete):
        return (int(len(observation_space.nvec)),)
    if isinstance(observation_space, spaces.MultiBinary):
        return tuple(observation_space.shape)
    if isinstance(observation_space, spaces.Dict):
        return {key: get_obs_shape(sub) for key, sub in observation_space.spaces.items()}  # type: ignore
    raise NotImplementedError(f"{observation_space} observation space is not supported: use Box, Discrete, "
                              "MultiDiscrete, MultiBinary or Dict")


def get_flattened_obs_dim(observation_space: spaces.Space) -> int:
    """
    The size of one observation once flattened (a Discrete space is one-hot: ``n``).

    :param observation_space: (gymnasium.Space) the space
    """
    if isinstance(observation_space, spaces.MultiDiscrete):
        return int(len(observation_space.nvec))
    return int(spaces.utils.flatdim(observation_space))


def get_action_dim(action_space: spaces.Space) -> int:
    """
    The size of one action (Discrete: 1; MultiDiscrete: the number of sub-actions).

    :param action_space: (gymnasium.Space) the space
    """
    if isinstance(action_space, spaces.Box):
        return int(np.prod(action_space.shape))
    if isinstance(action_space, spaces.Discrete):
        return 1
    if isinstance(action_space, spaces.MultiDiscrete):
        return int(len(action_space.nvec))
    if isinstance(action_space, spaces.MultiBinary):
        return int(np.prod(action_space.shape))
    raise NotImplementedError(f"{action_space} action space is not supported: use Box, Discrete, MultiDiscrete or "
                              "MultiBinary")


def check_for_nested_spaces(obs_space: spaces.Space) -> None:
    """
    Refuse a Dict or Tuple space nested in a Dict or Tuple space (which no policy handles).

    :param obs_space: (gymnasium.Space) the observation space
    """
    if isinstance(obs_space, (spaces.Dict, spaces.Tuple)):
        subs = obs_space.spaces.values() if isinstance(obs_space, spaces.Dict) else obs_space.spaces
        for sub in subs:
            if isinstance(sub, (spaces.Dict, spaces.Tuple)):
                raise NotImplementedError("Nested observation spaces are not supported (Tuple/Dict space inside "
                                          "Tuple/Dict space): flatten the inner space")
