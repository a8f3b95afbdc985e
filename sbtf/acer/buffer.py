"""ACER's episodic replay buffer (stable-baselines 2.x ``acer/buffer.py``).

The buffer stores whole rollouts ("slots"): per slot and env, ``n_steps + 1`` observations (the last one is
the observation after the rollout, used to bootstrap), ``n_steps`` actions, rewards, behaviour-policy
probabilities ``mu`` and done flags, and ``n_steps + 1`` masks (the done flag *before* each observation, used to
reset recurrent states). ``get()`` draws one random slot per environment and returns env ``i``'s part of its
slot, so a replayed batch keeps the on-policy batch layout (env-major, ``n_envs`` sequences). Sizes are counted
in frames per environment, as SB2: ``size`` frames hold ``size // n_steps`` slots.

In addition to SB2, the buffer keeps the recurrent state of each env at the start of each slot (``states``), so
that a replayed sequence of a recurrent policy starts from the state it was collected with.
"""
from __future__ import annotations

from typing import Optional

import gymnasium as gym
import numpy as np


class Buffer:
    """
    A buffer for observations, actions, rewards, mu's, states, masks and dones values.

    :param env: (VecEnv) The environment to learn from (gives ``num_envs`` and the observation space)
    :param n_steps: (int) The number of steps to run for each environment
    :param size: (int) The buffer size in number of steps (frames per environment)
    """

    def __init__(self, env, n_steps: int, size: int = 50000):
        self.n_env = env.num_envs
        self.n_steps = int(n_steps)
        self.n_batch = self.n_env * self.n_steps
        # Each slot holds n_env * n_steps frames, so the buffer holds n_env * size frames in total
        self.size = int(size) // self.n_steps
        if self.size < 1:
            raise ValueError(f"Error: the ACER buffer size ({size} frames per env) must be at least n_steps "
                             f"({n_steps}).")
        space = env.observation_space
        self.obs_shape = tuple(space.shape)
        if isinstance(space, gym.spaces.Box):
            self.obs_dtype = np.uint8 if space.dtype == np.uint8 else np.float32
        else:
            self.obs_dtype = np.int64
        self.raw_pixels = len(self.obs_shape) > 1

        self.enc_obs: Optional[np.ndarray] = None
        self.actions: Optional[np.ndarray] = None
        self.rewards: Optional[np.ndarray] = None
        self.mus: Optional[np.ndarray] = None
        self.dones: Optional[np.ndarray] = None
        self.masks: Optional[np.ndarray] = None
        self.states: Optional[np.ndarray] = None

        self.next_idx = 0
        self.num_in_buffer = 0

    def has_atleast(self, frames: int) -> bool:
        """
        Check to see if the buffer has at least the asked number of frames (per environment).

        :param frames: (int) The number of frames checked
        :return: (bool) number of frames in buffer >= number asked
        """
        return self.num_in_buffer >= (int(frames) // self.n_steps)

    def can_sample(self) -> bool:
        """Whether the buffer holds at least one slot."""
        return self.num_in_buffer > 0

    def decode(self, enc_obs: np.ndarray) -> np.ndarray:
        """
        The observations of a slot as (n_env, n_steps + 1) + obs_shape (SB2 ``decode`` without frame stacking).

        :param enc_obs: (np.ndarray) the stored observations
        :return: (np.ndarray) the decoded observations
        """
        return np.reshape(enc_obs, (self.n_env, self.n_steps + 1) + self.obs_shape)

    def put(self, enc_obs, actions, rewards, mus, dones, masks, states=None) -> None:
        """
        Adds a rollout to the buffer.

        :param enc_obs: (np.ndarray) observations (n_env, n_steps + 1) + obs_shape
        :param actions: (np.ndarray) actions (n_env, n_steps)
        :param rewards: (np.ndarray) rewards (n_env, n_steps)
        :param mus: (np.ndarray) behaviour-policy probabilities (n_env, n_steps, n_act)
        :param dones: (np.ndarray) done flags aligned with the rewards (n_env, n_steps)
        :param masks: (np.ndarray) done flags before each observation (n_env, n_steps + 1)
        :param states: (np.ndarray) recurrent states at the start of the rollout (n_env, state_size), or None
        """
        if self.enc_obs is None:
            self.enc_obs = np.empty((self.size,) + enc_obs.shape, dtype=self.obs_dtype)
            self.actions = np.empty((self.size,) + actions.shape, dtype=np.int64)
            self.rewards = np.empty((self.size,) + rewards.shape, dtype=np.float32)
            self.mus = np.empty((self.size,) + mus.shape, dtype=np.float32)
            self.dones = np.empty((self.size,) + dones.shape, dtype=bool)
            self.masks = np.empty((self.size,) + masks.shape, dtype=bool)
            if states is not None:
                self.states = np.empty((self.size,) + np.shape(states), dtype=np.float32)
        self.enc_obs[self.next_idx] = enc_obs
        self.actions[self.next_idx] = actions
        self.rewards[self.next_idx] = rewards
        self.mus[self.next_idx] = mus
        self.dones[self.next_idx] = dones
        self.masks[self.next_idx] = masks
        if self.states is not None and states is not None:
            self.states[self.next_idx] = states
        self.next_idx = (self.next_idx + 1) % self.size
        self.num_in_buffer = min(self.size, self.num_in_buffer + 1)

    def take(self, arr: np.ndarray, idx: np.ndarray, envx: np.ndarray) -> np.ndarray:
        """
        Env ``envx[i]``'s data of slot ``idx[i]``, for every env ``i``.

        :param arr: (np.ndarray) the array that is read, (slots, n_env, ...)
        :param idx: ([int]) the slots that are read
        :param envx: ([int]) the environments
        :return: (np.ndarray) (n_env, ...)
        """
        return arr[idx, envx]

    def get(self):
        """
        Randomly read one slot per environment (NumPy's global RNG, as SB2).

        :return: (np.ndarray, ...) observations (n_env, n_steps + 1, ...), actions, rewards, mus, dones, masks,
            and the recurrent states at the start of the sequences (None for feed-forward policies)
        """
        if not self.can_sample():
            raise ValueError("Error: the ACER replay buffer is empty.")
        # Sample exactly one id per env. Sampling across envs would correlate the samples of one env.
        idx = np.random.randint(0, self.num_in_buffer, self.n_env)
        envx = np.arange(self.n_env)
        dones = self.take(self.dones, idx, envx)
        obs = self.decode(self.take(self.enc_obs, idx, envx))
        actions = self.take(self.actions, idx, envx)
        rewards = self.take(self.rewards, idx, envx)
        mus = self.take(self.mus, idx, envx)
        masks = self.take(self.masks, idx, envx)
        states = self.take(self.states, idx, envx) if self.states is not None else None
        return obs, actions, rewards, mus, dones, masks, states


__all__ = ["Buffer"]
