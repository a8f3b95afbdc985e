"""Running mean and standard deviation of a data stream shared by MPI ranks
(stable-baselines 2.x ``common/mpi_running_mean_std.py``).

The statistics are kept as sums in float64 TensorFlow variables ``runningsum``, ``runningsumsq`` and ``count``
(non-trainable, SB2's names; GAIL's discriminator keeps them under ``adversary/obfilter/``). ``update`` adds this
rank's batch to the sums of every rank (``Allreduce``), so all ranks hold the same statistics. ``mean`` / ``std``
are float32 tensors (usable inside ``tf.function``); ``mean_np`` / ``std_np`` give NumPy copies for fast acting.
Works without mpirun and without mpi4py.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.mpi_util import allreduce_sum, get_comm

_STD_FLOOR = 1e-2


class RunningMeanStd(tf.Module):
    """
    Calculates the running mean and std of a data stream over all MPI ranks
    (https://en.wikipedia.org/wiki/Algorithms_for_calculating_variance#Parallel_algorithm).

    ``std = sqrt(max(sumsq / count - mean^2, 1e-2))`` (SB2: the variance is floored at 0.01).

    :param epsilon: (float) initial ``runningsumsq`` and ``count`` (helps with arithmetic issues)
    :param shape: (tuple) the shape of the data stream's values
    :param comm: (MPI Communicator) if None, MPI.COMM_WORLD (or a one-process stand-in)
    :param name: (str) the scope of the variables (e.g. ``"obfilter"``)
    """

    def __init__(self, epsilon: float = 1e-2, shape: Tuple[int, ...] = (), comm=None, name: str = "obfilter"):
        super().__init__(name=name)
        self.shape = tuple(int(d) for d in shape)
        self.epsilon = float(epsilon)
        self.comm = get_comm(comm)
        self._sum = tf.Variable(tf.zeros(self.shape, tf.float64), trainable=False, name="runningsum")
        self._sumsq = tf.Variable(tf.fill(self.shape, tf.constant(self.epsilon, tf.float64)), trainable=False,
                                  name="runningsumsq")
        self._count = tf.Variable(tf.constant(self.epsilon, tf.float64), trainable=False, name="count")
        self._version = 0
        self._np_cache_version = -1
        self._np_cache: Tuple[np.ndarray, np.ndarray] = (np.zeros(self.shape, np.float32),
                                                          np.ones(self.shape, np.float32))

    # ------------------------------------------------------------------ statistics
    @property
    def mean(self) -> tf.Tensor:
        """The running mean (float32 tensor)."""
        return tf.cast(self._sum / self._count, tf.float32)

    @property
    def std(self) -> tf.Tensor:
        """The running standard deviation (float32 tensor, variance floored at 1e-2)."""
        mean = self.mean
        return tf.sqrt(tf.maximum(tf.cast(self._sumsq / self._count, tf.float32) - tf.square(mean), _STD_FLOOR))

    @property
    def count(self) -> float:
        return float(self._count.numpy())

    def _numpy_stats(self) -> Tuple[np.ndarray, np.ndarray]:
        if self._np_cache_version != self._version:
            total = self._sum.numpy()
            sumsq = self._sumsq.numpy()
            count = self._count.numpy()
            mean = (total / count).astype(np.float32)
            var = (sumsq / count).astype(np.float32) - np.square(mean)
            self._np_cache = (mean, np.sqrt(np.maximum(var, np.float32(_STD_FLOOR))).astype(np.float32))
            self._np_cache_version = self._version
        return self._np_cache

    def mean_np(self) -> np.ndarray:
        """The running mean as a NumPy array (cached until the next update)."""
        return self._numpy_stats()[0]

    def std_np(self) -> np.ndarray:
        """The running standard deviation as a NumPy array (cached until the next update)."""
        return self._numpy_stats()[1]

    def named_variables(self, prefix: str = "") -> "OrderedDict[str, tf.Variable]":
        """``{name: variable}`` with SB2's names (``<prefix>runningsum:0``, ...)."""
        return OrderedDict([(f"{prefix}runningsum:0", self._sum), (f"{prefix}runningsumsq:0", self._sumsq),
                            (f"{prefix}count:0", self._count)])

    # ------------------------------------------------------------------ updates
    def update(self, data) -> None:
        """
        Add a batch (first axis = samples) to the statistics of every rank (a collective call under MPI).

        :param data: (np.ndarray) the batch, shape ``(n,) + shape``
        """
        data = np.asarray(data, dtype=np.float64)
        data_size = int(np.prod(self.shape)) if self.shape else 1
        data = data.reshape((-1,) + self.shape)
        addvec = np.concatenate([data.sum(axis=0).ravel(), np.square(data).sum(axis=0).ravel(),
                                 np.array([len(data)], dtype=np.float64)])
        totalvec = allreduce_sum(addvec, self.comm)
        self._sum.assign_add(totalvec[0:data_size].reshape(self.shape))
        self._sumsq.assign_add(totalvec[data_size:2 * data_size].reshape(self.shape))
        self._count.assign_add(totalvec[2 * data_size])
        self._version += 1

    def set_state(self, total, sumsq, count) -> None:
        """Overwrite the sums (e.g. to restore statistics)."""
        self._sum.assign(np.asarray(total, np.float64).reshape(self.shape))
        self._sumsq.assign(np.asarray(sumsq, np.float64).reshape(self.shape))
        self._count.assign(float(count))
        self._version += 1


__all__ = ["RunningMeanStd"]
