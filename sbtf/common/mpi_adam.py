"""Adam over MPI on a flat gradient (stable-baselines 2.x ``common/mpi_adam.py``): a thin all-reduce wrapper around
``sbtf.common.optimizers.Adam``.

Every rank computes a local flat gradient; ``update`` averages it over the ranks (``Allreduce``) and applies the same
Adam step everywhere, so parameters that start equal stay equal (``sync`` broadcasts rank 0's values,
``check_synced`` verifies them every 100 updates, as SB2). The Adam maths and state are ``optimizers.Adam``'s (TF
variables; ``fused=False``: SB2 MpiAdam's own rounding, step size in float64), so the same optimiser can also be
stepped inside a compiled training loop: ``update_tf`` averages the gradient over the ranks in the graph (an
``Allreduce`` wrapped in ``tf.numpy_function``) and applies ``apply_flat_grad``. Works without mpirun and without
mpi4py (a one-process communicator is used).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

from sbtf.common.mpi_util import allreduce_sum, allreduce_tf, get_comm, sync_check
from sbtf.common.optimizers import Adam
from sbtf.common.tf_util import GetFlat, SetFromFlat, flat_size
from sbtf.common.compile.weight_tracking import track_writes


class MpiAdam:
    """
    A parallel MPI implementation of the Adam optimizer (https://arxiv.org/abs/1412.6980) on a flat vector.

    :param var_list: ([tf.Variable]) the variables
    :param beta1: (float) Adam beta1 parameter
    :param beta2: (float) Adam beta2 parameter
    :param epsilon: (float) to help with preventing arithmetic issues
    :param scale_grad_by_procs: (bool) divide the summed gradient by the number of processes (average)
    :param comm: (MPI Communicator) if None, MPI.COMM_WORLD (or a one-process stand-in without MPI)
    :param sess: (None) kept for SB2 compatibility
    """

    def __init__(self, var_list: Sequence, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-08,
                 scale_grad_by_procs: bool = True, comm=None, sess=None):
        self.var_list = list(var_list)
        if not self.var_list:
            raise ValueError("MpiAdam needs at least one variable")
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.epsilon = float(epsilon)
        self.scale_grad_by_procs = scale_grad_by_procs
        self.size = flat_size(self.var_list)
        self.comm = get_comm(comm)
        # SB2 MpiAdam's own arithmetic (not the fused TF1 kernel): DDPG, PPO1, TRPO and GAIL train as they did in SB2
        self.adam = Adam(self.var_list, beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon, name="MpiAdam",
                         fused=False)
        self.getflat = GetFlat(self.var_list)
        self.setfromflat = SetFromFlat(self.var_list)
        # a tracked write: each update marks the acting copies of ``var_list`` stale first
        self._apply_fn = track_writes(tf.function(self.apply_flat_grad, input_signature=[
            tf.TensorSpec((self.size,), tf.float32), tf.TensorSpec((), tf.float32)], autograph=False))

    # ------------------------------------------------------------------ state (SB2 attribute names)
    @property
    def exp_avg(self) -> np.ndarray:
        """Exponential moving average of the gradient (m), flat."""
        return np.concatenate([np.ravel(m.numpy()) for m in self.adam.m])

    @property
    def exp_avg_sq(self) -> np.ndarray:
        """Exponential moving average of the squared gradient (v), flat."""
        return np.concatenate([np.ravel(v.numpy()) for v in self.adam.v])

    @property
    def step_variable(self) -> tf.Variable:
        """The step count as a TF variable (to sequence on inside a compiled loop)."""
        return self.adam.t

    @property
    def step(self) -> int:
        """Number of updates applied so far."""
        return int(self.adam.t.numpy())

    def reset(self) -> None:
        """Zero the moments and the step count."""
        self.adam.reset()

    # ------------------------------------------------------------------ updates
    def apply_flat_grad(self, flat_grad: tf.Tensor, learning_rate) -> tf.Tensor:
        """
        One Adam step with an already averaged flat gradient (TF ops: call it inside a ``tf.function`` to keep a
        whole minibatch loop in one compiled call). Returns the new step count.
        """
        self.adam.apply_flat(flat_grad, learning_rate)
        return self.adam.t.read_value()

    def reduce_grad_tf(self, local_grad: tf.Tensor) -> tf.Tensor:
        """This rank's flat gradient averaged (summed if not ``scale_grad_by_procs``) over the ranks, in TF ops."""
        return allreduce_tf(local_grad, self.comm, mean=self.scale_grad_by_procs)

    def update_tf(self, local_grad: tf.Tensor, learning_rate) -> tf.Tensor:
        """
        ``update`` as TF ops, for a minibatch loop inside one ``tf.function``: the gradient is averaged over the
        ranks in the graph (``allreduce_tf``; nothing to do in one process), then one Adam step is applied.
        """
        return self.apply_flat_grad(self.reduce_grad_tf(local_grad), learning_rate)

    def update(self, local_grad, learning_rate: float) -> None:
        """
        Average ``local_grad`` over the ranks and apply one Adam step.

        :param local_grad: (np.ndarray) this rank's flat gradient
        :param learning_rate: (float) the learning rate of this update
        """
        if self.step % 100 == 0:
            self.check_synced()
        local_grad = np.asarray(local_grad, dtype=np.float32).reshape(-1)
        if local_grad.shape[0] != self.size:
            raise ValueError(f"MpiAdam.update: expected a gradient of {self.size} values, got {local_grad.shape[0]}")
        global_grad = allreduce_sum(local_grad, self.comm)
        if self.scale_grad_by_procs:
            global_grad /= self.comm.Get_size()
        self._apply_fn(global_grad, np.float32(learning_rate))

    def sync(self) -> None:
        """Broadcast rank 0's parameters to every rank."""
        if self.comm.Get_size() == 1:
            return
        theta = np.ascontiguousarray(self.getflat())
        self.comm.Bcast(theta, root=0)
        self.setfromflat(theta)

    def check_synced(self) -> None:
        """Verify that every rank holds rank 0's parameters (raises ``MpiSyncError`` otherwise)."""
        if self.comm.Get_size() == 1:
            return
        sync_check(self.getflat(), name="MpiAdam parameters", comm=self.comm)


__all__ = ["MpiAdam"]
