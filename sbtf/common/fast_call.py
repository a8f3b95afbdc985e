"""
Cheap calls into compiled TF functions from a Python hot loop.

``ConcreteFunction.__call__`` re-binds and checks its arguments on every call, and ``tf.constant`` goes through
several layers of conversion; for train steps that take a millisecond or less that overhead is most of the cost.
These helpers keep one tensor per input and skip the re-checking where TF exposes the flat call.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

try:  # the cheap constructor of eager tensors (what tf.constant calls after several layers of checks)
    from tensorflow.python.eager import context as _tf_context
    from tensorflow.python.framework.ops import EagerTensor as _EagerTensor
except ImportError:  # pragma: no cover - other TF versions
    _EagerTensor = None
    _tf_context = None


def to_tensor(value) -> tf.Tensor:
    """A NumPy array (or tensor) as an eager tensor of the same dtype, by the cheapest route available."""
    if isinstance(value, tf.Tensor):
        return value
    if _EagerTensor is not None:
        try:
            return _EagerTensor(value, _tf_context.context().device_name, None)
        except Exception:  # noqa: BLE001 - fall back to the public API
            pass
    return tf.constant(value)


class FastFunction:
    """
    Calls a concrete function with positional tensors. ``ConcreteFunction.__call__`` re-binds and checks the
    arguments against the signature on every call (about 0.1-0.5 ms); the input signature is fixed here, so the
    flat call is used directly when this TF version has it, with the public call as fallback. The flat call does
    not convert dtypes, so NumPy inputs are first given the dtype the signature names (a no-op when they have it).
    """

    def __init__(self, concrete):
        self.concrete = concrete
        self._captured = list(concrete.captured_inputs)
        self._fast = callable(getattr(concrete, "_call_flat", None))
        n_args = len(concrete.inputs) - len(self._captured)
        self._dtypes = [t.dtype for t in concrete.inputs[:n_args]]
        self._np_dtypes = [d.as_numpy_dtype if d != tf.string else object for d in self._dtypes]

    def __call__(self, *inputs):
        if len(inputs) != len(self._dtypes):
            raise TypeError(f"expected {len(self._dtypes)} inputs, got {len(inputs)}")
        tensors = [(x if x.dtype == dtype else tf.cast(x, dtype)) if isinstance(x, tf.Tensor)
                   else to_tensor(np.asarray(x, dtype=np_dtype))
                   for x, dtype, np_dtype in zip(inputs, self._dtypes, self._np_dtypes)]
        if self._fast:
            try:
                return self.concrete._call_flat(tensors, self._captured)
            except TypeError:
                self._fast = False
        return self.concrete(*tensors)


class FlatLayout:
    """
    Several float32 arrays of fixed shapes laid out in one flat vector: packed in NumPy and unpacked in TF (for
    inputs), or concatenated in TF and viewed in NumPy (for outputs). One tensor crosses the Python/TF boundary
    instead of one per array.

    :param shapes: the shapes, in order
    """

    def __init__(self, shapes: Sequence[Sequence[int]]):
        self.shapes = [tuple(int(d) for d in shape) for shape in shapes]
        self.sizes = [int(np.prod(shape)) if shape else 1 for shape in self.shapes]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64).tolist()
        self.size = int(self.offsets[-1])

    def pack(self, arrays: Sequence) -> np.ndarray:
        out = np.empty(self.size, dtype=np.float32)
        for array, start, end in zip(arrays, self.offsets[:-1], self.offsets[1:]):
            out[start:end] = np.ravel(array)
        return out

    def unpack_tf(self, flat: tf.Tensor) -> list:
        return [tf.reshape(flat[start:end], shape)
                for shape, start, end in zip(self.shapes, self.offsets[:-1], self.offsets[1:])]

    def flatten_tf(self, tensors: Sequence) -> tf.Tensor:
        return tf.concat([tf.reshape(tf.cast(t, tf.float32), [-1]) for t in tensors], axis=0)

    def unpack_np(self, flat: np.ndarray, start: int = 0) -> list:
        return [flat[start + lo:start + hi].reshape(shape)
                for shape, lo, hi in zip(self.shapes, self.offsets[:-1], self.offsets[1:])]
