"""
Which copies of the weights a write makes stale, found by construction.

A policy that acts in NumPy mirrors some of its ``tf.Variable`` s (``sbtf.common.compile.acting.ActingPath``): its
copies carry the :class:`WeightVersion` they were read at, and are re-read when the version moved. Nobody declares which
writes move it:

* a compiled train step (``sbtf.common.compile.fast_call.TrainStep``, or any concrete function wrapped with
  :func:`track_writes`) finds the variables it writes in its traced graph (:func:`variables_written_by`: every op
  that takes a captured variable's handle and is not a read, followed into ``tf.while_loop`` bodies, ``tf.cond``
  branches and nested functions), and bumps the versions mirroring them **before** each call: whatever happens
  during or after the call (a Ctrl-C), the copies are never taken for current while the variables moved;
* the eager writes of the core (:func:`assign_variables`, :func:`variables_changed`: ``load``,
  ``load_parameters`` / ``set_parameters``, ``policy.set_weights``, MPI broadcasts, TRPO's line search,
  ``assign_from_flat``) bump the versions mirroring the variables they write.

A mirror registers the variables it copies (:func:`watch`) when it first reads them; the registry holds variables
and mirrors weakly.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import tensorflow as tf

__all__ = ["WeightVersion", "watch", "add_candidate", "mirrors_of", "versions_of", "variables_changed",
           "assign_variables", "variables_written_by", "track_writes", "TrackedFunction", "generation"]


class WeightVersion:
    """The version of a set of weights, shared by the copies made of them (a plain object: no Keras tracking)."""

    __slots__ = ("value", "__weakref__")

    def __init__(self):
        self.value = 0

    def bump(self) -> int:
        """The weights changed (or are about to): copies read before are stale. Returns the new version."""
        self.value += 1
        return self.value


# ---------------------------------------------------------------------------------------------------------------
# the registry: variable -> the mirrors (objects with a ``version``) that copy it
# ---------------------------------------------------------------------------------------------------------------
_MIRRORS: Dict[int, Tuple["weakref.ref", "weakref.WeakSet"]] = {}
_CANDIDATES: "weakref.WeakSet" = weakref.WeakSet()  # mirrors that have not read their variables yet
_GENERATION = itertools.count(1)
_generation = 0


def generation() -> int:
    """A number that changes whenever the registry changes (callers cache :func:`versions_of` against it)."""
    return _generation


def _changed() -> None:
    global _generation
    _generation = next(_GENERATION)


def watch(variables: Iterable, mirror) -> None:
    """
    ``mirror`` (an object with a ``version`` attribute, a :class:`WeightVersion`) keeps copies of ``variables``:
    every tracked write of one of them bumps ``mirror.version``.
    """
    for var in variables:
        key = _key(var)
        entry = _MIRRORS.get(key)
        if entry is None or not _same(entry[0](), var):
            entry = _MIRRORS[key] = (weakref.ref(var, _forget(key)), weakref.WeakSet())
        entry[1].add(mirror)
    _CANDIDATES.discard(mirror)
    _changed()


def _key(var) -> int:
    """A variable's registry key: its resource handle (a Keras variable and the ``tf.Variable`` inside share it)."""
    handle = getattr(var, "handle", None)
    return id(var) if handle is None else id(handle)


def _same(known, var) -> bool:
    """Whether the registered variable ``known`` is ``var`` (a variable, or a variable's resource handle)."""
    if known is None:
        return False
    handle = getattr(known, "handle", None)
    return known is var or handle is var or handle is getattr(var, "handle", False)


def _forget(key: int):
    def callback(ref) -> None:
        entry = _MIRRORS.get(key)
        if entry is not None and entry[0] is ref:
            del _MIRRORS[key]
    return callback


def add_candidate(mirror) -> None:
    """
    ``mirror`` will copy some variables but has not read them yet. ``mirror.candidate_variables()`` names the
    variables it may copy and ``mirror.start_watching()`` makes it decide (and :func:`watch` them): a train step
    traced before the mirror first acts can then still return fresh copies for it (an optimisation only: a mirror
    that never watched anything reads its variables when first used anyway).
    """
    _CANDIDATES.add(mirror)


def mirrors_of(variables: Iterable, resolve_candidates: bool = False) -> list:
    """The mirrors copying any of ``variables`` (with ``resolve_candidates``, candidates that may copy them first
    decide, see :func:`add_candidate`)."""
    variables = list(variables)
    ids = {_key(v) for v in variables}
    if resolve_candidates:
        for mirror in list(_CANDIDATES):
            try:
                candidates = {_key(v) for v in mirror.candidate_variables()}
            except Exception:  # noqa: BLE001 - a half-built policy: it decides when it first acts
                continue
            if candidates & ids:
                mirror.start_watching()
                _CANDIDATES.discard(mirror)
    found: dict = {}
    for var in variables:
        entry = _MIRRORS.get(_key(var))
        if entry is not None and _same(entry[0](), var):
            for mirror in list(entry[1]):
                found.setdefault(id(mirror), mirror)
    return list(found.values())


def versions_of(variables: Iterable) -> List[WeightVersion]:
    """The distinct versions of the mirrors copying any of ``variables``."""
    versions: dict = {}
    for mirror in mirrors_of(variables):
        versions.setdefault(id(mirror.version), mirror.version)
    return list(versions.values())


def variables_changed(variables: Iterable) -> None:
    """``variables`` were (or are about to be) written: every copy of them is stale."""
    for version in versions_of(variables):
        version.bump()


def assign_variables(pairs: Iterable[Tuple[tf.Variable, object]]) -> None:
    """``var.assign(value)`` for each pair (eagerly), copies of them marked stale first (see the module doc)."""
    pairs = list(pairs)
    variables_changed(var for var, _ in pairs)
    try:
        for var, value in pairs:
            var.assign(value)
    finally:
        variables_changed(var for var, _ in pairs)  # a copy read in between (another thread) is stale too


# ---------------------------------------------------------------------------------------------------------------
# which variables a traced graph writes
# ---------------------------------------------------------------------------------------------------------------
#: ops that take a resource handle and only read it (any other op taking a variable's handle counts as a write)
_READ_OPS = frozenset({
    "ReadVariableOp", "_ReadVariablesOp", "ResourceGather", "ResourceGatherNd", "VariableShape",
    "VarIsInitializedOp", "Identity", "IdentityN", "NoOp", "ResourceReadVariableOp",
})
_CALL_OPS = frozenset({"StatefulPartitionedCall", "PartitionedCall", "TPUPartitionedCall"})
_WHILE_OPS = frozenset({"While", "StatelessWhile", "_While"})
_IF_OPS = frozenset({"If", "StatelessIf", "_If"})
_CASE_OPS = frozenset({"Case", "StatelessCase"})
_DT_RESOURCE = 20  # types_pb2.DT_RESOURCE


def _data_inputs(node) -> List[str]:
    return [name for name in node.input if not name.startswith("^")]


def _callees(node) -> List[Tuple[List[str], int]]:
    """``[(function names, offset)]``: the functions ``node`` runs, and where their arguments start in its inputs."""
    attr = node.attr
    if node.op in _WHILE_OPS:
        return [([attr["body"].func.name, attr["cond"].func.name], 0)]
    if node.op in _IF_OPS:
        return [([attr["then_branch"].func.name, attr["else_branch"].func.name], 1)]
    if node.op in _CASE_OPS:
        return [([f.name for f in attr["branches"].list.func], 1)]
    if node.op in _CALL_OPS or "f" in attr and attr["f"].HasField("func"):
        return [([attr["f"].func.name], 0)]
    return []


class _Body:
    """One graph body (the top-level GraphDef or a FunctionDef) with its naming rules."""

    def __init__(self, nodes, function: bool, args: Dict[str, int]):
        self.nodes = {node.name: node for node in nodes}
        self.function = function
        self.args = args  # source name -> argument index

    def source(self, ref: str, depth: int = 0) -> Optional[int]:
        """The argument index a data input ``ref`` comes from (following identities and loop outputs), or None."""
        if depth > 64:
            return None
        if ref in self.args:
            return self.args[ref]
        parts = ref.split(":")
        name = parts[0]
        index = int(parts[-1]) if len(parts) > 1 else 0
        node = self.nodes.get(name)
        if node is None:
            return None
        inputs = _data_inputs(node)
        if node.op in ("Identity", "StopGradient") and inputs:
            return self.source(inputs[0], depth + 1)
        if (node.op == "IdentityN" or node.op in _WHILE_OPS) and index < len(inputs):
            return self.source(inputs[index], depth + 1)  # output i of a loop is its input i, carried through
        return None


def _written_args(body: _Body, library: dict, memo: dict, active: Set[str]) -> Set[int]:
    written: Set[int] = set()
    for node in body.nodes.values():
        inputs = _data_inputs(node)
        callees = _callees(node)
        if callees:
            for names, offset in callees:
                for name in names:
                    args = _function_writes(name, library, memo, active)
                    positions = range(len(inputs)) if args is None else [arg + offset for arg in args]
                    for position in positions:
                        if position < len(inputs):
                            src = body.source(inputs[position])
                            if src is not None:
                                written.add(src)
            continue
        if node.op in _READ_OPS:
            continue
        for ref in inputs:
            src = body.source(ref)
            if src is not None:
                written.add(src)
    return written


def _function_writes(name: str, library: dict, memo: dict, active: Set[str]) -> Optional[Set[int]]:
    """The resource arguments function ``name`` writes (memoised); None (every argument) for a function whose
    definition is not in the library."""
    if name in memo:
        return memo[name]
    fdef = library.get(name)
    if fdef is None or name in active:
        return None
    active.add(name)
    args = {arg.name: i for i, arg in enumerate(fdef.signature.input_arg) if arg.type == _DT_RESOURCE}
    written = _written_args(_Body(fdef.node_def, True, args), library, memo, active)
    active.discard(name)
    memo[name] = written
    return written


def variables_written_by(graph, variables: Optional[Sequence] = None) -> list:
    """
    What a traced graph (a ``FuncGraph``, also while it is being traced) writes: the captured variables whose handle
    reaches an op that is not a read, directly or through ``tf.while_loop`` / ``tf.cond`` / nested functions. Each
    is given as its variable when known (``variables``, or the ones the graph watched), else as its resource handle
    (the registry takes both).

    :param graph: the ``FuncGraph`` (``concrete_function.graph``)
    :param variables: variables the graph may capture (to return them instead of their handles)
    """
    known = list(graph.variables) if variables is None else list(variables)
    by_handle = {_key(var): var for var in known if getattr(var, "handle", None) is not None}
    placeholders: Dict[str, int] = {}
    captured: List = []
    for external, internal in graph.captures:
        if internal.dtype == tf.resource and getattr(external, "dtype", None) == tf.resource:
            placeholders[internal.op.name] = len(captured)
            captured.append(by_handle.get(id(external), external))
    if not captured:
        return []
    graph_def = graph.as_graph_def()
    library = {f.signature.name: f for f in graph_def.library.function}
    written = _written_args(_Body(graph_def.node, False, placeholders), library, {}, set())
    return [captured[i] for i in sorted(written) if i < len(captured)]


class TrackedFunction:
    """
    A callable around a compiled function that marks the copies of the variables it writes stale before each call
    (see the module doc). ``written`` lists those variables (found in the traced graph on the first call, unless
    given).

    :param function: what to call: a ``tf.function`` with an input signature (traced on the first call), or any
        callable with ``written`` given
    :param written: the variables it writes (default: found in ``function``'s traced graph)
    """

    def __init__(self, function, written: Optional[Sequence] = None):
        self.function = function
        self.written = None if written is None else list(written)  # variables or resource handles
        self._generation = -1
        self._versions: List[WeightVersion] = []

    def bump(self) -> None:
        """Mark the copies of the written variables stale (what each call does first)."""
        if self.written is None:
            concrete = self.function.get_concrete_function()
            self.written = variables_written_by(concrete.graph)
        if self._generation != _generation:
            self._versions = versions_of(self.written)
            self._generation = _generation
        for version in self._versions:
            version.bump()

    def __call__(self, *args, **kwargs):
        self.bump()
        return self.function(*args, **kwargs)

    def __getattr__(self, name: str):
        """Everything else is the wrapped function's (``get_concrete_function``, tracing counts, ...)."""
        if name == "function":  # not set yet (copy / unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.function, name)


def track_writes(function) -> TrackedFunction:
    """
    ``function`` (a ``tf.function`` with an input signature) wrapped so that every call first marks the acting
    copies of the variables it writes stale (found in its traced graph, on the first call).
    """
    return TrackedFunction(function)
