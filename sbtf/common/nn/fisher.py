"""Fisher-vector products for natural-gradient methods (TRPO): the Hessian of a mean KL divergence times a vector.

At the current parameters the Hessian of ``KL(pi_old || pi_theta)`` (either direction) is the Fisher information
matrix, so ``F v`` is the gradient of ``grad(KL) . v`` (two backward passes, no matrix). Together with
:func:`sbtf.common.cg.conjugate_gradient_tf` this solves ``(F + damping I) s = g`` inside one ``tf.function``.
"""
from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from sbtf.common.tf_util import flatgrad, unflatten_tensor

__all__ = ["hessian_vector_product"]


def hessian_vector_product(scalar_fn: Callable[[], tf.Tensor], variables: Sequence[tf.Variable],
                           flat_vector: tf.Tensor) -> tf.Tensor:
    """
    ``H v`` for the Hessian ``H`` of ``scalar_fn()`` (e.g. the mean KL between the old and the current policy) with
    respect to ``variables``, and ``v`` given flat (TF ops; variables without a gradient contribute zeros).

    :param scalar_fn: () -> scalar tensor, evaluated under the tapes
    :param variables: the variables the Hessian is taken over
    :param flat_vector: the vector, laid out as the variables flattened and concatenated
    :return: (tf.Tensor) ``H v``, flat
    """
    tangents = unflatten_tensor(flat_vector, variables)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            value = scalar_fn()
        grads = inner.gradient(value, variables)
        grad_dot_v = tf.add_n([tf.reduce_sum(g * t) for g, t in zip(grads, tangents) if g is not None])
    return flatgrad(outer.gradient(grad_dot_v, variables), variables)
