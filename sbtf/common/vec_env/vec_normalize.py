"""Running normalisation of observations and returns for vectorized environments."""
from __future__ import annotations

import io
import os
import pickle
import tempfile
import warnings
from typing import Any, Dict, Optional

import numpy as np
from gymnasium import spaces

from sbtf.common.running_mean_std import RunningMeanStd
from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper

# Format tag of the files written by ``VecNormalize.save`` (a pickle of plain data only).
_SAVE_FORMAT = "sbtf.VecNormalize"
_SAVE_FORMAT_VERSION = 1
_SETTINGS = ("training", "norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon")


class _PickledState(object):
    """Stand-in for a pickled VecNormalize object (stable-baselines or sbtf): only keeps its state dict."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.state: Dict[str, Any] = {}

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (dict state, slot state)
            state = state[0] or {}
        self.state = dict(state) if isinstance(state, dict) else {}


class _Inert(object):
    """Stand-in for objects in old pickles that are not needed (gym spaces, random generators): never runs code."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def __setstate__(self, state: Any) -> None:
        pass


def _inert_factory(*args: Any, **kwargs: Any) -> _Inert:
    return _Inert()


def _numpy_attr(path: str) -> Any:
    """Resolve a numpy pickle helper for either numpy 1 (``numpy.core``) or numpy 2 (``numpy._core``) names."""
    import importlib
    module_name, _, attr = path.rpartition(".")
    for candidate in (module_name.replace("numpy.core", "numpy._core"), module_name):
        try:
            return getattr(importlib.import_module(candidate), attr)
        except (ImportError, AttributeError):
            continue
    raise pickle.UnpicklingError("cannot resolve numpy helper {}".format(path))


class _StatsUnpickler(pickle.Unpickler):
    """
    A restricted unpickler for normalisation statistics: it resolves only numpy arrays / scalars, RunningMeanStd
    (sbtf, stable-baselines, baselines) and VecNormalize objects (turned into plain state), and replaces gym spaces
    and random generators by inert stand-ins. Anything else is refused, so a file cannot run code when loaded.
    """

    _NUMPY = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    }
    _RMS = {
        "sbtf.common.running_mean_std", "stable_baselines.common.running_mean_std",
        "baselines.common.running_mean_std", "stable_baselines3.common.running_mean_std",
    }
    _VEC_NORMALIZE = {
        "sbtf.common.vec_env.vec_normalize", "stable_baselines.common.vec_env.vec_normalize",
        "stable_baselines3.common.vec_env.vec_normalize",
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._NUMPY:
            return _numpy_attr(module + "." + name)
        if (module, name) == ("_codecs", "encode"):  # how protocol-2 pickles store bytes (array data)
            import codecs
            return codecs.encode
        if module == "numpy" and name in ("ndarray", "dtype"):
            return getattr(np, name)
        if module == "numpy" and name in ("float64", "float32", "int64", "int32", "bool_"):
            return getattr(np, name)
        if module.startswith("numpy.dtypes") and name.endswith("DType"):
            import numpy.dtypes
            return getattr(numpy.dtypes, name)
        if module in ("collections", "builtins") and name in ("OrderedDict", "dict", "list", "tuple", "object"):
            import builtins
            import collections
            return getattr(collections if module == "collections" else builtins, name)
        if module in ("copyreg", "copy_reg") and name == "_reconstructor":
            import copyreg
            return copyreg._reconstructor
        if module in self._RMS and name == "RunningMeanStd":
            return RunningMeanStd
        if module in self._VEC_NORMALIZE and name == "VecNormalize":
            return _PickledState
        if module.split(".")[0] in ("gym", "gymnasium") and ".spaces" in module:
            return _Inert
        if module.startswith("numpy.random"):
            return _inert_factory
        raise pickle.UnpicklingError(
            "Refusing to load {}.{} from a normalisation statistics file: only numpy arrays, RunningMeanStd and "
            "VecNormalize state are allowed (this protects you from files that would run code when loaded)".format(
                module, name))


def _legacy_reader(path: str) -> Any:
    """``sbtf_converters.legacy`` when ``path`` is a stable-baselines 2 pickle, else None."""
    try:
        from sbtf_converters import legacy
    except ImportError:
        return None
    return legacy if legacy.is_sb2_pickle(path) else None


def _restricted_load(path: str) -> Any:
    legacy = _legacy_reader(path)
    if legacy is not None:  # stable-baselines 2 file: read by sbtf_converters' allow-list unpickler
        return legacy.read_sb2_statistics(path)
    with open(path, "rb") as file_handler:
        return _StatsUnpickler(io.BytesIO(file_handler.read())).load()


def _rms_to_data(rms: RunningMeanStd) -> Dict[str, Any]:
    return {"mean": np.array(rms.mean, dtype=np.float64), "var": np.array(rms.var, dtype=np.float64),
            "count": float(rms.count)}


def _rms_from_data(data: Any) -> RunningMeanStd:
    """Build a RunningMeanStd from plain data (dict) or from an unpickled RunningMeanStd-like object."""
    if isinstance(data, dict):
        mean, var, count = data["mean"], data["var"], data["count"]
    elif all(hasattr(data, attr) for attr in ("mean", "var", "count")):
        mean, var, count = data.mean, data.var, data.count
    else:
        raise ValueError("Expected running mean/std statistics (mean, var, count), got {!r}".format(data))
    rms = RunningMeanStd(shape=np.shape(mean))
    rms.mean = np.array(mean, dtype=np.float64)
    rms.var = np.array(var, dtype=np.float64)
    rms.count = float(np.asarray(count))
    return rms


def _atomic_pickle_dump(obj: Any, path: str) -> None:
    """Pickle ``obj`` to ``path`` through a temporary file in the same folder and ``os.replace``."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    file_descriptor, tmp_path = tempfile.mkstemp(prefix=".tmp-", suffix=".pkl", dir=folder)
    try:
        with os.fdopen(file_descriptor, "wb") as file_handler:
            pickle.dump(obj, file_handler, protocol=pickle.HIGHEST_PROTOCOL)
            file_handler.flush()
            os.fsync(file_handler.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


class VecNormalize(VecEnvWrapper):
    """
    Normalises observations and rewards of a VecEnv with running statistics.

    Observations are normalised with the running mean / variance of the observations, rewards are divided by the
    running standard deviation of the discounted return. Both are clipped. Normalised observations and rewards are
    float32 (statistics are kept in float64). ``terminal_observation`` entries in the infos are normalised too, so
    that bootstrapping from them sees the same inputs as the policy.

    ``save`` writes the statistics and settings only (never the wrapped venv); ``load`` restores them around a venv.

    :param venv: (VecEnv) the vectorized environment to wrap
    :param training: (bool) update the statistics with the data seen (set False for evaluation)
    :param norm_obs: (bool) normalise the observations
    :param norm_reward: (bool) normalise the rewards
    :param clip_obs: (float) normalised observations are clipped to [-clip_obs, clip_obs]
    :param clip_reward: (float) normalised rewards are clipped to [-clip_reward, clip_reward]
    :param gamma: (float) discount factor of the return whose variance scales the rewards
    :param epsilon: (float) added to variances before the square root
    """

    def __init__(self, venv: VecEnv, training: bool = True, norm_obs: bool = True, norm_reward: bool = True,
                 clip_obs: float = 10., clip_reward: float = 10., gamma: float = 0.99, epsilon: float = 1e-8):
        VecEnvWrapper.__init__(self, venv)
        if norm_obs and isinstance(self.observation_space, (spaces.Dict, spaces.Tuple)):
            raise ValueError("VecNormalize cannot normalise {} observation spaces; use norm_obs=False or flatten the "
                             "observations (gymnasium.wrappers.FlattenObservation)".format(
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
    def _to_data(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {"format": _SAVE_FORMAT, "format_version": _SAVE_FORMAT_VERSION,
                                "obs_rms": _rms_to_data(self.obs_rms), "ret_rms": _rms_to_data(self.ret_rms)}
        for name in _SETTINGS:
            value = getattr(self, name)
            data[name] = bool(value) if isinstance(value, (bool, np.bool_)) else float(value)
        return data

    @classmethod
    def _from_data(cls, data: Dict[str, Any]) -> "VecNormalize":
        missing = [key for key in ("obs_rms", "ret_rms") if key not in data]
        if missing:
            raise ValueError("Not VecNormalize statistics: missing {}".format(missing))
        self = cls.__new__(cls)
        self.__dict__["venv"] = None
        self.obs_rms = _rms_from_data(data["obs_rms"])
        self.ret_rms = _rms_from_data(data["ret_rms"])
        defaults = {"training": True, "norm_obs": True, "norm_reward": True, "clip_obs": 10., "clip_reward": 10.,
                    "gamma": 0.99, "epsilon": 1e-8}
        for name in _SETTINGS:
            value = data.get(name, defaults[name])
            setattr(self, name, bool(value) if isinstance(defaults[name], bool) else float(value))
        self.old_obs = None
        self.old_rews = None
        return self

    def __getstate__(self) -> Dict[str, Any]:
        """Pickle only the statistics and settings (the venv is generally not picklable)."""
        return self._to_data()

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """Restore from pickled state; ``set_venv()`` must be called before use."""
        self.__dict__.update(type(self)._from_data(state).__dict__)

    def set_venv(self, venv: VecEnv) -> None:
        """
        Wrap ``venv`` with this (unpickled or loaded) VecNormalize; its observation shape must match the statistics.

        :param venv: (VecEnv)
        """
        if self.__dict__.get("venv") is not None:
            raise ValueError("Trying to set venv of already initialized VecNormalize wrapper.")
        VecEnvWrapper.__init__(self, venv)
        if self.obs_rms.mean.shape != self.observation_space.shape:
            raise ValueError("venv is incompatible with current statistics: observations of shape {} but statistics "
                             "of shape {}".format(self.observation_space.shape, self.obs_rms.mean.shape))
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
            self.obs_rms.update(obs)
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

    def _update_reward(self, reward: np.ndarray) -> None:
        """Update reward normalization statistics."""
        self.ret = self.ret * self.gamma + reward
        self.ret_rms.update(self.ret)

    def normalize_obs(self, obs: np.ndarray) -> np.ndarray:
        """
        Normalise observations with the current statistics (without updating them).

        :param obs: (np.ndarray) observations (a batch, or a single observation)
        :return: (np.ndarray) float32 normalised observations (unchanged input if ``norm_obs`` is False)
        """
        if not self.norm_obs:
            return obs
        normalized = (np.asarray(obs, dtype=np.float64) - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + self.epsilon)
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

    def get_original_obs(self) -> np.ndarray:
        """
        The raw (not normalised) observations of the last step or reset.
        """
        if self.old_obs is None:
            raise RuntimeError("get_original_obs(): no observation yet, call reset() first")
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
        """
        try:
            data = _restricted_load(load_path)
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError, TypeError) as exc:
            raise ValueError("{} is not a VecNormalize statistics file: {}".format(load_path, exc)) from exc
        if isinstance(data, _PickledState):
            data = data.state
        if not isinstance(data, dict) or "obs_rms" not in data or "ret_rms" not in data:
            raise ValueError("{} is not a VecNormalize statistics file (no obs_rms / ret_rms in it)".format(load_path))
        vec_normalize = cls._from_data(data)
        vec_normalize.set_venv(venv)
        return vec_normalize

    def save(self, save_path: str) -> None:
        """
        Save the statistics and settings (not the venv) as a pickle of plain data, atomically.

        :param save_path: (str) The path to save to
        """
        _atomic_pickle_dump(self._to_data(), save_path)

    def save_running_average(self, path: str) -> None:
        """
        Write ``obs_rms.pkl`` and ``ret_rms.pkl`` (plain data: mean, var, count) to the folder ``path``.

        :param path: (str) path to log dir

        .. deprecated:: 2.9.0
            This function will be removed in a future version, use ``save`` instead
        """
        warnings.warn("Usage of `save_running_average` is deprecated. Please use `save` instead.", DeprecationWarning)
        for rms, name in ((self.obs_rms, "obs_rms"), (self.ret_rms, "ret_rms")):
            _atomic_pickle_dump(_rms_to_data(rms), os.path.join(path, "{}.pkl".format(name)))

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
            try:
                loaded[name] = _rms_from_data(_restricted_load(file_path))
            except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError) as exc:
                raise ValueError("{} is not a running mean/std statistics file: {}".format(file_path, exc)) from exc
        if loaded["obs_rms"].mean.shape != self.observation_space.shape:
            raise ValueError("{}: statistics of shape {} do not match observations of shape {}".format(
                os.path.join(path, "obs_rms.pkl"), loaded["obs_rms"].mean.shape, self.observation_space.shape))
        self.obs_rms = loaded["obs_rms"]
        self.ret_rms = loaded["ret_rms"]
