"""In-graph building blocks of the off-policy train steps: target-network updates, the Huber loss and the seeds of
TF's stateless random ops (all usable inside ``tf.function`` and XLA)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf


def tf_variable(var) -> tf.Variable:
    """The ``tf.Variable`` behind a Keras 3 variable (or the variable itself)."""
    return getattr(var, "value", var) if not isinstance(var, tf.Variable) else var


def polyak_update(targets: Sequence, sources: Sequence, tau) -> None:
    """``target = (1 - tau) * target + tau * source`` for each pair (inside tf.function)."""
    for target, source in zip(targets, sources):
        tf_variable(target).assign((1.0 - tau) * target + tau * source)


def copy_variables(targets: Sequence, sources: Sequence) -> None:
    """``target = source`` for each pair (inside tf.function)."""
    for target, source in zip(targets, sources):
        tf_variable(target).assign(source)


def huber_loss(x, delta: float = 1.0):
    """Huber loss (SB2 ``tf_util.huber_loss``): ``0.5 x^2`` if ``|x| < delta`` else ``delta (|x| - 0.5 delta)``."""
    return tf.where(tf.abs(x) < delta, tf.square(x) * 0.5, delta * (tf.abs(x) - 0.5 * delta))


def stateless_seed() -> np.ndarray:
    """A fresh (2,) int64 seed for TF stateless random ops, drawn from NumPy's global generator."""
    return np.random.randint(0, 2 ** 31 - 1, size=(2,)).astype(np.int64)


__all__ = ["tf_variable", "polyak_update", "copy_variables", "huber_loss", "stateless_seed"]
