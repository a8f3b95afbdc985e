"""stable-baselines 2's bundled envs and ``Monitor`` with the old gym API, for unchanged old code.

sbtf's own classes (``sbtf.common.bit_flipping_env.BitFlippingEnv``, the identity envs of
``sbtf.common.identity_env``, ``sbtf.bench.Monitor``) follow the gymnasium API. Code written for stable-baselines 2
calls them the old way -- ``obs = env.reset()``, ``obs, reward, done, info = env.step(action)``, ``env.seed(s)`` --
so the ``stable_baselines`` paths of these classes serve the subclasses defined here:

* ``reset(...)`` returns the observation only;
* ``step(action)`` returns ``(obs, reward, done, info)`` with ``done = terminated or truncated``; a truncation
  (time limit) is marked ``info["TimeLimit.truncated"] = True``, as gym's ``TimeLimit`` did;
* ``seed(seed)`` seeds the next ``reset`` (gymnasium seeds at reset) and returns ``[seed]``.

They are still the sbtf classes (``isinstance(env, sbtf.bench.Monitor)`` holds) and declare the old API
(``sbtf.common.envs.gym_compat.OLD_GYM_API_ATTRIBUTE``), so sbtf's models, VecEnvs and ``evaluate_policy`` adapt them
automatically (``OldGymAPIAdapter``), exactly like any other env written for the old gym API.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from sbtf.bench import monitor as sbtf_monitor
from sbtf.common import bit_flipping_env as sbtf_bit_flipping_env
from sbtf.common import identity_env as sbtf_identity_env
from sbtf.common.envs.gym_compat import OLD_GYM_API_ATTRIBUTE

__all__ = ["OldGymAPI", "old_done", "BitFlippingEnv", "IdentityEnv", "IdentityEnvBox", "IdentityEnvMultiDiscrete",
           "IdentityEnvMultiBinary", "Monitor"]


def old_done(terminated: bool, truncated: bool, info: Dict[str, Any]) -> bool:
    """
    The old gym ``done`` of a gymnasium step; a truncation that is not also a termination is recorded in
    ``info["TimeLimit.truncated"]`` (which the adapter reads back as ``truncated``).

    :param terminated: (bool)
    :param truncated: (bool)
    :param info: (dict) the step's info (updated in place)
    :return: (bool)
    """
    if truncated and not terminated:
        info["TimeLimit.truncated"] = True
    return bool(terminated or truncated)


class OldGymAPI:
    """
    Mixin over a gymnasium env class: the old gym API on top of it (``reset() -> obs``, 4-tuple ``step``,
    ``seed()``). Put it first in the bases: ``class OldEnv(OldGymAPI, GymnasiumEnv)``.
    """

    _pending_seed: Optional[int] = None

    def seed(self, seed: Optional[int] = None) -> List[Optional[int]]:
        """
        Seed the env the old gym way: the seed is used at the next ``reset``.

        :param seed: (int or None)
        :return: ([int]) the seed, as old gym returned it
        """
        self._pending_seed = seed
        return [seed]

    def _take_seed(self, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        if self._pending_seed is not None and kwargs.get("seed") is None:
            kwargs = dict(kwargs, seed=self._pending_seed)
        self._pending_seed = None
        return kwargs

    def reset(self) -> Any:  # pylint: disable=arguments-differ
        """Reset the env and return the first observation (old gym API)."""
        obs, _info = super().reset(**self._take_seed({}))  # type: ignore[misc]
        return obs

    def step(self, action: Any) -> Tuple[Any, float, bool, Dict[str, Any]]:
        """One step: ``(obs, reward, done, info)`` (old gym API)."""
        obs, reward, terminated, truncated, info = super().step(action)  # type: ignore[misc]
        return obs, reward, old_done(terminated, truncated, info), info


setattr(OldGymAPI, OLD_GYM_API_ATTRIBUTE, True)


def _sb2_module(cls: type, module: str) -> type:
    """Name the class by its stable-baselines path (so it pickles by reference through that path)."""
    cls.__module__ = module
    return cls


class BitFlippingEnv(OldGymAPI, sbtf_bit_flipping_env.BitFlippingEnv):
    """
    stable-baselines 2's ``BitFlippingEnv`` (old gym API): the goal env of sbtf's
    :class:`sbtf.common.bit_flipping_env.BitFlippingEnv`, reset once at construction as SB2 did. ``done`` is True
    when the goal is reached or after ``max_steps``; ``info["is_success"]`` says which.
    """

    def __init__(self, n_bits: int = 10, continuous: bool = False, max_steps: Optional[int] = None,
                 discrete_obs_space: bool = False):
        super().__init__(n_bits=n_bits, continuous=continuous, max_steps=max_steps,
                         discrete_obs_space=discrete_obs_space)
        self.reset()


class IdentityEnv(OldGymAPI, sbtf_identity_env.IdentityEnv):
    """stable-baselines 2's ``IdentityEnv`` (old gym API; ``done`` after ``ep_length`` steps)."""


class IdentityEnvBox(OldGymAPI, sbtf_identity_env.IdentityEnvBox):
    """stable-baselines 2's ``IdentityEnvBox`` (old gym API)."""


class IdentityEnvMultiDiscrete(OldGymAPI, sbtf_identity_env.IdentityEnvMultiDiscrete):
    """stable-baselines 2's ``IdentityEnvMultiDiscrete`` (old gym API)."""


class IdentityEnvMultiBinary(OldGymAPI, sbtf_identity_env.IdentityEnvMultiBinary):
    """stable-baselines 2's ``IdentityEnvMultiBinary`` (old gym API)."""


class Monitor(OldGymAPI, sbtf_monitor.Monitor):
    """
    stable-baselines 2's ``Monitor`` (old gym API): :class:`sbtf.bench.Monitor` (same files, same
    ``info["episode"]``), with ``reset(**kwargs) -> obs`` (the ``reset_keywords`` are given here) and a 4-tuple
    ``step``. The wrapped env may follow either API.
    """

    def reset(self, **kwargs: Any) -> Any:  # pylint: disable=arguments-differ
        """
        Reset the env and return the first observation. ``kwargs``: the ``reset_keywords`` (handed to the gymnasium
        env inside ``options``, the way gymnasium passes reset arguments) and anything the env's reset takes.
        """
        kwargs = self._take_seed(kwargs)
        keywords = {key: kwargs.pop(key) for key in list(kwargs) if key in self.reset_keywords}
        if keywords:
            kwargs["options"] = {**(kwargs.get("options") or {}), **keywords}
        obs, _info = sbtf_monitor.Monitor.reset(self, **kwargs)
        return obs


for _cls, _module in ((BitFlippingEnv, "stable_baselines.common.bit_flipping_env"),
                      (IdentityEnv, "stable_baselines.common.identity_env"),
                      (IdentityEnvBox, "stable_baselines.common.identity_env"),
                      (IdentityEnvMultiDiscrete, "stable_baselines.common.identity_env"),
                      (IdentityEnvMultiBinary, "stable_baselines.common.identity_env"),
                      (Monitor, "stable_baselines.bench.monitor")):
    _sb2_module(_cls, _module)
