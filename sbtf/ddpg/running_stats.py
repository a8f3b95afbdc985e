"""DDPG's running statistics (``obs_rms`` / ``ret_rms``) and the normalisation they drive.

The statistics are ``sbtf.common.mpi_running_mean_std.RunningMeanStd`` (SB2's sums ``runningsum``, ``runningsumsq``,
``count``, float64, initial 0, 1e-2, 1e-2, shared over MPI) in deferred mode: DDPG updates them after every
environment step, in NumPy, and writes them to the TF variables (``input/obs_rms/...``, what is saved and what
compiled train functions read) with ``flush()`` before TensorFlow reads them.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.mpi_running_mean_std import RunningMeanStd


class RunningStats(RunningMeanStd):
    """
    SB2's ``obs_rms`` / ``ret_rms`` of DDPG: ``RunningMeanStd`` with epsilon 1e-2, sums kept in NumPy between
    ``flush()`` calls.

    :param shape: (tuple) shape of one value
    :param comm: (Comm) the communicator
    :param name: (str) scope of the variables
    """

    def __init__(self, shape: Tuple[int, ...], comm, name: str):
        super().__init__(epsilon=1e-2, shape=shape, comm=comm, name=name, deferred=True)


def normalize(tensor, stats: Optional[RunningMeanStd]):
    """Normalise a tensor with running statistics (identity without): ``(x - mean) / std``."""
    if stats is None:
        return tensor
    return (tensor - stats.mean) / stats.std


def denormalize(tensor, stats: Optional[RunningMeanStd]):
    """Inverse of ``normalize``: ``x * std + mean``."""
    if stats is None:
        return tensor
    return tensor * stats.std + stats.mean


def denormalize_np(x: np.ndarray, stats: Optional[RunningMeanStd]) -> np.ndarray:
    """``denormalize`` in NumPy (on the current statistics)."""
    return x if stats is None else x * stats.std_np() + stats.mean_np()


def reduce_std(tensor, axis=None, keepdims=False):
    """Standard deviation of a tensor."""
    mean = tf.reduce_mean(tensor, axis=axis, keepdims=True)
    return tf.sqrt(tf.reduce_mean(tf.square(tensor - mean), axis=axis, keepdims=keepdims))


__all__ = ["RunningStats", "normalize", "denormalize", "denormalize_np", "reduce_std"]
