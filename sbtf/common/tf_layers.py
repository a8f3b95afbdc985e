"""Keras layers that reproduce stable-baselines 2.x network maths and variable names.

Every layer here creates its variables with the names SB2 used inside the layer's scope
(``w``/``b`` for ``linear`` and ``conv``, ``wx``/``wh``/``b`` for the LSTM, ...), so that a
policy's ``named_parameters()`` reads ``model/pi_fc0/w:0`` like an SB2 parameter list. The
``scope`` attribute of a layer is its SB2 scope name.

Each layer knows its own maths in both backends (see ``sbtf.common.nn.network_ops``): ``call`` in TensorFlow and
``numpy_call(weights, x)`` in NumPy for the layers cheap enough to act with in NumPy (dense layers, layer norm); a
layer made of others (``SB2Mlp``) is written once as ``ops_call(x, ops)``. Convolutions have no NumPy form (a NumPy
convolution is slower than one TF call), so a CNN policy acts through TF.
"""
from __future__ import annotations

import contextlib
import inspect
import threading
from typing import Callable, Optional, Sequence

import numpy as np
import keras
import tensorflow as tf

try:  # BLAS thread pools (OpenBLAS spins its threads: on a busy machine a 3136x512 SVD took 32 s instead of 2 s)
    from threadpoolctl import threadpool_limits as _threadpool_limits
except ImportError:  # pragma: no cover - threadpoolctl is a dependency; without it the SVD uses every BLAS thread
    _threadpool_limits = None

from sbtf.common.nn.conv_ops import conv2d
from sbtf.common.nn.network_ops import (TF_OPS, NoNumpyForm, activation_name,  # re-exported: see __all__
                                        get_activation, numpy_activation)


def ortho_init(scale: float = 1.0) -> Callable:
    """
    Orthogonal initializer drawn with NumPy's global RNG (as SB2, so ``set_global_seeds`` seeds it).

    :param scale: (float) gain applied to the orthogonal matrix
    :return: a function ``(shape, dtype=None) -> np.ndarray``
    """

    def _ortho_init(shape: Sequence[int], dtype=None, **_kwargs) -> np.ndarray:
        shape = tuple(int(s) for s in shape)
        if len(shape) == 2:
            flat_shape = shape
        elif len(shape) == 4:  # conv kernel (fh, fw, c_in, c_out)
            flat_shape = (int(np.prod(shape[:-1])), shape[-1])
        else:
            raise NotImplementedError(f"ortho_init supports 2-D and 4-D shapes, got {shape}")
        gaussian_noise = np.random.normal(0.0, 1.0, flat_shape)
        u, _, v = _single_threaded_svd(gaussian_noise)
        weights = u if u.shape == flat_shape else v
        weights = weights.reshape(shape)
        return (scale * weights[: shape[0], : shape[1]] if len(shape) == 2 else scale * weights).astype(np.float32)

    return _ortho_init


def _single_threaded_svd(matrix: np.ndarray):
    """``np.linalg.svd(matrix, full_matrices=False)`` on one BLAS thread: the same result, and no spinning BLAS
    threads (an SVD of the Nature CNN's 3136x512 layer: 0.3 CPU-s on one thread, 5 CPU-s and 32 s of wall time on
    two threads of a loaded 2-core machine)."""
    if _threadpool_limits is None:
        return np.linalg.svd(matrix, full_matrices=False)
    with _threadpool_limits(limits=1, user_api="blas"):
        return np.linalg.svd(matrix, full_matrices=False)


class _NumpyInitializer(keras.initializers.Initializer):
    """Wraps a NumPy-array initializer function for Keras."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, shape, dtype=None):
        return tf.constant(self.fn(shape), dtype=tf.float32)


def _constant(value: float) -> keras.initializers.Initializer:
    return keras.initializers.Constant(value)


class SB2Layer(keras.layers.Layer):
    """Base for layers whose variables must carry SB2 names. ``scope`` is the SB2 scope."""

    def __init__(self, scope: str, **kwargs):
        super().__init__(name=kwargs.pop("name", scope.replace("/", "__")), **kwargs)
        self.scope = scope

    def named_variables(self) -> list[tuple[str, tf.Variable]]:
        """(SB2 relative name, variable) pairs in creation order, e.g. ``("pi_fc0/w", var)``."""
        return [(f"{self.scope}/{v.name}", v) for v in self.weights]

    def add_weight(self, *args, **kwargs):
        """Keras' ``add_weight``, first charged to the load budget: a model built from a file cannot create weights
        far beyond the parameters the file stores (``sbtf.common.fileio.load_budget.parameter_budget``)."""
        from sbtf.common.fileio.load_budget import charge_weight

        shape = kwargs.get("shape", args[0] if args else None)
        if shape is not None:
            charge_weight(shape, f"{self.scope}/{kwargs.get('name', '')}")
        return super().add_weight(*args, **kwargs)


class Linear(SB2Layer):
    """``tf_layers.linear``: ``x @ w + b`` with orthogonal ``w`` (gain ``init_scale``)."""

    def __init__(self, scope: str, n_hidden: int, init_scale: float = 1.0, init_bias: float = 0.0, **kwargs):
        super().__init__(scope, **kwargs)
        self.n_hidden = int(n_hidden)
        self.init_scale = init_scale
        self.init_bias = init_bias

    def build(self, input_shape):
        n_input = int(input_shape[-1])
        self.w = self.add_weight(name="w", shape=(n_input, self.n_hidden),
                                 initializer=_NumpyInitializer(ortho_init(self.init_scale)))
        self.b = self.add_weight(name="b", shape=(self.n_hidden,), initializer=_constant(self.init_bias))

    def call(self, inputs):
        return tf.matmul(inputs, self.w) + self.b

    @staticmethod
    def numpy_call(weights: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
        """``call`` in NumPy; ``weights`` are ``[w, b, ...]``."""
        return _affine_np(x, weights[0], weights[1])


def _affine_np(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``x @ w + b`` for a batch of vectors, by the cheapest NumPy route (``np.dot`` and an in-place add on its fresh
    output cost ~0.2 us less per layer than ``x @ w + b``, which matters at one call per environment step)."""
    out = np.dot(x, w)
    out += b
    return out


class GaussianHead(Linear):
    """The ``pi`` head of a diagonal Gaussian policy: mean ``x @ w + b`` and a free ``logstd`` (1, n)."""

    def build(self, input_shape):
        super().build(input_shape)
        self.logstd = self.add_weight(name="logstd", shape=(1, self.n_hidden), initializer="zeros")


class Conv(SB2Layer):
    """``tf_layers.conv``: VALID NHWC convolution, orthogonal kernel ``w`` (fh, fw, c_in, n) and bias ``b`` (n,)."""

    def __init__(self, scope: str, n_filters: int, filter_size, stride: int, init_scale: float = 1.0,
                 pad: str = "VALID", **kwargs):
        super().__init__(scope, **kwargs)
        self.n_filters = int(n_filters)
        # an int (square filters) or (height, width), as SB2's conv
        self.filter_size = tuple(int(k) for k in filter_size) if isinstance(filter_size, (list, tuple)) \
            else int(filter_size)
        self.stride = int(stride)
        self.init_scale = init_scale
        self.pad = pad

    def build(self, input_shape):
        n_input = int(input_shape[-1])
        height, width = self.filter_size if isinstance(self.filter_size, tuple) else (self.filter_size,) * 2
        self.w = self.add_weight(name="w", shape=(height, width, n_input, self.n_filters),
                                 initializer=_NumpyInitializer(ortho_init(self.init_scale)))
        self.b = self.add_weight(name="b", shape=(self.n_filters,), initializer="zeros")

    def call(self, inputs):
        return conv2d(inputs, self.w, self.stride, self.pad) + self.b


class LayerNorm(SB2Layer):
    """``tf.contrib.layers.layer_norm``: variables ``beta`` then ``gamma``; epsilon 1e-12 by default (SB2)."""

    def __init__(self, scope: str = "LayerNorm", epsilon: float = 1e-12, **kwargs):
        super().__init__(scope, **kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        n = int(input_shape[-1])
        self.beta = self.add_weight(name="beta", shape=(n,), initializer="zeros")
        self.gamma = self.add_weight(name="gamma", shape=(n,), initializer="ones")

    def call(self, inputs):
        mean, var = tf.nn.moments(inputs, axes=[-1], keepdims=True)
        return (inputs - mean) * tf.math.rsqrt(var + self.epsilon) * self.gamma + self.beta

    def numpy_call(self, weights: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
        """``call`` in NumPy; ``weights`` are ``[beta, gamma]``."""
        mean = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.epsilon) * weights[1] + weights[0]


class Lstm(SB2Layer):
    """
    ``tf_layers.lstm`` / ``lnlstm``: SB2's LSTM over env-major sequences with done-masks.

    State per env is ``concat[c, h]``; gates are split ``[input, forget, output, candidate]``; with
    ``layer_norm`` the pre-activations and the cell are normalised with epsilon 1e-5 (SB2 ``_ln``).
    """

    def __init__(self, scope: str, n_hidden: int, layer_norm: bool = False, init_scale: float = 1.0, **kwargs):
        super().__init__(scope, **kwargs)
        self.n_hidden = int(n_hidden)
        self.layer_norm = layer_norm
        self.init_scale = init_scale

    def build(self, input_shape):
        n_input = int(input_shape[-1])
        n = self.n_hidden
        ortho = _NumpyInitializer(ortho_init(self.init_scale))
        self.wx = self.add_weight(name="wx", shape=(n_input, 4 * n), initializer=ortho)
        self.wh = self.add_weight(name="wh", shape=(n, 4 * n), initializer=ortho)
        self.b = self.add_weight(name="b", shape=(4 * n,), initializer="zeros")
        if self.layer_norm:
            self.gx = self.add_weight(name="gx", shape=(4 * n,), initializer="ones")
            self.bx = self.add_weight(name="bx", shape=(4 * n,), initializer="zeros")
            self.gh = self.add_weight(name="gh", shape=(4 * n,), initializer="ones")
            self.bh = self.add_weight(name="bh", shape=(4 * n,), initializer="zeros")
            self.gc = self.add_weight(name="gc", shape=(n,), initializer="ones")
            self.bc = self.add_weight(name="bc", shape=(n,), initializer="zeros")

    @staticmethod
    def _ln(x, gain, bias, epsilon=1e-5):
        mean, var = tf.nn.moments(x, axes=[1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + epsilon) * gain + bias

    def cell(self, x_t, mask_t, c, h):
        """One time step; ``mask_t`` (batch,) is the done flag that resets the state before the step."""
        keep = 1.0 - tf.expand_dims(mask_t, 1)
        c = c * keep
        h = h * keep
        if self.layer_norm:
            z = self._ln(tf.matmul(x_t, self.wx), self.gx, self.bx) + self._ln(tf.matmul(h, self.wh), self.gh,
                                                                              self.bh) + self.b
        else:
            z = tf.matmul(x_t, self.wx) + tf.matmul(h, self.wh) + self.b
        i, f, o, u = tf.split(z, 4, axis=1)
        i, f, o, u = tf.sigmoid(i), tf.sigmoid(f), tf.sigmoid(o), tf.tanh(u)
        c = f * c + i * u
        h = o * tf.tanh(self._ln(c, self.gc, self.bc) if self.layer_norm else c)
        return c, h

    def call(self, inputs, masks=None, state=None, n_steps: int = 1):
        """
        :param inputs: (batch = n_env * n_steps, n_input), env-major
        :param masks: (batch,) done flags (float)
        :param state: (n_env, 2 * n_hidden) ``concat[c, h]``
        :param n_steps: (int) sequence length
        :return: (outputs (batch, n_hidden), new state (n_env, 2 * n_hidden))
        """
        n_input = inputs.shape[-1]
        xs = tf.reshape(inputs, (-1, n_steps, n_input))
        ms = tf.reshape(tf.cast(masks, tf.float32), (-1, n_steps))
        c, h = tf.split(state, 2, axis=1)
        outputs = []
        for t in range(n_steps):  # n_steps is static; SB2 unrolls the same way
            c, h = self.cell(xs[:, t], ms[:, t], c, h)
            outputs.append(h)
        out = tf.reshape(tf.stack(outputs, axis=1), (-1, self.n_hidden))
        return out, tf.concat([c, h], axis=1)


class NatureCNN(keras.layers.Layer):
    """``nature_cnn``: three ReLU convs (c1, c2, c3), flatten, ReLU ``fc1`` of 512 units (gain sqrt(2))."""

    def __init__(self, **kwargs):
        super().__init__(name=kwargs.pop("name", "nature_cnn"), **kwargs)
        self.c1 = Conv("c1", 32, 8, 4, init_scale=np.sqrt(2))
        self.c2 = Conv("c2", 64, 4, 2, init_scale=np.sqrt(2))
        self.c3 = Conv("c3", 64, 3, 1, init_scale=np.sqrt(2))
        self.fc1 = Linear("fc1", 512, init_scale=np.sqrt(2))

    def call(self, inputs):
        x = tf.nn.relu(self.c1(inputs))
        x = tf.nn.relu(self.c2(x))
        x = tf.nn.relu(self.c3(x))
        x = tf.reshape(x, (-1, int(np.prod(x.shape[1:]))))
        return tf.nn.relu(self.fc1(x))

    def sb2_layers(self) -> list[SB2Layer]:
        return [self.c1, self.c2, self.c3, self.fc1]


def nature_cnn(scaled_images=None, **kwargs):
    """
    SB2's CNN feature extractor. Called with no tensor it returns the Keras layer; called with a
    tensor it builds the layer and applies it (SB2 call form ``nature_cnn(scaled_images)``). Inside an SB2-style
    ``cnn_extractor`` function (see ``FunctionalCnnExtractor``) it is SB2's function of ``conv`` / ``linear``, so its
    variables join the extractor's (``c1`` ... ``fc1``).
    """
    if scaled_images is not None and _current_functional_extractor() is not None:
        activ = tf.nn.relu
        layer_1 = activ(conv(scaled_images, "c1", n_filters=32, filter_size=8, stride=4, init_scale=np.sqrt(2),
                             **kwargs))
        layer_2 = activ(conv(layer_1, "c2", n_filters=64, filter_size=4, stride=2, init_scale=np.sqrt(2), **kwargs))
        layer_3 = activ(conv(layer_2, "c3", n_filters=64, filter_size=3, stride=1, init_scale=np.sqrt(2), **kwargs))
        return activ(linear(conv_to_fc(layer_3), "fc1", n_hidden=512, init_scale=np.sqrt(2)))
    layer = NatureCNN(**kwargs)
    if scaled_images is None:
        return layer
    return layer(scaled_images)


# --------------------------------------------------------------------------------------------------
# SB2's functional layers (``conv``, ``linear``, ``conv_to_fc``, ``lstm``) and the extractor that traces an SB2
# ``cnn_extractor`` function into a Keras layer.
# --------------------------------------------------------------------------------------------------
_FUNCTIONAL_STACK = threading.local()


def _current_functional_extractor() -> Optional["FunctionalCnnExtractor"]:
    stack = getattr(_FUNCTIONAL_STACK, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def _functional_scope(extractor: "FunctionalCnnExtractor"):
    stack = getattr(_FUNCTIONAL_STACK, "stack", None)
    if stack is None:
        stack = _FUNCTIONAL_STACK.stack = []
    stack.append(extractor)
    try:
        yield
    finally:
        stack.pop()


def _sb2_layer(scope: str, factory: Callable[[], SB2Layer]) -> SB2Layer:
    """The layer of SB2 scope ``scope``: the one the running ``FunctionalCnnExtractor`` owns under that scope, else a
    new one (outside an extractor every call makes new variables, as a fresh TF1 graph would)."""
    extractor = _current_functional_extractor()
    if extractor is None:
        return factory()
    return extractor.sb2_layer(scope, factory)


def conv(input_tensor, scope: str, *, n_filters: int, filter_size, stride: int, pad: str = "VALID",
         init_scale: float = 1.0, data_format: str = "NHWC", one_dim_bias: bool = False):
    """
    SB2's ``tf_layers.conv``: a 2-D convolution with orthogonal weights ``scope/w`` (fh, fw, c_in, n_filters) and a
    bias ``scope/b``. It applies the Keras layer ``Conv`` (so it works on tensors and on Keras symbolic tensors);
    inside a ``cnn_extractor`` function traced by ``FunctionalCnnExtractor`` the layer is created once and reused.

    :param input_tensor: (tf.Tensor) the input, NHWC
    :param scope: (str) the TensorFlow variable scope (``c1`` -> ``model/c1/w:0`` in a policy)
    :param n_filters: (int) the number of filters
    :param filter_size: (int or (int, int)) the filter size (square, or (height, width))
    :param stride: (int) the stride of the convolution
    :param pad: (str) ``"VALID"`` or ``"SAME"``
    :param init_scale: (float) the gain of the orthogonal initialisation
    :param data_format: (str) ``"NHWC"`` only (TensorFlow's CPU convolution has no NCHW kernel)
    :param one_dim_bias: (bool) SB2 stored the bias as (n_filters,) when True, else (1, n_filters, 1, 1); sbtf keeps it
        as (n_filters,) either way (the SB2 reader reshapes stored biases)
    :return: (tf.Tensor) the convolution output
    """
    if data_format != "NHWC":
        raise NotImplementedError(f"conv: data_format {data_format!r} is not supported; sbtf's convolutions take NHWC "
                                  "input.")
    del one_dim_bias  # the bias is stored as (n_filters,) either way
    layer = _sb2_layer(scope, lambda: Conv(scope, n_filters, filter_size, stride, init_scale=init_scale, pad=pad))
    return layer(input_tensor)


def linear(input_tensor, scope: str, n_hidden: int, *, init_scale: float = 1.0, init_bias: float = 0.0):
    """
    SB2's ``tf_layers.linear``: ``x @ w + b`` with orthogonal ``scope/w`` (n_input, n_hidden) and ``scope/b``.

    :param input_tensor: (tf.Tensor) the input (batch, n_input)
    :param scope: (str) the TensorFlow variable scope
    :param n_hidden: (int) the number of output units
    :param init_scale: (float) the gain of the orthogonal initialisation
    :param init_bias: (float) the initial bias
    :return: (tf.Tensor) (batch, n_hidden)
    """
    layer = _sb2_layer(scope, lambda: Linear(scope, n_hidden, init_scale=init_scale, init_bias=init_bias))
    return layer(input_tensor)


def conv_to_fc(input_tensor):
    """
    SB2's ``tf_layers.conv_to_fc``: flattens a convolution output to (batch, features) (works on tensors and on Keras
    symbolic tensors).

    :param input_tensor: (tf.Tensor) (batch, ...)
    :return: (tf.Tensor) (batch, product of the other dimensions)
    """
    n_hidden = int(np.prod([int(d) for d in input_tensor.shape[1:]]))
    return keras.ops.reshape(input_tensor, (-1, n_hidden))


def batch_to_seq(tensor_batch, n_batch: int, n_steps: int, flat: bool = False) -> list:
    """
    SB2's ``a2c.utils.batch_to_seq``: an env-major batch (n_batch * n_steps, ...) as a list of ``n_steps`` tensors
    (n_batch, ...) (``flat``: (n_batch,) each), the input of ``lstm``.

    :param tensor_batch: (tf.Tensor) the batch
    :param n_batch: (int) the number of environments
    :param n_steps: (int) the number of steps per environment
    :param flat: (bool) whether the batch holds scalars
    :return: ([tf.Tensor]) one tensor per step
    """
    shape = (n_batch, n_steps) if flat else (n_batch, n_steps, -1)
    sequence = tf.reshape(tensor_batch, shape)
    return [tf.squeeze(v, axis=1) for v in tf.split(sequence, n_steps, axis=1)]


def seq_to_batch(tensor_sequence: list, flat: bool = False):
    """
    SB2's ``a2c.utils.seq_to_batch``: the inverse of ``batch_to_seq`` (env-major batch).

    :param tensor_sequence: ([tf.Tensor]) one tensor (n_batch, ...) per step
    :param flat: (bool) whether the tensors are (n_batch,)
    :return: (tf.Tensor) (n_batch * n_steps, ...)
    """
    if flat:
        return tf.reshape(tf.stack(tensor_sequence, axis=1), [-1])
    n_hidden = int(tensor_sequence[0].shape[-1])
    return tf.reshape(tf.stack(tensor_sequence, axis=1), [-1, n_hidden])


def lstm(input_tensor: list, mask_tensor: list, cell_state_hidden, scope: str, n_hidden: int,
         init_scale: float = 1.0, layer_norm: bool = False):
    """
    SB2's ``tf_layers.lstm``: an LSTM over a sequence (the lists ``batch_to_seq`` makes), with SB2's variables
    (``scope/wx``, ``wh``, ``b``; with ``layer_norm`` also ``gx``, ``bx``, ``gh``, ``bh``, ``gc``, ``bc``), gate order
    and done-masks (the state is reset before a step whose mask is 1).

    :param input_tensor: ([tf.Tensor]) one (n_env, n_input) tensor per step
    :param mask_tensor: ([tf.Tensor]) one (n_env,) or (n_env, 1) done mask per step
    :param cell_state_hidden: (tf.Tensor) the state (n_env, 2 * n_hidden), ``concat[c, h]``
    :param scope: (str) the TensorFlow variable scope
    :param n_hidden: (int) the number of LSTM units
    :param init_scale: (float) the gain of the orthogonal initialisation
    :param layer_norm: (bool) layer normalisation of the gates and the cell (SB2's ``lnlstm``)
    :return: ([tf.Tensor], tf.Tensor) the outputs per step and the new state
    """
    layer = _sb2_layer(scope, lambda: Lstm(scope, n_hidden, layer_norm=layer_norm, init_scale=init_scale))
    if not layer.built:
        layer.build((None, int(input_tensor[0].shape[-1])))
    cell_state, hidden = tf.split(cell_state_hidden, 2, axis=1)
    outputs = []
    for step_input, mask in zip(input_tensor, mask_tensor):
        cell_state, hidden = layer.cell(step_input, tf.reshape(tf.cast(mask, tf.float32), [-1]), cell_state, hidden)
        outputs.append(hidden)
    return outputs, tf.concat([cell_state, hidden], axis=1)


def lnlstm(input_tensor: list, mask_tensor: list, cell_state, scope: str, n_hidden: int, init_scale: float = 1.0):
    """SB2's ``tf_layers.lnlstm``: ``lstm`` with layer normalisation."""
    return lstm(input_tensor, mask_tensor, cell_state, scope, n_hidden, init_scale=init_scale, layer_norm=True)


class FunctionalCnnExtractor(keras.layers.Layer):
    """
    An SB2 ``cnn_extractor`` *function* (``def custom_cnn(scaled_images, **kwargs)`` written with ``conv``,
    ``linear``, ``conv_to_fc``, ``nature_cnn`` and TensorFlow ops) as a Keras layer. The function is traced once, when
    the layer is built: each ``conv(x, "c1", ...)`` / ``linear(...)`` it calls creates a layer with SB2's variable
    names under its scope (``model/c1/w:0`` in a policy). Later calls run the function again on the same layers, so
    the function must call the same scopes every time (as SB2's graph did). Other Keras layers created inside the
    function would be new on every call: use the functions of this module, or write a Keras layer instead.

    :param function: (callable) ``function(scaled_images, **function_kwargs) -> features`` (batch, n_features)
    :param function_kwargs: (dict) the extra keyword arguments SB2 passed to the extractor (the policy's ``**kwargs``)
    """

    def __init__(self, function: Callable, function_kwargs: Optional[dict] = None, **kwargs):
        super().__init__(name=kwargs.pop("name", getattr(function, "__name__", "cnn_extractor")), **kwargs)
        self.function = function
        self.function_kwargs = dict(function_kwargs or {})
        self._created: list = []            # the SB2 layers, in creation (= SB2 parameter) order
        self._scopes: list = []             # their scopes, same order
        self._used_while_tracing: list = []  # scopes called by the trace (each at most once)
        self._tracing = False

    def sb2_layer(self, scope: str, factory: Callable[[], SB2Layer]) -> SB2Layer:
        """The layer of ``scope`` (created by ``factory`` while the function is traced)."""
        if scope in self._scopes:
            if self._tracing and scope in self._used_while_tracing:
                raise ValueError(f"the cnn_extractor function {self.function.__name__!r} uses the scope {scope!r} "
                                 "twice; each conv / linear / lstm needs its own scope (as in SB2)")
            if self._tracing:
                self._used_while_tracing.append(scope)
            return self._created[self._scopes.index(scope)]
        if not self._tracing:
            raise ValueError(f"the cnn_extractor function {self.function.__name__!r} called scope {scope!r}, which it "
                             "did not create when it was traced; it must build the same layers on every call")
        layer = factory()
        self._created.append(layer)
        self._scopes.append(scope)
        self._used_while_tracing.append(scope)
        return layer

    def build(self, input_shape):
        shape = tuple(1 if d is None else int(d) for d in input_shape)
        self._tracing = True
        try:
            with tf.init_scope(), _functional_scope(self):
                self.function(tf.zeros(shape, tf.float32), **self.function_kwargs)
        finally:
            self._tracing = False
        if not self._created:
            raise ValueError(f"the cnn_extractor function {self.function.__name__!r} created no layer; write it with "
                             "sbtf.common.tf_layers' conv / linear (SB2's functions) or pass a Keras layer")
        self.built = True

    def call(self, inputs):
        with _functional_scope(self):
            return self.function(inputs, **self.function_kwargs)

    def sb2_layers(self) -> list:
        """The SB2-named layers in creation order (the policy's parameter order)."""
        return list(self._created)


def make_cnn_extractor(cnn_extractor, kwargs: dict) -> keras.layers.Layer:
    """
    The Keras layer for a policy's ``cnn_extractor`` argument, in any of its forms: a Keras layer; a Layer class or
    a factory such as ``nature_cnn`` (called with ``kwargs``, returning a layer); or an SB2 function of
    ``scaled_images`` (traced into a ``FunctionalCnnExtractor`` with ``kwargs``).

    :param cnn_extractor: (keras.layers.Layer, type or callable) the extractor
    :param kwargs: (dict) the policy's extra keyword arguments for the extractor
    :return: (keras.layers.Layer) the feature extractor
    """
    if isinstance(cnn_extractor, keras.layers.Layer):
        return cnn_extractor
    if not callable(cnn_extractor):
        raise TypeError(f"Error: cnn_extractor must be a Keras layer, a Layer class or a function of scaled_images, "
                        f"got {cnn_extractor!r}")
    if not isinstance(cnn_extractor, type) and _takes_a_tensor(cnn_extractor):
        return FunctionalCnnExtractor(cnn_extractor, kwargs)
    layer = cnn_extractor(**kwargs)
    if not isinstance(layer, keras.layers.Layer):
        raise TypeError("Error: cnn_extractor must return a Keras layer when called with its keyword arguments "
                        "(e.g. sbtf.common.policies.nature_cnn), or be a function of scaled_images (SB2's form)")
    return layer


def _takes_a_tensor(function: Callable) -> bool:
    """Whether ``function`` has a required positional parameter (SB2's ``cnn_extractor(scaled_images, **kwargs)``)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
               and p.default is inspect.Parameter.empty for p in parameters)


# --------------------------------------------------------------------------------------------------
# Dense layers of the off-policy algorithms (DQN, SAC, TD3, DDPG), with SB2's variable names.
# --------------------------------------------------------------------------------------------------
def glorot_uniform_init() -> Callable:
    """
    Glorot/Xavier uniform initializer drawn with NumPy's global RNG (``set_global_seeds`` seeds it), the
    default of ``tf.layers.dense`` and ``tf.contrib.layers.fully_connected``: U(-l, l), l = sqrt(6 / (in + out)).
    """

    def _glorot(shape: Sequence[int], dtype=None, **_kwargs) -> np.ndarray:
        shape = tuple(int(s) for s in shape)
        fan_in, fan_out = (shape[0], shape[1]) if len(shape) == 2 else (int(np.prod(shape[:-1])), shape[-1])
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return np.random.uniform(-limit, limit, shape).astype(np.float32)

    return _glorot


class Dense(SB2Layer):
    """
    ``tf.layers.dense(x, units, name=scope)``: variables ``kernel`` (in, units) and ``bias`` (units,), glorot-uniform
    kernel, zero bias; ``activation`` (a name or a TF function) is applied to the output.
    """

    kernel_name = "kernel"
    bias_name = "bias"

    def __init__(self, scope: str, units: int, activation=None, kernel_initializer: Optional[Callable] = None,
                 **kwargs):
        super().__init__(scope, **kwargs)
        self.units = int(units)
        self.activation = activation
        self._act = get_activation(activation) if activation is not None else None
        self._np_act = numpy_activation(activation) if activation is not None else None
        self.kernel_initializer = kernel_initializer

    def build(self, input_shape):
        n_input = int(input_shape[-1])
        init = self.kernel_initializer if self.kernel_initializer is not None else glorot_uniform_init()
        self.kernel = self.add_weight(name=self.kernel_name, shape=(n_input, self.units),
                                      initializer=_NumpyInitializer(init))
        self.bias = self.add_weight(name=self.bias_name, shape=(self.units,), initializer="zeros")

    def call(self, inputs):
        # bias_add (not +) lets TensorFlow fuse the product, the bias and a following ReLU into one oneDNN kernel
        out = tf.nn.bias_add(tf.matmul(inputs, self.kernel), self.bias)
        return self._act(out) if self._act is not None else out

    def numpy_call(self, weights: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
        """``call`` in NumPy; ``weights`` are ``[kernel, bias]``."""
        out = _affine_np(x, weights[0], weights[1])
        if self._act is None:
            return out
        if self._np_act is None:
            raise NoNumpyForm(f"the activation {self.activation!r} of {self.scope} has no NumPy form")
        return self._np_act(out)


class FullyConnected(Dense):
    """``tf.contrib.layers.fully_connected(x, n, activation_fn=None)``: variables ``weights`` and ``biases``."""

    kernel_name = "weights"
    bias_name = "biases"


def sb2_layer_norm_scope(index: int) -> str:
    """
    The scope ``tf.contrib.layers.layer_norm`` gets for its ``index``-th call in a scope (LayerNorm, LayerNorm_1...).
    """
    return "LayerNorm" if index == 0 else f"LayerNorm_{index}"


def sb2_fully_connected_scope(index: int) -> str:
    """
    The scope ``fully_connected`` gets for its ``index``-th call in a scope (fully_connected, fully_connected_1...).
    """
    return "fully_connected" if index == 0 else f"fully_connected_{index}"


class SB2Mlp(keras.layers.Layer):
    """
    A stack of hidden layers with SB2's names, ``act(LN?(dense(x)))`` per layer (layer norm before the activation).

    ``style="mlp"`` is SAC/TD3's ``tf_layers.mlp``: ``fc{i}/kernel``, ``fc{i}/bias``; ``style="fully_connected"`` is
    DQN's ``tf.contrib.layers.fully_connected`` stack: ``fully_connected{_i}/weights``, ``/biases``. With
    ``layer_norm``, each dense layer is followed by ``LayerNorm{_i}/beta``, ``/gamma`` (epsilon 1e-12, SB2).

    :param scope: (str) SB2 scope the layer names live in (e.g. ``"pi"`` or ``"action_value"``)
    :param layers: ([int]) hidden layer sizes
    :param act_fun: (callable or str) activation
    :param layer_norm: (bool) layer normalisation after each dense layer
    :param style: (str) ``"mlp"`` or ``"fully_connected"``
    """

    def __init__(self, scope: str, layers: Sequence[int], act_fun, layer_norm: bool = False, style: str = "mlp",
                 **kwargs):
        super().__init__(name=kwargs.pop("name", (scope.replace("/", "__") or "mlp") + "__mlp"), **kwargs)
        if style not in ("mlp", "fully_connected"):
            raise ValueError(f"Unknown SB2Mlp style {style!r}")
        self.scope = scope
        self.layer_sizes = [int(n) for n in layers]
        self.act_fun = act_fun
        self._act = get_activation(act_fun)
        self.layer_norm = bool(layer_norm)
        prefix = f"{scope}/" if scope else ""
        self.dense_layers = []
        self.norm_layers = []
        for i, size in enumerate(self.layer_sizes):
            if style == "mlp":
                self.dense_layers.append(Dense(f"{prefix}fc{i}", size))
            else:
                self.dense_layers.append(FullyConnected(f"{prefix}{sb2_fully_connected_scope(i)}", size))
            if self.layer_norm:
                self.norm_layers.append(LayerNorm(f"{prefix}{sb2_layer_norm_scope(i)}"))

    def build(self, input_shape):
        n_input = int(input_shape[-1])
        for i, layer in enumerate(self.dense_layers):
            layer.build((None, n_input))
            n_input = layer.units
            if self.layer_norm:
                self.norm_layers[i].build((None, n_input))

    def call(self, inputs):
        return self.ops_call(inputs, TF_OPS)

    def ops_call(self, x, ops):
        """The stack in the backend ``ops`` (TF or NumPy)."""
        act = ops.activation(self.act_fun)
        for i, layer in enumerate(self.dense_layers):
            x = ops.layer(layer, x)
            if self.layer_norm:
                x = ops.layer(self.norm_layers[i], x)
            x = act(x)
        return x

    def sb2_layers(self) -> list:
        """The named layers in SB2 creation order (dense, [LayerNorm], dense, ...)."""
        ordered = []
        for i, layer in enumerate(self.dense_layers):
            ordered.append(layer)
            if self.layer_norm:
                ordered.append(self.norm_layers[i])
        return ordered


__all__ = [
    "ortho_init", "SB2Layer", "Linear", "GaussianHead", "Conv", "LayerNorm", "Lstm", "NatureCNN", "nature_cnn", "conv",
    "linear", "conv_to_fc", "batch_to_seq", "seq_to_batch", "lstm", "lnlstm", "FunctionalCnnExtractor",
    "make_cnn_extractor", "glorot_uniform_init", "Dense", "FullyConnected", "sb2_layer_norm_scope",
    "sb2_fully_connected_scope", "SB2Mlp",
    # re-exported from sbtf.common.nn (imported from here by sbtf.common.save_util and older code)
    "TF_OPS", "NoNumpyForm", "activation_name", "get_activation", "numpy_activation", "conv2d",
]
