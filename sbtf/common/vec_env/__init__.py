"""Vectorized environments (the stable-baselines 2 VecEnv API on gymnasium environments)."""
from __future__ import annotations

from copy import deepcopy
from typing import Optional, Union

import gymnasium

from sbtf.common.vec_env.base_vec_env import (AlreadySteppingError, CloudpickleWrapper, NotSteppingError, VecEnv,
                                              VecEnvWrapper, tile_images)
from sbtf.common.vec_env.dummy_vec_env import DummyVecEnv
from sbtf.common.vec_env.envpool_vec_env import EnvPoolVecEnv
from sbtf.common.vec_env.subproc_vec_env import SubprocVecEnv, VecEnvWorkerError
from sbtf.common.vec_env.util import copy_obs_dict, dict_to_obs, obs_space_info
from sbtf.common.vec_env.vec_check_nan import VecCheckNan
from sbtf.common.vec_env.vec_extract_dict_obs import VecExtractDictObs
from sbtf.common.vec_env.vec_frame_stack import VecFrameStack
from sbtf.common.vec_env.vec_monitor import VecMonitor
from sbtf.common.vec_env.vec_normalize import VecNormalize
from sbtf.common.vec_env.vec_transpose import VecTransposeImage
from sbtf.common.vec_env.vec_video_recorder import VecVideoRecorder

__all__ = [
    "AlreadySteppingError", "NotSteppingError", "VecEnv", "VecEnvWrapper", "CloudpickleWrapper", "DummyVecEnv",
    "SubprocVecEnv", "VecEnvWorkerError", "EnvPoolVecEnv", "VecFrameStack", "VecNormalize", "VecVideoRecorder",
    "VecCheckNan",
    "VecMonitor", "VecTransposeImage", "VecExtractDictObs",
    "copy_obs_dict", "dict_to_obs", "obs_space_info", "tile_images", "unwrap_vec_normalize",
    "sync_envs_normalization", "unwrap_vec_wrapper", "is_vecenv_wrapped",
]


def unwrap_vec_wrapper(env: Union[gymnasium.Env, VecEnv], vec_wrapper_class: type) -> Optional[VecEnvWrapper]:
    """
    The first VecEnv wrapper of class ``vec_wrapper_class`` around ``env`` (stable-baselines3's
    ``unwrap_vec_wrapper``), or None.

    :param env: (VecEnv) the environment
    :param vec_wrapper_class: (type) a ``VecEnvWrapper`` subclass (e.g. ``VecNormalize``)
    :return: (VecEnvWrapper or None)
    """
    env_tmp = env
    while isinstance(env_tmp, VecEnvWrapper):
        if isinstance(env_tmp, vec_wrapper_class):
            return env_tmp
        env_tmp = env_tmp.venv
    return None


def is_vecenv_wrapped(env: Union[gymnasium.Env, VecEnv], vec_wrapper_class: type) -> bool:
    """
    Whether ``env`` is wrapped in a ``vec_wrapper_class`` VecEnv wrapper (stable-baselines3's ``is_vecenv_wrapped``,
    e.g. ``is_vecenv_wrapped(env, VecNormalize)``).

    :param env: (VecEnv) the environment
    :param vec_wrapper_class: (type) a ``VecEnvWrapper`` subclass
    :return: (bool)
    """
    return unwrap_vec_wrapper(env, vec_wrapper_class) is not None


def unwrap_vec_normalize(env: Union[gymnasium.Env, VecEnv]) -> Optional[VecNormalize]:
    """
    Find the VecNormalize wrapper in a stack of VecEnv wrappers.

    :param env: (Union[gymnasium.Env, VecEnv])
    :return: (VecNormalize) the first VecNormalize found going inwards, or None
    """
    return unwrap_vec_wrapper(env, VecNormalize)


def sync_envs_normalization(env: Union[gymnasium.Env, VecEnv], eval_env: Union[gymnasium.Env, VecEnv]) -> None:
    """
    Sync eval and train environments when using VecNormalize: every VecNormalize of ``eval_env`` gets a copy of the
    statistics of the VecNormalize at the same depth in ``env``.

    :param env: (Union[gymnasium.Env, VecEnv]) the training env
    :param eval_env: (Union[gymnasium.Env, VecEnv]) the evaluation env
    """
    env_tmp, eval_env_tmp = env, eval_env
    while isinstance(env_tmp, VecEnvWrapper):
        if isinstance(env_tmp, VecNormalize):
            if not isinstance(eval_env_tmp, VecNormalize):
                raise ValueError("sync_envs_normalization(): the eval env has no VecNormalize where the training env "
                                 "has one; wrap both envs with the same VecEnv wrappers")
            eval_env_tmp.obs_rms = deepcopy(env_tmp.obs_rms)
            eval_env_tmp.ret_rms = deepcopy(env_tmp.ret_rms)
        env_tmp = env_tmp.venv
        eval_env_tmp = eval_env_tmp.venv if isinstance(eval_env_tmp, VecEnvWrapper) else None
