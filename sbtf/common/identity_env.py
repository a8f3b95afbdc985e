"""Identity environments (the reward is for repeating the observation as the action), for algorithm tests."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium
import numpy as np
from gymnasium.spaces import Box, Discrete, MultiBinary, MultiDiscrete, Space

from sbtf.common.envs.gym_compat import convert_space


class IdentityEnv(gymnasium.Env):
    """
    An env whose observation is a random element of the action space and whose reward is 1 when the action equals
    the observation (0 otherwise). Episodes are cut (``truncated``) after ``ep_length`` steps.

    :param dim: (int) the size of the Discrete action space (when ``space`` is not given; default 1)
    :param space: (Space) the action (and observation) space; at most one of ``dim`` and ``space``
    :param ep_length: (int) the length of each episode in timesteps
    """

    metadata = {"render_modes": []}

    def __init__(self, dim: Optional[int] = None, space: Optional[Space] = None, ep_length: int = 100):
        if space is None:
            if dim is None:
                dim = 1
            space = Discrete(dim)
        else:
            if dim is not None:
                raise ValueError("arguments for both 'dim' and 'space' provided: at most one allowed")
            space = convert_space(space)
        self.action_space = self.observation_space = space
        self.ep_length = ep_length
        self.current_step = 0
        self.num_resets = -1  # becomes 0 with the reset below
        self.state: Any = None
        self.reset()

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        self.current_step = 0
        self.num_resets += 1
        self._choose_next_state()
        return self.state, {}

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, Dict]:
        reward = self._get_reward(action)
        self._choose_next_state()
        self.current_step += 1
        truncated = self.current_step >= self.ep_length
        return self.state, reward, False, truncated, {}

    def _choose_next_state(self) -> None:
        self.state = self.action_space.sample()

    def _get_reward(self, action: Any) -> float:
        return 1.0 if np.all(self.state == action) else 0.0

    def render(self, mode: str = 'human') -> None:
        """Nothing to draw."""
        return None


class IdentityEnvBox(IdentityEnv):
    """
    Identity environment for testing purposes, with a continuous Box(low, high, (1,)) space: the reward is 1 when the
    action is within ``eps`` of the observation.

    :param low: (float) the lower bound of the box dim
    :param high: (float) the upper bound of the box dim
    :param eps: (float) the epsilon bound for correct value
    :param ep_length: (int) the length of each episode in timesteps
    """

    def __init__(self, low: float = -1, high: float = 1, eps: float = 0.05, ep_length: int = 100):
        space = Box(low=low, high=high, shape=(1,), dtype=np.float32)
        super().__init__(ep_length=ep_length, space=space)
        self.eps = eps

    def _get_reward(self, action: Any) -> float:
        action = np.asarray(action)
        return 1.0 if np.all((self.state - self.eps <= action) & (action <= self.state + self.eps)) else 0.0


class IdentityEnvMultiDiscrete(IdentityEnv):
    """
    Identity environment for testing purposes, with a MultiDiscrete([dim, dim]) space.

    :param dim: (int) the size of each dimension
    :param ep_length: (int) the length of each episode in timesteps
    """

    def __init__(self, dim: int = 1, ep_length: int = 100):
        space = MultiDiscrete([dim, dim])
        super().__init__(ep_length=ep_length, space=space)


class IdentityEnvMultiBinary(IdentityEnv):
    """
    Identity environment for testing purposes, with a MultiBinary(dim) space.

    :param dim: (int) the size of the binary vector
    :param ep_length: (int) the length of each episode in timesteps
    """

    def __init__(self, dim: int = 1, ep_length: int = 100):
        space = MultiBinary(dim)
        super().__init__(ep_length=ep_length, space=space)
