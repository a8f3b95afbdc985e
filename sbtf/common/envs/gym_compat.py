"""
Adapting environments to the gymnasium API.

Inside sbtf every single environment follows the gymnasium API (``reset(seed=None, options=None) -> (obs, info)``,
``step(action) -> (obs, reward, terminated, truncated, info)``). :func:`wrap_env` is the one entry point that brings
anything else to that form:

* an env id string is made with ``gymnasium.make`` (ids that gymnasium retired are mapped to their successor, see
  :data:`RETIRED_ENV_IDS`);
* a gymnasium env is returned as it is;
* an env written for the old gym API (``reset() -> obs``, 4-tuple ``step``, ``seed()``, ``gym.spaces`` or duck-typed
  spaces) is wrapped in :class:`OldGymAPIAdapter`, also when its class subclasses ``gymnasium.Env`` (old code after
  ``import gymnasium as gym``: its ``reset`` takes no ``seed``).
"""
from __future__ import annotations

import inspect
import warnings
from collections import OrderedDict
from typing import Any, Dict, NamedTuple, Optional, Tuple

import gymnasium
import numpy as np
from gymnasium import spaces

class EnvIdChange(NamedTuple):
    """What became of an env id gymnasium no longer makes: its successor (None: refused) and why."""
    successor: Optional[str]
    why: str


def _same(old: str, new: str, obs: int, act: int) -> EnvIdChange:
    return EnvIdChange(new, f"{old} and {new} both observe {obs} values and take {act} actions")


def _mujoco_py(name: str, versions: Tuple[str, ...], obs: int, act: int) -> Dict[str, EnvIdChange]:
    """The mujoco-py versions of a MuJoCo env, mapped to ``-v4`` (the same model and spaces on the maintained
    ``mujoco`` bindings; ``-v5`` changed some spaces and defaults)."""
    return {f"{name}-{v}": _same(f"{name}-{v}", f"{name}-v4", obs, act) for v in versions}


#: The one table of env ids that gymnasium renamed or retired (gym <= 0.21 ids in stable-baselines 2 scripts, the
#: ids of stable-baselines3 / RL-Zoo files), each mapped to the id gymnasium makes now where the observation and
#: action spaces are the same, or refused (successor None) with the reason where they differ. Ids gymnasium still
#: makes (CartPole-v0, MountainCar-v0, Acrobot-v1, BipedalWalker-v3...) are not here. The MuJoCo ``-v2`` / ``-v3``
#: ids are still registered but need mujoco-py, which no longer installs: they are mapped too.
ENV_ID_TABLE: Dict[str, EnvIdChange] = {
    # classic control
    "Pendulum-v0": _same("Pendulum-v0", "Pendulum-v1", 3, 1),
    # box2d
    "LunarLander-v2": _same("LunarLander-v2", "LunarLander-v3", 8, 4),
    "LunarLanderContinuous-v2": _same("LunarLanderContinuous-v2", "LunarLanderContinuous-v3", 8, 2),
    "BipedalWalker-v2": _same("BipedalWalker-v2", "BipedalWalker-v3", 24, 4),
    "BipedalWalkerHardcore-v2": _same("BipedalWalkerHardcore-v2", "BipedalWalkerHardcore-v3", 24, 4),
    "CarRacing-v0": EnvIdChange("CarRacing-v3", "the same 96x96 RGB images and 3 actions"),
    "CarRacing-v1": EnvIdChange("CarRacing-v3", "the same 96x96 RGB images and 3 actions"),
    "CarRacing-v2": EnvIdChange("CarRacing-v3", "the same 96x96 RGB images and 3 actions"),
    # toy text
    "FrozenLake-v0": EnvIdChange("FrozenLake-v1", "the same 16 states and 4 actions"),
    "FrozenLake8x8-v0": EnvIdChange("FrozenLake8x8-v1", "the same 64 states and 4 actions"),
    "Taxi-v2": EnvIdChange("Taxi-v4", "the same 500 states and 6 actions"),
    "Taxi-v3": EnvIdChange("Taxi-v4", "the same 500 states and 6 actions"),
    "CliffWalking-v0": EnvIdChange("CliffWalking-v1", "the same 48 states and 4 actions"),
    "Blackjack-v0": EnvIdChange("Blackjack-v1", "the same observations and 2 actions"),
    # MuJoCo (mujoco-py -> mujoco)
    **_mujoco_py("HalfCheetah", ("v2", "v3"), 17, 6),
    **_mujoco_py("Hopper", ("v2", "v3"), 11, 3),
    **_mujoco_py("Walker2d", ("v2", "v3"), 17, 6),
    **_mujoco_py("Swimmer", ("v2", "v3"), 8, 2),
    **_mujoco_py("Humanoid", ("v2", "v3"), 376, 17),
    **_mujoco_py("HumanoidStandup", ("v2",), 376, 17),
    **_mujoco_py("Reacher", ("v2",), 11, 2),
    **_mujoco_py("InvertedPendulum", ("v2",), 4, 1),
    **_mujoco_py("InvertedDoublePendulum", ("v2",), 11, 1),
    **_mujoco_py("Pusher", ("v2",), 23, 7),
    **{f"Ant-{v}": EnvIdChange(None, f"Ant-{v} observes 111 values (with contact forces); Ant-v4 observes 27 by "
                                     "default and Ant-v5 105, so a policy trained on it cannot act there. Make the env "
                                     "yourself with gymnasium.make('Ant-v4', use_contact_forces=True) (111 values) "
                                     "and pass it as env=")
       for v in ("v2", "v3")},
}

#: old id -> the id gymnasium makes now, for the ids :data:`ENV_ID_TABLE` maps
RETIRED_ENV_IDS: Dict[str, str] = {old: change.successor for old, change in ENV_ID_TABLE.items()
                                   if change.successor is not None}


class RetiredEnvIdError(ValueError):
    """An env id gymnasium no longer makes and whose successor's spaces differ (see :data:`ENV_ID_TABLE`)."""


def _needs_mujoco_py(env_id: str) -> bool:
    entry_point = gymnasium.registry[env_id].entry_point
    return "mujoco_py" in str(getattr(entry_point, "__name__", entry_point))


def resolve_env_id(env_id: str) -> str:
    """
    Map an env id that gymnasium retired to its successor (with a warning naming both), from :data:`ENV_ID_TABLE`.

    :param env_id: (str) an env id, possibly from gym <= 0.21 or an old stable-baselines3 / RL-Zoo file
    :return: (str) the id to pass to ``gymnasium.make``
    :raises RetiredEnvIdError: the id's successor has other observation or action spaces (the message says why
        and what to do)
    """
    if env_id in gymnasium.registry and not _needs_mujoco_py(env_id):
        return env_id
    change = ENV_ID_TABLE.get(env_id)
    if change is None:
        return env_id
    if change.successor is None:
        raise RetiredEnvIdError(f"Error: gymnasium no longer makes the env '{env_id}' and sbtf does not map it: "
                                f"{change.why}.")
    warnings.warn("Env id '{}' was retired by gymnasium; using its successor '{}' instead ({}; check that the "
                  "changes between the versions do not matter for you).".format(env_id, change.successor, change.why),
                  UserWarning, stacklevel=3)
    return change.successor


def _space_kind(space: Any) -> Optional[str]:
    """Name the kind of an old-gym or duck-typed space ('Box', 'Discrete', ...), or None if it is not recognised."""
    kinds = ("MultiDiscrete", "MultiBinary", "Discrete", "Box", "Dict", "Tuple")
    for klass in type(space).__mro__:
        if klass.__name__ in kinds:
            return klass.__name__
    # Pure duck typing, by attributes.
    if hasattr(space, "nvec"):
        return "MultiDiscrete"
    if hasattr(space, "low") and hasattr(space, "high"):
        return "Box"
    if hasattr(space, "n"):
        return "Discrete"
    if isinstance(getattr(space, "spaces", None), dict):
        return "Dict"
    if isinstance(getattr(space, "spaces", None), (tuple, list)):
        return "Tuple"
    return None


def convert_space(space: Any) -> spaces.Space:
    """
    Convert an old ``gym.spaces`` space (or a duck-typed one) to the equivalent gymnasium space.

    :param space: (Any) a gymnasium space (returned unchanged), an old gym space, or an object with the same attributes
    :return: (gymnasium.spaces.Space)
    """
    if isinstance(space, spaces.Space):
        return space
    kind = _space_kind(space)
    if kind == "Box":
        dtype = np.dtype(getattr(space, "dtype", None) or np.float32)
        low = np.asarray(space.low)
        high = np.asarray(space.high)
        shape = tuple(getattr(space, "shape", None) or np.broadcast(low, high).shape)
        low = np.broadcast_to(low, shape).astype(dtype)
        high = np.broadcast_to(high, shape).astype(dtype)
        return spaces.Box(low=low, high=high, dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(space.nvec, dtype=np.int64))
    if kind == "MultiBinary":
        n = space.n
        return spaces.MultiBinary(list(n) if isinstance(n, (tuple, list, np.ndarray)) else int(n))
    if kind == "Dict":
        return spaces.Dict(OrderedDict((key, convert_space(sub)) for key, sub in space.spaces.items()))
    if kind == "Tuple":
        return spaces.Tuple(tuple(convert_space(sub) for sub in space.spaces))
    raise TypeError("Cannot convert the space {!r} (type {}) to a gymnasium space: supported are Box, Discrete, "
                    "MultiDiscrete, MultiBinary, Dict and Tuple (from gym.spaces, gymnasium.spaces or objects with "
                    "the same attributes).".format(space, type(space).__qualname__))


def is_old_gym_env(env: Any) -> bool:
    """
    Tell whether ``env`` is an environment that is not a ``gymnasium.Env`` but looks like a gym env (it has ``reset``,
    ``step``, ``observation_space`` and ``action_space``), or a ``gymnasium.Env`` whose ``reset`` takes no ``seed``
    (old-API code subclassing ``gymnasium.Env``), i.e. one that :func:`wrap_env` adapts.

    :param env: (Any)
    :return: (bool)
    """
    if isinstance(env, gymnasium.Env):
        # a gymnasium.Env subclass written with the old API (e.g. old code after ``import gymnasium as gym``)
        return has_old_reset_signature(env)
    return all(hasattr(env, name) for name in ("reset", "step", "observation_space", "action_space"))


#: a class attribute by which an env class declares that it follows the old gym API whatever its ``reset`` accepts
#: (e.g. stable-baselines 2's ``Monitor``, whose ``reset(**kwargs)`` also takes gymnasium's keywords)
OLD_GYM_API_ATTRIBUTE = "_sbtf_old_gym_api"


def has_old_reset_signature(env: Any) -> bool:
    """
    Tell whether ``env.reset`` cannot take gymnasium's ``seed`` keyword (an old-gym ``reset(self)``), or the env's class
    declares the old API (:data:`OLD_GYM_API_ATTRIBUTE`), which makes even a ``gymnasium.Env`` subclass an old-API
    env that :func:`wrap_env` adapts.

    :param env: (Any)
    :return: (bool)
    """
    if getattr(type(env), OLD_GYM_API_ATTRIBUTE, False):
        return True
    reset = getattr(env, "reset", None)
    return callable(reset) and not _accepts_keyword(reset, "seed")


def _accepts_keyword(func: Any, name: str) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


class OldGymAPIAdapter(gymnasium.Env):
    """
    Present an env written for the old gym API as a gymnasium env.

    * spaces are converted to gymnasium spaces;
    * ``reset(seed=s)`` calls ``env.seed(s)`` (when the env has it) and then ``env.reset()``; returns ``(obs, {})``;
    * a 4-tuple ``(obs, reward, done, info)`` from ``step`` becomes ``(obs, reward, terminated, truncated, info)``
      where an ``info["TimeLimit.truncated"]`` that is True means truncated (not terminated).

    Envs from gym 0.26 (already 5-tuple ``step`` and ``reset(seed=...) -> (obs, info)``, but not ``gymnasium.Env``
    instances) are handled too: their results pass through unchanged.

    Attributes the adapter does not have are looked up on the wrapped env (``adapter.ale``,
    ``adapter.get_action_meanings``).

    :param env: (Any) the old-API environment
    :param render_mode: (str) the gymnasium ``render_mode`` to report; by default 'rgb_array' when the env's metadata
        lists it, else None. ``render()`` calls ``env.render(mode=render_mode or 'human')``.
    """

    def __init__(self, env: Any, render_mode: Optional[str] = None):
        self.env = env
        self.observation_space = convert_space(env.observation_space)
        self.action_space = convert_space(env.action_space)
        metadata = dict(getattr(env, "metadata", None) or {})
        render_modes = list(metadata.get("render_modes", metadata.get("render.modes", [])))
        metadata.setdefault("render_modes", render_modes)
        self.metadata = metadata
        if render_mode is None and "rgb_array" in render_modes:
            render_mode = "rgb_array"
        self.render_mode = render_mode
        self.spec = None
        self.reward_range = getattr(env, "reward_range", (-float("inf"), float("inf")))
        self._reset_takes_seed = _accepts_keyword(env.reset, "seed")
        self._reset_returns_info: Optional[bool] = None

    def _split_reset_result(self, result: Any) -> Tuple[Any, Dict[str, Any]]:
        if self._reset_returns_info is None:
            # gym 0.26 envs return (obs, info); old ones return only obs. A Tuple observation space could make a
            # (obs, info) pair ambiguous, so ask the space in that case.
            looks_new = isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict)
            if looks_new and isinstance(self.observation_space, spaces.Tuple):
                looks_new = not self.observation_space.contains(result)
            self._reset_returns_info = looks_new
        if self._reset_returns_info:
            return result[0], dict(result[1])
        return result, {}

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        kwargs: Dict[str, Any] = {}
        if seed is not None:
            if hasattr(self.env, "seed"):
                self.env.seed(seed)
            elif self._reset_takes_seed:
                kwargs["seed"] = seed
            elif isinstance(self.env, gymnasium.Env):  # an old-API gymnasium.Env subclass: seed its np_random
                gymnasium.Env.reset(self.env, seed=seed)
            else:
                warnings.warn("{} has neither a seed() method nor a seed argument to reset(): the seed {} is "
                              "ignored".format(type(self.env).__name__, seed))
        if options is not None and _accepts_keyword(self.env.reset, "options"):
            kwargs["options"] = options
        return self._split_reset_result(self.env.reset(**kwargs))

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        result = self.env.step(action)
        if len(result) == 5:
            return result
        if len(result) != 4:
            raise ValueError("{}.step() returned {} values; expected 4 (old gym API: obs, reward, done, info) or 5 "
                             "(gymnasium API: obs, reward, terminated, truncated, info)".format(
                                 type(self.env).__name__, len(result)))
        obs, reward, done, info = result
        done = bool(done)
        truncated = done and bool(info.get("TimeLimit.truncated", False))
        return obs, reward, done and not truncated, truncated, info

    def render(self, mode: Optional[str] = None) -> Any:
        """
        Render the wrapped env.

        :param mode: (str) old-gym render mode; defaults to ``render_mode`` or 'human'
        """
        return self.env.render(mode=mode or self.render_mode or "human")

    def close(self) -> None:
        if hasattr(self.env, "close"):
            self.env.close()

    def seed(self, seed: Optional[int] = None) -> Any:
        """Old-gym style seeding, forwarded to the wrapped env (gymnasium code seeds through ``reset(seed=...)``)."""
        return self.env.seed(seed)

    def set_wrapper_attr(self, name: str, value: Any, *, force: bool = True) -> bool:
        if name not in self.__dict__ and not hasattr(type(self), name) and hasattr(self.env, name):
            setattr(self.env, name, value)
            return True
        return super().set_wrapper_attr(name, value, force=force)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "env":
            raise AttributeError("{!r} object has no attribute {!r}".format(type(self).__name__, name))
        return getattr(self.env, name)

    def __str__(self) -> str:
        return "<OldGymAPIAdapter<{}>>".format(self.env)


def wrap_env(env_or_id: Any, **make_kwargs: Any) -> gymnasium.Env:
    """
    Return a gymnasium env for an env id, a gymnasium env or an old-gym-API env.

    :param env_or_id: (str or Env) an env id (made with ``gymnasium.make``, retired ids are resolved through
        :data:`RETIRED_ENV_IDS`), a ``gymnasium.Env`` (returned unchanged) or an env with the old gym API (wrapped in
        :class:`OldGymAPIAdapter`, even a ``gymnasium.Env`` subclass whose ``reset`` takes no ``seed``)
    :param make_kwargs: keyword arguments for ``gymnasium.make`` (only with an env id)
    :return: (gymnasium.Env)
    """
    if isinstance(env_or_id, str):
        return gymnasium.make(resolve_env_id(env_or_id), **make_kwargs)
    if make_kwargs:
        raise ValueError("wrap_env(): keyword arguments {} are only used with an env id, not with an env instance "
                         "({})".format(sorted(make_kwargs), type(env_or_id).__name__))
    if isinstance(env_or_id, gymnasium.Env) and not has_old_reset_signature(env_or_id):
        return env_or_id
    if is_old_gym_env(env_or_id):
        return OldGymAPIAdapter(env_or_id)
    raise TypeError("Expected an env id string, a gymnasium.Env or a gym-style env (with reset, step, "
                    "observation_space and action_space), got {!r} of type {}".format(
                        env_or_id, type(env_or_id).__qualname__))
