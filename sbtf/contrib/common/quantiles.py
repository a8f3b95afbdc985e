"""The distributional maths QR-DQN and TQC share (TensorFlow, usable inside compiled train steps and XLA).

* :func:`quantile_huber_loss`: sb3-contrib's ``quantile_huber_loss`` (the QR-DQN and TQC papers): for every pair of
  current quantile ``i`` and target quantile ``j``, ``|tau_i - 1{target_j - current_i < 0}| * huber(target_j -
  current_i)`` with the mid-point fractions ``tau_i = (i + 0.5) / n_quantiles``; summed over the current quantiles
  and averaged over the rest (QR-DQN) or averaged over everything (TQC).
* :func:`truncated_quantile_target`: TQC's target: the next-state quantiles of every critic pooled and sorted, the
  ``top_quantiles_to_drop_per_net * n_critics`` largest dropped, the entropy term subtracted, then the one-step
  Bellman backup.
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf


def quantile_midpoints(n_quantiles: int) -> tf.Tensor:
    """The cumulative probabilities ``(i + 0.5) / n_quantiles`` of the quantiles, shape (n_quantiles,)."""
    return (tf.range(n_quantiles, dtype=tf.float32) + 0.5) / float(n_quantiles)


def quantile_huber_loss(current_quantiles: tf.Tensor, target_quantiles: tf.Tensor,
                        cum_prob: Optional[tf.Tensor] = None, sum_over_quantiles: bool = True) -> tf.Tensor:
    """
    The quantile-regression (Huber, kappa = 1) loss of sb3-contrib.

    :param current_quantiles: current quantile estimates, (batch, n_quantiles) (QR-DQN) or
        (batch, n_critics, n_quantiles) (TQC)
    :param target_quantiles: targets (no gradient is taken through them), (batch, n_target_quantiles),
        (batch, 1, n_target_quantiles) or (batch, n_critics, n_target_quantiles)
    :param cum_prob: the cumulative probabilities of the current quantiles, broadcastable to
        (batch, [n_critics,] n_quantiles, 1); None: the mid-points ``(i + 0.5) / n_quantiles``
    :param sum_over_quantiles: sum over the current-quantile axis before averaging (QR-DQN) or average everything
        (TQC)
    :return: the scalar loss
    """
    if current_quantiles.shape.rank != target_quantiles.shape.rank:
        raise ValueError(f"Error: the dimension of current_quantiles ({current_quantiles.shape.rank}) needs to match "
                         f"the dimension of target_quantiles ({target_quantiles.shape.rank}).")
    if current_quantiles.shape.rank not in (2, 3):
        raise ValueError(f"Error: the dimension of current_quantiles ({current_quantiles.shape.rank}) needs to be "
                         "either 2 or 3.")
    if cum_prob is None:
        cum_prob = quantile_midpoints(int(current_quantiles.shape[-1]))
        cum_prob = tf.reshape(cum_prob, (1, -1, 1) if current_quantiles.shape.rank == 2 else (1, 1, -1, 1))
    # pairwise_delta[..., i, j] = target_j - current_i
    pairwise_delta = tf.expand_dims(target_quantiles, -2) - tf.expand_dims(current_quantiles, -1)
    abs_delta = tf.abs(pairwise_delta)
    huber = tf.where(abs_delta > 1.0, abs_delta - 0.5, 0.5 * tf.square(pairwise_delta))
    below = tf.cast(tf.stop_gradient(pairwise_delta) < 0.0, tf.float32)
    loss = tf.abs(cum_prob - below) * huber
    if sum_over_quantiles:
        return tf.reduce_mean(tf.reduce_sum(loss, axis=-2))
    return tf.reduce_mean(loss)


def truncated_quantile_target(next_quantiles: tf.Tensor, n_target_quantiles: int, rewards: tf.Tensor,
                              dones: tf.Tensor, gamma: float, entropy_term: Optional[tf.Tensor] = None) -> tf.Tensor:
    """
    TQC's target quantiles (without gradient).

    :param next_quantiles: the target critics' quantiles at (next state, next action), (batch, n_critics, n_quantiles)
    :param n_target_quantiles: how many of the smallest pooled quantiles are kept
        (``n_quantiles * n_critics - top_quantiles_to_drop_per_net * n_critics``)
    :param rewards: (batch,)
    :param dones: (batch,) 1.0 for a termination (not a time-limit cut)
    :param gamma: the discount factor
    :param entropy_term: ``ent_coef * log_prob(next action)``, (batch,), subtracted from every kept quantile
    :return: (batch, 1, n_target_quantiles), broadcastable against the critics' (batch, n_critics, n_quantiles)
    """
    batch = tf.shape(next_quantiles)[0]
    pooled = tf.sort(tf.reshape(next_quantiles, (batch, -1)), axis=-1)[:, :n_target_quantiles]
    if entropy_term is not None:
        pooled = pooled - entropy_term[:, None]
    target = rewards[:, None] + (1.0 - dones[:, None]) * gamma * pooled
    return tf.stop_gradient(target[:, None, :])


__all__ = ["quantile_midpoints", "quantile_huber_loss", "truncated_quantile_target"]
