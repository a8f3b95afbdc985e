"""Observation pre-processing shared by all policies (SB2 ``common/input.py`` semantics).

Box observations are cast to float32 and, for CNN policies only (``scale=True``), rescaled to
[0, 1] with the space bounds; Discrete / MultiDiscrete observations are one-hot encoded;
MultiBinary observations are cast to float32. Each function has a TF and a NumPy form that
compute the same thing.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf

SUPPORTED_OBS_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def check_obs_space(ob_space: gym.Space, algo_name: str = "this policy", allow_dict: bool = False) -> None:
    """
    Raise a clear error when ``ob_space`` cannot be fed to an sbtf policy.

    :param ob_space: (gymnasium.Space) the observation space
    :param algo_name: (str) the algorithm or policy named in the error
    :param allow_dict: (bool) the caller takes Dict observations (``MultiInputPolicy``, ``MultiInputLstmPolicy``;
        checked key by key)
    """
    if isinstance(ob_space, gym.spaces.Dict):
        if allow_dict:
            from sbtf.common.envs.dict_obs import DictObsLayout

            DictObsLayout(ob_space)  # refuses nested / unsupported sub-spaces, naming the key
            return
        raise NotImplementedError(
            f"Error: {algo_name} does not support Dict observation spaces ({ob_space!r}) here. The on-policy "
            "algorithms (A2C, ACER, ACKTR, PPO1, PPO2, TRPO) take them with policy='MultiInputPolicy' (or a "
            "features_extractor_class that takes a dict), and A2C, ACER, ACKTR and PPO2 with the recurrent "
            "policy='MultiInputLstmPolicy'; goal environments work with HER; otherwise flatten them with "
            "gymnasium.wrappers.FlattenObservation.")
    if not isinstance(ob_space, SUPPORTED_OBS_SPACES):
        raise NotImplementedError(
            f"Error: {algo_name} does not support observation space {ob_space!r} "
            f"({type(ob_space).__name__}); supported: Box, Discrete, MultiDiscrete, MultiBinary, and Dict of those "
            "with MultiInputPolicy / MultiInputLstmPolicy (on-policy algorithms).")


def obs_input_dtype(ob_space: gym.Space):
    """The dtype observations are fed to the network with (NumPy dtype)."""
    if isinstance(ob_space, gym.spaces.Box):
        return np.dtype(ob_space.dtype) if ob_space.dtype in (np.uint8, np.float32) else np.dtype(np.float32)
    if isinstance(ob_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return np.dtype(np.int32)
    return np.dtype(np.float32)  # MultiBinary; a Dict space is fed packed as float32 rows (sbtf.common.envs.dict_obs)


def obs_input_shape(ob_space: gym.Space) -> tuple:
    """Shape of one observation as fed to the network (no batch axis)."""
    if isinstance(ob_space, gym.spaces.Discrete):
        return ()
    if isinstance(ob_space, gym.spaces.Dict):
        from sbtf.common.envs.dict_obs import layout_of

        return (layout_of(ob_space).size,)
    return tuple(ob_space.shape)


def processed_obs_dim(ob_space: gym.Space) -> int:
    """Size of the flattened processed observation."""
    if isinstance(ob_space, gym.spaces.Discrete):
        return int(ob_space.n)
    if isinstance(ob_space, gym.spaces.MultiDiscrete):
        return int(np.sum(ob_space.nvec))
    return int(np.prod(ob_space.shape))


def _scale_bounds(ob_space: gym.Space, scale: bool):
    if (scale and isinstance(ob_space, gym.spaces.Box) and np.all(np.isfinite(ob_space.low))
            and np.all(np.isfinite(ob_space.high)) and np.all(ob_space.high - ob_space.low != 0)):
        low = np.asarray(ob_space.low, dtype=np.float32)
        return low, (np.asarray(ob_space.high, dtype=np.float32) - low)
    return None


def preprocess_obs_tf(obs, ob_space: gym.Space, scale: bool = False) -> tf.Tensor:
    """TF pre-processing of a batch of observations."""
    if isinstance(ob_space, gym.spaces.Discrete):
        return tf.one_hot(tf.cast(obs, tf.int32), int(ob_space.n), dtype=tf.float32)
    if isinstance(ob_space, gym.spaces.MultiDiscrete):
        obs = tf.cast(obs, tf.int32)
        return tf.concat([tf.one_hot(obs[:, i], int(n), dtype=tf.float32)
                          for i, n in enumerate(np.asarray(ob_space.nvec).ravel())], axis=-1)
    processed = tf.cast(obs, tf.float32)
    bounds = _scale_bounds(ob_space, scale)
    if bounds is not None:
        processed = (processed - bounds[0]) / bounds[1]
    return processed


def _one_hot_np(indices: np.ndarray, depth: int) -> np.ndarray:
    """Rows of ``np.eye(depth)`` for ``indices`` (batch x depth values; ``np.eye`` itself would take depth**2,
    i.e. 16 TB for Discrete(2000000))."""
    indices = np.asarray(indices).reshape(-1)
    if indices.size and (indices.max() >= depth or indices.min() < -depth):
        raise IndexError(f"index {int(indices.max())} is out of bounds for one-hot vectors of size {depth}")
    out = np.zeros((indices.shape[0], depth), dtype=np.float32)
    out[np.arange(indices.shape[0]), indices] = 1.0
    return out


def preprocess_obs_np(obs: np.ndarray, ob_space: gym.Space, scale: bool = False) -> np.ndarray:
    """NumPy pre-processing of a batch of observations (same maths as ``preprocess_obs_tf``)."""
    if isinstance(ob_space, gym.spaces.Discrete):
        return _one_hot_np(np.asarray(obs, dtype=np.int64).reshape(-1), int(ob_space.n))
    if isinstance(ob_space, gym.spaces.MultiDiscrete):
        obs = np.asarray(obs, dtype=np.int64)
        return np.concatenate([_one_hot_np(obs[:, i], int(n))
                               for i, n in enumerate(np.asarray(ob_space.nvec).ravel())], axis=-1)
    processed = np.asarray(obs, dtype=np.float32)
    bounds = _scale_bounds(ob_space, scale)
    if bounds is not None:
        processed = (processed - bounds[0]) / bounds[1]
    return processed


def is_image_space(ob_space: gym.Space) -> bool:
    """True for 3-D Box observation spaces (H, W, C)."""
    return isinstance(ob_space, gym.spaces.Box) and len(ob_space.shape) == 3
