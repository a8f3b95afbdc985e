"""Reading action masks from environments (sb3-contrib ``common/maskable/utils.py``).

An environment supports masking when it (or a wrapper such as :class:`~sbtf.contrib.common.maskable.ActionMasker`)
has a method ``action_masks()`` returning one boolean per choice of each action component, flat.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sbtf.common.vec_env import VecEnv

#: the method an environment must have to support masking
EXPECTED_METHOD_NAME = "action_masks"

__all__ = ["EXPECTED_METHOD_NAME", "get_action_masks", "is_masking_supported"]


def _is_vec_env(env: Any) -> bool:
    return isinstance(env, VecEnv)


def get_action_masks(env: Any) -> np.ndarray:
    """
    The current action masks of an environment: ``(n_envs, n_choices)`` for a VecEnv, ``(n_choices,)`` otherwise.

    :param env: (gymnasium.Env or VecEnv) the environment
    :return: (np.ndarray) the masks (bool)
    """
    if _is_vec_env(env):
        return np.stack(env.env_method(EXPECTED_METHOD_NAME)).astype(bool, copy=False)
    getter = env.get_wrapper_attr if hasattr(env, "get_wrapper_attr") else lambda name: getattr(env, name)
    return np.asarray(getter(EXPECTED_METHOD_NAME)(), dtype=bool)


def is_masking_supported(env: Any) -> bool:
    """
    Whether an environment exposes ``action_masks()`` (itself or through a wrapper).

    :param env: (gymnasium.Env or VecEnv) the environment
    :return: (bool)
    """
    if _is_vec_env(env):
        from sbtf.common.vec_env.subproc_vec_env import VecEnvWorkerError  # pylint: disable=import-outside-toplevel

        try:
            method = env.get_attr(EXPECTED_METHOD_NAME, indices=[0])[0]
        except (AttributeError, VecEnvWorkerError):
            return False
        except Exception:  # pylint: disable=broad-except  # a bound method a worker cannot send back: it exists
            return True
        return method is not None
    try:
        if hasattr(env, "get_wrapper_attr"):
            env.get_wrapper_attr(EXPECTED_METHOD_NAME)
        else:
            getattr(env, EXPECTED_METHOD_NAME)
        return True
    except AttributeError:
        return False
