"""A restricted unpickler for stable-baselines 2.x files (``.pkl`` models, the pickled entries of ``.zip``
models, ``obs_rms.pkl`` / ``ret_rms.pkl`` / ``vecnormalize.pkl``).

Loading an untrusted old file must not run code. ``SB2Unpickler.find_class`` therefore resolves a
name only when it is on an allow-list:

* data: numpy arrays, dtypes and scalars (old ``numpy.core.*`` and new ``numpy._core.*`` paths),
  ``collections.OrderedDict``/``deque``, builtins that are data (``set``, ``frozenset``, ``complex`` ...),
  ``copyreg._reconstructor`` (only for the stand-ins below) and ``_codecs.encode`` (latin-1 only);
* gym spaces (``gym.spaces.box.Box`` ...): recorded as :class:`LegacyObject` and rebuilt as gymnasium
  spaces from their state by :func:`materialize`;
* ``stable_baselines`` classes: policies (kept as :class:`LegacyGlobal` references, mapped to sbtf by
  the converter), noise objects, ``RunningMeanStd``, ``VecNormalize``, ``GoalSelectionStrategy``,
  schedules; algorithm classes (HER's ``model_class``) as references;
* cloudpickle's function machinery (``_make_skel_func``, ``_fill_function``, ``_builtin_type``,
  ``_make_function``, cells, ...): replaced by inert stand-ins that *record* what a pickled function was
  (module, qualname, closure values, constants of its code) without ever building a code object or a
  function; see :class:`LegacyFunction`;
* TensorFlow / NumPy activation functions referenced by name (``act_fun`` in ``policy_kwargs``).

Any other global becomes an :class:`LegacyGlobal` marker class of kind ``"unknown"``: calling or
instantiating it raises :class:`RefusedGlobalError` (a ``pickle.UnpicklingError``) naming it, and
:func:`find_unknown_globals` lets the caller refuse a value that merely refers to it. With
``allow_pickle=True`` names that are not on the list are imported as a normal unpickler would (only for
files you trust).
"""
from __future__ import annotations

import _compat_pickle
import collections
import enum
import importlib
import io
import pickle
import pickletools
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import numpy as np

__all__ = [
    "RefusedGlobalError", "SB2Unpickler", "LegacyGlobal", "LegacyObject", "LegacyFunction", "LegacyCode",
    "LegacyStandIn", "SB2GoalSelectionStrategy", "restricted_loads", "materialize", "find_unknown_globals",
    "pickle_globals", "describe",
]


class RefusedGlobalError(pickle.UnpicklingError):
    """A pickle asked for a class or function that is not on the allow-list."""


def _refusal_message(path: str, action: str) -> str:
    return (f"Refusing to {action} {path!r} while reading a stable-baselines file: it is not on sbtf's allow-list "
            "of data classes, so loading it could run code. If you trust the file, pass allow_pickle=True; to "
            "replace one stored value, pass custom_objects={key: value}.")


# ------------------------------------------------------------------------------------------------
# references to globals that are never called
# ------------------------------------------------------------------------------------------------
class _LegacyGlobalMeta(type):
    """Metaclass of reference markers: a marker can be looked at but never called."""

    def __call__(cls, *args, **kwargs):
        raise RefusedGlobalError(_refusal_message(cls.sb2_path, "call"))

    def __repr__(cls) -> str:
        return f"<stable-baselines file reference {cls.sb2_kind}:{cls.sb2_path}>"


class LegacyGlobal(metaclass=_LegacyGlobalMeta):
    """
    Base of the marker classes that stand for a global named in a file (``module.name``).

    ``sb2_kind`` says what it is: ``"policy"``, ``"algorithm"``, ``"activation"``, ``"function"`` (a
    module-level function such as ``stable_baselines.a2c.utils.linear_schedule``) or ``"unknown"``.
    """

    sb2_module = ""
    sb2_name = ""
    sb2_kind = "unknown"
    sb2_path = ""

    def __new__(cls, *args, **kwargs):  # NEWOBJ on a marker
        raise RefusedGlobalError(_refusal_message(cls.sb2_path, "instantiate"))


_MARKERS: Dict[Tuple[str, str, str], type] = {}


def legacy_global(module: str, name: str, kind: str) -> type:
    """The (cached) marker class for ``module.name``."""
    key = (module, name, kind)
    if key not in _MARKERS:
        _MARKERS[key] = _LegacyGlobalMeta(name.replace(".", "_") or "anonymous", (LegacyGlobal,), {
            "sb2_module": module, "sb2_name": name, "sb2_kind": kind, "sb2_path": f"{module}.{name}",
            "__module__": __name__})
    return _MARKERS[key]


def is_legacy_global(obj: Any, kind: Optional[str] = None) -> bool:
    return isinstance(obj, type) and issubclass(obj, LegacyGlobal) and obj is not LegacyGlobal and (
        kind is None or obj.sb2_kind == kind)


# ------------------------------------------------------------------------------------------------
# objects whose state is recorded
# ------------------------------------------------------------------------------------------------
class LegacyObject:
    """
    Records an allow-listed object of an old file (a gym space, a noise object, ...) as
    ``(kind, module, name, args, state)``; :func:`materialize` turns it into the sbtf/gymnasium object.
    Creating one runs no code of the file.
    """

    sb2_kind = "object"
    sb2_module = ""
    sb2_name = ""

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.args = args
        obj.kwargs = kwargs
        obj.state = {}
        return obj

    def __init__(self, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and (state[0] is None or isinstance(state[0], dict)):
            merged = dict(state[0] or {})  # (dict state, slot state)
            if isinstance(state[1], dict):
                merged.update(state[1])
            state = merged
        self.state = state

    @classmethod
    def path(cls) -> str:
        return f"{cls.sb2_module}.{cls.sb2_name}"

    def __repr__(self) -> str:
        return f"<{self.sb2_kind} {self.path()} state={_short(self.state)}>"


_OBJECT_CLASSES: Dict[Tuple[str, str, str], type] = {}


def legacy_object_class(module: str, name: str, kind: str) -> type:
    key = (module, name, kind)
    if key not in _OBJECT_CLASSES:
        _OBJECT_CLASSES[key] = type(name, (LegacyObject,), {"sb2_kind": kind, "sb2_module": module,
                                                            "sb2_name": name, "__module__": __name__})
    return _OBJECT_CLASSES[key]


class SB2GoalSelectionStrategy(enum.Enum):
    """``stable_baselines.her.replay_buffer.GoalSelectionStrategy`` (pickled as ``GoalSelectionStrategy(value)``)."""

    FUTURE = 0
    FINAL = 1
    EPISODE = 2
    RANDOM = 3


# ------------------------------------------------------------------------------------------------
# cloudpickle stand-ins: record, never build code
# ------------------------------------------------------------------------------------------------
class LegacyCode:
    """What a pickled ``CodeType(...)`` call held (Python 3.5-3.11 layouts); it is never turned into code."""

    _FIELDS = {
        15: ("co_argcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_flags", "co_code",
             "co_consts", "co_names", "co_varnames", "co_filename", "co_name", "co_firstlineno", "co_lnotab",
             "co_freevars", "co_cellvars"),
        16: ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_flags",
             "co_code", "co_consts", "co_names", "co_varnames", "co_filename", "co_name", "co_firstlineno",
             "co_lnotab", "co_freevars", "co_cellvars"),
        18: ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_flags",
             "co_code", "co_consts", "co_names", "co_varnames", "co_filename", "co_name", "co_qualname",
             "co_firstlineno", "co_linetable", "co_exceptiontable", "co_freevars", "co_cellvars"),
    }

    def __init__(self, *args):
        self.args = args
        fields = self._FIELDS.get(len(args), ())
        self.fields = dict(zip(fields, args))

    @property
    def co_name(self) -> str:
        return str(self.fields.get("co_name", "?"))

    @property
    def co_filename(self) -> str:
        return str(self.fields.get("co_filename", "?"))

    @property
    def co_consts(self) -> tuple:
        consts = self.fields.get("co_consts", ())
        return tuple(consts) if isinstance(consts, (tuple, list)) else ()

    def __repr__(self) -> str:
        return f"<code {self.co_name} from {self.co_filename}>"


class _LegacyCell:
    """A closure cell of a pickled function."""

    _EMPTY = object()

    def __init__(self, value: Any = _EMPTY):
        self.value = value

    @property
    def is_empty(self) -> bool:
        return self.value is _LegacyCell._EMPTY


class LegacyFunction:
    """
    Stands for a function that cloudpickle stored *by value* (its bytecode) in an old file.

    The function is never rebuilt nor executed; what it was is kept as data (``module``, ``qualname``,
    ``closure_values``, ``defaults``, ``code.co_consts``) so that known schedule closures
    (``constfn.<locals>.func``, the zoo's ``linear_schedule.<locals>.func``) can be rebuilt as sbtf
    schedules. Calling it raises a RuntimeError that says how to replace it.
    """

    def __init__(self, code: Any = None, base_globals: Any = None, name: Optional[str] = None,
                 defaults: Any = None, closure: Any = None):
        self.code = code
        self.base_globals = base_globals
        self.name = name or (code.co_name if isinstance(code, LegacyCode) else None)
        self.qualname: Optional[str] = None
        self.module: Optional[str] = base_globals if isinstance(base_globals, str) else None
        self.defaults = defaults
        self.doc = None
        self.dict: dict = {}
        self.globals: dict = {}
        self._closure_cells = list(closure) if isinstance(closure, (tuple, list)) else None
        self._closure_values: Optional[list] = None
        self.key = "?"

    # filled by _fill_function / _function_setstate --------------------------------------------
    def _fill(self, state: dict) -> "LegacyFunction":
        if not isinstance(state, dict):
            return self
        if isinstance(state.get("globals"), dict):
            self.globals = state["globals"]
        if "defaults" in state:
            self.defaults = state["defaults"]
        if isinstance(state.get("dict"), dict):
            self.dict = state["dict"]
        if state.get("module") is not None:
            self.module = str(state["module"])
        if state.get("name") is not None:
            self.name = str(state["name"])
        if state.get("qualname") is not None:
            self.qualname = str(state["qualname"])
        if state.get("doc") is not None:
            self.doc = state["doc"]
        if "closure_values" in state and state["closure_values"] is not None:
            self._closure_values = list(state["closure_values"])
        return self

    @property
    def closure_values(self) -> list:
        if self._closure_values is not None:
            return self._closure_values
        if self._closure_cells:
            return [c.value if isinstance(c, _LegacyCell) and not c.is_empty else c for c in self._closure_cells]
        return []

    @property
    def full_name(self) -> str:
        return f"{self.module or '?'}.{self.qualname or self.name or '?'}"

    def code_constants(self) -> list:
        if isinstance(self.code, LegacyCode):
            return [c for c in self.code.co_consts if isinstance(c, (int, float)) and not isinstance(c, bool)]
        return []

    def describe(self) -> str:
        text = f"function {self.full_name} pickled by value"
        values = [v for v in self.closure_values if isinstance(v, (int, float, str, bool, type(None)))]
        if values:
            text += f" (closure values {values})"
        consts = self.code_constants()
        if consts:
            text += f" (constants in its code: {consts})"
        return text

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"{self.key!r} of this stable-baselines file is a {self.describe()}. sbtf does not execute code from "
            f"model files; pass custom_objects={{{self.key!r}: ...}} to give a replacement.")

    def __repr__(self) -> str:
        return f"<LegacyFunction {self.describe()}>"


class _BuiltinTypeStandIn:
    """``cloudpickle._builtin_type(name)``: only code, function, cell and method types are recorded."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args, **kwargs):
        if self.name == "CodeType":
            return LegacyCode(*args)
        if self.name == "FunctionType":
            code, base_globals = (list(args) + [None, None])[:2]
            name = args[2] if len(args) > 2 else None
            defaults = args[3] if len(args) > 3 else None
            closure = args[4] if len(args) > 4 else None
            return LegacyFunction(code, base_globals, name, defaults, closure)
        if self.name == "CellType":
            return _LegacyCell(*args[:1])
        if self.name == "MethodType":
            func = args[0] if args else None
            if isinstance(func, LegacyFunction):
                return func
            return LegacyStandIn("method", f"bound method {describe(func)}")
        raise RefusedGlobalError(_refusal_message(f"types.{self.name}", "build an object of"))

    def __repr__(self) -> str:
        return f"<builtin type stand-in {self.name}>"


def _cp_builtin_type(name: str) -> _BuiltinTypeStandIn:
    return _BuiltinTypeStandIn(str(name))


def _cp_make_skel_func(code: Any, cell_count: Any = 0, base_globals: Any = None) -> LegacyFunction:
    cells = [_LegacyCell() for _ in range(cell_count)] if isinstance(cell_count, int) and cell_count > 0 else None
    return LegacyFunction(code, base_globals, closure=cells)


def _cp_fill_function(*args) -> Any:
    func = args[0] if args else None
    if not isinstance(func, LegacyFunction):
        raise RefusedGlobalError(_refusal_message("cloudpickle._fill_function on a non-function", "call"))
    if len(args) == 2 and isinstance(args[1], dict):  # cloudpickle >= 0.5.3: (func, state)
        return func._fill(args[1])
    if len(args) == 5:  # (func, globals, defaults, dict, closure_values)
        return func._fill({"globals": args[1], "defaults": args[2], "dict": args[3], "closure_values": args[4]})
    if len(args) == 6:  # (func, globals, defaults, dict, module, closure_values)
        return func._fill({"globals": args[1], "defaults": args[2], "dict": args[3], "module": args[4],
                           "closure_values": args[5]})
    return func


def _cp_make_function(code: Any, globals_: Any = None, name: Any = None, argdefs: Any = None,
                      closure: Any = None) -> LegacyFunction:
    return LegacyFunction(code, globals_, name, argdefs, closure)


def _cp_function_setstate(obj: Any, state: Any) -> Any:
    if not isinstance(obj, LegacyFunction):
        raise RefusedGlobalError(_refusal_message("cloudpickle._function_setstate on a non-function", "call"))
    state_dict, slotstate = (state if isinstance(state, tuple) and len(state) == 2 else ({}, {}))
    slotstate = slotstate if isinstance(slotstate, dict) else {}
    fill = {"dict": state_dict if isinstance(state_dict, dict) else {}}
    for key, target in (("__globals__", "globals"), ("__defaults__", "defaults"), ("__module__", "module"),
                        ("__name__", "name"), ("__qualname__", "qualname"), ("__doc__", "doc")):
        if key in slotstate:
            fill[target] = slotstate[key]
    closure = slotstate.get("__closure__")
    if isinstance(closure, (tuple, list)):
        fill["closure_values"] = [c.value if isinstance(c, _LegacyCell) and not c.is_empty else c for c in closure]
    return obj._fill(fill)


def _cp_make_cell(value: Any = _LegacyCell._EMPTY) -> _LegacyCell:
    return _LegacyCell(value)


def _cp_make_empty_cell() -> _LegacyCell:
    return _LegacyCell()


def _cp_cell_set(cell: Any, value: Any) -> None:
    if isinstance(cell, _LegacyCell):
        cell.value = value


class LegacyStandIn:
    """
    A described stand-in for an object of an old file that sbtf does not rebuild (a module, a class
    pickled by value, a removed stable-baselines class such as ``ddpg.memory.Memory``). Inert.
    """

    def __init__(self, kind: str, description: str, state: Any = None):
        self.kind = kind
        self.description = description
        self.state = state
        self.key = "?"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.key!r} of this stable-baselines file was not loaded ({self.description}); pass "
                           f"custom_objects={{{self.key!r}: ...}} to give a replacement.")

    def __repr__(self) -> str:
        return f"<LegacyStandIn {self.kind}: {self.description}>"


def _cp_subimport(name: Any, *args) -> LegacyStandIn:
    return LegacyStandIn("module", f"module {name} (not imported)")


def _cp_make_skeleton_class(type_constructor: Any = None, name: Any = "?", bases: Any = (), *args) -> LegacyStandIn:
    return LegacyStandIn("class", f"class {name} pickled by value (its code is not loaded)")


def _cp_class_setstate(obj: Any, state: Any) -> Any:
    return obj


def _cp_rehydrate_skeleton_class(skeleton: Any, class_dict: Any) -> Any:
    return skeleton


def _cp_make_dict_view(obj: Any, *args) -> list:
    return list(obj) if isinstance(obj, (list, tuple, dict)) else []


_CLOUDPICKLE_MODULES = ("cloudpickle.cloudpickle", "cloudpickle.cloudpickle_fast", "cloudpickle")
_CLOUDPICKLE_NAMES: Dict[str, Any] = {
    "_builtin_type": _cp_builtin_type,
    "_make_skel_func": _cp_make_skel_func,
    "_fill_function": _cp_fill_function,
    "_make_function": _cp_make_function,
    "_function_setstate": _cp_function_setstate,
    "_make_cell": _cp_make_cell,
    "_make_empty_cell": _cp_make_empty_cell,
    "cell_set": _cp_cell_set,
    "_cell_set": _cp_cell_set,
    "subimport": _cp_subimport,
    "dynamic_subimport": _cp_subimport,
    "_make_skeleton_class": _cp_make_skeleton_class,
    "_make_skeleton_enum": _cp_make_skeleton_class,
    "_rehydrate_skeleton_class": _cp_rehydrate_skeleton_class,
    "_class_setstate": _cp_class_setstate,
    "_make_dict_keys": _cp_make_dict_view,
    "_make_dict_values": _cp_make_dict_view,
    "_make_dict_items": _cp_make_dict_view,
    "_gen_ellipsis": lambda: Ellipsis,
    "_gen_not_implemented": lambda: NotImplemented,
}


# ------------------------------------------------------------------------------------------------
# numpy / builtins helpers (safe versions)
# ------------------------------------------------------------------------------------------------
def _numpy_attr(module: str, name: str) -> Any:
    """A numpy helper under its numpy 1 (``numpy.core``) or numpy 2 (``numpy._core``) module."""
    candidates = [module]
    if module.startswith("numpy.core"):
        candidates.insert(0, "numpy._core" + module[len("numpy.core"):])
    elif module.startswith("numpy._core"):
        candidates.append("numpy.core" + module[len("numpy._core"):])
    for candidate in candidates:
        try:
            return getattr(importlib.import_module(candidate), name)
        except (ImportError, AttributeError):
            continue
    raise pickle.UnpicklingError(f"numpy helper {module}.{name} is not available in this numpy")


def _safe_reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    if not (isinstance(subtype, type) and issubclass(subtype, np.ndarray)):
        raise RefusedGlobalError(_refusal_message(describe(subtype), "build an array of"))
    return _numpy_attr("numpy.core.multiarray", "_reconstruct")(subtype, shape, dtype)


def _safe_codecs_encode(obj: Any, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    if str(encoding).lower().replace("_", "-") not in ("latin1", "latin-1", "iso-8859-1"):
        raise RefusedGlobalError(_refusal_message(f"_codecs.encode with encoding {encoding!r}", "call"))
    import codecs
    return codecs.encode(obj, "latin1", errors)


def _safe_reconstructor(cls: Any, base: Any, state: Any) -> Any:
    """``copyreg._reconstructor`` (protocol 0/1 objects), only for the allow-listed stand-in classes."""
    if isinstance(cls, type) and issubclass(cls, LegacyObject) and base is object:
        return cls.__new__(cls)
    raise RefusedGlobalError(_refusal_message(f"copyreg._reconstructor({describe(cls)}, {describe(base)})",
                                              "call"))


_ACTIVATION_NAMES = {"relu", "tanh", "sigmoid", "elu", "softplus", "selu", "leaky_relu", "identity", "linear",
                     "relu6", "softsign", "swish", "gelu"}


def _safe_ufunc_reconstruct(module: Any, name: Any) -> type:
    """``numpy.core._ufunc_reconstruct``: only activation-like NumPy ufuncs, kept as references."""
    if str(module) == "numpy" and str(name) in _ACTIVATION_NAMES:
        return legacy_global("numpy", str(name), "activation")
    raise RefusedGlobalError(_refusal_message(f"{module}.{name}", "resolve the ufunc"))


_BUILTIN_DATA = {"set", "frozenset", "complex", "bytearray", "slice", "range", "object", "dict", "list", "tuple",
                 "int", "float", "str", "bytes", "bool"}
_NUMPY_CALLABLES = {
    ("numpy.core.multiarray", "_reconstruct"): _safe_reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _safe_reconstruct,
}
_NUMPY_HELPERS = {("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
                  ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
                  ("numpy.core.multiarray", "_frombuffer"), ("numpy._core.multiarray", "_frombuffer")}
_NUMPY_TYPES = {"ndarray", "dtype", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                "uint16", "uint32", "uint64", "bool_", "complex64", "complex128", "str_", "bytes_", "longlong",
                "ulonglong", "intc", "uintc", "half", "single", "double", "longdouble"}
_RNG_NAMES = {("numpy.random", "__RandomState_ctor"), ("numpy.random._pickle", "__randomstate_ctor"),
              ("numpy.random._pickle", "__generator_ctor"), ("numpy.random._pickle", "__bit_generator_ctor"),
              ("numpy.random.mtrand", "RandomState"), ("numpy.random", "RandomState"),
              ("numpy.random._generator", "Generator"), ("numpy.random._mt19937", "MT19937"),
              ("numpy.random._pcg64", "PCG64"), ("numpy.random.bit_generator", "SeedSequence")}

_GYM_SPACE_MODULES = {"gym.spaces", "gym.spaces.box", "gym.spaces.discrete", "gym.spaces.multi_discrete",
                      "gym.spaces.multi_binary", "gym.spaces.dict", "gym.spaces.dict_space", "gym.spaces.tuple",
                      "gym.spaces.tuple_space", "gymnasium.spaces", "gymnasium.spaces.box",
                      "gymnasium.spaces.discrete", "gymnasium.spaces.multi_discrete",
                      "gymnasium.spaces.multi_binary", "gymnasium.spaces.dict", "gymnasium.spaces.tuple"}
_GYM_SPACE_NAMES = {"Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple"}

_NOISE_MODULES = {"stable_baselines.ddpg.noise", "stable_baselines.common.noise"}
_NOISE_NAMES = {"NormalActionNoise", "OrnsteinUhlenbeckActionNoise", "AdaptiveParamNoiseSpec"}
_ZOO_CUSTOM_POLICIES = {"CustomDQNPolicy", "CustomMlpPolicy", "CustomSACPolicy"}
_ALGORITHM_NAMES = {"A2C", "ACER", "ACKTR", "DDPG", "DQN", "GAIL", "HER", "PPO1", "PPO2", "SAC", "TD3", "TRPO"}
_SCHEDULE_CLASSES = {("stable_baselines.common.schedules", "ConstantSchedule"),
                     ("stable_baselines.common.schedules", "LinearSchedule"),
                     ("stable_baselines.common.schedules", "PiecewiseSchedule"),
                     ("stable_baselines.deepq.replay_buffer", "LinearSchedule"),
                     ("stable_baselines.a2c.utils", "Scheduler"),
                     ("stable_baselines.common.schedules", "Scheduler")}
_SCHEDULE_FUNCTIONS = {("stable_baselines.common.schedules", "linear_interpolation"),
                       ("stable_baselines.a2c.utils", "constant"), ("stable_baselines.a2c.utils", "linear_schedule"),
                       ("stable_baselines.a2c.utils", "middle_drop"),
                       ("stable_baselines.a2c.utils", "double_linear_con"),
                       ("stable_baselines.a2c.utils", "double_middle_drop"),
                       ("stable_baselines.common.schedules", "constant"),
                       ("stable_baselines.common.schedules", "linear_schedule"),
                       ("stable_baselines.common.schedules", "middle_drop"),
                       ("stable_baselines.common.schedules", "double_linear_con"),
                       ("stable_baselines.common.schedules", "double_middle_drop")}


def classify_global(module: str, name: str) -> Tuple[str, Any]:
    """
    Decide what an allow-listed ``module.name`` is. Returns ``(category, value)`` where value is what the
    unpickler hands to pickle, or ``("unknown", None)``.
    """
    if (module, name) in _NUMPY_CALLABLES:
        return "numpy", _NUMPY_CALLABLES[(module, name)]
    if (module, name) in _NUMPY_HELPERS:
        return "numpy", _numpy_attr(module, name)
    if module == "numpy" and name in _NUMPY_TYPES:
        return "numpy", getattr(np, name)
    if module in ("numpy.dtypes",) and name.endswith("DType"):
        import numpy.dtypes
        return "numpy", getattr(numpy.dtypes, name)
    if (module in ("numpy.core", "numpy._core", "numpy.core.umath", "numpy._core.umath")
            and name == "_ufunc_reconstruct"):
        return "numpy", _safe_ufunc_reconstruct
    if (module, name) in _RNG_NAMES:
        return "rng", legacy_object_class(module, name, "rng")
    if module == "builtins" and name in _BUILTIN_DATA:
        import builtins
        return "builtin", getattr(builtins, name)
    if module == "collections" and name in ("OrderedDict", "deque"):
        return "builtin", getattr(collections, name)
    if module == "copyreg" and name == "_reconstructor":
        return "builtin", _safe_reconstructor
    if module == "_codecs" and name == "encode":
        return "builtin", _safe_codecs_encode
    if module in _CLOUDPICKLE_MODULES and name in _CLOUDPICKLE_NAMES:
        return "cloudpickle", _CLOUDPICKLE_NAMES[name]
    if module in _GYM_SPACE_MODULES and name in _GYM_SPACE_NAMES:
        return "space", legacy_object_class(module, name, "space")
    if module.startswith("stable_baselines"):
        parts = module.split(".")
        if parts[-1] == "policies" or (module == "stable_baselines.common" and name.endswith("Policy")):
            return "policy", legacy_global(module, name, "policy")
        if module in _NOISE_MODULES and name in _NOISE_NAMES:
            return "noise", legacy_object_class(module, name, "noise")
        if name == "RunningMeanStd" and parts[-1] in ("running_mean_std", "mpi_running_mean_std"):
            return "rms", legacy_object_class(module, name, "rms")
        if module.startswith("stable_baselines.common.vec_env") and name == "VecNormalize":
            return "vecnormalize", legacy_object_class(module, name, "vecnormalize")
        if name == "GoalSelectionStrategy":
            return "enum", SB2GoalSelectionStrategy
        if (module, name) in _SCHEDULE_CLASSES:
            return "schedule", legacy_object_class(module, name, "schedule")
        if (module, name) in _SCHEDULE_FUNCTIONS:
            return "function", legacy_global(module, name, "function")
        if name in _ALGORITHM_NAMES:
            return "algorithm", legacy_global(module, name, "algorithm")
        if module == "stable_baselines.ddpg.memory" or (module.startswith("stable_baselines.gail.dataset")
                                                        and name in ("ExpertDataset", "DataLoader")):
            return "removed", legacy_object_class(module, name, "standin")
    if module in ("utils", "utils.utils") and name in _ZOO_CUSTOM_POLICIES:
        return "policy", legacy_global(module, name, "policy")
    if module.split(".")[0] in ("tensorflow", "tensorflow_core") and name in _ACTIVATION_NAMES:
        return "activation", legacy_global(module, name, "activation")
    if module == "numpy" and name in ("tanh",):
        return "activation", legacy_global(module, name, "activation")
    return "unknown", None


# ------------------------------------------------------------------------------------------------
# the unpickler
# ------------------------------------------------------------------------------------------------
class SB2Unpickler(pickle.Unpickler):
    """
    ``pickle.Unpickler`` whose ``find_class`` only resolves allow-listed names (see module docstring).

    :param file: (binary file) the pickle stream
    :param allow_pickle: (bool) import names that are not on the list (trusted files only)
    """

    def __init__(self, file, allow_pickle: bool = False):
        super().__init__(file, encoding="latin1")
        self.allow_pickle = allow_pickle
        self.seen: List[Tuple[str, str, str]] = []

    def find_class(self, module: str, name: str) -> Any:
        # Python 2 names (protocol 0-2 files), as the default find_class maps them.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        category, value = classify_global(module, name)
        self.seen.append((module, name, category))
        if category != "unknown":
            return value
        if self.allow_pickle:
            return super().find_class(module, name)
        return legacy_global(module, name, "unknown")

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedGlobalError(f"Refusing persistent id {pid!r} in a stable-baselines file.")


def restricted_loads(payload: bytes, allow_pickle: bool = False) -> Any:
    """Unpickle ``payload`` with :class:`SB2Unpickler` (raw result; see :func:`materialize`)."""
    return SB2Unpickler(io.BytesIO(payload), allow_pickle=allow_pickle).load()


# ------------------------------------------------------------------------------------------------
# turning the recorded objects into sbtf / gymnasium objects
# ------------------------------------------------------------------------------------------------
def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def describe(obj: Any) -> str:
    """A short human description of a (possibly stand-in) value."""
    if is_legacy_global(obj):
        return obj.sb2_path
    if isinstance(obj, (LegacyFunction, LegacyStandIn)):
        return obj.describe() if isinstance(obj, LegacyFunction) else obj.description
    if isinstance(obj, LegacyObject):
        return obj.path()
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__qualname__}"
    return _short(obj)


def _state_get(state: Any, *names: str, default: Any = None) -> Any:
    if isinstance(state, dict):
        for name in names:
            if name in state:
                return state[name]
    return default


def _build_space(obj: LegacyObject) -> Any:
    from gymnasium import spaces

    state = obj.state if isinstance(obj.state, dict) else {}
    kind = obj.sb2_name
    if kind == "Box":
        low = np.asarray(_state_get(state, "low", "_low"))
        high = np.asarray(_state_get(state, "high", "_high"))
        dtype = _state_get(state, "dtype", "_dtype", default=None)
        dtype = np.dtype(dtype) if dtype is not None else low.dtype
        shape = _state_get(state, "shape", "_shape", default=None)
        shape = tuple(int(s) for s in shape) if shape is not None else low.shape
        low = np.broadcast_to(low, shape).astype(dtype)
        high = np.broadcast_to(high, shape).astype(dtype)
        return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(_state_get(state, "n")), start=int(_state_get(state, "start", default=0)))
    if kind == "MultiDiscrete":
        nvec = np.asarray(_state_get(state, "nvec"), dtype=np.int64)
        return spaces.MultiDiscrete(nvec)
    if kind == "MultiBinary":
        n = _state_get(state, "n")
        n = [int(v) for v in n] if isinstance(n, (list, tuple, np.ndarray)) else int(n)
        return spaces.MultiBinary(n)
    if kind == "Dict":
        subs = _state_get(state, "spaces")
        return spaces.Dict(collections.OrderedDict((k, materialize(v)) for k, v in dict(subs).items()))
    if kind == "Tuple":
        return spaces.Tuple(tuple(materialize(v) for v in _state_get(state, "spaces")))
    raise pickle.UnpicklingError(f"Unknown gym space class {obj.path()}")


def _build_noise(obj: LegacyObject) -> Any:
    from sbtf.common import noise

    state = obj.state if isinstance(obj.state, dict) else {}
    if obj.sb2_name == "NormalActionNoise":
        return noise.NormalActionNoise(_state_get(state, "_mu", "mean"), _state_get(state, "_sigma", "sigma"))
    if obj.sb2_name == "OrnsteinUhlenbeckActionNoise":
        result = noise.OrnsteinUhlenbeckActionNoise(
            _state_get(state, "_mu", "mean"), _state_get(state, "_sigma", "sigma"),
            theta=float(_state_get(state, "_theta", default=0.15)), dt=float(_state_get(state, "_dt", default=1e-2)),
            initial_noise=_state_get(state, "initial_noise"))
        if _state_get(state, "noise_prev") is not None:
            result.noise_prev = np.asarray(_state_get(state, "noise_prev"))
        return result
    spec = noise.AdaptiveParamNoiseSpec(float(_state_get(state, "initial_stddev", default=0.1)),
                                        float(_state_get(state, "desired_action_stddev", default=0.1)),
                                        float(_state_get(state, "adoption_coefficient", default=1.01)))
    spec.current_stddev = float(_state_get(state, "current_stddev", default=spec.initial_stddev))
    return spec


def _build_rms(obj: LegacyObject) -> Any:
    from sbtf.common.running_mean_std import RunningMeanStd

    state = obj.state if isinstance(obj.state, dict) else {}
    if not all(k in state for k in ("mean", "var", "count")):
        raise pickle.UnpicklingError(f"{obj.path()} in this file has no mean/var/count statistics "
                                     f"(state keys {sorted(state) if isinstance(state, dict) else state!r})")
    mean = np.asarray(state["mean"], dtype=np.float64)
    rms = RunningMeanStd(shape=mean.shape)
    rms.mean = mean
    rms.var = np.asarray(state["var"], dtype=np.float64)
    rms.count = float(np.asarray(state["count"]))
    return rms


def _build_schedule(obj: LegacyObject) -> Any:
    from sbtf.common import schedules

    state = obj.state if isinstance(obj.state, dict) else {}
    name = obj.sb2_name
    if name == "ConstantSchedule":
        return schedules.ConstantSchedule(_state_get(state, "_v", "_value", "value"))
    if name == "LinearSchedule":
        return schedules.LinearSchedule(state["schedule_timesteps"], state["final_p"], state.get("initial_p", 1.0))
    if name == "PiecewiseSchedule":
        interpolation = state.get("_interpolation")
        if interpolation is not None and not (is_legacy_global(interpolation, "function")
                                              and interpolation.sb2_name == "linear_interpolation"):
            raise pickle.UnpicklingError(f"A PiecewiseSchedule in this file uses the interpolation "
                                         f"{describe(interpolation)}, which sbtf cannot rebuild without running "
                                         "code from the file.")
        return schedules.PiecewiseSchedule([tuple(p) for p in state["_endpoints"]],
                                           outside_value=state.get("_outside_value"))
    if name == "Scheduler":
        fn = state.get("schedule")
        fn_name = fn.sb2_name if is_legacy_global(fn, "function") else None
        by_function = {"constant": "constant", "linear_schedule": "linear", "middle_drop": "middle_drop",
                       "double_linear_con": "double_linear_con", "double_middle_drop": "double_middle_drop"}
        if fn_name not in by_function:
            raise pickle.UnpicklingError(f"A Scheduler in this file uses the schedule function {describe(fn)}, "
                                         "which is not one of stable-baselines' named schedules.")
        scheduler = schedules.Scheduler(state["initial_value"], state["nvalues"], by_function[fn_name])
        scheduler.step = float(state.get("step", 0.0))
        return scheduler
    raise pickle.UnpicklingError(f"Unknown schedule class {obj.path()}")


def materialize(value: Any, _depth: int = 0) -> Any:
    """
    Replace the recorded stand-ins in an unpickled value by sbtf / gymnasium objects: gym spaces ->
    gymnasium spaces, noise -> ``sbtf.common.noise``, ``RunningMeanStd`` -> sbtf's, schedules -> sbtf
    schedules, a pickled VecNormalize -> a plain dict of its state, random generators -> None, removed
    classes -> :class:`LegacyStandIn`. References (:class:`LegacyGlobal`) and :class:`LegacyFunction`
    are kept for the caller, who knows which key they belong to.
    """
    if _depth > 200:
        raise pickle.UnpicklingError("The stable-baselines file nests objects too deeply to be a model file.")
    depth = _depth + 1
    if isinstance(value, LegacyObject):
        kind = value.sb2_kind
        if kind == "space":
            return _build_space(value)
        if kind == "noise":
            return _build_noise(value)
        if kind == "rms":
            return _build_rms(value)
        if kind == "schedule":
            return _build_schedule(value)
        if kind == "rng":
            return None
        if kind == "vecnormalize":
            state = value.state if isinstance(value.state, dict) else {}
            return {"__sb2_vecnormalize__": True, **{k: materialize(v, depth) for k, v in state.items()}}
        return LegacyStandIn(kind, f"{value.path()} (a stable-baselines class sbtf does not rebuild)",
                             state=value.state)
    if isinstance(value, LegacyFunction):
        value._closure_values = [materialize(v, depth) for v in value.closure_values]
        value.defaults = materialize(value.defaults, depth)
        return value
    if isinstance(value, collections.OrderedDict):
        return collections.OrderedDict((k, materialize(v, depth)) for k, v in value.items())
    if isinstance(value, dict):
        return {k: materialize(v, depth) for k, v in value.items()}
    if isinstance(value, list):
        return [materialize(v, depth) for v in value]
    if isinstance(value, tuple):
        return tuple(materialize(v, depth) for v in value)
    if isinstance(value, SB2GoalSelectionStrategy):
        return value
    return value


def find_unknown_globals(value: Any, kinds: Iterable[str] = ("unknown",), _depth: int = 0) -> List[type]:
    """The :class:`LegacyGlobal` references of the given kinds found anywhere inside ``value``."""
    kinds = tuple(kinds)
    found: List[type] = []
    if _depth > 200:
        return found
    if is_legacy_global(value):
        if value.sb2_kind in kinds:
            found.append(value)
        return found
    if isinstance(value, dict):
        for k, v in value.items():
            found += find_unknown_globals(k, kinds, _depth + 1) + find_unknown_globals(v, kinds, _depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            found += find_unknown_globals(v, kinds, _depth + 1)
    elif isinstance(value, LegacyFunction):
        for v in value.closure_values:
            found += find_unknown_globals(v, kinds, _depth + 1)
    elif isinstance(value, np.ndarray) and value.dtype == object:
        for v in value.ravel():
            found += find_unknown_globals(v, kinds, _depth + 1)
    return found


# ------------------------------------------------------------------------------------------------
# static inspection (no execution)
# ------------------------------------------------------------------------------------------------
def pickle_globals(payload: bytes) -> Set[Tuple[str, str]]:
    """
    The ``(module, name)`` globals a pickle refers to, found by reading its opcodes (nothing is executed).
    Raises ``ValueError`` when the bytes are not a complete pickle.
    """
    found: Set[Tuple[str, str]] = set()
    memo: Dict[int, Any] = {}
    stack_strings: List[Any] = []
    next_memo = 0
    try:
        for opcode, arg, _pos in pickletools.genops(payload):
            name = opcode.name
            if name == "GLOBAL" or name == "INST":
                module, _, attr = str(arg).partition(" ")
                found.add((module, attr))
                stack_strings.append(None)
            elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING",
                          "SHORT_BINSTRING"):
                stack_strings.append(arg)
            elif name == "MEMOIZE":
                memo[next_memo] = stack_strings[-1] if stack_strings else None
                next_memo += 1
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(arg)] = stack_strings[-1] if stack_strings else None
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack_strings.append(memo.get(int(arg)))
            elif name == "STACK_GLOBAL":
                if len(stack_strings) >= 2 and isinstance(stack_strings[-2], str) and isinstance(
                        stack_strings[-1], str):
                    found.add((stack_strings[-2], stack_strings[-1]))
                stack_strings = stack_strings[:-2] + [None]
            else:
                stack_strings.append(None)
    except Exception as exc:  # noqa: BLE001 - pickletools raises ValueError / others on broken streams
        raise ValueError(f"not a complete pickle: {exc}") from exc
    return found
