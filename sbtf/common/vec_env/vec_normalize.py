"""Running normalisation of observations and returns for vectorized environments.

Statistics files (``VecNormalize.save`` / ``save_running_average`` of sbtf, stable-baselines 2 and 3, baselines)
are pickles; they are read by :mod:`sbtf.common.fileio.safe_pickle` with a small allow-list (numpy arrays, scalars and
dtypes; ``RunningMeanStd`` and ``VecNormalize`` objects as inert records of their state; gym spaces and random
generators as inert records), so a file cannot run code, and every value taken from it is validated. Every
failure is a :class:`~sbtf.common.file_errors.ModelFileError` naming the file.
"""
from __future__ import annotations

import math
import os
import pickle
import warnings
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
from gymnasium import spaces

from sbtf.common.fileio import safe_pickle
from sbtf.common.fileio.safe_zip import read_file_limited
from sbtf.common.fileio.atomic_io import atomic_write_bytes, atomic_write_many
from sbtf.common.file_errors import CorruptedFileError, ModelDataError, ModelFileError, describe_value
from sbtf.common.running_mean_std import RunningMeanStd
from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper

# Format tag of the files written by ``VecNormalize.save`` (a pickle of plain data only).
_SAVE_FORMAT = "sbtf.VecNormalize"
_SAVE_FORMAT_VERSION = 1
_SETTINGS = ("training", "norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon")
#: what each number setting means, as (low, high, low included): clips and epsilon > 0, gamma a discount in [0, 1]
_SETTING_RANGES = {"clip_obs": (0.0, math.inf, False), "clip_reward": (0.0, math.inf, False),
                   "gamma": (0.0, 1.0, True), "epsilon": (0.0, math.inf, False)}
_DEFAULTS = {"training": True, "norm_obs": True, "norm_reward": True, "clip_obs": 10., "clip_reward": 10.,
             "gamma": 0.99, "epsilon": 1e-8}
#: the statistics of a Dict observation space: one RunningMeanStd per normalised (Box) entry
DictStatistics = Dict[str, RunningMeanStd]

# ----- reading statistics files: an allow-list for the safe pickle interpreter -----
_RMS_MODULES = {
    "sbtf.common.running_mean_std", "stable_baselines.common.running_mean_std",
    "stable_baselines.common.mpi_running_mean_std", "baselines.common.running_mean_std",
    "stable_baselines3.common.running_mean_std",
}
_VEC_NORMALIZE_MODULES = {
    "sbtf.common.vec_env.vec_normalize", "stable_baselines.common.vec_env.vec_normalize",
    "stable_baselines3.common.vec_env.vec_normalize",
}
_DATA_TABLE = {**safe_pickle.NUMPY_HANDLERS, **safe_pickle.DATA_HANDLERS}
_RMS = safe_pickle.RecordClass("rms")
_VEC_NORMALIZE = safe_pickle.RecordClass("vecnormalize")
_INERT = safe_pickle.RecordClass("inert")


def _stats_resolver(module: str, name: str) -> Optional[safe_pickle.Handler]:
    """What a global of a statistics file may be (anything else is refused when called)."""
    handler = _DATA_TABLE.get((module, name))
    if handler is not None:
        return handler
    if name == "RunningMeanStd" and module in _RMS_MODULES:
        return _RMS
    if name == "VecNormalize" and module in _VEC_NORMALIZE_MODULES:
        return _VEC_NORMALIZE
    if module.split(".")[0] in ("gym", "gymnasium") and ".spaces" in module:
        return _INERT  # observation/action spaces stored with SB2/SB3 wrappers: not needed
    if module.startswith("numpy.random"):
        return _INERT  # their random generators
    return None


def _read_statistics(path: str, kind: str) -> Any:
    """Interpret the pickle at ``path`` (a ``kind`` file) with the statistics allow-list."""
    payload = read_file_limited(path, kind)
    try:
        return safe_pickle.loads(payload, _stats_resolver, what=f"the {kind} {path}")
    except CorruptedFileError as exc:
        raise CorruptedFileError(f"{path} is not a {kind}, or it is damaged ({exc})") from exc
    except ModelFileError as exc:  # every message names the file
        if path in str(exc):
            raise
        raise type(exc)(f"{path}: {exc}") from exc


def _state_of(value: Any) -> Any:
    """The recorded state of a pickled RunningMeanStd / VecNormalize object (plain values are returned as is)."""
    if isinstance(value, safe_pickle.Record):
        return value.state
    return value


def _rms_to_data(rms: RunningMeanStd) -> Dict[str, Any]:
    return {"mean": np.array(rms.mean, dtype=np.float64), "var": np.array(rms.var, dtype=np.float64),
            "count": float(rms.count)}


def _statistic_array(value: Any, what: str) -> np.ndarray:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iuf":
        found = f"an array of {value.dtype}" if isinstance(value, np.ndarray) else type(value).__name__
        raise ModelDataError(f"{what} must be a numeric array, not {found}.")
    return np.array(value, dtype=np.float64)


def _rms_from_data(data: Any, where: str = "The statistics") -> RunningMeanStd:
    """A validated RunningMeanStd from plain data (dict), a pickled record or a RunningMeanStd-like object."""
    data = _state_of(data)
    if isinstance(data, dict):
        if not all(key in data for key in ("mean", "var", "count")):
            raise ModelDataError(f"{where} has no mean/var/count (found the keys "
                                 f"{describe_value(list(data)[:8])}).")
        mean, var, count = data["mean"], data["var"], data["count"]
    elif isinstance(data, RunningMeanStd):
        mean, var, count = data.mean, data.var, data.count
    else:
        raise ModelDataError(f"{where} are not running mean/std statistics (mean, var, count), but a "
                             f"{type(data).__name__}.")
    mean = _statistic_array(mean, f"{where}: the mean")
    var = _statistic_array(var, f"{where}: the variance")
    if mean.shape != var.shape:
        raise ModelDataError(f"{where}: the mean has shape {mean.shape} but the variance {var.shape}.")
    if not np.all(np.isfinite(mean)):
        raise ModelDataError(f"{where}: the mean holds NaN or infinite values; the statistics are corrupted "
                             "(they would turn every observation into NaN).")
    if not np.all(np.isfinite(var)) or np.any(var < 0):
        raise ModelDataError(f"{where}: the variance must be finite and >= 0, but it holds "
                             f"{'negative' if np.any(var < 0) else 'NaN or infinite'} values; the statistics are "
                             "corrupted.")
    count = _statistic_array(count, f"{where}: the count")
    if count.shape != () or not math.isfinite(float(count)) or float(count) < 0:
        raise ModelDataError(f"{where}: the count must be a finite number >= 0, not {describe_value(count)}.")
    rms = RunningMeanStd(shape=mean.shape)
    rms.mean, rms.var, rms.count = mean, var, float(count)
    return rms


def running_mean_std_from_data(data: Any, where: str = "The statistics") -> RunningMeanStd:
    """
    A RunningMeanStd from ``{mean, var, count}`` data (or a RunningMeanStd), validated against its meaning: a finite
    mean, a finite variance >= 0, a finite count >= 0.

    :raises ModelDataError: when a value is missing or invalid
    """
    return _rms_from_data(data, where)


def _setting(name: str, value: Any, where: str) -> Any:
    """A validated VecNormalize setting: a bool for the flags, a number (not NaN) for the others."""
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(_DEFAULTS[name], bool):
        if isinstance(value, bool) or (type(value) is int and value in (0, 1)):
            return bool(value)
        raise ModelDataError(f"{where}: the setting {name!r} must be a bool, not {type(value).__name__}.")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or (
            isinstance(value, int) and abs(value) > 2 ** 64):
        raise ModelDataError(f"{where}: the setting {name!r} must be a number, not {describe_value(value)}.")
    value = float(value)
    low, high, closed = _SETTING_RANGES[name]
    if not (math.isfinite(value) and (low <= value if closed else low < value) and value <= high):
        raise ModelDataError(f"{where}: the setting {name!r} is {value!r}, outside "
                             f"{'[' if closed else '('}{low}, {high}]; the statistics are corrupted.")
    return value


class VecNormalize(VecEnvWrapper):
    """
    Normalises observations and rewards of a VecEnv with running statistics.

    Observations are normalised with the running mean / variance of the observations, rewards are divided by the
    running standard deviation of the discounted return. Both are clipped. With a ``Dict`` observation space, each
    ``Box`` entry (or each entry of ``norm_obs_keys``) has its own statistics (``obs_rms`` is then a dict of them,
    as in stable-baselines 3) and the other entries pass through unchanged; ``Tuple`` spaces are not supported.
    Normalised observations and rewards are float32 (statistics are kept in float64). ``terminal_observation``
    entries in the infos are normalised too, so that bootstrapping from them sees the same inputs as the policy.

    ``save`` writes the statistics and settings only (never the wrapped venv); ``load`` restores them around a venv.

    :param venv: (VecEnv) the vectorized environment to wrap
    :param training: (bool) update the statistics with the data seen (set False for evaluation)
    :param norm_obs: (bool) normalise the observations
    :param norm_reward: (bool) normalise the rewards
    :param clip_obs: (float) normalised observations are clipped to [-clip_obs, clip_obs]
    :param clip_reward: (float) normalised rewards are clipped to [-clip_reward, clip_reward]
    :param gamma: (float) discount factor of the return whose variance scales the rewards
    :param epsilon: (float) added to variances before the square root
    :param norm_obs_keys: ([str]) Dict observation spaces only: the entries to normalise (``Box`` entries); default:
        every ``Box`` entry
    """

    def __init__(self, venv: VecEnv, training: bool = True, norm_obs: bool = True, norm_reward: bool = True,
                 clip_obs: float = 10., clip_reward: float = 10., gamma: float = 0.99, epsilon: float = 1e-8,
                 norm_obs_keys: Optional[Sequence[str]] = None):
        VecEnvWrapper.__init__(self, venv)
        if norm_obs and isinstance(self.observation_space, spaces.Tuple):
            raise ValueError("VecNormalize cannot normalise Tuple observation spaces; use norm_obs=False or flatten "
                             "the observations (gymnasium.wrappers.FlattenObservation)")
        self.norm_obs_keys: Optional[List[str]] = None
        self.obs_rms: Union[RunningMeanStd, DictStatistics]
        if isinstance(self.observation_space, spaces.Dict):
            self.norm_obs_keys = _dict_keys_to_normalize(self.observation_space, norm_obs_keys)
            self.obs_rms = OrderedDict((key, RunningMeanStd(shape=self.observation_space.spaces[key].shape))
                                       for key in self.norm_obs_keys)
        else:
            if norm_obs_keys is not None:
                raise ValueError("norm_obs_keys only applies to Dict observation spaces, not to {}".format(
                    type(self.observation_space).__name__))
            self.obs_rms = RunningMeanStd(shape=self.observation_space.shape)
        self.ret_rms = RunningMeanStd(shape=())
        self.clip_obs = clip_obs
        self.clip_reward = clip_reward
        # Discounted returns of the running episodes, one per env.
        self.ret = np.zeros(self.num_envs)
        self.gamma = gamma
        self.epsilon = epsilon
        self.training = training
        self.norm_obs = norm_obs
        self.norm_reward = norm_reward
        self.old_obs: Optional[np.ndarray] = None
        self.old_rews: Optional[np.ndarray] = None

    # ----- pickling: plain data only, never the venv -----
    @property
    def returns(self) -> np.ndarray:
        """The discounted returns of the running episodes, one per env (SB3's name of SB2's ``ret``)."""
        return self.ret

    @returns.setter
    def returns(self, value: np.ndarray) -> None:
        self.ret = value

    def _to_data(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {"format": _SAVE_FORMAT, "format_version": _SAVE_FORMAT_VERSION,
                                "obs_rms": _obs_rms_to_data(self.obs_rms), "ret_rms": _rms_to_data(self.ret_rms)}
        if self.norm_obs_keys is not None:
            data["norm_obs_keys"] = list(self.norm_obs_keys)
        for name in _SETTINGS:
            value = getattr(self, name)
            data[name] = bool(value) if isinstance(value, (bool, np.bool_)) else float(value)
        return data

    @classmethod
    def from_data(cls, data: Dict[str, Any], where: str = "The VecNormalize statistics") -> "VecNormalize":
        """
        A VecNormalize without venv (call :meth:`set_venv` before use) from statistics and settings as plain data.

        :param data: (dict) ``obs_rms`` and ``ret_rms`` (each a ``RunningMeanStd`` or a ``{mean, var, count}``
            dict), and optionally the settings ``training``, ``norm_obs``, ``norm_reward``, ``clip_obs``,
            ``clip_reward``, ``gamma``, ``epsilon`` (defaults as in the constructor)
        :param where: (str) what the data is, for error messages
        :raises ModelDataError: when a value is missing or invalid
        """
        data = _state_of(data)
        if not isinstance(data, dict):
            raise ModelDataError(f"{where} are a {type(data).__name__}, not VecNormalize statistics.")
        missing = [key for key in ("obs_rms", "ret_rms") if key not in data]
        if missing:
            raise ModelDataError(f"{where} are not VecNormalize statistics: {missing} missing.")
        self = cls.__new__(cls)
        self.__dict__["venv"] = None
        norm_obs_keys = data.get("norm_obs_keys")
        if norm_obs_keys is None:
            self.norm_obs_keys = None
            self.obs_rms = _rms_from_data(data["obs_rms"], f"{where} (obs_rms)")
        else:
            self.norm_obs_keys, self.obs_rms = _dict_statistics_from_data(norm_obs_keys, data["obs_rms"], where)
        self.ret_rms = _rms_from_data(data["ret_rms"], f"{where} (ret_rms)")
        for name in _SETTINGS:
            setattr(self, name, _setting(name, data.get(name, _DEFAULTS[name]), where))
        self.old_obs = None
        self.old_rews = None
        return self

    def __getstate__(self) -> Dict[str, Any]:
        """Pickle only the statistics and settings (the venv is generally not picklable)."""
        return self._to_data()

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """Restore from pickled state; ``set_venv()`` must be called before use."""
        self.__dict__.update(type(self).from_data(state).__dict__)

    def set_venv(self, venv: VecEnv) -> None:
        """
        Wrap ``venv`` with this (unpickled or loaded) VecNormalize; its observation shape must match the statistics.

        :param venv: (VecEnv)
        """
        if self.__dict__.get("venv") is not None:
            raise ValueError("Trying to set venv of already initialized VecNormalize wrapper.")
        VecEnvWrapper.__init__(self, venv)
        _check_statistics_fit(self.obs_rms, self.observation_space, "venv is incompatible with current statistics")
        self.ret = np.zeros(self.num_envs)

    # ----- VecEnv API -----
    def step_wait(self):
        """
        Collect the step results, update the statistics (when training) and return normalised data.
        """
        obs, rews, news, infos = self.venv.step_wait()
        self.old_obs = obs
        self.old_rews = rews

        if self.training:
            self._update_obs(obs)
        obs = self.normalize_obs(obs)

        if self.training:
            self._update_reward(rews)
        rews = self.normalize_reward(rews)

        for idx in np.flatnonzero(news):
            terminal = infos[idx].get("terminal_observation")
            if terminal is not None:
                infos[idx]["terminal_observation"] = self.normalize_obs(terminal)
        self.ret[news] = 0
        return obs, rews, news, infos

    def _update_obs(self, obs: Any) -> None:
        """Update the observation statistics (one per normalised entry of a Dict observation)."""
        if isinstance(self.obs_rms, dict):
            for key, rms in self.obs_rms.items():
                rms.update(np.asarray(obs[key]))
        else:
            self.obs_rms.update(obs)

    def _update_reward(self, reward: np.ndarray) -> None:
        """Update reward normalization statistics."""
        self.ret = self.ret * self.gamma + reward
        self.ret_rms.update(self.ret)

    def normalize_obs(self, obs: Any) -> Any:
        """
        Normalise observations with the current statistics (without updating them).

        :param obs: (np.ndarray or dict) observations (a batch, or a single observation); for a Dict observation
            space a dict, whose entries in ``norm_obs_keys`` are normalised (a new dict; the others are kept)
        :return: (np.ndarray or dict) float32 normalised observations (unchanged input if ``norm_obs`` is False)
        """
        if not self.norm_obs:
            return obs
        if isinstance(self.obs_rms, dict):
            normalized_dict = OrderedDict(obs)
            for key, rms in self.obs_rms.items():
                normalized_dict[key] = self._normalize_array(obs[key], rms)
            return normalized_dict
        return self._normalize_array(obs, self.obs_rms)

    def _normalize_array(self, obs: np.ndarray, rms: RunningMeanStd) -> np.ndarray:
        normalized = (np.asarray(obs, dtype=np.float64) - rms.mean) / np.sqrt(rms.var + self.epsilon)
        return np.clip(normalized, -self.clip_obs, self.clip_obs).astype(np.float32)

    def normalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """
        Scale rewards with the current return statistics (without updating them).

        :param reward: (np.ndarray) rewards
        :return: (np.ndarray) float32 normalised rewards (unchanged input if ``norm_reward`` is False)
        """
        if not self.norm_reward:
            return reward
        normalized = np.asarray(reward, dtype=np.float64) / np.sqrt(self.ret_rms.var + self.epsilon)
        return np.clip(normalized, -self.clip_reward, self.clip_reward).astype(np.float32)

    def unnormalize_obs(self, obs: Any) -> Any:
        """
        Invert :meth:`normalize_obs` with the current statistics (exact unless the observation was clipped).

        :param obs: (np.ndarray or dict) normalised observations; for a Dict observation space a dict, whose entries
            in ``norm_obs_keys`` are unnormalised (a new dict; the others are kept)
        :return: (np.ndarray or dict) the observations in the env's units, in the dtype of ``obs`` (unchanged input
            if ``norm_obs`` is False)
        """
        if not self.norm_obs:
            return obs
        if isinstance(self.obs_rms, dict):
            restored = OrderedDict(obs)
            for key, rms in self.obs_rms.items():
                restored[key] = self._unnormalize_array(obs[key], rms)
            return restored
        return self._unnormalize_array(obs, self.obs_rms)

    def _unnormalize_array(self, obs: np.ndarray, rms: RunningMeanStd) -> np.ndarray:
        obs = np.asarray(obs)
        restored = np.asarray(obs, dtype=np.float64) * np.sqrt(rms.var + self.epsilon) + rms.mean
        return restored.astype(obs.dtype if obs.dtype.kind == "f" else np.float32)

    def unnormalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """
        Invert :meth:`normalize_reward` with the current statistics (exact unless the reward was clipped).

        :param reward: (np.ndarray) normalised rewards
        :return: (np.ndarray) the rewards in the env's units (unchanged input if ``norm_reward`` is False)
        """
        if not self.norm_reward:
            return reward
        return np.asarray(reward, dtype=np.float64) * np.sqrt(self.ret_rms.var + self.epsilon)

    def get_original_obs(self) -> np.ndarray:
        """
        The raw (not normalised) observations of the last step or reset.
        """
        if self.old_obs is None:
            raise RuntimeError("get_original_obs(): no observation yet, call reset() first")
        if isinstance(self.old_obs, dict):
            return OrderedDict((key, np.array(value, copy=True)) for key, value in self.old_obs.items())
        return np.array(self.old_obs, copy=True)

    def get_original_reward(self) -> np.ndarray:
        """
        The raw (not normalised) rewards of the last step.
        """
        if self.old_rews is None:
            raise RuntimeError("get_original_reward(): no reward yet, call step() first")
        return np.array(self.old_rews, copy=True)

    def reset(self):
        """
        Reset the envs and the running returns; return normalised observations.
        """
        obs = self.venv.reset()
        self.old_obs = obs
        self.ret = np.zeros(self.num_envs)
        if self.training:
            # As in stable-baselines 2: the zero returns of the fresh episodes count in the return statistics.
            self._update_reward(self.ret)
        return self.normalize_obs(obs)

    # ----- saving / loading -----
    @classmethod
    def load(cls, load_path: str, venv: VecEnv) -> "VecNormalize":
        """
        Restore a VecNormalize saved with ``save`` around ``venv``.

        Reads files written by ``save`` and also VecNormalize pickles written by stable-baselines 2 / 3 (only the
        statistics and settings are taken from them; nothing in the file is executed).

        :param load_path: (str) the path to load from.
        :param venv: (VecEnv) the VecEnv to wrap.
        :return: (VecNormalize)
        :raises ModelFileError: (a ValueError) when the file is not valid statistics, names the file
        """
        load_path = os.fspath(load_path)
        data = _state_of(_read_statistics(load_path, "VecNormalize statistics file"))
        if not isinstance(data, dict) or "obs_rms" not in data or "ret_rms" not in data:
            raise CorruptedFileError("{} is not a VecNormalize statistics file (no obs_rms / ret_rms in it)".format(
                load_path))
        vec_normalize = cls.from_data(data, where=f"The statistics in {load_path}")
        vec_normalize.set_venv(venv)
        return vec_normalize

    def save(self, save_path: str) -> None:
        """
        Save the statistics and settings (not the venv) as a pickle of plain data, atomically.

        :param save_path: (str) The path to save to
        """
        atomic_write_bytes(save_path, pickle.dumps(self._to_data(), protocol=pickle.HIGHEST_PROTOCOL))

    def save_running_average(self, path: str) -> None:
        """
        Write ``obs_rms.pkl`` and ``ret_rms.pkl`` (plain data: mean, var, count) to the folder ``path``; both files
        are replaced together.

        :param path: (str) path to log dir

        .. deprecated:: 2.9.0
            This function will be removed in a future version, use ``save`` instead
        """
        warnings.warn("Usage of `save_running_average` is deprecated. Please use `save` instead.", DeprecationWarning)
        if isinstance(self.obs_rms, dict):
            raise ValueError("save_running_average() writes one obs_rms.pkl, which cannot hold the statistics of a "
                             "Dict observation space; use save() instead")
        atomic_write_many({os.path.join(path, "{}.pkl".format(name)): pickle.dumps(
            _rms_to_data(rms), protocol=pickle.HIGHEST_PROTOCOL)
            for rms, name in ((self.obs_rms, "obs_rms"), (self.ret_rms, "ret_rms"))})

    def load_running_average(self, path: str) -> None:
        """
        Read ``obs_rms.pkl`` and ``ret_rms.pkl`` from the folder ``path`` (written by ``save_running_average`` of
        sbtf or of stable-baselines 2; nothing in the files is executed).

        :param path: (str) path to log dir

        .. deprecated:: 2.9.0
            This function will be removed in a future version, use ``load`` instead
        """
        warnings.warn("Usage of `load_running_average` is deprecated. Please use `load` instead.", DeprecationWarning)
        loaded = {}
        for name in ("obs_rms", "ret_rms"):
            file_path = os.path.join(path, "{}.pkl".format(name))
            value = _read_statistics(file_path, "running mean/std statistics file")
            loaded[name] = _rms_from_data(value, f"The statistics in {file_path}")
        if isinstance(self.obs_rms, dict):
            raise ModelDataError("{}: obs_rms.pkl holds one statistic, but the observations are a Dict; use "
                                 "VecNormalize.load with a file written by save()".format(path))
        if loaded["obs_rms"].mean.shape != self.observation_space.shape:
            raise ModelDataError("{}: statistics of shape {} do not match observations of shape {}".format(
                os.path.join(path, "obs_rms.pkl"), loaded["obs_rms"].mean.shape, self.observation_space.shape))
        self.obs_rms = loaded["obs_rms"]
        self.ret_rms = loaded["ret_rms"]


def _dict_keys_to_normalize(space: spaces.Dict, norm_obs_keys: Optional[Sequence[str]]) -> List[str]:
    """The entries of a Dict observation space to normalise: ``norm_obs_keys`` (checked), else every Box entry."""
    if norm_obs_keys is None:
        return [key for key, sub in space.spaces.items() if isinstance(sub, spaces.Box)]
    keys = [str(key) for key in norm_obs_keys]
    for key in keys:
        if key not in space.spaces:
            raise ValueError("norm_obs_keys: {!r} is not an entry of the observation space (entries: {})".format(
                key, ", ".join(map(str, space.spaces))))
        if not isinstance(space.spaces[key], spaces.Box):
            raise ValueError("norm_obs_keys: the entry {!r} is a {}; VecNormalize normalises Box entries only".format(
                key, type(space.spaces[key]).__name__))
    return keys


def _obs_rms_to_data(obs_rms: Union[RunningMeanStd, DictStatistics]) -> Any:
    if isinstance(obs_rms, dict):
        return {str(key): _rms_to_data(rms) for key, rms in obs_rms.items()}
    return _rms_to_data(obs_rms)


def _dict_statistics_from_data(keys: Any, data: Any, where: str):
    """``(norm_obs_keys, {key: RunningMeanStd})`` of a Dict observation space's statistics (validated)."""
    data = _state_of(data)
    if not isinstance(keys, (list, tuple)) or not all(isinstance(key, str) for key in keys):
        raise ModelDataError(f"{where}: norm_obs_keys must be a list of entry names, not {describe_value(keys)}.")
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data) or sorted(data) != sorted(keys):
        found = describe_value(list(data)[:8]) if isinstance(data, dict) else type(data).__name__
        raise ModelDataError(f"{where}: obs_rms must hold the statistics of the entries {describe_value(list(keys))}, "
                             f"found {found}.")
    statistics = OrderedDict((key, _rms_from_data(data[key], f"{where} (obs_rms[{key!r}])")) for key in keys)
    return list(keys), statistics


def _check_statistics_fit(obs_rms: Union[RunningMeanStd, DictStatistics], space: spaces.Space, what: str) -> None:
    """Raise ModelDataError when the statistics do not fit the observation space (shapes, Dict entries)."""
    if isinstance(obs_rms, dict):
        if not isinstance(space, spaces.Dict):
            raise ModelDataError("{}: statistics of the Dict entries {} but a {} observation space".format(
                what, list(obs_rms), type(space).__name__))
        for key, rms in obs_rms.items():
            sub = space.spaces.get(key)
            if not isinstance(sub, spaces.Box) or sub.shape != rms.mean.shape:
                raise ModelDataError("{}: statistics of shape {} for the entry {!r}, but the observation space has "
                                     "{}".format(what, rms.mean.shape, key, sub))
        return
    if isinstance(space, spaces.Dict) or obs_rms.mean.shape != space.shape:
        raise ModelDataError("{}: observations of shape {} but statistics of shape {}".format(
            what, space.shape if not isinstance(space, spaces.Dict) else "Dict", obs_rms.mean.shape))
