"""Gymnasium wrappers that rl-baselines-zoo agents were trained with.

:class:`TimeFeatureWrapper` appends the remaining time of the episode to the observation (the rl-baselines-zoo /
sb3-contrib wrapper, same maths), so agents trained with ``env_wrapper: utils.wrappers.TimeFeatureWrapper`` see the
observations they were trained on.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium
import numpy as np
from gymnasium import spaces

__all__ = ["TimeFeatureWrapper", "find_max_episode_steps"]

#: the key of a Dict observation (goal envs) that receives the time feature
OBSERVATION_KEY = "observation"


def find_max_episode_steps(env: Any) -> Optional[int]:
    """
    The episode length limit of ``env``: the smallest ``TimeLimit`` found going inwards through the wrappers (gymnasium
    ``TimeLimit`` or old gym's, both keep ``_max_episode_steps``), else ``env.spec.max_episode_steps``.

    :param env: (gymnasium.Env) a possibly wrapped env
    :return: (int or None) None when the env declares no limit
    """
    limits = []
    layer, seen = env, set()
    while layer is not None and id(layer) not in seen:
        seen.add(id(layer))
        limit = layer.__dict__.get("_max_episode_steps") if hasattr(layer, "__dict__") else None
        if isinstance(limit, (int, np.integer)) and not isinstance(limit, bool) and limit > 0:
            limits.append(int(limit))
        layer = layer.__dict__.get("env") if hasattr(layer, "__dict__") else None
    if limits:
        return min(limits)
    spec = getattr(env, "spec", None)
    limit = getattr(spec, "max_episode_steps", None)
    if isinstance(limit, (int, np.integer)) and not isinstance(limit, bool) and limit > 0:
        return int(limit)
    return None


def _time_feature_box(space: spaces.Space, where: str) -> spaces.Box:
    """The observation Box with one more entry in [0, 1] for the time feature (1-d Box spaces only)."""
    if not isinstance(space, spaces.Box) or len(space.shape) != 1:
        raise TypeError("TimeFeatureWrapper needs a 1-d Box observation{}, got {}: the time feature is appended to a "
                        "flat vector.".format(where, space))
    dtype = space.dtype if np.issubdtype(space.dtype, np.floating) else np.dtype(np.float32)
    low = np.concatenate((space.low.astype(dtype), np.zeros(1, dtype=dtype)))
    high = np.concatenate((space.high.astype(dtype), np.ones(1, dtype=dtype)))
    return spaces.Box(low=low, high=high, dtype=dtype)


class TimeFeatureWrapper(gymnasium.Wrapper):
    """
    Append the remaining time ``1 - t / max_steps`` (in [0, 1]; 1 at reset, 0 at the time limit) to the observation,
    for fixed-length episodes (https://arxiv.org/abs/1712.00378). The maths of rl-baselines-zoo's and sb3-contrib's
    ``TimeFeatureWrapper``: agents trained with either act the same here.

    Observations: a 1-d ``Box`` (the feature becomes its last entry), or a ``Dict`` (goal envs) whose
    ``"observation"`` entry is a 1-d ``Box`` (the feature is appended to that entry). The feature has the dtype of
    the observation (float32 when the observation is not a float array). After ``max_steps`` steps (an env without a
    time limit) the feature stays at 0.

    :param env: (gymnasium.Env) the env to wrap
    :param max_steps: (int) the episode length when the env has no time limit (a ``TimeLimit`` wrapper or
        ``spec.max_episode_steps``, which take precedence)
    :param test_mode: (bool) keep the feature constant at 1.0, to check that the agent did not learn a fixed sequence
        of actions from it
    """

    def __init__(self, env: gymnasium.Env, max_steps: int = 1000, test_mode: bool = False):
        super().__init__(env)
        if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
            raise ValueError("TimeFeatureWrapper: max_steps must be a positive integer, got {!r}".format(max_steps))
        space = env.observation_space
        if isinstance(space, spaces.Dict):
            if OBSERVATION_KEY not in space.spaces:
                raise TypeError("TimeFeatureWrapper on a Dict observation needs an '{}' entry (goal envs), got the "
                                "keys {}".format(OBSERVATION_KEY, sorted(space.spaces)))
            box = _time_feature_box(space.spaces[OBSERVATION_KEY], " (Dict entry '{}')".format(OBSERVATION_KEY))
            entries = dict(space.spaces)
            entries[OBSERVATION_KEY] = box
            self.observation_space = spaces.Dict(entries)
        else:
            box = _time_feature_box(space, "")
            self.observation_space = box
        self._feature_dtype = box.dtype
        self._max_steps = find_max_episode_steps(env) or int(max_steps)
        self._test_mode = bool(test_mode)
        self._current_step = 0

    @property
    def max_steps(self) -> int:
        """The episode length the feature counts down over."""
        return self._max_steps

    @property
    def test_mode(self) -> bool:
        """Whether the feature is held at 1.0."""
        return self._test_mode

    def time_feature(self) -> float:
        """The feature for the current step: ``1 - t / max_steps`` clipped to [0, 1], or 1.0 in test mode."""
        if self._test_mode:
            return 1.0
        return max(0.0, 1.0 - self._current_step / self._max_steps)

    def _with_feature(self, obs: Any) -> Any:
        feature = np.asarray([self.time_feature()], dtype=self._feature_dtype)
        if isinstance(obs, dict):
            obs = dict(obs)
            obs[OBSERVATION_KEY] = np.concatenate(
                (np.asarray(obs[OBSERVATION_KEY], dtype=self._feature_dtype).reshape(-1), feature))
            return obs
        return np.concatenate((np.asarray(obs, dtype=self._feature_dtype).reshape(-1), feature))

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict]:
        self._current_step = 0
        obs, info = self.env.reset(seed=seed, options=options)
        return self._with_feature(obs), info

    def step(self, action: Any) -> Tuple[Any, Any, bool, bool, Dict[str, Any]]:
        self._current_step += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._with_feature(obs), reward, terminated, truncated, info
