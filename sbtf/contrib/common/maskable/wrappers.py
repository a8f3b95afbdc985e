"""``ActionMasker`` (sb3-contrib ``common/wrappers/action_masker.py``): give any environment an ``action_masks()``."""
from __future__ import annotations

from typing import Callable, Union

import gymnasium as gym
import numpy as np

__all__ = ["ActionMasker"]


class ActionMasker(gym.Wrapper):
    """
    Env wrapper providing the method required to support masking: ``action_masks()`` returns the masks of the
    wrapped env. Not needed when the env has that method itself.

    :param env: (gymnasium.Env) the environment to wrap
    :param action_mask_fn: (callable or str) a function ``fn(env) -> masks``, or the name of such a method of the env
    """

    def __init__(self, env: gym.Env, action_mask_fn: Union[str, Callable[[gym.Env], np.ndarray]]):
        super().__init__(env)
        if isinstance(action_mask_fn, str):
            found_method = getattr(self.env, action_mask_fn)
            if not callable(found_method):
                raise ValueError(f"Environment attribute {action_mask_fn} is not a method")
            self._action_mask_fn = found_method
        else:
            self._action_mask_fn = action_mask_fn

    def action_masks(self) -> np.ndarray:
        """The masks of the wrapped environment (the function, or the named method, is called with the env, as in
        sb3-contrib)."""
        return self._action_mask_fn(self.env)
