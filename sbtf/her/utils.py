"""Goal-environment helpers of HER (stable-baselines 2.x ``her/utils.py``) on the gymnasium API."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sbtf.common.envs.gym_compat import wrap_env

# Important: gym mixes up ordered and unordered keys
# and the Dict space may return a different order of keys that the actual one
KEY_ORDER = ['observation', 'achieved_goal', 'desired_goal']


class GoalObsConverter:
    """
    Flattens goal-env dict observations as ``concat[observation, achieved_goal, desired_goal]`` (``KEY_ORDER``) and
    splits them back. Built from the dict observation space alone (no env needed), e.g. to predict with a loaded
    HER model.

    :param observation_space: (gymnasium.spaces.Dict) the goal env's observation space
    """

    def __init__(self, observation_space: gym.Space):
        if not isinstance(observation_space, spaces.Dict) or any(k not in observation_space.spaces for k in KEY_ORDER):
            raise ValueError(f"Error: HER needs a goal environment, whose observation space is a Dict with the keys "
                             f"{KEY_ORDER}; got {observation_space!r}.")
        self.dict_space = observation_space
        self.spaces = [observation_space.spaces[key] for key in KEY_ORDER]
        # Check that all spaces are of the same type (current limitation of the wrapper)
        space_types = [type(space) for space in self.spaces]
        if len(set(space_types)) != 1:
            raise ValueError(f"Error: the spaces for goal and observation must be of the same type, got "
                             f"{[t.__name__ for t in space_types]} for {KEY_ORDER}.")
        first = self.spaces[0]
        if isinstance(first, spaces.Discrete):
            self.obs_dim = 1
            self.goal_dim = 1
        elif isinstance(first, (spaces.Box, spaces.MultiBinary)):
            goal_space_shape = tuple(observation_space.spaces['achieved_goal'].shape)
            obs_shape = tuple(observation_space.spaces['observation'].shape)
            if len(goal_space_shape) == 2:
                if goal_space_shape[1] != 1:
                    raise ValueError("Error: only 1D observation spaces are supported yet (goal shape "
                                     f"{goal_space_shape}).")
            elif len(goal_space_shape) != 1 or len(obs_shape) != 1:
                raise ValueError(f"Error: only 1D observation spaces are supported yet (observation shape "
                                 f"{obs_shape}, goal shape {goal_space_shape}).")
            self.obs_dim = int(obs_shape[0])
            self.goal_dim = int(goal_space_shape[0])
        else:
            raise NotImplementedError(f"{type(first).__name__} space is not supported")

        if isinstance(first, spaces.MultiBinary):
            total_dim = self.obs_dim + 2 * self.goal_dim
            self.observation_space: gym.Space = spaces.MultiBinary(total_dim)
        elif isinstance(first, spaces.Box):
            lows = np.concatenate([np.asarray(space.low, np.float64).reshape(-1) for space in self.spaces])
            highs = np.concatenate([np.asarray(space.high, np.float64).reshape(-1) for space in self.spaces])
            self.observation_space = spaces.Box(lows.astype(np.float32), highs.astype(np.float32), dtype=np.float32)
        else:
            dimensions = [int(space.n) for space in self.spaces]
            self.observation_space = spaces.MultiDiscrete(dimensions)

    def convert_dict_to_obs(self, obs_dict) -> np.ndarray:
        """
        :param obs_dict: (dict<np.ndarray>) one observation, or a batch (leading axis) of them
        :return: (np.ndarray)
        """
        # Note: achieved goal is not removed from the observation
        # this is helpful to have a revertible transformation
        if isinstance(self.observation_space, spaces.MultiDiscrete):
            # Special case for multidiscrete
            parts = [np.asarray(obs_dict[key], dtype=np.int64) for key in KEY_ORDER]
            if parts[0].ndim == 0:
                return np.array([int(part) for part in parts], dtype=np.int64)
            return np.stack([part.reshape(-1) for part in parts], axis=-1)
        parts = [np.asarray(obs_dict[key]) for key in KEY_ORDER]
        single = parts[0].ndim <= 1
        parts = [part.reshape(-1) if single else part.reshape(part.shape[0], -1) for part in parts]
        obs = np.concatenate(parts, axis=-1)
        if isinstance(self.observation_space, spaces.Box):
            return obs.astype(np.float32, copy=False)
        return obs.astype(self.observation_space.dtype, copy=False)

    def convert_obs_to_dict(self, observations) -> "OrderedDict[str, np.ndarray]":
        """
        Inverse operation of convert_dict_to_obs

        :param observations: (np.ndarray) one flat observation, or a batch (leading axis)
        :return: (OrderedDict<np.ndarray>)
        """
        observations = np.asarray(observations)
        if isinstance(self.observation_space, spaces.MultiDiscrete):
            return OrderedDict([(key, observations[..., i]) for i, key in enumerate(KEY_ORDER)])
        obs_dim, goal_dim = self.obs_dim, self.goal_dim
        return OrderedDict([
            ('observation', observations[..., :obs_dim]),
            ('achieved_goal', observations[..., obs_dim:obs_dim + goal_dim]),
            ('desired_goal', observations[..., obs_dim + goal_dim:]),
        ])


def _compute_reward_fn(env: Any):
    """The ``compute_reward`` of a goal env (through gymnasium wrappers)."""
    getter = getattr(env, "get_wrapper_attr", None)
    if getter is not None:
        try:
            return getter("compute_reward")
        except AttributeError:
            pass
    fn = getattr(env, "compute_reward", None)
    if fn is None:
        fn = getattr(getattr(env, "unwrapped", None), "compute_reward", None)
    return fn


class HERGoalEnvWrapper(gym.Wrapper):
    """
    A wrapper that allow to use dict observation space (coming from GoalEnv) with
    the RL algorithms.
    It assumes that all the spaces of the dict space are of the same type.

    The flat observation is ``concat[observation, achieved_goal, desired_goal]`` (``KEY_ORDER``): a ``Box``
    (float32) for Box goal spaces, ``MultiBinary`` for MultiBinary ones and ``MultiDiscrete([n_obs, n_goal, n_goal])``
    for Discrete ones. The wrapped env follows the gymnasium API (an env id, or an env written for the old gym API, is
    adapted first).

    :param env: (gymnasium.Env) a goal environment: Dict observations with ``observation``, ``achieved_goal`` and
        ``desired_goal``, and ``compute_reward(achieved_goal, desired_goal, info)``
    """

    def __init__(self, env):
        env = wrap_env(env)
        super().__init__(env)
        self._converter = GoalObsConverter(env.observation_space)
        self.spaces = self._converter.spaces
        self.obs_dim = self._converter.obs_dim
        self.goal_dim = self._converter.goal_dim
        self.observation_space = self._converter.observation_space
        self.action_space = env.action_space
        self._compute_reward = _compute_reward_fn(env)
        if self._compute_reward is None:
            raise ValueError(f"Error: HER needs a goal environment with compute_reward(achieved_goal, desired_goal, "
                             f"info); {env!r} has none.")
        self._next_seed: Optional[int] = None

    def convert_dict_to_obs(self, obs_dict) -> np.ndarray:
        """
        :param obs_dict: (dict<np.ndarray>)
        :return: (np.ndarray)
        """
        return self._converter.convert_dict_to_obs(obs_dict)

    def convert_obs_to_dict(self, observations) -> "OrderedDict[str, np.ndarray]":
        """
        Inverse operation of convert_dict_to_obs

        :param observations: (np.ndarray)
        :return: (OrderedDict<np.ndarray>)
        """
        return self._converter.convert_obs_to_dict(observations)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self.convert_dict_to_obs(obs), reward, terminated, truncated, info

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is None:
            seed, self._next_seed = self._next_seed, None
        obs, info = self.env.reset(seed=seed, options=options)
        return self.convert_dict_to_obs(obs), info

    def seed(self, seed: Optional[int] = None) -> list:
        """SB2 compatibility: the seed is used by the next ``reset()``."""
        self._next_seed = seed
        return [seed]

    def compute_reward(self, achieved_goal, desired_goal, info):
        return self._compute_reward(achieved_goal, desired_goal, info)

    def render(self, *args, **kwargs):
        return self.env.render(*args, **kwargs)

    def close(self):
        return self.env.close()


__all__ = ["KEY_ORDER", "HERGoalEnvWrapper", "GoalObsConverter"]
