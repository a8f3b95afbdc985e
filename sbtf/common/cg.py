"""Conjugate gradient for symmetric positive-definite systems ``A x = b`` given only ``x -> A x``.

TRPO solves ``(F + damping * I) x = g`` this way, with ``F`` the Fisher matrix available as Fisher-vector products.
``conjugate_gradient`` (NumPy, stable-baselines 2.x ``common/cg.py``; alias ``cg``) drives any ``f_Ax`` callable,
e.g. one that averages products over MPI ranks; ``conjugate_gradient_tf`` is the same iteration in TensorFlow ops,
to run inside a ``tf.function`` together with the products.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np


def conjugate_gradient(f_Ax: Callable[[np.ndarray], np.ndarray], b_vec: np.ndarray, cg_iters: int = 10,  # noqa: N803
                       callback: Optional[Callable[[np.ndarray], None]] = None, verbose: bool = False,
                       residual_tol: float = 1e-10) -> np.ndarray:
    """
    Conjugate gradient descent for ``A x = b`` (``A`` symmetric positive-definite), from ``x = 0``.

    :param f_Ax: (callable) ``x -> A x``
    :param b_vec: (np.ndarray) the right-hand side
    :param cg_iters: (int) the maximum number of iterations
    :param callback: (callable) called with the current solution before each iteration and at the end
    :param verbose: (bool) print the residual and solution norms per iteration
    :param residual_tol: (float) stop when the squared residual norm falls below this
    :return: (np.ndarray) the approximate solution
    """
    b_vec = np.asarray(b_vec)
    direction = b_vec.copy()
    residual = b_vec.copy()
    x_var = np.zeros_like(b_vec)
    residual_dot_residual = residual.dot(residual)

    fmt_str = "%10i %10.3g %10.3g"
    title_str = "%10s %10s %10s"
    if verbose:
        print(title_str % ("iter", "residual norm", "soln norm"))

    n_iters = 0
    for i in range(int(cg_iters)):
        if callback is not None:
            callback(x_var)
        if verbose:
            print(fmt_str % (i, residual_dot_residual, np.linalg.norm(x_var)))
        if residual_dot_residual < residual_tol:  # already solved (e.g. b == 0): avoid 0 / 0
            break
        z_var = np.asarray(f_Ax(direction))
        v_var = residual_dot_residual / direction.dot(z_var)
        x_var += v_var * direction
        residual -= v_var * z_var
        new_residual_dot_residual = residual.dot(residual)
        mu_val = new_residual_dot_residual / residual_dot_residual
        direction = residual + mu_val * direction
        residual_dot_residual = new_residual_dot_residual
        n_iters = i + 1
        if residual_dot_residual < residual_tol:
            break

    if callback is not None:
        callback(x_var)
    if verbose:
        print(fmt_str % (n_iters, residual_dot_residual, np.linalg.norm(x_var)))
    return x_var


cg = conjugate_gradient


def conjugate_gradient_tf(f_Ax, b_vec, cg_iters: int = 10, residual_tol: float = 1e-10):  # noqa: N803
    """
    ``conjugate_gradient`` in TensorFlow ops (a ``tf.while_loop``; for use inside ``tf.function``, with or without
    autograph; ``f_Ax`` maps a tensor to a tensor).

    :return: (tf.Tensor) the approximate solution
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    b_vec = tf.convert_to_tensor(b_vec)
    tol = tf.constant(residual_tol, b_vec.dtype)
    rdotr = tf.reduce_sum(b_vec * b_vec)

    def _cond(i, x_var, direction, residual, rdotr):
        return tf.logical_and(i < int(cg_iters), rdotr >= tol)

    def _body(i, x_var, direction, residual, rdotr):
        z_var = f_Ax(direction)
        v_var = rdotr / tf.reduce_sum(direction * z_var)
        x_var = x_var + v_var * direction
        residual = residual - v_var * z_var
        new_rdotr = tf.reduce_sum(residual * residual)
        direction = residual + (new_rdotr / rdotr) * direction
        return i + 1, x_var, direction, residual, new_rdotr

    _, x_var, _, _, _ = tf.while_loop(_cond, _body, (tf.constant(0), tf.zeros_like(b_vec), b_vec, b_vec, rdotr))
    return x_var


__all__ = ["conjugate_gradient", "cg", "conjugate_gradient_tf"]
