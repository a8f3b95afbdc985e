"""``VecMonitor``: the ``Monitor`` of stable-baselines3 at the level of a VecEnv."""
from __future__ import annotations

import csv
import json
import os
import time
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper

__all__ = ["VecMonitor", "EpisodeCsvWriter"]

#: the extension of the files ``Monitor`` and ``VecMonitor`` write (``sbtf.bench.load_results`` reads them)
MONITOR_EXT = "monitor.csv"


def _monitor_file_name(filename: str) -> str:
    """The ``*.monitor.csv`` path for ``filename`` (a folder gets ``monitor.csv`` inside it), as ``Monitor``."""
    filename = os.fspath(filename)
    if filename.endswith(MONITOR_EXT):
        return filename
    if os.path.isdir(filename):
        return os.path.join(filename, MONITOR_EXT)
    return f"{filename}.{MONITOR_EXT}"


def _wrapped_with_monitor(venv: VecEnv) -> bool:
    """Whether the single envs inside ``venv`` already carry a ``Monitor`` (False when that cannot be told)."""
    from sbtf.common.evaluation import _monitor_in_chain

    inner = venv
    while isinstance(inner, VecEnvWrapper):
        inner = inner.venv
    envs = getattr(inner, "envs", None)
    return bool(isinstance(envs, (list, tuple)) and envs and _monitor_in_chain(envs[0]))


class EpisodeCsvWriter:
    """
    Writes episodes to a ``*.monitor.csv`` file in ``Monitor``'s format (a ``#{"t_start", "env_id"}`` line, then
    ``r,l,t[,info keywords]`` rows, flushed per episode), which ``sbtf.bench.load_results`` reads.

    :param filename: (str) the file (``.monitor.csv`` is appended unless present; a folder gets ``monitor.csv``)
    :param env_id: (str) the env id written in the header
    :param t_start: (float) the start time written in the header
    :param info_keywords: (tuple) the extra columns
    """

    def __init__(self, filename: str, env_id: Optional[str], t_start: float, info_keywords: Sequence[str] = ()):
        self.filename = _monitor_file_name(filename)
        self._file = open(self.filename, "wt", newline="")
        self._file.write("#%s\n" % json.dumps({"t_start": t_start, "env_id": str(env_id)}))
        self._writer = csv.DictWriter(self._file, fieldnames=("r", "l", "t") + tuple(info_keywords),
                                      lineterminator="\n")
        self._writer.writeheader()
        self._file.flush()

    def write(self, episode: dict) -> None:
        """Append one episode's row."""
        self._writer.writerow(episode)
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()


class VecMonitor(VecEnvWrapper):
    """
    A vectorized monitor (stable-baselines3's ``VecMonitor``): records each episode's return, length and wall-clock
    time in ``info["episode"]`` (``{"r", "l", "t"}`` plus ``info_keywords``) at the step that ends it, for VecEnvs
    whose envs could not be wrapped in a ``Monitor`` one by one (e.g. envs that are vectorized natively). With a
    ``filename``, the episodes are also written to a ``*.monitor.csv`` file in ``Monitor``'s format
    (``sbtf.bench.load_results`` reads it).

    :param venv: (VecEnv) the vectorized environment
    :param filename: (str) where to write the log file (None: no file)
    :param info_keywords: (tuple) extra information to log, taken from the ``info`` of the last step of an episode
    """

    def __init__(self, venv: VecEnv, filename: Optional[str] = None, info_keywords: Sequence[str] = ()):
        if _wrapped_with_monitor(venv):
            warnings.warn("The environment is already wrapped with a `Monitor` wrapper but you are wrapping it with a "
                          "`VecMonitor` wrapper, the `Monitor` statistics will be overwritten by the `VecMonitor` "
                          "ones.", UserWarning)
        VecEnvWrapper.__init__(self, venv)
        self.episode_count = 0
        self.t_start = time.time()
        self.info_keywords = tuple(info_keywords)
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        self.filename: Optional[str] = None
        self._writer: Optional[EpisodeCsvWriter] = None
        if filename:
            spec = getattr(venv, "spec", None)
            env_id = getattr(spec, "id", None) if spec is not None else None
            self._writer = EpisodeCsvWriter(filename, env_id, self.t_start, self.info_keywords)
            self.filename = self._writer.filename

    def reset(self) -> Any:
        obs = self.venv.reset()
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        return obs

    def step_wait(self) -> Any:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.episode_returns += rewards
        self.episode_lengths += 1
        new_infos = list(infos)
        for i in np.flatnonzero(dones):
            info = dict(infos[i])
            episode_info = {"r": float(self.episode_returns[i]), "l": int(self.episode_lengths[i]),
                            "t": round(time.time() - self.t_start, 6)}
            for key in self.info_keywords:
                episode_info[key] = info[key]
            info["episode"] = episode_info
            new_infos[i] = info
            self.episode_count += 1
            self.episode_returns[i] = 0
            self.episode_lengths[i] = 0
            if self._writer is not None:
                self._writer.write(episode_info)
        return obs, rewards, dones, new_infos

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return self.venv.close()
