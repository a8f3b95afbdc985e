"""``Monitor``: the episode-statistics wrapper of stable-baselines 2.x, for gymnasium envs.

SB2 named it ``stable_baselines.bench.Monitor`` (``sbtf.bench`` keeps that name), SB3
``stable_baselines3.common.monitor.Monitor``; it lives here so that the core needs nothing from ``sbtf.bench``.

It records each episode's reward, length and wall-clock time in ``info["episode"]`` at the
episode's last step (an episode ends when the env reports ``terminated`` or ``truncated``)
and, when given a file name, appends them to a ``*.monitor.csv`` file in the stable-baselines
format: a ``#{"t_start": ..., "env_id": ...}`` JSON header line, then ``r,l,t`` columns
(plus any ``reset_keywords`` / ``info_keywords``).
"""
from __future__ import annotations

import csv
import json
import os
import time
from glob import glob
from typing import Any, Dict, List, Optional, Sequence, SupportsFloat, Tuple

import gymnasium

from sbtf.common.envs.gym_compat import wrap_env

__all__ = ["Monitor", "LoadMonitorResultsError", "get_monitor_files", "load_results"]


class Monitor(gymnasium.Wrapper):
    """
    A monitor wrapper for Gym environments, it is used to know the episode reward, length, time and other data.

    :param env: (gymnasium.Env) the environment (an old-gym-API env is adapted with
        ``sbtf.common.envs.gym_compat.wrap_env`` first)
    :param filename: (Optional[str]) the location to save a log file, None (the default, as stable-baselines3) for
        no log
    :param allow_early_resets: (bool) allows the reset of the environment before it is done
    :param reset_keywords: (tuple) extra keywords for the reset call, if extra parameters are needed at reset
    :param info_keywords: (tuple) extra information to log, from the information return of environment.step
    :param override_existing: (bool) stable-baselines3's: start a new log file (True) or append to an existing one
    """

    EXT = "monitor.csv"
    file_handler = None

    def __init__(
        self,
        env: Any,
        filename: Optional[str] = None,
        allow_early_resets: bool = True,
        reset_keywords: Sequence[str] = (),
        info_keywords: Sequence[str] = (),
        override_existing: bool = True,
    ):
        if not isinstance(env, gymnasium.Env):
            env = wrap_env(env)
        super().__init__(env)
        self.t_start = time.time()
        reset_keywords = tuple(reset_keywords)
        info_keywords = tuple(info_keywords)
        if filename is None:
            self.file_handler = None
            self.logger: Optional[csv.DictWriter] = None
        else:
            filename = os.fspath(filename)
            if not filename.endswith(Monitor.EXT):
                if os.path.isdir(filename):
                    filename = os.path.join(filename, Monitor.EXT)
                else:
                    filename = filename + "." + Monitor.EXT
            spec = getattr(env, "spec", None)
            env_id = getattr(spec, "id", None) if spec is not None else None
            append = not override_existing and os.path.isfile(filename) and os.path.getsize(filename) > 0
            self.file_handler = open(filename, "at" if append else "wt", newline="")
            if not append:
                self.file_handler.write("#%s\n" % json.dumps({"t_start": self.t_start, "env_id": env_id}))
            self.logger = csv.DictWriter(
                self.file_handler, fieldnames=("r", "l", "t") + reset_keywords + info_keywords, lineterminator="\n"
            )
            if not append:
                self.logger.writeheader()
            self.file_handler.flush()
        self.filename = filename
        self.reset_keywords = reset_keywords
        self.info_keywords = info_keywords
        self.allow_early_resets = allow_early_resets
        self.rewards: List[float] = []
        self.needs_reset = True
        self.episode_rewards: List[float] = []
        self.episode_lengths: List[int] = []
        self.episode_times: List[float] = []
        self.total_steps = 0
        self.current_reset_info: Dict[str, Any] = {}

    def reset(self, **kwargs: Any) -> Tuple[Any, Dict[str, Any]]:
        """
        Calls the Gym environment reset. Can only be called if the environment is over, or if allow_early_resets is True

        :param kwargs: Extra keywords passed to env.reset() call; each of ``reset_keywords`` must be
            given, either as a keyword or inside ``options``
        :return: (obs, info) the first observation of the environment and the reset info
        """
        if not self.allow_early_resets and not self.needs_reset:
            raise RuntimeError(
                "Tried to reset an environment before done. If you want to allow early resets, "
                "wrap your env with Monitor(env, path, allow_early_resets=True)"
            )
        self.rewards = []
        self.needs_reset = False
        options = kwargs.get("options") or {}
        for key in self.reset_keywords:
            value = kwargs.get(key, options.get(key) if isinstance(options, dict) else None)
            if value is None:
                raise ValueError("Expected you to pass kwarg {} into reset".format(key))
            self.current_reset_info[key] = value
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Tuple[Any, SupportsFloat, bool, bool, Dict[str, Any]]:
        """
        Step the environment with the given action

        :param action: the action
        :return: (observation, reward, terminated, truncated, info)
        """
        if self.needs_reset:
            raise RuntimeError("Tried to step environment that needs reset")
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.rewards.append(float(reward))
        if terminated or truncated:
            self.needs_reset = True
            ep_rew = float(sum(self.rewards))
            ep_len = len(self.rewards)
            ep_time = time.time() - self.t_start
            ep_info: Dict[str, Any] = {"r": round(ep_rew, 6), "l": ep_len, "t": round(ep_time, 6)}
            for key in self.info_keywords:
                ep_info[key] = info[key]
            self.episode_rewards.append(ep_rew)
            self.episode_lengths.append(ep_len)
            self.episode_times.append(ep_time)
            ep_info.update(self.current_reset_info)
            if self.logger is not None:
                self.logger.writerow(ep_info)
                self.file_handler.flush()
            info["episode"] = ep_info
        self.total_steps += 1
        return observation, reward, terminated, truncated, info

    def close(self) -> None:
        """
        Closes the environment and the log file
        """
        super().close()
        if self.file_handler is not None:
            self.file_handler.close()
            self.file_handler = None

    def get_total_steps(self) -> int:
        """
        Returns the total number of timesteps

        :return: (int)
        """
        return self.total_steps

    def get_episode_rewards(self) -> List[float]:
        """
        Returns the rewards of all the episodes

        :return: ([float])
        """
        return self.episode_rewards

    def get_episode_lengths(self) -> List[int]:
        """
        Returns the number of timesteps of all the episodes

        :return: ([int])
        """
        return self.episode_lengths

    def get_episode_times(self) -> List[float]:
        """
        Returns the runtime in seconds of all the episodes

        :return: ([float])
        """
        return self.episode_times


class LoadMonitorResultsError(Exception):
    """
    Raised when loading the monitor log fails.
    """

    pass


def get_monitor_files(path: str) -> List[str]:
    """
    get all the monitor files in the given path

    :param path: (str) the logging folder
    :return: ([str]) the log files
    """
    return glob(os.path.join(path, "*" + Monitor.EXT))


def load_results(path: str) -> Any:
    """
    Load all Monitor logs from a given directory path matching ``*monitor.csv`` and ``*monitor.json``

    :param path: (str) the directory path containing the log file(s)
    :return: (pandas.DataFrame) the logged data, sorted by time, ``t`` relative to the earliest ``t_start``
    """
    import pandas

    monitor_files = glob(os.path.join(path, "*monitor.json")) + get_monitor_files(path)
    if not monitor_files:
        raise LoadMonitorResultsError("no monitor files of the form *%s found in %s" % (Monitor.EXT, path))
    data_frames, headers = [], []
    for file_name in monitor_files:
        with open(file_name, "rt") as file_handler:
            if file_name.endswith("csv"):
                first_line = file_handler.readline()
                if not first_line.startswith("#"):
                    raise LoadMonitorResultsError("{} does not start with a '#{{...}}' JSON header".format(file_name))
                header = json.loads(first_line[1:])
                data_frame = pandas.read_csv(file_handler, index_col=None)
            elif file_name.endswith("json"):  # Deprecated json format
                lines = file_handler.readlines()
                header = json.loads(lines[0])
                episodes = [json.loads(line) for line in lines[1:] if line.strip()]
                data_frame = pandas.DataFrame(episodes)
            else:  # pragma: no cover - the globs above only match csv/json
                raise LoadMonitorResultsError("unexpected monitor file {}".format(file_name))
            headers.append(header)
            data_frame["t"] += header["t_start"]
        data_frames.append(data_frame)
    data_frame = pandas.concat(data_frames)
    data_frame = data_frame.sort_values("t")
    # as stable-baselines: the old per-file row numbers are kept in an 'index' column
    data_frame = data_frame.reset_index()
    data_frame["t"] -= min(header["t_start"] for header in headers)
    return data_frame
