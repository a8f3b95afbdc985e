"""Running estimate of the mean and variance of a data stream (SB2's ``RunningMeanStd``)."""
from __future__ import annotations

from typing import Tuple, Union

import numpy as np


class RunningMeanStd(object):
    """
    Tracks the mean, variance and count of values seen so far, batch by batch.

    Uses the parallel-variance formula (Chan et al.) so that statistics of two batches can be merged
    exactly: https://en.wikipedia.org/wiki/Algorithms_for_calculating_variance#Parallel_algorithm

    :param epsilon: (float) initial count (avoids a division by zero on the first update)
    :param shape: (tuple) the shape of the data stream's values
    """

    def __init__(self, epsilon: float = 1e-4, shape: Tuple[int, ...] = ()):
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = float(epsilon)

    def update(self, arr: np.ndarray) -> None:
        """
        Update the statistics with a batch of values (first axis is the batch axis).

        :param arr: (np.ndarray) the batch, of shape ``(batch_size,) + shape``
        """
        arr = np.asarray(arr, dtype=np.float64)
        self.update_from_moments(arr.mean(axis=0), arr.var(axis=0), arr.shape[0])

    def update_from_moments(self, batch_mean: Union[np.ndarray, float], batch_var: Union[np.ndarray, float],
                            batch_count: Union[int, float]) -> None:
        """
        Merge the moments of a batch into the running statistics.

        :param batch_mean: (np.ndarray) mean of the batch
        :param batch_var: (np.ndarray) (population) variance of the batch
        :param batch_count: (int) number of values in the batch
        """
        batch_count = float(batch_count)
        total = self.count + batch_count
        delta = batch_mean - self.mean
        new_mean = self.mean + delta * (batch_count / total)
        # Sum of squared deviations of both parts plus the between-part correction term.
        m2 = self.var * self.count + batch_var * batch_count + np.square(delta) * (self.count * batch_count / total)
        self.mean = np.asarray(new_mean, dtype=np.float64)
        self.var = np.asarray(m2 / total, dtype=np.float64)
        self.count = total

    def combine(self, other: "RunningMeanStd") -> None:
        """
        Merge ``other``'s statistics into these ones (as if its values had been seen here too).

        :param other: (RunningMeanStd) statistics of another stream of the same shape
        """
        self.update_from_moments(other.mean, other.var, other.count)

    def copy(self) -> "RunningMeanStd":
        """An independent copy (its own arrays)."""
        twin = RunningMeanStd(shape=np.shape(self.mean))
        twin.mean, twin.var, twin.count = self.mean.copy(), self.var.copy(), float(self.count)
        return twin

    def __repr__(self) -> str:
        return "RunningMeanStd(mean={}, var={}, count={})".format(self.mean, self.var, self.count)
