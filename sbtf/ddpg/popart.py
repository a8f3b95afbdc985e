"""Pop-Art (https://arxiv.org/abs/1602.07714) for DDPG: when the return statistics move, the critics' output layers
are rescaled so that their denormalised outputs do not change (inside compiled functions)."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import tensorflow as tf

from sbtf.common.mpi_running_mean_std import RunningMeanStd


def rescale_critic_outputs(networks: Sequence, ret_rms: RunningMeanStd, old_mean, old_std) -> None:
    """``qf_output`` of each network: ``W <- W * old_std / new_std``, ``b <- (b * old_std + old_mean - new_mean) /
    new_std`` (the new statistics are ``ret_rms``'s current ones)."""
    new_mean, new_std = ret_rms.mean, ret_rms.std
    for net in networks:
        kernel, bias = net.qf_output_variables()
        kernel.assign(kernel * old_std / new_std)
        bias.assign((bias * old_std + old_mean - new_mean) / new_std)


def update_return_statistics(ret_rms: RunningMeanStd, target_q, allreduce_sum: Optional[Callable] = None) -> None:
    """Add the target Q values to the return statistics (in the graph); ``allreduce_sum`` sums them over the MPI
    ranks first."""
    if allreduce_sum is None:
        ret_rms.update_tf(target_q)
        return
    data = tf.cast(tf.reshape(target_q, (-1,)), tf.float64)
    totals = allreduce_sum(tf.stack([tf.reduce_sum(data), tf.reduce_sum(tf.square(data)),
                                     tf.cast(tf.size(data), tf.float64)]))
    ret_rms.add_sums_tf(totals[0], totals[1], totals[2])


__all__ = ["rescale_critic_outputs", "update_return_statistics"]
