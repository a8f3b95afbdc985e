"""
The two backends a network is written against: TensorFlow (:data:`TF_OPS`) and NumPy (:class:`NumpyOps`).

A policy writes each network once, as a function of a backend ``ops``: layers are called as ``ops.layer(layer, x)``,
activations are ``ops.activation(fn)``, and the few array operations a network needs (``concat``, ``tanh``, ``clip``,
``flatten``, ``one_hot``, ``standardize`` by running statistics, ...) are methods of ``ops``. With :data:`TF_OPS` the
function is the TensorFlow maths (training, export, the compiled acting call); with a :class:`NumpyOps` bound to NumPy
copies of the weights it runs in NumPy.

A layer offers a NumPy form with ``numpy_call(weights, x)`` (``weights``: NumPy arrays of ``layer.weights`` in that
order); a layer made of other layers offers ``ops_call(x, ops)``. A layer with neither, or an activation without a
NumPy twin, raises :class:`NoNumpyForm` in the NumPy backend.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional, Sequence

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.input import preprocess_obs_np, preprocess_obs_tf


_ZERO32 = np.float32(0)

# Activations: stored by name in saved files, evaluated in NumPy for fast acting.
_NP_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, _ZERO32),  # a float32 zero: no dtype resolution per call
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "softplus": lambda x: np.logaddexp(0, x),
    "linear": lambda x: x,
    "identity": lambda x: x,
    "leaky_relu": lambda x: np.where(x > 0, x, 0.2 * x),
    "selu": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(np.minimum(x, 0))),
}

_TF_ACTIVATIONS: dict[str, Callable] = {
    "tanh": tf.tanh,
    "relu": tf.nn.relu,
    "sigmoid": tf.sigmoid,
    "elu": tf.nn.elu,
    "softplus": tf.nn.softplus,
    "linear": tf.identity,
    "identity": tf.identity,
    "leaky_relu": tf.nn.leaky_relu,
    "selu": tf.nn.selu,
}


def activation_name(fn: Callable) -> Optional[str]:
    """The registered name of a TF/Keras/NumPy activation function, or None for a custom one."""
    if isinstance(fn, str):
        return fn if fn in _TF_ACTIVATIONS else None
    for name, tf_fn in _TF_ACTIVATIONS.items():
        if fn is tf_fn:
            return name
    aliases = {tf.math.tanh: "tanh", tf.nn.tanh: "tanh", tf.math.sigmoid: "sigmoid", tf.nn.sigmoid: "sigmoid",
               np.tanh: "tanh", keras.activations.tanh: "tanh", keras.activations.relu: "relu",
               keras.activations.sigmoid: "sigmoid", keras.activations.elu: "elu",
               keras.activations.softplus: "softplus", keras.activations.selu: "selu"}
    try:
        return aliases.get(fn)
    except TypeError:
        return None


def get_activation(name_or_fn) -> Callable:
    """The TF function for an activation name (or the function itself)."""
    if isinstance(name_or_fn, str):
        if name_or_fn not in _TF_ACTIVATIONS:
            raise ValueError(f"Unknown activation {name_or_fn!r}; known: {sorted(_TF_ACTIVATIONS)}")
        return _TF_ACTIVATIONS[name_or_fn]
    return name_or_fn


def numpy_activation(fn) -> Optional[Callable[[np.ndarray], np.ndarray]]:
    """The NumPy twin of an activation, or None when there is none (custom function)."""
    name = activation_name(fn)
    return _NP_ACTIVATIONS.get(name) if name else None


class NoNumpyForm(Exception):
    """A layer or activation on an acting path has no NumPy form: the path acts through TF."""


class TFOps:
    """The network maths in TensorFlow (training, export and the compiled acting call)."""

    is_numpy = False

    @staticmethod
    def layer(layer, x):
        """``layer(x)``."""
        return layer(x)

    @staticmethod
    def activation(fn) -> Callable:
        """The TF function of an activation (a name or a function)."""
        return get_activation(fn)

    @staticmethod
    def weight(layer, name: str):
        """The variable ``name`` of ``layer``."""
        return getattr(layer, name)

    @staticmethod
    def preprocess(obs, ob_space: gym.Space, scale: bool = False):
        return preprocess_obs_tf(obs, ob_space, scale)

    @staticmethod
    def flatten(x):
        """(batch, ...) -> (batch, n)."""
        return tf.reshape(x, (-1, int(np.prod(x.shape[1:]))))

    @staticmethod
    def concat(xs: Sequence):
        """Concatenation on the last axis."""
        return tf.concat(list(xs), axis=-1)

    @staticmethod
    def mean_last(x):
        """Mean over the last axis, kept as an axis of size 1."""
        return tf.reduce_mean(x, axis=-1, keepdims=True)

    tanh = staticmethod(tf.tanh)
    exp = staticmethod(tf.exp)
    log = staticmethod(tf.math.log)
    clip = staticmethod(tf.clip_by_value)

    @staticmethod
    def as_float(x):
        return tf.cast(x, tf.float32)

    @staticmethod
    def one_hot(indices, depth: int):
        """Float32 one-hot rows, shape (n, depth), of integer ``indices`` (any shape, flattened)."""
        return tf.one_hot(tf.cast(tf.reshape(indices, (-1,)), tf.int32), depth, dtype=tf.float32)

    @staticmethod
    def standardize(x, stats):
        """``(x - stats.mean) / stats.std`` with running statistics (e.g. a ``RunningMeanStd``) as they are now."""
        return (x - stats.mean) / stats.std


#: the TensorFlow backend (stateless: one instance serves every network)
TF_OPS = TFOps()


class NumpyOps:
    """
    The network maths in NumPy on copies of the weights. ``bound`` maps ``id(layer)`` to ``f(x)``: ``layer.numpy_call``
    with the layer's weight arrays bound (a leaf layer), or ``layer.ops_call`` with this backend bound (a layer made of
    others; see ``bind_composite``). ``named`` maps ``id(layer)`` to ``{variable name: array}`` (for ``weight``).
    """

    is_numpy = True

    def __init__(self, bound: Dict[int, Callable[[np.ndarray], np.ndarray]], named: Dict[int, Dict[str, np.ndarray]],
                 activations: Optional[Dict[Any, Callable]] = None):
        self._bound = bound
        self._named = named
        self._activations: Dict[Any, Callable] = {} if activations is None else activations

    def layer(self, layer, x: np.ndarray) -> np.ndarray:
        return self._bound[id(layer)](x)

    def bind_leaf(self, layer, weights: Sequence[np.ndarray], names: Sequence[str]) -> None:
        """Evaluate ``layer`` with ``layer.numpy_call(weights, x)``."""
        self._bound[id(layer)] = functools.partial(layer.numpy_call, weights)
        self._named[id(layer)] = dict(zip(names, weights))

    def bind_composite(self, layer) -> None:
        """Evaluate ``layer`` (made of other layers) with ``layer.ops_call(x, self)``."""
        self._bound[id(layer)] = functools.partial(layer.ops_call, ops=self)

    def activation(self, fn) -> Callable[[np.ndarray], np.ndarray]:
        try:
            return self._activations[fn]
        except (KeyError, TypeError):
            pass
        np_fn = numpy_activation(fn)
        if np_fn is None:
            raise NoNumpyForm(f"the activation {fn!r} has no NumPy form")
        try:
            self._activations[fn] = np_fn
        except TypeError:  # unhashable callable: not cached
            pass
        return np_fn

    def weight(self, layer, name: str) -> np.ndarray:
        return self._named[id(layer)][name]

    @staticmethod
    def preprocess(obs, ob_space: gym.Space, scale: bool = False) -> np.ndarray:
        return preprocess_obs_np(obs, ob_space, scale)

    @staticmethod
    def flatten(x: np.ndarray) -> np.ndarray:
        return x.reshape(x.shape[0], -1)

    @staticmethod
    def concat(xs: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate(xs, axis=-1)

    @staticmethod
    def mean_last(x: np.ndarray) -> np.ndarray:
        return x.mean(axis=-1, keepdims=True)

    tanh = staticmethod(np.tanh)
    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    clip = staticmethod(np.clip)

    @staticmethod
    def as_float(x) -> np.ndarray:
        return np.asarray(x, dtype=np.float32)

    @staticmethod
    def one_hot(indices, depth: int) -> np.ndarray:
        rows = np.asarray(indices).reshape(-1).astype(np.intp, copy=False)
        out = np.zeros((len(rows), depth), np.float32)
        out[np.arange(len(rows)), rows] = 1.0
        return out

    @staticmethod
    def standardize(x: np.ndarray, stats) -> np.ndarray:
        """The statistics are read from ``stats.mean_np()`` / ``stats.std_np()`` (not weights: no weight version)."""
        return (x - stats.mean_np()) / stats.std_np()


__all__ = ["NoNumpyForm", "TFOps", "TF_OPS", "NumpyOps", "activation_name", "get_activation", "numpy_activation"]
