"""Flat-parameter helpers on TF2 variables (the parts of stable-baselines 2.x ``common/tf_util.py`` that TF2 still
needs).

TRPO's natural-gradient step and MpiAdam work on one flat vector holding a list of variables: ``GetFlat`` reads it,
``SetFromFlat`` writes it (each one compiled call), ``flatgrad`` / ``flatten_tensors`` concatenate gradients (a
missing gradient counts as zeros) and ``unflatten_tensor`` / ``assign_from_flat`` split a flat vector back into
variable shapes inside a ``tf.function``.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import tensorflow as tf

from sbtf.common.compile.weight_tracking import track_writes, variables_changed


def intprod(shape: Sequence[int]) -> int:
    """Product of a shape's entries (1 for a scalar)."""
    return int(np.prod([int(d) for d in shape])) if len(shape) else 1


def numel(var) -> int:
    """Number of elements of a variable or tensor with a fully known shape."""
    shape = var.shape
    if any(d is None for d in shape):
        raise ValueError(f"numel needs a fully known shape, got {shape} for {getattr(var, 'name', var)}")
    return intprod(shape)


def flat_size(var_list: Sequence) -> int:
    """Total number of elements of a list of variables."""
    return int(sum(numel(v) for v in var_list))


def flatten_tensors(tensors: Sequence[Optional[tf.Tensor]], var_list: Sequence) -> tf.Tensor:
    """
    Concatenate ``tensors`` (one per variable, e.g. gradients) into one vector; None stands for zeros of the
    variable's shape (SB2 ``flatgrad`` semantics).
    """
    parts = []
    for tensor, var in zip(tensors, var_list):
        if tensor is None:
            parts.append(tf.zeros((numel(var),), dtype=var.dtype))
        else:
            if isinstance(tensor, tf.IndexedSlices):
                tensor = tf.convert_to_tensor(tensor)
            parts.append(tf.reshape(tensor, [-1]))
    return tf.concat(parts, axis=0)


def flatgrad(grads: Sequence[Optional[tf.Tensor]], var_list: Sequence, clip_norm: Optional[float] = None) -> tf.Tensor:
    """
    The gradients of ``var_list`` as one flat vector (zeros for missing gradients).

    :param grads: ([tf.Tensor]) gradients, e.g. from ``GradientTape.gradient(loss, var_list)``
    :param var_list: ([tf.Variable]) the variables
    :param clip_norm: (float) clip each gradient to this norm first (as SB2)
    """
    if clip_norm is not None:
        grads = [tf.clip_by_norm(g, clip_norm=clip_norm) if g is not None else None for g in grads]
    return flatten_tensors(grads, var_list)


def unflatten_tensor(flat: tf.Tensor, var_list: Sequence) -> list:
    """Split a flat vector into tensors shaped like ``var_list``."""
    sizes = [numel(v) for v in var_list]
    parts = tf.split(flat, sizes) if len(sizes) > 1 else [flat]
    return [tf.reshape(part, v.shape) for part, v in zip(parts, var_list)]


def assign_from_flat(var_list: Sequence, flat: tf.Tensor) -> None:
    """``var.assign(...)`` every variable from its slice of ``flat`` (TF ops; usable inside ``tf.function``). Eagerly,
    a tracked write (the acting copies of the variables are re-read when used); in a graph, the step's own tracking
    sees it."""
    _tracked_eager_write(var_list, lambda: [var.assign(tf.cast(value, var.dtype))
                                            for var, value in zip(var_list, unflatten_tensor(flat, var_list))])


def assign_add_from_flat(var_list: Sequence, flat: tf.Tensor) -> None:
    """``var.assign_add(...)`` every variable from its slice of ``flat`` (tracked like ``assign_from_flat``)."""
    _tracked_eager_write(var_list, lambda: [var.assign_add(tf.cast(value, var.dtype))
                                            for var, value in zip(var_list, unflatten_tensor(flat, var_list))])


def _tracked_eager_write(var_list: Sequence, write) -> None:
    if not tf.executing_eagerly():
        write()
        return
    variables_changed(var_list)
    try:
        write()
    finally:
        variables_changed(var_list)


def minibatch_loop(n_steps, step_fn) -> None:
    """
    Run ``step_fn(k)`` for ``k = 0 .. n_steps - 1`` as a ``tf.while_loop`` (inside ``tf.function``, without needing
    autograph; ``step_fn`` must return an op or tensor to sequence on, e.g. an optimizer's step counter).
    """
    def _body(k):
        with tf.control_dependencies([step_fn(k)]):
            return (k + 1,)

    tf.while_loop(lambda k: k < n_steps, _body, (tf.constant(0),))


def repeat_steps(n_steps: int, step_fn, initial: tuple) -> tuple:
    """
    ``carry = step_fn(k, *carry)`` for ``k = 0 .. n_steps - 1``, one step after the other, as a ``tf.while_loop``
    (inside ``tf.function``, without autograph); returns the final ``carry`` (a tuple of tensors, shapes fixed).
    """
    def _body(k, *carry):
        return (k + 1,) + tuple(step_fn(k, *carry))

    return tuple(tf.while_loop(lambda k, *_: k < n_steps, _body, (tf.constant(0),) + tuple(initial),
                               parallel_iterations=1)[1:])


def get_flat_tensor(var_list: Sequence) -> tf.Tensor:
    """The variables' values as one flat vector (TF ops)."""
    return tf.concat([tf.reshape(v, [-1]) for v in var_list], axis=0)


class GetFlat:
    """
    Read a list of variables as one flat NumPy vector (SB2 ``tf_util.GetFlat``; one compiled call).

    :param var_list: ([tf.Variable]) the variables
    :param sess: (None) kept for SB2 compatibility
    """

    def __init__(self, var_list: Sequence, sess=None):
        self.var_list = list(var_list)
        self.size = flat_size(self.var_list)
        self._fn = tf.function(lambda: get_flat_tensor(self.var_list), input_signature=[], autograph=False)

    def __call__(self) -> np.ndarray:
        return self._fn().numpy()


class SetFromFlat:
    """
    Write a flat vector into a list of variables (SB2 ``tf_util.SetFromFlat``; one compiled call).

    :param var_list: ([tf.Variable]) the variables
    :param dtype: (tf.DType) the vector's dtype
    :param sess: (None) kept for SB2 compatibility
    """

    def __init__(self, var_list: Sequence, dtype=tf.float32, sess=None):
        self.var_list = list(var_list)
        self.size = flat_size(self.var_list)
        self.dtype = tf.as_dtype(dtype)

        @tf.function(input_signature=[tf.TensorSpec((self.size,), self.dtype)], autograph=False)
        def _set(theta):
            assign_from_flat(self.var_list, theta)
            return tf.constant(True)

        self._fn = track_writes(_set)

    def __call__(self, theta) -> None:
        theta = np.asarray(theta, dtype=self.dtype.as_numpy_dtype).reshape(-1)
        if theta.shape[0] != self.size:
            raise ValueError(f"SetFromFlat: expected a vector of {self.size} values, got {theta.shape[0]}")
        self._fn(theta)


def make_assign_fn(targets: Sequence, sources: Sequence):
    """A compiled ``() -> None`` doing ``target.assign(source)`` pairwise (e.g. ``oldpi <- pi``)."""
    targets, sources = list(targets), list(sources)
    if len(targets) != len(sources):
        raise ValueError(f"make_assign_fn: {len(targets)} targets but {len(sources)} sources")
    for t, s in zip(targets, sources):
        if tuple(t.shape) != tuple(s.shape):
            raise ValueError(f"make_assign_fn: shape mismatch {t.shape} vs {s.shape} ({t.name} <- {s.name})")

    @tf.function(input_signature=[], autograph=False)
    def _assign():
        for target, source in zip(targets, sources):
            target.assign(source)
        return tf.constant(True)

    return track_writes(_assign)


__all__ = ["intprod", "numel", "flat_size", "flatten_tensors", "flatgrad", "unflatten_tensor", "assign_from_flat",
           "assign_add_from_flat", "minibatch_loop", "get_flat_tensor", "GetFlat", "SetFromFlat", "make_assign_fn"]


def xla_pays_off(policy: Any) -> bool:
    """
    Whether to XLA-compile a train step of ``policy``: the rule of ``sbtf.common.compile.fast_call.xla_pays_off`` (XLA,
    unless the network has a convolution and runs on the CPU; see docs/benchmarks.md, "When sbtf uses XLA").
    ``TrainStep`` applies the same rule itself to the policies it updates.
    """
    from sbtf.common.compile.fast_call import xla_pays_off as _rule

    return _rule([policy])
