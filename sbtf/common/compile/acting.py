"""
The fast acting path of a policy, derived from its layers.

A policy writes each network once against a backend ``ops`` (see ``sbtf.common.nn.network_ops``). An
:class:`ActingPath` holds the acting functions of one network (``fn(ops, *inputs)``) and finds out, with one dry run
in NumPy on zero weights, whether every layer and activation on them has a NumPy form. If so, the policy acts in
NumPy on copies of the weights (one TF call per environment step costs more than a small network in NumPy); if not
(a user's Keras layer, a CNN), each function is one compiled TF call with a fixed signature (``FastFunction``), which
reads the variables directly.

The copies carry the version of the policy's weights (:class:`WeightVersion`). Nobody bumps it by hand: a path that
acts in NumPy registers the variables it copies (``sbtf.common.compile.weight_tracking.watch``), and every tracked
write of them bumps it -- a compiled train step (``sbtf.common.compile.fast_call.TrainStep``, which finds what it writes
in its traced graph, bumps before its call and returns fresh copies with its outputs), ``load`` / ``load_parameters``,
``policy.set_weights``, MPI broadcasts, ``assign_from_flat`` (see ``docs/architecture.md``, "Acting weights").
Stale copies are refreshed by one compiled read of the path's variables when next used.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.compile.fast_call import FastFunction, FlatLayout
from sbtf.common.nn.network_ops import TF_OPS, NoNumpyForm, NumpyOps, TFOps  # noqa: F401 (TFOps re-exported)
from sbtf.common.compile.weight_tracking import WeightVersion, add_candidate, watch


class _DiscoveringOps(NumpyOps):
    """``NumpyOps`` of a dry run on zero weights: records the layers on the path, fails on one without NumPy form."""

    def __init__(self):
        super().__init__({}, {})
        self.leaves: List[Any] = []
        self.composites: List[Any] = []

    def layer(self, layer, x: np.ndarray) -> np.ndarray:
        key = id(layer)
        if key not in self._bound:
            if callable(getattr(layer, "numpy_call", None)):
                zeros = [np.zeros(tuple(int(d) for d in v.shape), np.float32) for v in layer.weights]
                self.bind_leaf(layer, zeros, _short_names(layer))
                self.leaves.append(layer)
            elif callable(getattr(layer, "ops_call", None)):
                self.bind_composite(layer)
                self.composites.append(layer)
            else:
                raise NoNumpyForm(f"the layer {getattr(layer, 'name', layer)!r} ({type(layer).__name__}) has no "
                                  "NumPy form")
        return super().layer(layer, x)


def _short_names(layer) -> List[str]:
    """The names of a layer's variables without scope (``w``, ``b``, ``logstd`` ...), in ``layer.weights`` order."""
    return [v.name.split("/")[-1].split(":")[0] for v in layer.weights]


#: an acting function: ``fn(ops, *inputs)`` and the ``tf.TensorSpec`` of each input (for the compiled TF call)
ActingFunction = Tuple[Callable[..., Any], Sequence[tf.TensorSpec]]


class ActingPath:
    """
    The acting path of one network of a policy: NumPy when every layer on it has a NumPy form, else one compiled TF
    call per function.

    :param functions: ``{name: (fn(ops, *inputs), input specs)}``; all of them are dry-run to find the layers
    :param version: the policy's weight version
    :param parameter_order: the policy's variables in their saved order (the path's variables follow it)
    :param numpy_allowed: False forces the TF call (e.g. a subclass replaced the TF maths by its own)
    :param install_from_train_steps: whether train steps that write this path's variables return fresh copies of
        them with their outputs (else the path refreshes itself with one compiled read when it is next used)
    """

    def __init__(self, functions: Mapping[str, ActingFunction], version: WeightVersion,
                 parameter_order: Callable[[], Sequence] = lambda: (), numpy_allowed: bool = True,
                 install_from_train_steps: bool = True):
        self._functions = dict(functions)
        self.install_from_train_steps = bool(install_from_train_steps)
        self._version = version
        self._parameter_order = parameter_order
        self._numpy_allowed = bool(numpy_allowed)
        self._resolved = False
        self._uses_numpy = False
        self.variables: list = []  # the variables the NumPy copies mirror (empty on the TF path)
        self._leaves: list = []
        self._composites: list = []
        self._leaf_slots: List[List[int]] = []
        self._leaf_names: List[List[str]] = []
        self._activations: Dict[Any, Callable] = {}  # NumPy twins of activations, shared by the bound backends
        self._layout: Optional[FlatLayout] = None
        self._reader: Optional[FastFunction] = None
        self._tf_calls: Dict[str, FastFunction] = {}
        self._ops: Optional[NumpyOps] = None
        self._arrays: List[np.ndarray] = []
        self._copy_version = -1
        self.n_reads = 0  # compiled reads of the variables (refreshes of stale copies)
        add_candidate(self)  # a train step traced before the first act can still return fresh copies

    @property
    def version(self) -> WeightVersion:
        """The version of the weights this path copies (shared with the other paths of its policy)."""
        return self._version

    def candidate_variables(self) -> list:
        """The variables this path may copy (before it decided: the policy's parameters)."""
        return list(self.variables) if self._resolved else list(self._parameter_order())

    def start_watching(self) -> None:
        """Decide NumPy or TF now (the dry run); a NumPy path then registers the variables it copies."""
        self._resolve()

    # ------------------------------------------------------------------ resolution (one dry run)
    def _resolve(self) -> None:
        if self._resolved:
            return
        self._resolved = True
        if not self._numpy_allowed:
            watch((), self)  # no copies: nothing to watch (and no longer a candidate)
            return
        ops = _DiscoveringOps()
        try:
            for fn, specs in self._functions.values():
                fn(ops, *[_zeros(spec) for spec in specs])
        except NoNumpyForm:
            watch((), self)
            return
        by_id: Dict[int, Any] = {}
        for layer in ops.leaves:
            for var in layer.weights:
                by_id.setdefault(id(var), var)
        ordered = [var for var in self._parameter_order() if id(var) in by_id]
        seen = {id(var) for var in ordered}
        ordered += [var for key, var in by_id.items() if key not in seen]
        index = {id(var): i for i, var in enumerate(ordered)}
        self.variables = ordered
        self._leaves = list(ops.leaves)
        self._composites = list(ops.composites)
        self._leaf_slots = [[index[id(var)] for var in layer.weights] for layer in self._leaves]
        self._leaf_names = [_short_names(layer) for layer in self._leaves]
        self._layout = FlatLayout([tuple(int(d) for d in var.shape) for var in ordered])
        self._uses_numpy = True
        watch(ordered, self)  # every tracked write of these variables bumps this path's version

    @property
    def uses_numpy(self) -> bool:
        """Whether this path acts in NumPy (else through one compiled TF call)."""
        self._resolve()
        return self._uses_numpy

    # ------------------------------------------------------------------ weight copies
    def numpy_ops(self) -> Optional[NumpyOps]:
        """The NumPy backend bound to fresh copies of the weights, or None when the path acts through TF."""
        if self._copy_version != self._version.value:
            self._refresh()
        return self._ops

    def _refresh(self) -> None:
        self._resolve()
        version = self._version.value  # the copies read below are of this version (a write bumps it first)
        if self._uses_numpy:
            if self._reader is None:
                variables = self.variables
                layout = self._layout

                def read():
                    return layout.flatten_tf([tf.identity(v) for v in variables])

                self._reader = FastFunction(tf.function(read, input_signature=[], autograph=False)
                                            .get_concrete_function())
            self.n_reads += 1
            self._bind(self._layout.unpack_np(self._reader().numpy()))
        self._copy_version = version

    def _bind(self, arrays: Sequence[np.ndarray]) -> None:
        self._arrays = list(arrays)
        self._ops = self.ops_for(self._arrays)

    def ops_for(self, arrays: Sequence[np.ndarray]) -> NumpyOps:
        """A NumPy backend on the given copies of ``variables`` (e.g. perturbed weights), in ``variables`` order."""
        self._resolve()
        if not self._uses_numpy:
            raise NoNumpyForm("this acting path has no NumPy form")
        if len(arrays) != len(self.variables):
            raise ValueError(f"expected {len(self.variables)} weight arrays, got {len(arrays)}")
        ops = NumpyOps({}, {}, self._activations)
        for layer, slots, names in zip(self._leaves, self._leaf_slots, self._leaf_names):
            ops.bind_leaf(layer, [arrays[i] for i in slots], names)
        for layer in self._composites:
            ops.bind_composite(layer)
        return ops

    def current_weights(self) -> List[np.ndarray]:
        """The NumPy copies of ``variables`` (fresh), e.g. to perturb them."""
        self.numpy_ops()
        return list(self._arrays)

    def install(self, arrays: Sequence[np.ndarray], version: Optional[int] = None) -> None:
        """
        Install fresh copies of ``variables`` computed elsewhere (a train step).

        :param arrays: the values, in ``variables`` order
        :param version: the weight version they are of (default: the current one); copies of an older version than
            the current one are installed but stay stale (re-read when used)
        """
        if self.uses_numpy:
            self._bind(arrays)
        self._copy_version = self._version.value if version is None else int(version)

    def weights_tf(self) -> list:
        """Inside a compiled step: the values of ``variables`` (after the step's updates), to pass to ``install``."""
        with tf.init_scope():  # the dry run is NumPy (it may read statistics eagerly), also while a step is traced
            uses_numpy = self.uses_numpy
        return [tf.identity(v) for v in self.variables] if uses_numpy else []

    @property
    def n_weights(self) -> int:
        """How many arrays ``install`` takes."""
        return len(self.variables) if self.uses_numpy else 0

    # ------------------------------------------------------------------ acting
    def __call__(self, name: str, *inputs):
        """Run function ``name`` on NumPy inputs; NumPy outputs (a tuple when the function returns several)."""
        ops = self.numpy_ops()
        fn, specs = self._functions[name]
        if ops is not None:
            return fn(ops, *inputs)
        call = self._tf_calls.get(name)
        if call is None:
            call = self._tf_calls[name] = FastFunction(
                tf.function(lambda *args: fn(TF_OPS, *args), input_signature=list(specs), autograph=False)
                .get_concrete_function())
        out = call(*inputs)
        if isinstance(out, (tuple, list)):
            return tuple(t.numpy() for t in out)
        return out.numpy()


def _zeros(spec: tf.TensorSpec) -> np.ndarray:
    shape = tuple(1 if d is None else int(d) for d in spec.shape)
    return np.zeros(shape, spec.dtype.as_numpy_dtype)


__all__ = ["ActingPath", "NoNumpyForm", "NumpyOps", "TFOps", "TF_OPS", "WeightVersion"]
