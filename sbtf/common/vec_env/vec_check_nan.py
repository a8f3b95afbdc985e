"""Detection of NaN / inf values going in and out of vectorized environments."""
from __future__ import annotations

import warnings
from typing import Any, List, Tuple

import numpy as np

from sbtf.common.vec_env.base_vec_env import VecEnv, VecEnvWrapper


def _find_invalid(value: Any, check_inf: bool) -> List[str]:
    """Return ['nan'] / ['inf'] / both for the non-finite values in ``value`` (arrays, scalars, dicts, tuples)."""
    if isinstance(value, dict):
        parts = list(value.values())
    elif isinstance(value, (tuple, list)) and value and not np.isscalar(value[0]):
        parts = list(value)
    else:
        parts = [value]
    found: List[str] = []
    for part in parts:
        try:
            array = np.asarray(part)
        except Exception:
            continue
        if array.dtype.kind not in "fc":  # ints and bools cannot hold nan / inf
            continue
        if check_inf and "inf" not in found and np.isinf(array).any():
            found.append("inf")
        if "nan" not in found and np.isnan(array).any():
            found.append("nan")
    return found


class VecCheckNan(VecEnvWrapper):
    """
    Watches actions (from the model) and observations / rewards (from the envs) for NaN and inf values, and says
    where they came from: a UserWarning by default, a ValueError with ``raise_exception=True``.

    :param venv: (VecEnv) the vectorized environment to wrap
    :param raise_exception: (bool) raise a ValueError instead of warning
    :param warn_once: (bool) warn only the first time (the checks stop then, unless raising)
    :param check_inf: (bool) look for +inf / -inf too, not only NaN
    """

    def __init__(self, venv: VecEnv, raise_exception: bool = False, warn_once: bool = True, check_inf: bool = True):
        VecEnvWrapper.__init__(self, venv)
        self.raise_exception = raise_exception
        self.warn_once = warn_once
        self.check_inf = check_inf
        self._actions = None
        self._observations = None
        self._user_warned = False

    def step_async(self, actions: np.ndarray) -> None:
        self._check_val(async_step=True, actions=actions)
        self._actions = actions
        self.venv.step_async(actions)

    def step_wait(self):
        observations, rewards, news, infos = self.venv.step_wait()
        self._check_val(async_step=False, observations=observations, rewards=rewards, news=news)
        self._observations = observations
        return observations, rewards, news, infos

    def reset(self):
        observations = self.venv.reset()
        self._actions = None
        self._check_val(async_step=False, observations=observations)
        self._observations = observations
        return observations

    def _check_val(self, *, async_step: bool, **kwargs: Any) -> None:
        # Once warned (and only warning once), stop paying for the checks.
        if not self.raise_exception and self.warn_once and self._user_warned:
            return

        found: List[Tuple[str, str]] = []
        for name, value in kwargs.items():
            for kind in _find_invalid(value, self.check_inf):
                found.append((name, kind))
        if not found:
            return

        self._user_warned = True
        msg = ", ".join("found {} in {}".format(kind, name) for name, kind in found)
        msg += ".\r\nOriginated from the "
        if async_step:
            msg += "RL model, Last given value was: \r\n\tobservations={}".format(self._observations)
        elif self._actions is None:
            msg += "environment observation (at reset)"
        else:
            msg += "environment, Last given value was: \r\n\taction={}".format(self._actions)

        if self.raise_exception:
            raise ValueError(msg)
        warnings.warn(msg, UserWarning)
