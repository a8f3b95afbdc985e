"""Self-test of :class:`sbtf.common.mpi_running_mean_std.RunningMeanStd` over MPI (what
``python -m stable_baselines.common.mpi_running_mean_std`` ran in stable-baselines 2)::

    mpirun -np 2 python -m sbtf.scripts.common.mpi_running_mean_std

Each rank feeds its own three batches (of different sizes); the statistics every rank holds must then be the mean and
standard deviation of all the ranks' data together. Exits with 1 when they are not. It also runs in one process.
"""
from __future__ import annotations

import sys
from typing import List, Optional

import numpy as np

from sbtf.common.mpi_util import get_comm


def _batches(rank: int) -> List[np.ndarray]:
    rng = np.random.RandomState(1000 + rank)
    return [rng.randn(3 + rank, 1), rng.randn(4 + rank, 1), rng.randn(5 + rank, 1)]


def run_check(verbose: bool = True) -> None:
    """
    Run the check.

    :param verbose: (bool) print both statistics (rank 0)
    :raises AssertionError: when the statistics differ from those of all the data
    """
    from sbtf.common.mpi_running_mean_std import RunningMeanStd  # pylint: disable=import-outside-toplevel

    comm = get_comm()
    rank, size = comm.Get_rank(), comm.Get_size()
    rms = RunningMeanStd(epsilon=0.0, shape=(1,), comm=comm)
    for batch in _batches(rank):
        rms.update(batch)
    everything = np.concatenate([batch for other in range(size) for batch in _batches(other)])
    if verbose and rank == 0:
        print("mean", everything.mean(axis=0), rms.mean_np(), "std", everything.std(axis=0), rms.std_np())
    assert np.allclose(everything.mean(axis=0), rms.mean_np(), atol=1e-5), "running mean differs"
    assert np.allclose(everything.std(axis=0), rms.std_np(), atol=1e-5), "running std differs"


def main(argv: Optional[List[str]] = None) -> int:
    """Run the check; 0 when it passes."""
    del argv
    run_check()
    print("rank ok: RunningMeanStd holds the statistics of every rank's data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
