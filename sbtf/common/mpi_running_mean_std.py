"""Running mean and standard deviation of a data stream shared by MPI ranks
(stable-baselines 2.x ``common/mpi_running_mean_std.py``), the statistics of GAIL's ``obfilter`` and of DDPG's
``obs_rms`` / ``ret_rms``.

The statistics are kept as sums in float64 TensorFlow variables ``runningsum``, ``runningsumsq`` and ``count``
(non-trainable, SB2's names; GAIL's discriminator keeps them under ``adversary/obfilter/``, DDPG under
``input/obs_rms/`` and ``input/ret_rms/``). ``update`` adds this rank's batch to the sums of every rank
(``Allreduce``), so all ranks hold the same statistics. ``mean`` / ``std`` are float32 tensors (usable inside
``tf.function``); ``mean_np`` / ``std_np`` give NumPy copies for fast acting.

Two ways to keep the sums (``deferred``):

* written through (the default): ``update`` adds to the variables at once;
* deferred (DDPG, which updates after every environment step): the sums live in float64 NumPy arrays, ``update``
  adds to them, and ``flush()`` writes them to the variables before TensorFlow reads them (train calls, saving).

Either way, ``pull()`` re-reads the variables after they changed outside ``update`` (an in-graph update, a load).
Works without mpirun and without mpi4py.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.mpi_util import allreduce_sum, get_comm

_STD_FLOOR = 1e-2


def moments_from_sums(total: np.ndarray, sumsq: np.ndarray, count: float) -> Tuple[np.ndarray, np.ndarray]:
    """``(mean, std)`` (float32) of running sums: ``mean = sum / count``, ``std = sqrt(max(sumsq / count - mean^2,
    1e-2))`` (SB2 floors the variance at 0.01)."""
    mean = (np.asarray(total) / count).astype(np.float32)
    var = (np.asarray(sumsq) / count).astype(np.float32) - np.square(mean)
    return mean, np.sqrt(np.maximum(var, np.float32(_STD_FLOOR))).astype(np.float32)


class RunningMeanStd(tf.Module):
    """
    Calculates the running mean and std of a data stream over all MPI ranks
    (https://en.wikipedia.org/wiki/Algorithms_for_calculating_variance#Parallel_algorithm).

    ``std = sqrt(max(sumsq / count - mean^2, 1e-2))`` (SB2: the variance is floored at 0.01).

    :param epsilon: (float) initial ``runningsumsq`` and ``count`` (helps with arithmetic issues)
    :param shape: (tuple) the shape of the data stream's values
    :param comm: (MPI Communicator) if None, MPI.COMM_WORLD (or a one-process stand-in)
    :param name: (str) the scope of the variables (e.g. ``"obfilter"``)
    :param deferred: (bool) keep the sums in NumPy and write them to the variables on ``flush()`` (see the module
        docstring)
    """

    def __init__(self, epsilon: float = 1e-2, shape: Tuple[int, ...] = (), comm=None, name: str = "obfilter",
                 deferred: bool = False):
        super().__init__(name=name)
        self.shape = tuple(int(d) for d in shape)
        self.epsilon = float(epsilon)
        self.comm = get_comm(comm)
        self.deferred = bool(deferred)
        self._sum = tf.Variable(tf.zeros(self.shape, tf.float64), trainable=False, name="runningsum")
        self._sumsq = tf.Variable(tf.fill(self.shape, tf.constant(self.epsilon, tf.float64)), trainable=False,
                                  name="runningsumsq")
        self._count = tf.Variable(tf.constant(self.epsilon, tf.float64), trainable=False, name="count")
        # the NumPy sums (deferred mode: the current statistics; written-through mode: unused)
        self._np_sum = np.zeros(self.shape, np.float64)
        self._np_sumsq = np.full(self.shape, self.epsilon, np.float64)
        self._np_count = self.epsilon
        self._dirty = False
        self._np_cache = None
        #: bumped whenever the statistics change (a cache key for users of ``mean_np`` / ``std_np``)
        self._version = 0

    # ------------------------------------------------------------------ statistics
    @property
    def mean(self) -> tf.Tensor:
        """The running mean (float32 tensor; in deferred mode, as of the last ``flush()``)."""
        return tf.cast(self._sum / self._count, tf.float32)

    @property
    def std(self) -> tf.Tensor:
        """The running standard deviation (float32 tensor, variance floored at 1e-2)."""
        mean = self.mean
        return tf.sqrt(tf.maximum(tf.cast(self._sumsq / self._count, tf.float32) - tf.square(mean), _STD_FLOOR))

    @property
    def count(self) -> float:
        return float(self._np_count) if self.deferred else float(self._count.numpy())

    def _numpy_stats(self) -> Tuple[np.ndarray, np.ndarray]:
        if self._np_cache is None:
            if self.deferred:
                self._np_cache = moments_from_sums(self._np_sum, self._np_sumsq, self._np_count)
            else:
                self._np_cache = moments_from_sums(self._sum.numpy(), self._sumsq.numpy(), self._count.numpy())
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
        total = totalvec[0:data_size].reshape(self.shape)
        sumsq = totalvec[data_size:2 * data_size].reshape(self.shape)
        if self.deferred:
            self._np_sum = self._np_sum + total
            self._np_sumsq = self._np_sumsq + sumsq
            self._np_count = self._np_count + float(totalvec[2 * data_size])
            self._dirty = True
        else:
            self._sum.assign_add(total)
            self._sumsq.assign_add(sumsq)
            self._count.assign_add(totalvec[2 * data_size])
        self._np_cache = None
        self._version += 1

    def add_sums_tf(self, total, sumsq, count) -> None:
        """Inside a compiled function: add (already reduced) sums to the variables; call ``pull()`` afterwards."""
        self._sum.assign_add(tf.reshape(tf.cast(total, tf.float64), self.shape))
        self._sumsq.assign_add(tf.reshape(tf.cast(sumsq, tf.float64), self.shape))
        self._count.assign_add(tf.cast(count, tf.float64))

    def update_tf(self, data) -> None:
        """Inside a compiled function (one process): add a batch to the variables; call ``pull()`` afterwards."""
        data = tf.reshape(tf.cast(data, tf.float64), (-1,) + self.shape)
        self.add_sums_tf(tf.reduce_sum(data, axis=0), tf.reduce_sum(tf.square(data), axis=0),
                         tf.cast(tf.shape(data)[0], tf.float64))

    def set_state(self, total, sumsq, count) -> None:
        """Overwrite the sums (e.g. to restore statistics)."""
        self._sum.assign(np.asarray(total, np.float64).reshape(self.shape))
        self._sumsq.assign(np.asarray(sumsq, np.float64).reshape(self.shape))
        self._count.assign(float(count))
        self.pull()

    def flush(self) -> None:
        """Deferred mode: write the NumPy sums to the variables (when they changed); otherwise nothing to do."""
        if self._dirty:
            self._sum.assign(self._np_sum)
            self._sumsq.assign(self._np_sumsq)
            self._count.assign(self._np_count)
            self._dirty = False

    def pull(self) -> None:
        """Re-read the variables after they changed outside ``update`` (in-graph update, load, ``set_state``)."""
        if self.deferred:
            self._np_sum = np.array(self._sum.numpy(), np.float64).reshape(self.shape)
            self._np_sumsq = np.array(self._sumsq.numpy(), np.float64).reshape(self.shape)
            self._np_count = float(self._count.numpy())
            self._dirty = False
        self._np_cache = None
        self._version += 1


__all__ = ["RunningMeanStd", "moments_from_sums"]
