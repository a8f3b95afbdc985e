"""Rollout collection shared by the on-policy algorithms (SB2 ``common/runners.py``)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Optional

import gymnasium as gym
import numpy as np


class AbstractEnvRunner(ABC):
    """
    Collects experience batches from a VecEnv with a model's policy.

    :param env: (VecEnv) the environment
    :param model: (BaseRLModel) the model (its ``policy_tf`` acts)
    :param n_steps: (int) steps per environment per batch
    """

    def __init__(self, *, env, model, n_steps: int):
        self.env = env
        self.model = model
        n_envs = env.num_envs
        self.batch_ob_shape = (n_envs * n_steps,) + env.observation_space.shape
        self.obs = np.zeros((n_envs,) + env.observation_space.shape, dtype=env.observation_space.dtype)
        self.obs[:] = env.reset()
        self.n_steps = n_steps
        self.states = model.initial_state
        self.dones = np.zeros(n_envs, dtype=bool)
        self.callback = None
        self.continue_training = True
        self.n_envs = n_envs

    def run(self, callback=None):
        """Collect one batch; ``callback.on_step()`` returning False stops (``continue_training`` = False)."""
        self.callback = callback
        self.continue_training = True
        return self._run()

    @abstractmethod
    def _run(self):
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def _clip_actions(self, actions: np.ndarray) -> np.ndarray:
        space = self.env.action_space
        if isinstance(space, gym.spaces.Box):
            return np.clip(actions, space.low, space.high)
        return actions

    def _bootstrap_truncated(self, rewards: np.ndarray, dones: np.ndarray, infos: list, gamma: float,
                             states_before: Optional[np.ndarray]) -> np.ndarray:
        """
        Add ``gamma * V(terminal_observation)`` to the reward of episodes cut by a time limit, so that a
        truncation is not learnt as a termination (``infos[i]["TimeLimit.truncated"]``).
        """
        truncated = [i for i in np.flatnonzero(dones)
                     if infos[i].get("TimeLimit.truncated", False) and infos[i].get("terminal_observation") is not None]
        if not truncated:
            return rewards
        terminal_obs = np.stack([np.asarray(infos[i]["terminal_observation"]) for i in truncated])
        policy = self.model.policy_tf
        if getattr(policy, "recurrent", False):
            state = states_before[truncated]
            values = policy.value(terminal_obs, state, np.zeros(len(truncated), np.float32))
        else:
            values = policy.value(terminal_obs)
        rewards = rewards.astype(np.float32, copy=True)
        rewards[truncated] += gamma * values.astype(np.float32)
        return rewards

    def _step_callback(self, local_vars: dict) -> bool:
        if self.callback is None:
            return True
        self.callback.update_locals(local_vars)
        if self.callback.on_step() is False:
            self.continue_training = False
            return False
        return True


def swap_and_flatten(arr: np.ndarray) -> np.ndarray:
    """(n_steps, n_envs, ...) -> (n_envs * n_steps, ...), env-major (SB2 layout)."""
    shape = arr.shape
    return arr.swapaxes(0, 1).reshape(shape[0] * shape[1], *shape[2:])
