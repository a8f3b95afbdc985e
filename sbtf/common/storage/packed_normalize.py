"""
``VecNormalize`` of a Dict observation space, applied to the packed rows sbtf carries Dict observations in.

The off-policy algorithms see a Dict-observation env through ``VecPackDictObs`` (one float32 row per observation,
``sbtf.common.envs.dict_obs``) and store the *original* observations in their replay buffers; as in stable-baselines3,
the observations are normalised when a minibatch is sampled. :class:`PackedVecNormalize` does what the VecNormalize does
to the dict observations, on the packed rows: the entries of ``norm_obs_keys`` are normalised (or unnormalised) with
their own statistics by the VecNormalize itself, the other entries (e.g. uint8 images, Discrete keys) are copied
unchanged.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from sbtf.common.envs.dict_obs import layout_of


class PackedVecNormalize:
    """
    A view of a ``VecNormalize`` with a Dict observation space that takes and returns packed observation rows.

    :param vec_normalize: (VecNormalize) the wrapper (its ``obs_rms`` is a dict of per-entry statistics)
    """

    def __init__(self, vec_normalize: Any):
        if not isinstance(vec_normalize.obs_rms, dict):
            raise TypeError("Error: PackedVecNormalize needs a VecNormalize of a Dict observation space.")
        self.vec_normalize = vec_normalize
        self.layout = layout_of(vec_normalize.observation_space)
        self._entries = tuple(self.layout[key] for key in vec_normalize.obs_rms)

    def _per_key(self, rows: Any, transform: Callable[[Any], Any]) -> Any:
        """Apply ``transform`` (a dict of the normalised entries -> a dict) to packed rows (one row or a batch)."""
        if isinstance(rows, Mapping):
            return transform(rows)
        rows = np.asarray(rows, dtype=np.float32)
        if not self.vec_normalize.norm_obs or not self._entries:
            return rows
        batch = rows.reshape(-1, self.layout.size)
        n = batch.shape[0]
        parts = OrderedDict((e.key, batch[:, e.offset:e.offset + e.size].reshape((n,) + e.shape))
                            for e in self._entries)
        result = transform(parts)
        out = np.array(batch, dtype=np.float32, copy=True)
        for entry in self._entries:
            out[:, entry.offset:entry.offset + entry.size] = np.asarray(result[entry.key]).reshape(n, entry.size)
        return out.reshape(rows.shape)

    def normalize_obs(self, rows: Any) -> Any:
        """
        Packed rows normalised as ``VecNormalize.normalize_obs`` normalises the dict observations.

        :param rows: (np.ndarray) packed observations ``(n, size)`` or one row ``(size,)`` (a dict is passed to the
            VecNormalize as it is)
        :return: (np.ndarray) float32 rows of the same shape
        """
        return self._per_key(rows, self.vec_normalize.normalize_obs)

    def unnormalize_obs(self, rows: Any) -> Any:
        """
        Packed rows unnormalised as ``VecNormalize.unnormalize_obs`` does (exact unless the values were clipped).

        :param rows: (np.ndarray) packed normalised observations ``(n, size)`` or one row ``(size,)``
        :return: (np.ndarray) float32 rows of the same shape
        """
        return self._per_key(rows, self.vec_normalize.unnormalize_obs)

    def normalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """``VecNormalize.normalize_reward``."""
        return self.vec_normalize.normalize_reward(reward)

    def unnormalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """``VecNormalize.unnormalize_reward``."""
        return self.vec_normalize.unnormalize_reward(reward)

    def get_original_obs(self) -> np.ndarray:
        """The raw observations of the last step or reset, packed (``(n_envs, size)`` float32)."""
        return self.layout.pack(self.vec_normalize.get_original_obs())

    def get_original_reward(self) -> np.ndarray:
        """``VecNormalize.get_original_reward``."""
        return self.vec_normalize.get_original_reward()


def for_packed_rows(vec_normalize: Any) -> Any:
    """
    What normalises the observations a model stores: the :class:`PackedVecNormalize` view of a VecNormalize of a Dict
    observation space, anything else (a Box VecNormalize, None, a view already) as it is.

    :param vec_normalize: (VecNormalize or None)
    :return: (VecNormalize, PackedVecNormalize or None)
    """
    if vec_normalize is None or isinstance(vec_normalize, PackedVecNormalize):
        return vec_normalize
    if isinstance(getattr(vec_normalize, "obs_rms", None), dict) and \
            isinstance(getattr(vec_normalize, "observation_space", None), gym.spaces.Dict):
        return PackedVecNormalize(vec_normalize)
    return vec_normalize


__all__ = ["PackedVecNormalize", "for_packed_rows"]
