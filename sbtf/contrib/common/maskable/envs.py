"""Identity environments with invalid actions (sb3-contrib ``common/envs/invalid_actions_env.py``), for tests.

The observation is a random element of the action space and the reward is 1 for repeating it; at every step
``n_invalid_actions`` choices other than the right one are invalid, and ``action_masks()`` says which. A policy that
respects the masks chooses among fewer actions, so it learns faster than one that does not.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np
from gymnasium import spaces

from sbtf.common.identity_env import IdentityEnv

__all__ = ["InvalidActionEnvDiscrete", "InvalidActionEnvMultiDiscrete", "InvalidActionEnvMultiBinary"]


class InvalidActionEnvDiscrete(IdentityEnv):
    """
    Identity env with a discrete action space. Supports action masking.

    :param dim: (int) the number of actions
    :param ep_length: (int) the length of each episode in timesteps
    :param n_invalid_actions: (int) how many actions are invalid at each step
    """

    def __init__(self, dim: Optional[int] = None, ep_length: int = 100, n_invalid_actions: int = 0):
        if dim is None:
            dim = 1
        if n_invalid_actions >= dim:
            raise ValueError(f"Too many invalid actions: {n_invalid_actions} >= {dim}")
        space = spaces.Discrete(dim)
        self.n_invalid_actions = n_invalid_actions
        self.possible_actions = np.arange(int(space.n), dtype=int)
        self.invalid_actions: List[int] = []
        super().__init__(space=space, ep_length=ep_length)

    def _choose_next_state(self) -> None:
        self.state = self.action_space.sample()
        potential_invalid_actions = [i for i in self.possible_actions if i != self.state]
        self.invalid_actions = self.np_random.choice(potential_invalid_actions, self.n_invalid_actions,
                                                     replace=False).tolist()

    def action_masks(self) -> List[bool]:
        """One boolean per action: False for the invalid ones."""
        return [action not in self.invalid_actions for action in self.possible_actions]


class InvalidActionEnvMultiDiscrete(IdentityEnv):
    """
    Identity env with a multidiscrete action space. Supports action masking.

    :param dims: ([int]) the number of choices of each component
    :param ep_length: (int) the length of each episode in timesteps
    :param n_invalid_actions: (int) how many choices (over all components) are invalid at each step
    """

    def __init__(self, dims: Optional[List[int]] = None, ep_length: int = 100, n_invalid_actions: int = 0):
        if dims is None:
            dims = [1, 1]
        if n_invalid_actions > sum(dims) - len(dims):
            raise ValueError(f"Cannot find a valid action for each dim. Set n_invalid_actions <= "
                             f"{sum(dims) - len(dims)}")
        space = spaces.MultiDiscrete(dims)
        self.n_invalid_actions = n_invalid_actions
        self.possible_actions = np.arange(sum(dims))
        self.invalid_actions: List[int] = []
        super().__init__(space=space, ep_length=ep_length)

    def _choose_next_state(self) -> None:
        self.state = self.action_space.sample()
        offsets = np.concatenate([[0], np.cumsum(self.action_space.nvec)[:-1]])
        converted_state = (offsets + self.state).tolist()
        potential_invalid_actions = [i for i in self.possible_actions if i not in converted_state]
        self.invalid_actions = self.np_random.choice(potential_invalid_actions, self.n_invalid_actions,
                                                     replace=False).tolist()

    def action_masks(self) -> List[bool]:
        """One boolean per choice of each component (flat): False for the invalid ones."""
        return [action not in self.invalid_actions for action in self.possible_actions]


class InvalidActionEnvMultiBinary(IdentityEnv):
    """
    Identity env with a multibinary action space. Supports action masking (two choices per bit).

    :param dims: (int) the number of bits
    :param ep_length: (int) the length of each episode in timesteps
    :param n_invalid_actions: (int) how many choices (over all bits) are invalid at each step
    """

    def __init__(self, dims: Optional[int] = None, ep_length: int = 100, n_invalid_actions: int = 0):
        if dims is None:
            dims = 1
        if n_invalid_actions > dims:
            raise ValueError(f"Cannot find a valid action for each dim. Set n_invalid_actions <= {dims}")
        space = spaces.MultiBinary(dims)
        self.n_dims = dims
        self.n_invalid_actions = n_invalid_actions
        self.possible_actions = np.arange(2 * dims)
        self.invalid_actions: List[int] = []
        super().__init__(space=space, ep_length=ep_length)

    def _choose_next_state(self) -> None:
        self.state = self.action_space.sample()
        converted_state = (2 * np.arange(self.n_dims) + self.state).tolist()
        potential_invalid_actions = [i for i in self.possible_actions if i not in converted_state]
        self.invalid_actions = self.np_random.choice(potential_invalid_actions, self.n_invalid_actions,
                                                     replace=False).tolist()

    def action_masks(self) -> List[bool]:
        """Two booleans per bit (choice 0, choice 1), flat: False for the invalid ones."""
        return [action not in self.invalid_actions for action in self.possible_actions]
