"""Stacking of the last observations of each env along the last axis."""
from __future__ import annotations

import warnings

import numpy as np
from gymnasium import spaces

from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper


class VecFrameStack(VecEnvWrapper):
    """
    Stacks observations: the observation is the concatenation, along the last axis, of
    the ``n_stack`` most recent observations (oldest first). At the start of an episode the older slots are zeros.
    The ``terminal_observation`` in the infos is stacked the same way.

    :param venv: (VecEnv) the vectorized environment to wrap (with a Box observation space)
    :param n_stack: (int) how many observations to stack
    """

    def __init__(self, venv: VecEnv, n_stack: int):
        wrapped_obs_space = venv.observation_space
        if not isinstance(wrapped_obs_space, spaces.Box):
            raise ValueError("VecFrameStack needs a Box observation space, got {}".format(wrapped_obs_space))
        if int(n_stack) < 1:
            raise ValueError("VecFrameStack: n_stack must be >= 1, got {}".format(n_stack))
        self.venv = venv
        self.n_stack = int(n_stack)
        low = np.repeat(wrapped_obs_space.low, self.n_stack, axis=-1)
        high = np.repeat(wrapped_obs_space.high, self.n_stack, axis=-1)
        self._last_axis = wrapped_obs_space.shape[-1]
        self.stackedobs = np.zeros((venv.num_envs,) + low.shape, low.dtype)
        observation_space = spaces.Box(low=low, high=high, dtype=wrapped_obs_space.dtype)
        VecEnvWrapper.__init__(self, venv, observation_space=observation_space)

    def step_wait(self):
        observations, rewards, dones, infos = self.venv.step_wait()
        size = self._last_axis
        stacked = self.stackedobs
        # Shift the history left by one frame (numpy handles the overlapping copy).
        stacked[..., :-size] = stacked[..., size:]
        for i in np.flatnonzero(dones):
            terminal = infos[i].get("terminal_observation")
            if terminal is not None:
                infos[i]["terminal_observation"] = np.concatenate((stacked[i, ..., :-size], terminal), axis=-1)
            else:
                warnings.warn("VecFrameStack wrapping a VecEnv without terminal_observation info")
            stacked[i] = 0
        stacked[..., -size:] = observations
        return stacked.copy(), rewards, dones, infos

    def reset(self):
        """
        Reset the envs; the history of each env is zeros then the first observation.
        """
        obs = self.venv.reset()
        self.stackedobs[...] = 0
        self.stackedobs[..., -self._last_axis:] = obs
        return self.stackedobs.copy()

    def close(self) -> None:
        self.venv.close()
