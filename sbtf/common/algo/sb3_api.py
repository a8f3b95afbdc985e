"""stable-baselines3's model API, for the classes that speak it (``sbtf.sb3`` and ``sbtf.contrib``).

:class:`Sb3ModelApi` is a mixin placed before :class:`~sbtf.common.base_class.BaseRLModel` in the bases of the
stable-baselines3 / sb3-contrib algorithms. It gives them SB3's forms where SB2's differ:

* ``model.policy`` is the policy object (``model.policy_class`` the class); the object answers SB3's
  ``predict(obs, state, episode_start, deterministic)`` through its model;
* ``get_parameters()`` returns ``{"policy": {name: array}}`` and ``set_parameters(path_or_dict, exact_match, device)``
  takes that form (or a model file);
* ``save(path, exclude=None, include=None)`` and ``load(path, env=None, device="auto", custom_objects=None,
  print_system_info=False, force_reset=True, **kwargs)``;
* ``model.logger`` and ``set_logger(logger)`` (a logger made by :func:`sbtf.common.logger.configure`).

What SB2 and SB3 share (``ep_info_buffer``, ``ep_success_buffer``, ``get_env``, ``set_env(env, force_reset)``,
``get_vec_normalize_env``) lives on ``BaseRLModel`` itself.
"""
from __future__ import annotations

import platform
import weakref
from collections import OrderedDict
from typing import Any, Dict, Iterable, Optional, Tuple

import numpy as np

from sbtf import logger as sbtf_logger

__all__ = ["Sb3ModelApi", "PolicyApi", "Device", "current_device", "SB3_PARAMETER_OBJECT", "get_system_info"]

#: the one entry of SB3-form parameters: sbtf keeps every network of a model in its policy object
SB3_PARAMETER_OBJECT = "policy"

#: what a file cannot do without (``save(exclude=...)`` refuses to leave them out)
_REQUIRED_DATA = ("policy", "observation_space", "action_space")


def get_system_info(print_info: bool = True) -> Tuple[Dict[str, str], str]:
    """
    The versions of what runs the model (SB3's ``get_system_info``): OS, Python, sbtf, TensorFlow, NumPy, Gymnasium.

    :param print_info: print them
    :return: the dict and its printed form
    """
    import gymnasium
    import tensorflow as tf

    from sbtf import __version__

    env_info = {
        "OS": f"{platform.platform()} {platform.version()}",
        "Python": platform.python_version(),
        "sbtf": __version__,
        "TensorFlow": tf.__version__,
        "GPU Enabled": str(bool(tf.config.list_physical_devices("GPU"))),
        "Numpy": np.__version__,
        "Gymnasium": gymnasium.__version__,
    }
    env_info_str = "".join(f"- {key}: {value}\n" for key, value in env_info.items())
    if print_info:
        print(env_info_str)
    return env_info, env_info_str


class Device:
    """Where a model computes, as PyTorch's ``torch.device`` reports it: ``type`` is ``"cpu"`` or ``"cuda"``."""

    def __init__(self, kind: str) -> None:
        self.type = kind

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Device) and other.type == self.type

    def __hash__(self) -> int:
        return hash(self.type)

    def __repr__(self) -> str:
        return f"device(type={self.type!r})"


def current_device() -> Device:
    """``cuda`` when TensorFlow sees a GPU (it places the variables there), else ``cpu``."""
    import tensorflow as tf

    return Device("cuda" if tf.config.list_physical_devices("GPU") else "cpu")


class PolicyApi:
    """
    stable-baselines3's policy-object surface, mixed into sbtf's ``BasePolicy``: ``observation_space`` /
    ``action_space``, ``set_training_mode`` and ``predict``. A policy answers ``predict`` through the model that owns
    it (bound when the model hands it out as ``model.policy``), so both give the same actions.
    """

    @property
    def device(self) -> Device:
        """Where the weights live (SB3's ``policy.device`` / ``model.device``; TensorFlow places them)."""
        return current_device()

    @property
    def observation_space(self):
        """The observation space (SB3's name of ``ob_space``)."""
        return self.ob_space

    @observation_space.setter
    def observation_space(self, value) -> None:
        self.ob_space = value

    @property
    def action_space(self):
        """The action space (SB3's name of ``ac_space``)."""
        return self.ac_space

    @action_space.setter
    def action_space(self, value) -> None:
        self.ac_space = value

    def set_training_mode(self, mode: bool) -> None:
        """
        SB3's switch between training and evaluation mode (dropout, batch norm). sbtf's policies behave the same in
        both (their train steps pass ``training`` themselves); the mode is kept in ``training_mode``.

        :param mode: True for training mode
        """
        object.__setattr__(self, "_sb3_training_mode", bool(mode))

    @property
    def training_mode(self) -> bool:
        """The mode last set by :meth:`set_training_mode` (False until then, as a loaded SB3 policy)."""
        return bool(getattr(self, "_sb3_training_mode", False))

    def _bind_model(self, model: Any) -> None:
        """Remember (weakly) the model this policy acts for: ``predict`` runs through it."""
        object.__setattr__(self, "_sb3_model_ref", weakref.ref(model))

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = False, **kwargs):
        """
        SB3's ``policy.predict``: the action(s) and next state for an observation (single or batch), as the model's
        ``predict`` gives them (the same clipping, rescaling and unbatching).

        :param observation: the observation(s)
        :param state: the recurrent state (recurrent policies)
        :param episode_start: the episode-start flags (recurrent policies)
        :param deterministic: the distribution's mode instead of a sample
        :param kwargs: passed to the model's ``predict`` (e.g. MaskablePPO's ``action_masks``)
        :return: (actions, next state)
        """
        ref = getattr(self, "_sb3_model_ref", None)
        model = ref() if ref is not None else None
        if model is None:
            raise RuntimeError(f"{type(self).__name__}.predict() acts through the model that owns the policy; get the "
                               "policy as model.policy (or call model.predict).")
        return model.predict(observation, state=state, episode_start=episode_start, deterministic=deterministic,
                             **kwargs)


class Sb3ModelApi:
    """
    stable-baselines3's model API (see the module docstring). Mixed in before ``BaseRLModel`` by the SB3 and
    sb3-contrib bases; ``_policy_is_object`` makes ``model.policy`` the policy object.
    """

    _policy_is_object = True

    # ------------------------------------------------------------------ the policy object
    @property
    def device(self) -> Device:
        """SB3's ``model.device``: ``cpu`` when ``device="cpu"`` was asked for, else where TensorFlow computes."""
        if str(self.__dict__.get("_device_requested", "auto")).startswith("cpu"):
            return Device("cpu")
        return current_device()

    @device.setter
    def device(self, value: Any) -> None:
        self.__dict__["_device_requested"] = getattr(value, "type", value)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = False, **kwargs):
        """
        SB3's ``predict``: the action(s) as an ``ndarray`` (a single Discrete observation's action is a 0-d array,
        as SB3's, not a NumPy scalar) and the next recurrent state.

        :param observation: (np.ndarray or dict) one observation or a batch
        :param state: the recurrent state (recurrent policies), else None
        :param episode_start: (np.ndarray) which envs start an episode (recurrent policies)
        :param deterministic: (bool) the distribution's mode instead of a sample
        """
        action, state = super().predict(observation, state=state, episode_start=episode_start,
                                        deterministic=deterministic, **kwargs)
        return np.asarray(action), state

    @property
    def policy(self):
        """The policy object (SB3's ``model.policy``; the class is ``policy_class``)."""
        policy = self.__dict__.get("policy_tf")
        if policy is not None and isinstance(policy, PolicyApi):
            policy._bind_model(self)
        return policy

    @policy.setter
    def policy(self, value) -> None:
        if value is None or isinstance(value, (type, str)):
            self.policy_class = value
        else:
            self.policy_tf = value

    # ------------------------------------------------------------------ environment
    def _make_vec_env(self, env):
        """As SB3: a single env (or an env id) is wrapped in a ``Monitor`` (unless it has one) before the
        ``DummyVecEnv``, so that ``ep_info_buffer`` gets the episodes' rewards and lengths."""
        from sbtf.common.vec_env import VecEnv

        if env is not None and not isinstance(env, VecEnv):
            from sbtf.common.envs.gym_compat import wrap_env
            from sbtf.common.monitor import Monitor
            from sbtf.common.vec_env.util import is_wrapped

            if isinstance(env, str):
                from sbtf.common.cmd_util import render_mode_kwargs

                if self.verbose >= 1:
                    print(f"Creating environment from the given name {env!r}.")
                env = wrap_env(env, **render_mode_kwargs(env))
            else:
                env = wrap_env(env)
            if not is_wrapped(env, Monitor):
                if self.verbose >= 1:
                    print("Wrapping the env with a `Monitor` wrapper")
                env = Monitor(env)
        return super()._make_vec_env(env)

    # ------------------------------------------------------------------ logger
    @property
    def logger(self) -> sbtf_logger.Logger:
        """The logger ``learn()`` writes to: the one given to :meth:`set_logger`, else the current global one."""
        return self.__dict__.get("_custom_logger") or sbtf_logger.Logger.CURRENT

    def set_logger(self, logger: sbtf_logger.Logger) -> None:
        """
        Make ``learn()`` log to ``logger`` (SB3's ``set_logger``; build one with
        :func:`sbtf.common.logger.configure`).

        :param logger: the logger
        """
        if not isinstance(logger, sbtf_logger.Logger):
            raise TypeError(f"set_logger() takes a sbtf.common.logger.Logger (from configure(...)), got "
                            f"{type(logger).__name__}.")
        self._custom_logger = logger

    # ------------------------------------------------------------------ parameters
    def get_parameters(self) -> Dict[str, "OrderedDict[str, np.ndarray]"]:
        """
        The model's parameters in SB3's form: ``{"policy": {name: array}}`` (sbtf keeps every network, targets
        included, in the policy object; the names are the variable names the model files use).
        """
        return {SB3_PARAMETER_OBJECT: self._flat_parameters()}

    def set_parameters(self, load_path_or_dict, exact_match: bool = True, device: str = "auto") -> None:
        """
        Load parameters from a model file or from a dict in :meth:`get_parameters`' form (SB3's ``set_parameters``).

        :param load_path_or_dict: a model file (path or file object), or ``{"policy": {name: array}}``
        :param exact_match: every object and every parameter must be given, and nothing else
        :param device: ignored (TensorFlow places the variables)
        :raises ValueError: names that do not match (with ``exact_match``), a parameter of the wrong shape
        """
        del device
        if not isinstance(load_path_or_dict, dict):
            self.load_parameters(load_path_or_dict, exact_match=exact_match)
            return
        objects = set(load_path_or_dict)
        expected = {SB3_PARAMETER_OBJECT}
        unknown = objects - expected
        if unknown:
            flat = all(isinstance(key, str) and "/" in key for key in unknown)
            hint = (" (a flat {name: array} dict is what load_parameters() takes; set_parameters() takes "
                    "{'policy': {name: array}}, the form get_parameters() returns)") if flat else ""
            raise ValueError(f"Error: set_parameters() got objects {sorted(map(str, unknown))[:5]} that "
                             f"{type(self).__name__} does not have; its parameter objects are {sorted(expected)}"
                             f"{hint}.")
        if exact_match and objects != expected:
            raise ValueError(f"Error: names of parameters do not match the agent's: expected {sorted(expected)}, got "
                             f"{sorted(map(str, objects))} (set exact_match=False to load a subset).")
        params = load_path_or_dict.get(SB3_PARAMETER_OBJECT)
        if params is None:
            return
        if not isinstance(params, dict):
            raise ValueError(f"Error: set_parameters(): {SB3_PARAMETER_OBJECT!r} must map parameter names to arrays, "
                             f"got {type(params).__name__}.")
        if exact_match:
            extra = [name for name in params if name not in self._named_parameters()]
            if extra:
                raise ValueError(f"Error: set_parameters(): {SB3_PARAMETER_OBJECT!r} has parameters the model does "
                                 f"not have: {sorted(map(str, extra))[:5]} (set exact_match=False to ignore them).")
        self.load_parameters(params, exact_match=exact_match)

    # ------------------------------------------------------------------ save / load
    def save(self, path, exclude: Optional[Iterable[str]] = None, include: Optional[Iterable[str]] = None) -> None:
        """
        Save the model to a zip file (atomically; ``.zip`` is appended when the path has no extension), as SB3.

        :param path: where to save (str, PathLike or a file object)
        :param exclude: names of stored attributes to leave out (they come back as the constructor's defaults)
        :param include: names to store even when listed in ``exclude``. sbtf's files hold only what the class
            declares (``_save_schema``), never pickled objects: a name outside it (``env``, ``replay_buffer``, ...)
            is refused (save the replay buffer with ``save_replay_buffer``)
        """
        from sbtf.common import save_util

        data = self._get_save_data()
        include = [str(name) for name in (include or ())]
        not_stored = [name for name in include if name not in data]
        if not_stored:
            raise ValueError(f"Error: save(include={not_stored}): sbtf's model files store only "
                             f"{type(self).__name__}'s "
                             f"declared attributes ({', '.join(sorted(data))}), never arbitrary objects; "
                             "save a replay buffer with save_replay_buffer() and a VecNormalize with its save().")
        excluded = {str(name) for name in (exclude or ())} - set(include)
        required = sorted(excluded & set(_REQUIRED_DATA))
        if required:
            raise ValueError(f"Error: save(exclude={required}): a model file cannot be loaded without them.")
        for name in excluded:
            data.pop(name, None)
        save_util.save_to_zip(path, data, self._flat_parameters(), meta={"algo": self._file_algo_name()})

    @classmethod
    def load(cls, path, env=None, device: str = "auto", custom_objects: Optional[dict] = None,
             print_system_info: bool = False, force_reset: bool = True, *, allow_pickle: bool = False, **kwargs):
        """
        Load a model saved by sbtf (SB3's signature).

        :param path: the file (str, PathLike or file object; ``.zip`` appended when missing)
        :param env: the environment to attach (None: predict only until ``set_env``)
        :param device: ignored (TensorFlow places the variables)
        :param custom_objects: values that replace the stored ones, by key
        :param print_system_info: print the versions this process runs with (sbtf's files store the sbtf version
            they were written by, shown as well)
        :param force_reset: the next ``learn()`` starts with a reset of ``env`` (sbtf's ``learn()`` always resets
            the env it starts with, so both values behave as SB3's default)
        :param allow_pickle: allow the file to run code; never for a file you do not trust
        :param kwargs: attributes set on the model before it is built
        """
        del device, force_reset
        if print_system_info:  # a stable-baselines3 file's reader prints its system_info.txt, then this machine's
            kwargs["print_system_info"] = True
        return super().load(path, env=env, custom_objects=custom_objects, allow_pickle=allow_pickle, **kwargs)
