"""``VecPackDictObs``: the adapter through which sbtf's algorithms see a Dict-observation VecEnv."""
from __future__ import annotations

from typing import Any, List

import numpy as np

from sbtf.common.envs.dict_obs import DictObsLayout
from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper


class VecPackDictObs(VecEnvWrapper):
    """
    Packs the dict observations of a VecEnv with a ``gymnasium.spaces.Dict`` observation space into flat float32
    rows (``sbtf.common.envs.dict_obs.DictObsLayout``); its ``observation_space`` is the flat Box. A model puts it
    around a Dict-observation env internally (``model.env``), so that every runner and buffer handles plain arrays,
    while ``model.get_env()`` still returns the user's env. ``terminal_observation`` entries of the infos are packed too
    (the infos are copied, the user's env's own dicts are not changed).

    :param venv: (VecEnv) a VecEnv with a Dict observation space
    """

    def __init__(self, venv: VecEnv):
        self.layout = DictObsLayout(venv.observation_space)
        super().__init__(venv, observation_space=self.layout.flat_space)

    def reset(self) -> np.ndarray:
        return self.layout.pack(self.venv.reset())

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        return self.layout.pack(obs), rewards, dones, self._pack_infos(infos)

    def _pack_infos(self, infos: List[dict]) -> List[dict]:
        packed = []
        for info in infos:
            terminal = info.get("terminal_observation") if isinstance(info, dict) else None
            if isinstance(terminal, dict):
                info = dict(info)
                info["terminal_observation"] = self.layout.pack(terminal)[0]
            packed.append(info)
        return packed

    @property
    def unwrapped_user_env(self) -> Any:
        """The VecEnv this adapter wraps (what ``model.get_env()`` returns)."""
        return self.venv


__all__ = ["VecPackDictObs"]
