"""``VecExtractDictObs``: one entry of a Dict observation (stable-baselines3)."""
from __future__ import annotations

from typing import Any

from gymnasium import spaces

from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper

__all__ = ["VecExtractDictObs"]


class VecExtractDictObs(VecEnvWrapper):
    """
    A vectorized wrapper that keeps one entry of Dict observations (stable-baselines3's ``VecExtractDictObs``);
    ``terminal_observation`` in the infos is reduced the same way.

    :param venv: (VecEnv) the vectorized environment, with a Dict observation space
    :param key: (str) the key of the entry to keep
    """

    def __init__(self, venv: VecEnv, key: str):
        if not isinstance(venv.observation_space, spaces.Dict):
            raise ValueError(f"VecExtractDictObs can only be used with Dict obs space, not {venv.observation_space}")
        if key not in venv.observation_space.spaces:
            raise KeyError(f"VecExtractDictObs: the observation space has no key {key!r}; its keys are "
                           f"{list(venv.observation_space.spaces)}")
        self.key = key
        super().__init__(venv=venv, observation_space=venv.observation_space.spaces[key])

    def reset(self) -> Any:
        return self.venv.reset()[self.key]

    def step_wait(self) -> Any:
        obs, reward, done, infos = self.venv.step_wait()
        for info in infos:
            if "terminal_observation" in info:
                info["terminal_observation"] = info["terminal_observation"][self.key]
        return obs[self.key], reward, done, infos
