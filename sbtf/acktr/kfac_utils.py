"""Helpers of the K-FAC optimizer (stable-baselines 2.x ``acktr/kfac_utils.py``), for TensorFlow 2.

Besides SB2's helpers (``gmatmul``, ``clipout_neg``, ``detect_min_val``, ``factor_reshape``) this module holds
the pure functions that turn recorded layer inputs and back-propagated output gradients into the
Kronecker factors, so that they can be tested on their own:

* ``dense_factors``: for ``s = a W + b`` over a batch of ``B`` rows, ``A = [a, 1]^T [a, 1] / B`` and
  ``G = (B g)^T (B g) / B`` where ``g = dL/ds`` of a loss averaged over the batch (so ``G`` is the mean of the
  per-sample outer products ``g_i g_i^T``);
* ``conv_factors``: SB2's patch extraction for a convolution: the patches of the input
  (``extract_patches`` with the layer's kernel size, stride and padding), flattened to
  ``(B * Oh * Ow, kh * kw * C)`` and divided by ``Oh * Ow``, the homogeneous coordinate ``1 / (Oh * Ow)``,
  ``A = P^T P / B``; the output gradients reshaped to ``(B * Oh * Ow, F)``, multiplied by ``Oh * Ow * B``,
  ``G = g^T g / (B * Oh * Ow)``.
"""
from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf


def gmatmul(tensor_a, tensor_b, transpose_a: bool = False, transpose_b: bool = False, reduce_dim: Optional[int] = None):
    """
    Matrix multiplication of ``a`` and ``b`` along ``reduce_dim`` even when one of them has more than two dims
    (SB2 ``gmatmul``).

    :param tensor_a: (tf.Tensor)
    :param tensor_b: (tf.Tensor)
    :param transpose_a: (bool) if ``a`` needs transposing
    :param transpose_b: (bool) if ``b`` needs transposing
    :param reduce_dim: (int) the dimension multiplied over
    :return: (tf.Tensor) a * b
    """
    if reduce_dim is None:
        raise ValueError("gmatmul needs reduce_dim")
    rank_a, rank_b = len(tensor_a.shape), len(tensor_b.shape)
    if rank_a == 2 and rank_b > 2:
        b_shape = tensor_b.shape
        if reduce_dim != 0:
            b_dims = list(range(rank_b))
            b_dims.remove(reduce_dim)
            b_dims.insert(0, reduce_dim)
            tensor_b = tf.transpose(tensor_b, b_dims)
        b_t_shape = tensor_b.shape
        tensor_b = tf.reshape(tensor_b, [int(b_shape[reduce_dim]), -1])
        result = tf.matmul(tensor_a, tensor_b, transpose_a=transpose_a, transpose_b=transpose_b)
        result = tf.reshape(result, b_t_shape)
        if reduce_dim != 0:
            b_dims = list(range(rank_b))
            b_dims.remove(0)
            b_dims.insert(reduce_dim, 0)
            result = tf.transpose(result, b_dims)
        return result
    if rank_a > 2 and rank_b == 2:
        a_shape = tensor_a.shape
        outer_dim = rank_a - 1
        reduce_dim = rank_a - reduce_dim - 1
        if reduce_dim != outer_dim:
            a_dims = list(range(rank_a))
            a_dims.remove(reduce_dim)
            a_dims.insert(outer_dim, reduce_dim)
            tensor_a = tf.transpose(tensor_a, a_dims)
        a_t_shape = tensor_a.shape
        tensor_a = tf.reshape(tensor_a, [-1, int(a_shape[reduce_dim])])
        result = tf.matmul(tensor_a, tensor_b, transpose_a=transpose_a, transpose_b=transpose_b)
        result = tf.reshape(result, a_t_shape)
        if reduce_dim != outer_dim:
            a_dims = list(range(rank_a))
            a_dims.remove(outer_dim)
            a_dims.insert(reduce_dim, outer_dim)
            result = tf.transpose(result, a_dims)
        return result
    if rank_a == 2 and rank_b == 2:
        return tf.matmul(tensor_a, tensor_b, transpose_a=transpose_a, transpose_b=transpose_b)
    raise ValueError(f"gmatmul: unsupported ranks {rank_a} and {rank_b}")


def clipout_neg(vec, threshold: float = 1e-6):
    """Set to 0 every entry not above ``threshold`` (eigenvalues of a PSD estimate that are noise)."""
    return tf.cast(vec > threshold, vec.dtype) * vec


def detect_min_val(input_mat, var=None, threshold: float = 1e-6, name: str = "", debug: bool = False):
    """
    ``clipout_neg`` of eigenvalues; with ``debug`` also prints the extreme values when their ratio is odd
    (negative eigenvalues), as SB2 did.
    """
    clipped = clipout_neg(input_mat, threshold)
    if debug:
        eigen_min = tf.reduce_min(input_mat)
        eigen_max = tf.reduce_max(input_mat)
        ratio = eigen_max / eigen_min
        odd = tf.logical_not(tf.logical_or(ratio > 0.0, ratio < -500.0))

        def _report():
            tf.print("odd ratio", name, "eigen values!!!", getattr(var, "name", ""), eigen_min, eigen_max, ratio)
            return tf.constant(True)

        tf.cond(odd, _report, lambda: tf.constant(False))
    return clipped


def factor_reshape(eigen_vectors, eigen_values, grad, fac_idx: int = 0, f_type: str = "act"):
    """Reshape ``eigen_values`` so that they broadcast along the gradient's dim of factor ``fac_idx``."""
    rank = len(grad.shape)
    expanded_shape = [1] * rank
    if f_type == "act":
        expanded_shape[fac_idx] = -1
    elif f_type == "grad":
        expanded_shape[rank - fac_idx - 1] = -1
    else:
        raise ValueError(f"f_type must be 'act' or 'grad', got {f_type!r}")
    return eigen_vectors, tf.reshape(eigen_values, expanded_shape)


def _batch_size(tensor) -> tf.Tensor:
    return tf.cast(tf.shape(tensor)[0], tf.float32)


def dense_factors(inputs: Sequence[tf.Tensor], output_grads: Sequence[tf.Tensor], has_bias: bool = True):
    """
    Kronecker factors of a dense layer ``s = a W (+ b)`` (SB2 semantics).

    A layer applied several times (an unrolled sequence) contributes every application: the inputs and the
    output gradients are concatenated along the batch (SB2 did so for gradients summed over several uses).

    :param inputs: ([tf.Tensor]) the layer inputs ``a`` (rows, d_in), one per application
    :param output_grads: ([tf.Tensor]) ``dL/ds`` (rows, d_out) of the sampled Fisher loss, one per application
    :param has_bias: (bool) append the homogeneous coordinate 1 to ``a`` (the bias is factored with ``W``)
    :return: (tf.Tensor, tf.Tensor) ``A`` (d_in [+1], d_in [+1]) and ``G`` (d_out, d_out)
    """
    act = tf.concat([tf.reshape(x, (-1, x.shape[-1])) for x in inputs], axis=0)
    grad = tf.concat([tf.reshape(g, (-1, g.shape[-1])) for g in output_grads], axis=0)
    if has_bias:
        act = tf.concat([act, tf.ones((tf.shape(act)[0], 1), act.dtype)], axis=1)
    cov_a = tf.matmul(act, act, transpose_a=True) / _batch_size(act)
    grad = grad * _batch_size(grad)  # the sampled loss is a batch mean: per-sample gradients
    cov_g = tf.matmul(grad, grad, transpose_a=True) / _batch_size(grad)
    return cov_a, cov_g


def conv_patches(inputs, kernel_size: Sequence[int], strides: int, padding: str):
    """Patches of ``inputs`` (B, H, W, C) for a ``kernel_size`` (kh, kw) convolution: (B, Oh, Ow, kh*kw*C)."""
    return tf.image.extract_patches(inputs, sizes=[1, int(kernel_size[0]), int(kernel_size[1]), 1],
                                    strides=[1, int(strides), int(strides), 1], rates=[1, 1, 1, 1],
                                    padding=padding.upper())


def conv_factors(inputs: Sequence[tf.Tensor], output_grads: Sequence[tf.Tensor], kernel_size: Sequence[int],
                 strides: int, padding: str, has_bias: bool = True):
    """
    Kronecker factors of a 2-D convolution (SB2's patch extraction, see the module docstring).

    :param inputs: ([tf.Tensor]) layer inputs (B, H, W, C), one per application
    :param output_grads: ([tf.Tensor]) ``dL/ds`` (B, Oh, Ow, F) of the sampled Fisher loss, one per application
    :param kernel_size: ((int, int)) kernel height and width
    :param strides: (int) the stride
    :param padding: (str) "VALID" or "SAME"
    :param has_bias: (bool) append the homogeneous coordinate (``1 / (Oh * Ow)``)
    :return: (tf.Tensor, tf.Tensor) ``A`` (kh*kw*C [+1], same) and ``G`` (F, F)
    """
    cov_a = cov_g = None
    act_rows, grad_rows = [], []
    batch = 0.0
    for x, g in zip(inputs, output_grads):
        out_h, out_w = int(g.shape[1]), int(g.shape[2])
        patches = conv_patches(x, kernel_size, strides, padding)
        flat = tf.reshape(patches, (-1, int(patches.shape[-1]))) / float(out_h * out_w)
        if has_bias:
            flat = tf.concat([flat, tf.ones((tf.shape(flat)[0], 1), flat.dtype) / float(out_h * out_w)], axis=1)
        act_rows.append(flat)
        batch = batch + _batch_size(x)
        grad_rows.append(tf.reshape(g, (-1, int(g.shape[-1]))) * float(out_h * out_w))
    act = tf.concat(act_rows, axis=0)
    cov_a = tf.matmul(act, act, transpose_a=True) / batch
    grad = tf.concat(grad_rows, axis=0) * batch
    cov_g = tf.matmul(grad, grad, transpose_a=True) / _batch_size(grad)
    return cov_a, cov_g


def kronecker_precondition(grad, eig_a, vec_a, eig_g, vec_g, damping):
    """
    ``(A (x) G + damping)^-1 vec(grad)`` through the eigenbases of ``A = Q_A diag(d_A) Q_A^T`` and
    ``G = Q_G diag(d_G) Q_G^T``: ``Q_A [(Q_A^T grad Q_G) / (d_A d_G^T + damping)] Q_G^T``.

    :param grad: (tf.Tensor) (d_a, d_g) gradient of the stacked [W; b]
    :param eig_a: (tf.Tensor) eigenvalues of A (already clipped)
    :param vec_a: (tf.Tensor) eigenvectors of A (columns)
    :param eig_g: (tf.Tensor) eigenvalues of G (already clipped)
    :param vec_g: (tf.Tensor) eigenvectors of G (columns)
    :param damping: (float or tf.Tensor) Tikhonov damping added to every eigenvalue product
    :return: (tf.Tensor) the preconditioned gradient, shape of ``grad``
    """
    projected = tf.matmul(tf.matmul(vec_a, grad, transpose_a=True), vec_g)
    projected = projected / (eig_a[:, None] * eig_g[None, :] + damping)
    return tf.matmul(tf.matmul(vec_a, projected), vec_g, transpose_b=True)


__all__ = ["gmatmul", "clipout_neg", "detect_min_val", "factor_reshape", "dense_factors", "conv_patches",
           "conv_factors", "kronecker_precondition"]
