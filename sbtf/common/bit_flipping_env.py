"""The bit flipping goal environment of stable-baselines 2.x (``common/bit_flipping_env.py``), on the gymnasium API.

A toy goal environment to test HER: the state is a vector of ``n_bits`` bits, an action flips one bit (or, in the
continuous variant, every bit whose action component is positive), and the goal is the vector of ones. The
observation is a dict ``{"observation", "achieved_goal", "desired_goal"}`` (the achieved goal is the state) and the
reward is 0 when the goal is reached, -1 otherwise; ``compute_reward(achieved_goal, desired_goal, info)`` gives the
same reward for any goal, which is what HER needs.

Differences from stable-baselines 2.x: the gymnasium API (``reset(seed=None, options=None) -> (obs, info)``,
``step -> (obs, reward, terminated, truncated, info)``: reaching the goal terminates the episode, ``max_steps`` cuts
it as a truncation); ``compute_reward`` also accepts batches of goals (one reward per row); with
``discrete_obs_space=True`` the spaces are ``Discrete(2 ** n_bits)`` (SB2's ``Discrete(2 ** n_bits - 1)`` could not
hold the goal ``2 ** n_bits - 1``).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Optional, Union

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class BitFlippingEnv(gym.Env):
    """
    Simple bit flipping env, useful to test HER.
    The goal is to flip all the bits to get a vector of ones.
    In the continuous variant, if the ith action component has a value > 0,
    then the ith bit will be flipped.

    :param n_bits: (int) Number of bits to flip
    :param continuous: (bool) Whether to use the continuous actions version or not,
        by default, it uses the discrete one
    :param max_steps: (int) Max number of steps, by default, equal to n_bits
    :param discrete_obs_space: (bool) Whether to use the discrete observation
        version or not, by default, it uses the MultiBinary one
    :param render_mode: (str) "human" or "ansi"
    :param image_obs_space: (bool) observations and goals as 36x36 greyscale uint8 images (SB3's option): the first
        ``n_bits`` pixels are the bits (0 -> 0, 1 -> 255), the rest is black
    :param channel_first: (bool) images shaped (1, 36, 36) (SB3's default) instead of (36, 36, 1)
    """

    metadata = {"render_modes": ["human", "ansi"]}

    def __init__(self, n_bits: int = 10, continuous: bool = False, max_steps: Optional[int] = None,
                 discrete_obs_space: bool = False, render_mode: Optional[str] = None, image_obs_space: bool = False,
                 channel_first: bool = True):
        super().__init__()
        n_bits = int(n_bits)
        if n_bits < 1:
            raise ValueError(f"Error: n_bits must be positive, got {n_bits}.")
        if discrete_obs_space and image_obs_space:
            raise ValueError("Error: discrete_obs_space and image_obs_space cannot both be set: choose one")
        self.image_shape = (1, 36, 36) if channel_first else (36, 36, 1)
        if image_obs_space and n_bits > 36 * 36:
            raise ValueError(f"Error: image_obs_space holds at most {36 * 36} bits, got n_bits={n_bits}")
        # The achieved goal is determined by the current state; here it is a special case where they are equal
        if discrete_obs_space:
            # In the discrete case, the agent acts on the binary representation of the observation
            goal_space: spaces.Space = spaces.Discrete(2 ** n_bits)
            self.observation_space = spaces.Dict(OrderedDict([
                ('observation', spaces.Discrete(2 ** n_bits)),
                ('achieved_goal', spaces.Discrete(2 ** n_bits)),
                ('desired_goal', goal_space),
            ]))
        elif image_obs_space:
            image = spaces.Box(0, 255, self.image_shape, np.uint8)
            self.observation_space = spaces.Dict(OrderedDict([
                ('observation', image), ('achieved_goal', image), ('desired_goal', image)]))
        else:
            self.observation_space = spaces.Dict(OrderedDict([
                ('observation', spaces.MultiBinary(n_bits)),
                ('achieved_goal', spaces.MultiBinary(n_bits)),
                ('desired_goal', spaces.MultiBinary(n_bits)),
            ]))
        self.obs_space = spaces.MultiBinary(n_bits)
        if continuous:
            self.action_space = spaces.Box(-1, 1, shape=(n_bits,), dtype=np.float32)
        else:
            self.action_space = spaces.Discrete(n_bits)
        self.n_bits = n_bits
        self.continuous = continuous
        self.discrete_obs_space = discrete_obs_space
        self.image_obs_space = image_obs_space
        self.render_mode = render_mode
        self.state: Optional[np.ndarray] = None
        self.desired_goal = np.ones((n_bits,), dtype=np.int8)
        if max_steps is None:
            max_steps = n_bits
        self.max_steps = int(max_steps)
        self.current_step = 0

    def convert_if_needed(self, state: np.ndarray) -> Union[int, np.ndarray]:
        """
        Convert to discrete space if needed.

        :param state: (np.ndarray)
        :return: (np.ndarray or int)
        """
        if self.discrete_obs_space:
            # The internal state is the binary representation of the observed one
            return int(sum(int(state[i]) * 2 ** i for i in range(len(state))))
        if self.image_obs_space:
            image = np.zeros(int(np.prod(self.image_shape)), np.uint8)
            image[:len(state)] = np.asarray(state, np.uint8) * 255
            return image.reshape(self.image_shape)
        return np.asarray(state, dtype=np.int8)

    def _get_obs(self) -> "OrderedDict[str, Any]":
        return OrderedDict([
            ('observation', self.convert_if_needed(self.state.copy())),
            ('achieved_goal', self.convert_if_needed(self.state.copy())),
            ('desired_goal', self.convert_if_needed(self.desired_goal.copy())),
        ])

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        if seed is not None:
            self.obs_space.seed(int(self.np_random.integers(0, 2 ** 31 - 1)))
        self.current_step = 0
        self.state = self.obs_space.sample().astype(np.int8)
        return self._get_obs(), {}

    def step(self, action):
        if self.state is None:
            raise RuntimeError("Error: call reset() before step().")
        if self.continuous:
            flip = np.asarray(action).reshape(self.n_bits) > 0
            self.state[flip] = 1 - self.state[flip]
        else:
            index = int(np.asarray(action).reshape(()))
            self.state[index] = 1 - self.state[index]
        obs = self._get_obs()
        reward = float(self.compute_reward(obs['achieved_goal'], obs['desired_goal'], None))
        success = reward == 0
        self.current_step += 1
        # The episode terminates when the goal is reached, and is cut after max_steps
        info = {'is_success': bool(success)}
        truncated = (not success) and self.current_step >= self.max_steps
        return obs, reward, bool(success), bool(truncated), info

    def compute_reward(self, achieved_goal, desired_goal, _info) -> Union[float, np.ndarray]:
        """
        The reward of reaching ``achieved_goal`` when ``desired_goal`` is wanted: 0 when they are equal, else -1
        (a batch of goals gives one reward per row).

        :param achieved_goal: (np.ndarray or int) the achieved goal(s)
        :param desired_goal: (np.ndarray or int) the desired goal(s)
        :param _info: (dict) unused
        :return: (float or np.ndarray)
        """
        achieved_goal = np.asarray(achieved_goal)
        desired_goal = np.asarray(desired_goal)
        if self.image_obs_space:  # back to bits: the first n_bits pixels of each image (a batch keeps its axis)
            batched = achieved_goal.ndim > len(self.image_shape)
            achieved_goal = achieved_goal.reshape(achieved_goal.shape[0] if batched else 1, -1)[:, :self.n_bits] // 255
            desired_goal = desired_goal.reshape(desired_goal.shape[0] if desired_goal.ndim > len(self.image_shape)
                                                else 1, -1)[:, :self.n_bits] // 255
            equal = np.all(achieved_goal == desired_goal, axis=-1)
            return np.where(equal, 0.0, -1.0) if batched else (0.0 if bool(equal[0]) else -1.0)
        if self.discrete_obs_space:
            equal = achieved_goal.reshape(-1) == desired_goal.reshape(-1)
            if achieved_goal.size == 1 and desired_goal.size == 1:
                return 0.0 if bool(equal[0]) else -1.0
            return np.where(equal, 0.0, -1.0)
        if achieved_goal.ndim <= 1 and desired_goal.ndim <= 1:
            return 0.0 if np.array_equal(achieved_goal.reshape(-1), desired_goal.reshape(-1)) else -1.0
        equal = np.all(achieved_goal == desired_goal, axis=-1)
        return np.where(equal, 0.0, -1.0)

    def render(self, mode: Optional[str] = None):
        mode = mode or self.render_mode or "human"
        if mode == "ansi":
            return str(self.state)
        print(self.state)
        return None

    def close(self) -> None:
        pass


__all__ = ["BitFlippingEnv"]
