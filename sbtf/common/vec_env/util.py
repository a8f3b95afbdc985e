"""Helpers for VecEnvs with structured (Dict / Tuple) observation spaces."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
from gymnasium import spaces

ObsKey = Optional[Union[str, int]]


def copy_obs_dict(obs: Mapping[ObsKey, np.ndarray]) -> "OrderedDict[ObsKey, np.ndarray]":
    """
    Deep-copy a dict of numpy arrays.

    :param obs: (dict) a dict of numpy arrays
    :return: (OrderedDict) a dict of copies of the arrays
    """
    if not isinstance(obs, Mapping):
        raise TypeError("copy_obs_dict() expects a dict of numpy arrays, got {}".format(type(obs).__name__))
    return OrderedDict([(key, np.array(value, copy=True)) for key, value in obs.items()])


def dict_to_obs(space: spaces.Space, obs_dict: Mapping[ObsKey, np.ndarray]) -> Any:
    """
    Convert the internal representation (a dict of arrays, keyed by ``obs_space_info``'s keys) into the
    observation type of ``space``: the dict itself for a Dict space, a tuple for a Tuple space, the array otherwise.

    :param space: (gymnasium.spaces.Space) the observation space
    :param obs_dict: (dict) the internal representation
    :return: (dict, tuple or np.ndarray)
    """
    if isinstance(space, spaces.Dict):
        return obs_dict
    if isinstance(space, spaces.Tuple):
        if len(obs_dict) != len(space.spaces):
            raise ValueError("dict_to_obs(): {} entries for a Tuple space of {} sub-spaces".format(
                len(obs_dict), len(space.spaces)))
        return tuple(obs_dict[i] for i in range(len(space.spaces)))
    if set(obs_dict.keys()) != {None}:
        raise ValueError("dict_to_obs(): a non-structured space expects the single key None, got keys {}".format(
            list(obs_dict.keys())))
    return obs_dict[None]


def obs_space_info(obs_space: spaces.Space
                   ) -> Tuple[List[ObsKey], Dict[ObsKey, Tuple[int, ...]], Dict[ObsKey, np.dtype]]:
    """
    Get dict-structured information about a space: the keys (Dict keys, Tuple indices, or ``[None]`` for any other
    space) and, per key, the shape and dtype of the sub-space.

    :param obs_space: (gymnasium.spaces.Space) an observation space
    :return: (list, dict, dict) keys, shapes, dtypes
    """
    if isinstance(obs_space, spaces.Dict):
        subspaces: Mapping[ObsKey, spaces.Space] = obs_space.spaces
    elif isinstance(obs_space, spaces.Tuple):
        subspaces = {i: space for i, space in enumerate(obs_space.spaces)}
    else:
        subspaces = {None: obs_space}
    keys: List[ObsKey] = []
    shapes: Dict[ObsKey, Tuple[int, ...]] = {}
    dtypes: Dict[ObsKey, np.dtype] = {}
    for key, box in subspaces.items():
        if isinstance(box, (spaces.Dict, spaces.Tuple)) or box.shape is None:
            raise NotImplementedError("Nested or shapeless observation spaces are not supported by VecEnvs "
                                      "(sub-space {!r}: {}); flatten the observation space first, e.g. with "
                                      "gymnasium.wrappers.FlattenObservation".format(key, box))
        keys.append(key)
        shapes[key] = tuple(box.shape)
        dtypes[key] = np.dtype(box.dtype)
    return keys, shapes, dtypes


def unwrap_wrapper(env: Any, wrapper_class: type) -> Optional[Any]:
    """
    The first wrapper of class ``wrapper_class`` in the wrapper chain of a single env (stable-baselines3's
    ``env_util.unwrap_wrapper``), followed through ``.env``; None when there is none.

    :param env: (gymnasium.Env) the env
    :param wrapper_class: (type) the wrapper class
    :return: (gymnasium.Wrapper or None)
    """
    seen = set()
    while env is not None and id(env) not in seen:
        if isinstance(env, wrapper_class):
            return env
        seen.add(id(env))
        env = getattr(env, "env", None)
    return None


def is_wrapped(env: Any, wrapper_class: type) -> bool:
    """
    Whether a single env has a ``wrapper_class`` wrapper in its chain (stable-baselines3's ``env_util.is_wrapped``).

    :param env: (gymnasium.Env) the env
    :param wrapper_class: (type) the wrapper class
    :return: (bool)
    """
    return unwrap_wrapper(env, wrapper_class) is not None
