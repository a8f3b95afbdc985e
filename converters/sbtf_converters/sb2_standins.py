"""The inert stand-ins that the stable-baselines 2 pickle reader (:mod:`sbtf_converters.sb2_pickle`) builds instead of
running code: references to globals (:class:`LegacyGlobal`), recorded objects (:class:`LegacyObject`), cloudpickle's
function machinery recorded as :class:`LegacyFunction` / :class:`LegacyCode` / :class:`LegacyStandIn`, and their
bounded descriptions (:func:`describe`)."""
from __future__ import annotations

import collections
import enum
import pickle
from typing import Any, Dict, Iterable, Optional, Tuple

from sbtf.common.fileio import safe_pickle as sp
from sbtf.common.file_errors import UnsafeFileError, describe_value

_ADVICE = (" If you trust the file, pass allow_pickle=True; to replace one stored value, pass "
           "custom_objects={key: value}.")


class RefusedGlobalError(UnsafeFileError, pickle.UnpicklingError):
    """A pickle asked for a class or function that is not on the allow-list."""


def _refusal_message(path: str, action: str) -> str:
    return (f"Refusing to {action} {describe_value(path)} while reading a stable-baselines file: it is not on sbtf's "
            "allow-list "
            f"of data classes, so loading it could run code.{_ADVICE}")


# ------------------------------------------------------------------------------------------------
# references to globals that are never called
# ------------------------------------------------------------------------------------------------
class LegacyGlobal(sp.Ref):
    """
    A reference to a global named in a file (``module.name``), created fresh by each load; never imported.

    ``sb2_kind`` says what it is: ``"policy"``, ``"algorithm"``, ``"activation"``, ``"function"`` (a
    module-level function such as ``stable_baselines.a2c.utils.linear_schedule``) or ``"unknown"``.
    """

    __slots__ = ()

    @property
    def sb2_module(self) -> str:
        return self.module

    @property
    def sb2_name(self) -> str:
        return self.name

    @property
    def sb2_kind(self) -> str:
        return self.kind

    @property
    def sb2_path(self) -> str:
        return self.path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RefusedGlobalError(_refusal_message(self.path, "call"))

    def __repr__(self) -> str:
        return f"<stable-baselines file reference {self.kind}:{self.path}>"


def legacy_global(module: str, name: str, kind: str) -> LegacyGlobal:
    """A (new) reference to ``module.name`` of the given kind."""
    return LegacyGlobal(module, name, kind)


def is_legacy_global(obj: Any, kind: Optional[str] = None) -> bool:
    """True for a :class:`LegacyGlobal` reference (of the given kind)."""
    return isinstance(obj, LegacyGlobal) and (kind is None or obj.kind == kind)


# ------------------------------------------------------------------------------------------------
# objects whose state is recorded
# ------------------------------------------------------------------------------------------------
class LegacyObject(sp.Record):
    """
    Records an allow-listed object of an old file (a gym space, a noise object, ...) as
    ``(kind, module, name, args, state)``; :func:`materialize` turns it into the sbtf/gymnasium object.
    Creating one runs no code of the file.
    """

    __slots__ = ()

    @property
    def sb2_kind(self) -> str:
        return self.kind

    @property
    def sb2_module(self) -> str:
        return self.module

    @property
    def sb2_name(self) -> str:
        return self.name

    def path(self) -> str:  # type: ignore[override]
        return f"{self.module}.{self.name}"

    def __repr__(self) -> str:
        keys = sorted(str(k) for k in self.state)[:8] if isinstance(self.state, dict) else type(self.state).__name__
        return f"<{self.kind} {self.path()} state: {keys}>"


class SB2GoalSelectionStrategy(enum.Enum):
    """``stable_baselines.her.replay_buffer.GoalSelectionStrategy`` (pickled as ``GoalSelectionStrategy(value)``)."""

    FUTURE = 0
    FINAL = 1
    EPISODE = 2
    RANDOM = 3


# ------------------------------------------------------------------------------------------------
# cloudpickle stand-ins: record, never build code
# ------------------------------------------------------------------------------------------------
class LegacyCode(sp.SafeNode):
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

    def __init__(self, *args: Any):
        self.args = args
        fields = self._FIELDS.get(len(args), ())
        self.fields = dict(zip(fields, args))

    def safe_children(self) -> Iterable[Any]:
        return (self.args,)

    @property
    def co_name(self) -> str:
        return str(self.fields.get("co_name", "?"))[:200]

    @property
    def co_filename(self) -> str:
        return str(self.fields.get("co_filename", "?"))[:500]

    @property
    def co_consts(self) -> tuple:
        consts = self.fields.get("co_consts", ())
        return tuple(consts) if isinstance(consts, (tuple, list)) else ()

    def __repr__(self) -> str:
        return f"<code {self.co_name} from {self.co_filename}>"


class _LegacyCell(sp.SafeNode):
    """A closure cell of a pickled function."""

    _EMPTY = object()

    def __init__(self, value: Any = _EMPTY):
        self.value = value

    @property
    def is_empty(self) -> bool:
        return self.value is _LegacyCell._EMPTY

    def safe_children(self) -> Iterable[Any]:
        return () if self.is_empty else (self.value,)


class LegacyFunction(sp.SafeBuildable, sp.SafeNode):
    """
    Stands for a function that cloudpickle stored *by value* (its bytecode) in an old file.

    The function is never rebuilt nor executed; what it was is kept as data (``module``, ``qualname``,
    ``closure_values``, ``defaults``, ``code.co_consts``) so that known schedule closures
    (``constfn.<locals>.func``, the zoo's ``linear_schedule.<locals>.func``) can be rebuilt as sbtf
    schedules. Calling it raises a RuntimeError that says how to replace it. Of the function's globals only
    their names are kept.
    """

    def __init__(self, code: Any = None, base_globals: Any = None, name: Optional[str] = None,
                 defaults: Any = None, closure: Any = None):
        self.code = code
        self.name = _text(name) if name is not None else (code.co_name if isinstance(code, LegacyCode) else None)
        self.qualname: Optional[str] = None
        self.module: Optional[str] = _text(base_globals) if isinstance(base_globals, str) else None
        self.defaults = defaults
        self.doc: Optional[str] = None
        self.global_names: Tuple[str, ...] = ()
        self._closure_cells = list(closure) if isinstance(closure, (tuple, list)) else None
        self._closure_values: Optional[list] = None
        self.key = "?"

    # filled by _fill_function / _function_setstate --------------------------------------------
    def _fill(self, state: Any) -> "LegacyFunction":
        if not isinstance(state, dict):
            return self
        if isinstance(state.get("globals"), dict):
            self.global_names = tuple(str(k)[:200] for k in list(state["globals"])[:100])
        if "defaults" in state:
            self.defaults = state["defaults"]
        for key in ("module", "name", "qualname"):
            if isinstance(state.get(key), str):
                setattr(self, key, _text(state[key]))
        if isinstance(state.get("doc"), str):
            self.doc = _text(state["doc"])
        if isinstance(state.get("closure_values"), (list, tuple)):
            self._closure_values = list(state["closure_values"])
        return self

    def safe_build(self, ctx: sp.SafeUnpickler, state: Any) -> "LegacyFunction":
        return _function_setstate(self, state)

    def safe_children(self) -> Iterable[Any]:
        return (self.code, self._closure_cells, self._closure_values, self.defaults)

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
            return [c for c in self.code.co_consts if isinstance(c, (int, float)) and not isinstance(c, bool)][:20]
        return []

    def describe(self) -> str:
        text = f"function {self.full_name} pickled by value"
        values = [v for v in self.closure_values if isinstance(v, (int, float, str, bool, type(None)))][:10]
        if values:
            text += f" (closure values {_short(values)})"
        consts = self.code_constants()
        if consts:
            text += f" (constants in its code: {_short(consts)})"
        return text

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{describe_value(self.key)} of this stable-baselines file is a {self.describe()}. sbtf does not execute "
            f"code from model files; pass custom_objects={{{describe_value(self.key)}: ...}} to give a replacement.")

    def __repr__(self) -> str:
        return f"<LegacyFunction {self.describe()}>"


def _text(value: Any, limit: int = 200) -> str:
    """A string read from a file cut to ``limit`` characters; any other value: its bounded description."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 3] + "..."
    return describe_value(value, limit)


class _BuiltinTypeStandIn(sp.SafeCallable):
    """``cloudpickle._builtin_type(name)``: only code, function, cell and method types are recorded."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    @property
    def path(self) -> str:  # type: ignore[override]
        return f"types.{self.name}"

    def safe_call(self, ctx: sp.SafeUnpickler, args: tuple) -> Any:
        if self.name == "CodeType":
            return LegacyCode(*args)
        if self.name == "FunctionType":
            code, base_globals = (list(args[:2]) + [None, None])[:2]
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


def _cp_builtin_type(ctx: sp.SafeUnpickler, name: Any = "?") -> _BuiltinTypeStandIn:
    return _BuiltinTypeStandIn(_text(name, 100))


def _cp_make_skel_func(ctx: sp.SafeUnpickler, code: Any = None, cell_count: Any = 0,
                       base_globals: Any = None) -> LegacyFunction:
    cells = None
    if type(cell_count) is int and cell_count > 0:
        ctx.charge(cell_count)
        cells = [_LegacyCell() for _ in range(cell_count)]
    return LegacyFunction(code, base_globals, closure=cells)


def _cp_fill_function(ctx: sp.SafeUnpickler, *args: Any) -> Any:
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


def _cp_make_function(ctx: sp.SafeUnpickler, code: Any = None, globals_: Any = None, name: Any = None,
                      argdefs: Any = None, closure: Any = None) -> LegacyFunction:
    return LegacyFunction(code, globals_, name, argdefs, closure)


def _function_setstate(obj: Any, state: Any) -> Any:
    if not isinstance(obj, LegacyFunction):
        raise RefusedGlobalError(_refusal_message("cloudpickle._function_setstate on a non-function", "call"))
    state_dict, slotstate = (state if isinstance(state, tuple) and len(state) == 2 else ({}, {}))
    slotstate = slotstate if isinstance(slotstate, dict) else {}
    fill: Dict[str, Any] = {}
    for key, target in (("__globals__", "globals"), ("__defaults__", "defaults"), ("__module__", "module"),
                        ("__name__", "name"), ("__qualname__", "qualname"), ("__doc__", "doc")):
        if key in slotstate:
            fill[target] = slotstate[key]
    closure = slotstate.get("__closure__")
    if isinstance(closure, (tuple, list)):
        fill["closure_values"] = [c.value if isinstance(c, _LegacyCell) and not c.is_empty else c for c in closure]
    return obj._fill(fill)


def _cp_function_setstate(ctx: sp.SafeUnpickler, obj: Any = None, state: Any = None) -> Any:
    return _function_setstate(obj, state)


def _cp_make_cell(ctx: sp.SafeUnpickler, value: Any = _LegacyCell._EMPTY) -> _LegacyCell:
    return _LegacyCell(value)


def _cp_make_empty_cell(ctx: sp.SafeUnpickler) -> _LegacyCell:
    return _LegacyCell()


def _cp_cell_set(ctx: sp.SafeUnpickler, cell: Any = None, value: Any = None) -> None:
    if isinstance(cell, _LegacyCell):
        cell.value = value


class LegacyStandIn(sp.SafeNode):
    """
    A described stand-in for an object of an old file that sbtf does not rebuild (a module, a class
    pickled by value, a removed stable-baselines class such as ``ddpg.memory.Memory``). Inert.
    """

    def __init__(self, kind: str, description: str, state: Any = None):
        self.kind = kind
        self.description = description
        self.state = state
        self.key = "?"

    def safe_children(self) -> Iterable[Any]:
        return (self.state,)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{describe_value(self.key)} of this stable-baselines file was not loaded "
                           f"({self.description}); pass custom_objects={{{describe_value(self.key)}: ...}} to give a "
                           "replacement.")

    def __repr__(self) -> str:
        return f"<LegacyStandIn {self.kind}: {self.description}>"


def _cp_subimport(ctx: sp.SafeUnpickler, name: Any = "?", *args: Any) -> LegacyStandIn:
    return LegacyStandIn("module", f"module {_text(name, 200)} (not imported)")


def _cp_make_skeleton_class(ctx: sp.SafeUnpickler, type_constructor: Any = None, name: Any = "?",
                            *args: Any) -> LegacyStandIn:
    return LegacyStandIn("class", f"class {_text(name, 200)} pickled by value (its code is not loaded)")


def _cp_class_setstate(ctx: sp.SafeUnpickler, obj: Any = None, *args: Any) -> Any:
    return obj


def _cp_make_dict_view(ctx: sp.SafeUnpickler, obj: Any = None, *args: Any) -> list:
    if type(obj) in (list, tuple, dict, collections.OrderedDict):
        ctx.charge(len(obj))
        return ctx.make_list(list(obj))
    return ctx.make_list()


def _cp_constant(value: Any) -> sp.Function:
    return sp.Function(lambda ctx: value)


_CLOUDPICKLE_MODULES = ("cloudpickle.cloudpickle", "cloudpickle.cloudpickle_fast", "cloudpickle")
_CLOUDPICKLE_NAMES: Dict[str, sp.Handler] = {
    "_builtin_type": sp.Function(_cp_builtin_type),
    "_make_skel_func": sp.Function(_cp_make_skel_func),
    "_fill_function": sp.Function(_cp_fill_function),
    "_make_function": sp.Function(_cp_make_function),
    "_function_setstate": sp.Function(_cp_function_setstate),
    "_make_cell": sp.Function(_cp_make_cell),
    "_make_empty_cell": sp.Function(_cp_make_empty_cell),
    "cell_set": sp.Function(_cp_cell_set),
    "_cell_set": sp.Function(_cp_cell_set),
    "subimport": sp.Function(_cp_subimport),
    "dynamic_subimport": sp.Function(_cp_subimport),
    "_make_skeleton_class": sp.Function(_cp_make_skeleton_class),
    "_make_skeleton_enum": sp.Function(_cp_make_skeleton_class),
    "_rehydrate_skeleton_class": sp.Function(_cp_class_setstate),
    "_class_setstate": sp.Function(_cp_class_setstate),
    "_make_dict_keys": sp.Function(_cp_make_dict_view),
    "_make_dict_values": sp.Function(_cp_make_dict_view),
    "_make_dict_items": sp.Function(_cp_make_dict_view),
    "_gen_ellipsis": _cp_constant(Ellipsis),
    "_gen_not_implemented": _cp_constant(NotImplemented),
}


def _short(value: Any, limit: int = 120) -> str:
    """A bounded description of a value read from a file (``describe_value``)."""
    return describe_value(value, limit)


def describe(obj: Any) -> str:
    """A short human description of a (possibly stand-in) value."""
    if is_legacy_global(obj):
        return obj.sb2_path
    if isinstance(obj, LegacyFunction):
        return obj.describe()
    if isinstance(obj, LegacyStandIn):
        return obj.description
    if isinstance(obj, LegacyObject):
        return obj.path()
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__qualname__}"
    return _short(obj)
