"""
Cheap calls into compiled TF functions from a Python hot loop.

``ConcreteFunction.__call__`` re-binds and checks its arguments on every call, and ``tf.constant`` goes through
several layers of conversion; for train steps that take a millisecond or less that overhead is most of the cost.
These helpers keep one tensor per input and skip the re-checking where TF exposes the flat call.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from sbtf.common.compile.weight_tracking import TrackedFunction, mirrors_of, variables_written_by

try:  # the cheap constructor of eager tensors (what tf.constant calls after several layers of checks)
    from tensorflow.python.eager import context as _tf_context
    from tensorflow.python.framework.ops import EagerTensor as _EagerTensor
except ImportError:  # pragma: no cover - other TF versions
    _EagerTensor = None
    _tf_context = None

try:  # whether a gradient tape or forward accumulator is active (the call-op route below records no gradients)
    from tensorflow.python.eager import record as _tf_record
    from tensorflow.python.eager import cancellation as _tf_cancellation
except ImportError:  # pragma: no cover - other TF versions
    _tf_record = None
    _tf_cancellation = None


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


# ---------------------------------------------------------------------------------------------------------------
# When sbtf uses XLA (docs/benchmarks.md, "When sbtf uses XLA")
# ---------------------------------------------------------------------------------------------------------------
#: environment variable overriding the decision for every train step: ``auto`` (the rule), ``on`` or ``off``
XLA_ENV_VAR = "SBTF_XLA"


def _layers_of(network) -> list:
    """Every Keras layer inside ``network``, itself included (just ``[network]`` for an object that is not a layer)."""
    flatten = getattr(network, "_flatten_layers", None)
    if callable(flatten):
        try:
            return list(flatten(include_self=True, recursive=True))
        except TypeError:  # pragma: no cover - other Keras versions
            pass
    return [network]


def is_convolution(layer) -> bool:
    """Whether ``layer`` is a convolution: sbtf's ``Conv``, a Keras ``Conv*`` layer or a subclass of either."""
    return any(cls.__name__.startswith(("Conv", "DepthwiseConv", "SeparableConv")) for cls in type(layer).__mro__)


def has_convolution(networks: Iterable) -> bool:
    """Whether any of ``networks`` (policies or other Keras layers) contains a convolution layer."""
    for network in networks:
        if getattr(network, "feature_extraction", None) == "cnn":
            return True
        if any(is_convolution(layer) for layer in _layers_of(network)):
            return True
    return False


def on_gpu() -> bool:
    """Whether TensorFlow places ops on a GPU by default (a GPU is visible)."""
    return bool(tf.config.list_logical_devices("GPU"))


def xla_pays_off(networks: Iterable, gpu: Optional[bool] = None) -> bool:
    """
    The rule deciding whether a train step over ``networks`` is XLA-compiled (when its algorithm asks for XLA):
    **yes, unless a network contains a convolution and the step runs on the CPU.** Measured on CPU: XLA:CPU's
    convolution kernels (forward and gradients) run ~35x slower than TensorFlow's oneDNN kernels (PPO2 Nature-CNN on
    Pong, ``learn(1024)``: 98.5 s with XLA vs 3.3 s without), while XLA fuses the many small ops of MLP steps into a
    few kernels (PPO2 CartPole zoo step: 11.6 vs 14.1 CPU-ms per call). On GPU XLA's convolutions are cuDNN's: kept.

    ``SBTF_XLA=on``/``off`` (environment) overrides the rule, for measurements.

    :param networks: the policies / Keras layers the step computes with
    :param gpu: whether the step runs on a GPU (default: whether TensorFlow sees one)
    """
    forced = _forced_xla()
    if forced is not None:
        return forced
    networks = list(networks)
    # a policy may say itself that XLA does not pay on CPU (``xla_friendly``: e.g. a user's Keras extractor)
    if not has_convolution(networks) and all(getattr(net, "xla_friendly", True) for net in networks):
        return True
    return on_gpu() if gpu is None else bool(gpu)


def _forced_xla() -> Optional[bool]:
    """``SBTF_XLA``: ``on`` -> True, ``off`` -> False, unset/``auto`` -> None (the rule decides)."""
    forced = os.environ.get(XLA_ENV_VAR, "auto").strip().lower()
    if forced in ("auto", ""):
        return None
    if forced not in ("on", "off"):
        raise ValueError(f"{XLA_ENV_VAR}={forced!r}: expected 'auto', 'on' or 'off'")
    return forced == "on"


#: the fewest gradient steps a ``learn()`` call must plan for its train steps to be XLA-compiled. Measured on CPU
#: (docs/benchmarks.md, "When sbtf uses XLA"): XLA's compilation costs 1.3-4 s per train step, and then saves about
#: 0.2-0.25 ms per gradient step of a small MLP (PPO2 minibatches of 32-128, SAC/TD3 64x64): it pays back after
#: 8,000-16,000 gradient steps, so shorter runs (tests, tutorials, the first minutes of a study) skip it.
XLA_MIN_GRADIENT_STEPS = 20_000

_planned_gradient_steps: "contextvars.ContextVar[Optional[int]]" = contextvars.ContextVar(
    "sbtf_planned_gradient_steps", default=None)


@contextlib.contextmanager
def gradient_step_plan(n_gradient_steps: Optional[int]) -> Iterator[None]:
    """
    Within this block, train steps know how many gradient steps the running ``learn()`` plans (None: unknown). A
    ``TrainStep`` that may use XLA uses it only for plans of at least :data:`XLA_MIN_GRADIENT_STEPS` (or unknown
    plans): the compilation would not pay back on a shorter run. The plan is a count, never a timing, so a seeded
    run takes the same path every time.

    :param n_gradient_steps: the gradient steps (minibatch updates) the ``learn()`` call will run, or None
    """
    token = _planned_gradient_steps.set(None if n_gradient_steps is None else int(n_gradient_steps))
    try:
        yield
    finally:
        _planned_gradient_steps.reset(token)


def xla_planned(min_gradient_steps: int = XLA_MIN_GRADIENT_STEPS) -> bool:
    """
    Whether the current plan (:func:`gradient_step_plan`) is long enough for XLA (or unknown), or ``SBTF_XLA=on``.

    :param min_gradient_steps: the shortest plan that pays for the compilation (a step's own measurement)
    """
    forced = _forced_xla()
    if forced is not None:
        return forced
    planned = _planned_gradient_steps.get()
    return planned is None or planned >= min_gradient_steps


def decide_jit_compile(requested: Union[bool, str], networks: Iterable) -> bool:
    """
    Whether to XLA-compile a step. ``requested`` is what the algorithm asks for: ``False`` (never: steps XLA cannot
    compile, or has not been measured to help) or ``True``/``"auto"`` (where :func:`xla_pays_off` says it pays). For
    measurements, the environment variable ``SBTF_XLA`` overrides the rule for the steps that ask for XLA: ``on``
    compiles them all (convolutions on CPU too), ``off`` none of them.
    """
    if isinstance(requested, str) and requested != "auto":
        raise ValueError(f"jit_compile: expected True, False or 'auto', got {requested!r}")
    if not requested:
        return False
    return xla_pays_off(networks)


#: environment variable turning the call-op route of :class:`FastFunction` off (``0``), for measurements
CALL_OP_ENV_VAR = "SBTF_CALL_OP"


def _call_op_route(concrete) -> Optional[tuple]:
    """
    ``(call, pack)``: ``call(flat_inputs)`` runs ``concrete``'s body through an eager ``StatefulPartitionedCall`` op
    and returns its flat outputs, ``pack`` gives them the function's output structure; None where it does not apply.

    A tf.function called eagerly runs its body on TensorFlow's inter-op thread pool while the calling thread waits:
    two context switches per call, 60-130 us on a small VM. TensorFlow runs an eager *op* as a one-node function
    instantiated with its "small function" optimizations (``run_eager_op_as_function``): the function call the op
    makes is inlined into that one-node function, and the whole body then runs on the single-threaded executor, on
    the calling thread, with the same Grappler pipeline. XLA-compiled functions (``_XlaMustCompile``) keep the
    public call: the op route would run them without XLA.
    """
    if os.environ.get(CALL_OP_ENV_VAR, "1").strip() == "0" or _tf_record is None or _tf_context is None:
        return None
    try:
        atomic = concrete._inference_function
        definition = atomic.cached_definition
        functions = [atomic] + list(getattr(atomic, "children", []) or [])
        for function in functions:
            attr = function.cached_definition.attr.get("_XlaMustCompile")
            if attr is not None and attr.b:
                return None
        n_inputs = len(definition.signature.input_arg)
        tout = [tf.as_dtype(arg.type) for arg in definition.signature.output_arg]
        pack_output = atomic.function_type.pack_output
        bound_context = atomic._bound_context
        call_op = tf.raw_ops.StatefulPartitionedCall
    except Exception:  # noqa: BLE001 - another TF version: the public call
        return None
    if not tout:  # the op of a function without outputs returns no tensors to pack
        return None

    def call(args: list):
        if len(args) != n_inputs:
            raise TypeError(f"expected {n_inputs} flat inputs, got {len(args)}")
        options = bound_context.function_call_options
        return call_op(args=args, Tout=tout, f=atomic, config_proto=options.config_proto_serialized,
                       executor_type=options.executor_type or "")

    return call, pack_output


class FastFunction:
    """
    Calls a concrete function with positional tensors. ``ConcreteFunction.__call__`` re-binds and checks the
    arguments against the signature on every call (about 0.1-0.5 ms); the input signature is fixed here, so the
    flat call is used directly when this TF version has it, with the public call as fallback. The flat call does
    not convert dtypes, so NumPy inputs are first given the dtype the signature names (a no-op when they have it).

    Eager calls of a function that is not XLA-compiled go through an eager ``StatefulPartitionedCall`` op, which runs
    the body on the calling thread instead of handing it to TensorFlow's inter-op pool (:func:`_call_op_route`;
    docs/benchmarks.md, "One compiled call costs 150-250 us on this host"): same outputs and variable updates, about
    70-100 us less per call here. Under a gradient tape, in graph mode, inside a cancellation context, or with
    ``SBTF_CALL_OP=0``, the flat call is used.
    """

    def __init__(self, concrete):
        self.concrete = concrete
        self._captured = list(concrete.captured_inputs)
        self._fast = callable(getattr(concrete, "_call_flat", None))
        self._call_op = _call_op_route(concrete) if self._fast else None
        n_args = len(concrete.inputs) - len(self._captured)
        self._dtypes = [t.dtype for t in concrete.inputs[:n_args]]
        self._np_dtypes = [d.as_numpy_dtype if d != tf.string else object for d in self._dtypes]

    @property
    def uses_call_op(self) -> bool:
        """Whether eager calls go through the ``StatefulPartitionedCall`` op (the body runs on the calling thread)."""
        return self._call_op is not None

    def __call__(self, *inputs):
        if len(inputs) != len(self._dtypes):
            raise TypeError(f"expected {len(self._dtypes)} inputs, got {len(inputs)}")
        tensors = [(x if x.dtype == dtype else tf.cast(x, dtype)) if isinstance(x, tf.Tensor)
                   else to_tensor(np.asarray(x, dtype=np_dtype))
                   for x, dtype, np_dtype in zip(inputs, self._dtypes, self._np_dtypes)]
        if self._call_op is not None and _tf_context.executing_eagerly() \
                and not _tf_record.could_possibly_record() and _tf_cancellation.context() is None:
            call, pack = self._call_op
            try:
                outputs = call(tensors + self._captured)
            except (TypeError, ValueError, NotImplementedError):  # rejected before running: the flat call below
                self._call_op = None
            else:
                return pack(outputs)
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


class TrainStep:
    """
    A compiled train step with named inputs and outputs.

    ``fn(**tensors) -> {name: tensor}`` is the algorithm's TF maths (losses, gradient application, loops). The step
    is traced lazily on the first call, with a fixed signature built from ``inputs``; ``n_traces`` counts traces.
    Hidden inside: float32 inputs of static shape are packed into one flat vector in NumPy and unpacked in the
    graph (other inputs cross as their own tensors); float outputs of static shape come back as one flat float32
    vector, viewed per name in NumPy; the flat call of ``FastFunction`` is used.

    Nobody declares which weights ``fn`` changes: the step finds the variables its traced graph writes
    (``sbtf.common.compile.weight_tracking.variables_written_by``) and, before every call, marks the acting copies of
    those variables stale (``written`` lists them). As an optimisation, the copies of the acting paths that mirror them
    ride along: they are read in the graph after ``fn`` and appended to the outputs, then installed at the version
    bumped before the call, so acting after a train step needs no second TF call. Correctness does not depend on
    it: a call interrupted anywhere (Ctrl-C) leaves the copies stale, and acting re-reads them.

    :param fn: the train maths, ``fn(**tensors) -> dict[str, tf.Tensor]``
    :param inputs: ``{name: tf.TensorSpec}``, the inputs ``fn`` takes
    :param jit_compile: compile with XLA: ``True``/``"auto"`` where it pays (:func:`xla_pays_off` on ``networks``:
        not for convolutions on CPU; and only in ``learn()`` calls that plan enough gradient steps,
        :func:`gradient_step_plan`), ``False`` never; ``self.xla_allowed`` is the first decision, ``self.jit_compile``
        the one for the current plan
    :param networks: the networks the step computes with (only for the XLA decision: a convolution on CPU says no)
    :param xla_min_gradient_steps: the shortest ``learn()`` plan for which the step uses XLA (default
        :data:`XLA_MIN_GRADIENT_STEPS`; 0: whatever the plan, for steps measured to gain much more than an MLP step)
    :param name: name of the compiled function (shows in traces and profiles)
    :param autograph: convert Python control flow on tensors (``tf.function``'s ``autograph``). Off by default:
        sbtf's steps write their loops and branches as ``tf.while_loop`` / ``tf.cond`` (see
        :func:`sbtf.common.tf_util.repeat_steps`), and autograph's conversion of the Python code a step calls (the
        losses, the networks, the optimizers) cost 1.4-2.7 CPU-s of the first call of the off-policy steps
    """

    def __init__(self, fn: Callable[..., Mapping[str, tf.Tensor]], inputs: Mapping[str, tf.TensorSpec],
                 jit_compile: Union[bool, str] = False, name: str = "train_step",
                 autograph: bool = False, networks: Sequence = (),
                 xla_min_gradient_steps: int = XLA_MIN_GRADIENT_STEPS):
        self.fn = fn
        self.name = name
        self.autograph = bool(autograph)
        self.input_specs: "dict[str, tf.TensorSpec]" = {}
        for key, spec in inputs.items():
            if not isinstance(spec, tf.TensorSpec):
                raise TypeError(f"TrainStep input {key!r}: expected a tf.TensorSpec, got {spec!r}")
            self.input_specs[key] = spec
        self.xla_allowed = decide_jit_compile(jit_compile, list(networks))
        self.xla_min_gradient_steps = int(xla_min_gradient_steps)
        self.n_traces = 0
        packed = [k for k, s in self.input_specs.items() if s.dtype == tf.float32 and s.shape.is_fully_defined()]
        self._packed_names = packed
        self._packed_layout = FlatLayout([self.input_specs[k].shape.as_list() for k in packed])
        self._separate_names = [k for k in self.input_specs if k not in set(packed)]
        self._known_names = frozenset(self.input_specs)
        self._functions: "dict[bool, FastFunction]" = {}  # by jit_compile: one per XLA decision met
        # filled at trace time
        self._flat_outputs: list = []  # [(name, shape)] laid out in the flat output vector
        self._flat_layout: Optional[FlatLayout] = None
        self._separate_outputs: list = []  # names of outputs returned as their own tensors
        self._riders: list = []  # [(acting path, FlatLayout of its weights)] whose fresh copies ride along
        self._update_offset = 0
        self._tracked: Optional[TrackedFunction] = None  # marks the copies of the written variables stale

    # ------------------------------------------------------------------ tracing
    def _graph_fn(self, *tensors):
        self.n_traces += 1
        flat = tensors[0]
        named = dict(zip(self._packed_names, self._packed_layout.unpack_tf(flat)))
        named.update(zip(self._separate_names, tensors[1:]))
        outputs = self.fn(**named)
        if not isinstance(outputs, Mapping):
            raise TypeError(f"TrainStep {self.name!r}: fn must return a dict of named tensors, got "
                            f"{type(outputs).__name__}")
        flat_names, flat_tensors, separate_names, separate_tensors = [], [], [], []
        for key, value in outputs.items():
            value = tf.convert_to_tensor(value)
            if value.dtype == tf.float32 and value.shape.is_fully_defined():
                flat_names.append((key, tuple(value.shape.as_list())))
                flat_tensors.append(value)
            else:
                separate_names.append(key)
                separate_tensors.append(value)
        layout = FlatLayout([shape for _, shape in flat_names])
        # what fn writes, from the graph traced so far (the reads below come after the writes: automatic control
        # dependencies order the ops on one variable as written)
        written = variables_written_by(tf.compat.v1.get_default_graph())
        weight_tensors, riders = [], []
        with tf.init_scope():  # acting paths decide NumPy or TF with a NumPy dry run (eager)
            mirrors = [m for m in mirrors_of(written, resolve_candidates=True)
                       if getattr(m, "install_from_train_steps", False) and m.n_weights]
        for path in mirrors:
            weights = list(path.weights_tf())
            riders.append((path, FlatLayout([w.shape.as_list() for w in weights])))
            weight_tensors.extend(weights)
        self._tracked = TrackedFunction(None, written)
        self._flat_outputs = flat_names
        self._flat_layout = layout
        self._separate_outputs = separate_names
        self._riders = riders
        self._update_offset = layout.size
        all_flat = flat_tensors + weight_tensors
        flat_out = layout.flatten_tf(all_flat) if all_flat else tf.zeros((0,), tf.float32)
        return (flat_out, *separate_tensors)

    @property
    def jit_compile(self) -> bool:
        """Whether a call now runs the XLA-compiled form: XLA allowed and the current plan long enough."""
        return self.xla_allowed and xla_planned(self.xla_min_gradient_steps)

    def _build(self, jit_compile: bool) -> FastFunction:
        signature = [tf.TensorSpec((self._packed_layout.size,), tf.float32)]
        signature += [self.input_specs[k] for k in self._separate_names]
        compiled = tf.function(self._graph_fn, input_signature=signature, jit_compile=jit_compile,
                               autograph=self.autograph, reduce_retracing=False)
        compiled.__name__ = self.name if self.name.isidentifier() else "train_step"
        return FastFunction(compiled.get_concrete_function())

    @property
    def traced(self) -> bool:
        """Whether the step has been traced (it is on its first call)."""
        return bool(self._functions)

    # ------------------------------------------------------------------ calling
    def __call__(self, **values) -> "dict[str, np.ndarray]":
        """Run one step; ``values`` are the named inputs (NumPy arrays, scalars or tensors)."""
        if values.keys() != self._known_names:
            missing = sorted(self._known_names - values.keys())
            extra = sorted(values.keys() - self._known_names)
            raise TypeError(f"TrainStep {self.name!r}: missing inputs {missing}, unknown inputs {extra}")
        jit = self.jit_compile
        function = self._functions.get(jit)
        if function is None:
            function = self._functions[jit] = self._build(jit)
        packed = self._packed_layout.pack([_as_numpy(values[k]) for k in self._packed_names])
        separate = [values[k] for k in self._separate_names]
        # before the call: the acting copies of what the step writes are stale from here on, whatever happens
        self._tracked.bump()
        versions = [path.version.value for path, _ in self._riders]
        results = function(packed, *separate)
        flat = results[0].numpy()
        out: "dict[str, np.ndarray]" = dict(zip((n for n, _ in self._flat_outputs),
                                                self._flat_layout.unpack_np(flat)))
        for key, tensor in zip(self._separate_outputs, results[1:]):
            out[key] = tensor.numpy()
        offset = self._update_offset
        for (path, layout), version in zip(self._riders, versions):
            path.install(layout.unpack_np(flat, offset), version=version)
            offset += layout.size
        return out

    @property
    def written(self) -> list:
        """The variables the traced step writes (empty before its first call)."""
        return [] if self._tracked is None else self._tracked.written


def _as_numpy(value):
    return value.numpy() if isinstance(value, tf.Tensor) else value
