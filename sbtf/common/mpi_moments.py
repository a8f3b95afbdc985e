"""Mean and standard deviation of data spread over MPI ranks (stable-baselines 2.x ``common/mpi_moments.py``).

Works without mpirun and without mpi4py (one process: the plain NumPy moments).
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from sbtf.common.mpi_util import allreduce_sum, get_comm


def mpi_mean(arr, axis: int = 0, comm=None, keepdims: bool = False) -> Tuple[np.ndarray, float]:
    """
    Mean of an array along ``axis`` over all ranks (each rank holds some of the entries along ``axis``).

    :param arr: (np.ndarray) this rank's data (ndim >= 1)
    :param axis: (int) the axis along which the data is split between ranks
    :param comm: (MPI Communicator) if None, MPI.COMM_WORLD (or the one-process stand-in)
    :param keepdims: (bool) keep the reduced axis with size 1
    :return: (np.ndarray, float) the mean and the total count over all ranks
    """
    arr = np.asarray(arr)
    if arr.ndim == 0:
        raise ValueError("mpi_mean needs an array with at least one dimension")
    comm = get_comm(comm)
    dtype = arr.dtype if np.issubdtype(arr.dtype, np.floating) else np.float64
    xsum = arr.sum(axis=axis, keepdims=keepdims).astype(dtype)
    size = xsum.size
    localsum = np.zeros(size + 1, dtype)
    localsum[:size] = xsum.ravel()
    localsum[size] = arr.shape[axis]
    globalsum = allreduce_sum(localsum, comm)
    count = globalsum[size]
    if count == 0:
        raise ValueError("mpi_mean of an empty array (no entries on any rank)")
    return globalsum[:size].reshape(xsum.shape) / count, float(count)


def mpi_moments(arr, axis: int = 0, comm=None, keepdims: bool = False) -> Tuple[np.ndarray, np.ndarray, float]:
    """
    Mean and (population) standard deviation of an array along ``axis`` over all ranks.

    :param arr: (np.ndarray) this rank's data (ndim >= 1)
    :param axis: (int) the axis along which the data is split between ranks
    :param comm: (MPI Communicator) if None, MPI.COMM_WORLD (or the one-process stand-in)
    :param keepdims: (bool) keep the reduced axis with size 1
    :return: (np.ndarray, np.ndarray, float) mean, std and total count
    """
    arr = np.asarray(arr)
    if arr.ndim == 0:
        raise ValueError("mpi_moments needs an array with at least one dimension")
    axis = axis % arr.ndim
    mean, count = mpi_mean(arr, axis=axis, comm=comm, keepdims=True)
    sqdiffs = np.square(arr - mean)
    meansqdiff, count1 = mpi_mean(sqdiffs, axis=axis, comm=comm, keepdims=True)
    assert count1 == count
    std = np.sqrt(meansqdiff)
    if not keepdims:
        newshape = mean.shape[:axis] + mean.shape[axis + 1:]
        mean = mean.reshape(newshape)
        std = std.reshape(newshape)
    return mean, std, count


__all__ = ["mpi_mean", "mpi_moments"]
