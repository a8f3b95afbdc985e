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


def _helper_runningmeanstd(comm=None) -> None:
    """
    Check :func:`mpi_moments` against NumPy over the ranks (stable-baselines 2's helper, which its tests run as
    ``mpirun -np 3 python -c "from stable_baselines.common.mpi_moments import _helper_runningmeanstd;
    _helper_runningmeanstd()"``). Three arrays are split along the axis of the moments; rank ``r`` holds the parts
    ``r, r + size, ...`` (so any number of ranks works, also a single process), and the moments over the ranks must
    equal those of the whole array.

    :param comm: (MPI Communicator) if None, MPI.COMM_WORLD (or the one-process stand-in)
    :raises AssertionError: when the moments differ
    """
    comm = get_comm(comm)
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.RandomState(0)
    cases = [((rng.randn(3), rng.randn(4), rng.randn(5)), 0),
             ((rng.randn(3, 2), rng.randn(4, 2), rng.randn(5, 2)), 0),
             ((rng.randn(2, 3), rng.randn(2, 4), rng.randn(2, 4)), 1)]
    for parts, axis in cases:
        whole = np.concatenate(parts, axis=axis)
        mine = [part for index, part in enumerate(parts) if index % size == rank]
        local = np.concatenate(mine, axis=axis) if mine else np.take(whole, [], axis=axis)
        expected = (whole.mean(axis=axis), whole.std(axis=axis), whole.shape[axis])
        for want, got in zip(expected, mpi_moments(local, axis=axis, comm=comm)):
            print(want, got)
            assert np.allclose(want, got), (want, got)
            print("ok!")


__all__ = ["mpi_mean", "mpi_moments"]
