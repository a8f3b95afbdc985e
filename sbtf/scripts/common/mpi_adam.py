"""Self-test of :class:`sbtf.common.mpi_adam.MpiAdam` over MPI (what ``python -m stable_baselines.common.mpi_adam``
ran in stable-baselines 2)::

    mpirun -np 2 python -m sbtf.scripts.common.mpi_adam

Every rank minimises ``(rank + 1) * (sum(a^2) + sum(sin(b)))`` from the same start; MpiAdam averages the gradients
over the ranks, so every rank must follow exactly the path of a single Adam on the average loss
``(size + 1) / 2 * (...)``. The script prints the losses, checks the parameters against that reference (and that
the ranks agree) and exits with 1 when they differ. It also runs in one process (no mpirun).
"""
from __future__ import annotations

import sys
from typing import List, Optional

import numpy as np

from sbtf.common.mpi_util import get_comm


def run_check(steps: int = 10, learning_rate: float = 1e-2, verbose: bool = True) -> float:
    """
    Run the check.

    :param steps: (int) Adam steps
    :param learning_rate: (float) the step size
    :param verbose: (bool) print the losses (rank 0)
    :return: (float) the largest difference between MpiAdam's parameters and the reference
    :raises AssertionError: when MpiAdam leaves the reference path or the ranks disagree
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from sbtf.common.mpi_adam import MpiAdam  # pylint: disable=import-outside-toplevel

    comm = get_comm()
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.RandomState(0)
    start_a, start_b = rng.randn(3).astype(np.float32), rng.randn(2, 5).astype(np.float32)

    def loss_of(a_var: tf.Variable, b_var: tf.Variable) -> tf.Tensor:
        return tf.reduce_sum(tf.square(a_var)) + tf.reduce_sum(tf.sin(b_var))

    # the reference: one plain Adam (SB2's maths) on the average of the ranks' losses
    scale = (size + 1) / 2.0
    ref = [start_a.astype(np.float64), start_b.astype(np.float64)]
    first, second = [np.zeros_like(x) for x in ref], [np.zeros_like(x) for x in ref]
    for step in range(1, steps + 1):
        grads = [scale * 2 * ref[0], scale * np.cos(ref[1])]
        step_size = learning_rate * np.sqrt(1 - 0.999 ** step) / (1 - 0.9 ** step)
        for i, grad in enumerate(grads):
            first[i] = 0.9 * first[i] + 0.1 * grad
            second[i] = 0.999 * second[i] + 0.001 * grad * grad
            ref[i] = ref[i] - step_size * first[i] / (np.sqrt(second[i]) + 1e-8)

    a_var, b_var = tf.Variable(start_a), tf.Variable(start_b)
    adam = MpiAdam([a_var, b_var], comm=comm)
    adam.sync()
    for step in range(steps):
        with tf.GradientTape() as tape:
            loss = (rank + 1) * loss_of(a_var, b_var)
        grads = tape.gradient(loss, [a_var, b_var])
        adam.update(np.concatenate([g.numpy().ravel() for g in grads]), learning_rate)
        if verbose and rank == 0:
            print(step, float(loss.numpy()))
    adam.check_synced()
    difference = max(float(np.max(np.abs(a_var.numpy() - ref[0]))), float(np.max(np.abs(b_var.numpy() - ref[1]))))
    assert difference < 1e-4, "MpiAdam left the reference Adam path by {}".format(difference)
    return difference


def main(argv: Optional[List[str]] = None) -> int:
    """Run the check; 0 when it passes."""
    del argv
    difference = run_check()
    print("rank ok: MpiAdam follows the reference Adam (max difference {:.2e})".format(difference))
    return 0


if __name__ == "__main__":
    sys.exit(main())
