"""A pickle reader for files that may be hostile: a pure-Python opcode interpreter that builds data only.

``pickle.Unpickler`` (even with a restricted ``find_class``) runs the file's program inside C: it calls
``__setstate__``/``setattr`` on whatever a BUILD targets, hashes whatever keys a dict receives (quadratic on
colliding integers), lets allow-listed callables such as ``bytes(n)`` allocate gigabytes and hands
``numpy.dtype`` state to numpy's C code. :class:`SafeUnpickler` instead reads the opcodes itself
(protocols 0-5) and never calls code of the file:

* a global ``module.name`` resolves only through the caller's *resolver* (``(module, name) -> Handler``,
  after the Python 2 name mapping); anything else becomes an inert :class:`Ref`. Calling a :class:`Ref`
  (REDUCE, NEWOBJ, INST, OBJ) raises :class:`UnsafeFileError`; merely referring to one is left to the caller;
* handlers are sbtf functions that build validated data (:data:`NUMPY_HANDLERS`, :data:`DATA_HANDLERS`) or
  fresh inert :class:`Record` objects; BUILD only applies state to such records (or finishes a numpy
  array/dtype being built), so no class or object outside this load is ever changed;
* numpy arrays are rebuilt from ``(dtype string, shape, bytes)`` with plain numeric dtypes only;
* limits (:func:`sbtf.common.file_errors.get_load_limits`): nesting depth; items: every object the stream
  creates or pushes (each opcode that pushes a value counts, an empty set four times, MARK once), every
  container element and memo entry; memo indices no larger than the file (so the memo costs the same whatever
  the indices: they cannot be chosen to collide); non-string keys per dict/set and keys sharing one hash value
  (their hashes can be chosen to collide), bytes of strings and arrays built;
  the returned value is checked to be a tree (no cycles) of bounded expanded size and depth, so that code
  walking it naively stays bounded too. The cost is linear in the size of the file.

Every failure raises a :mod:`sbtf.common.file_errors` type: :class:`CorruptedFileError` (malformed or truncated
stream, and any unexpected exception from inside), :class:`UnsafeFileError` (refused globals and opcodes),
:class:`FileLimitError` (limits), :class:`ModelDataError` (non-numeric dtypes, invalid array data).

``trusted=True`` (``allow_pickle=True``, for files the user trusts) imports globals the resolver does not
know and applies the normal pickle semantics to them; handlers still take precedence.
"""
from __future__ import annotations

import _compat_pickle
import codecs
import collections
import copyreg
import gc
import math
import re
import struct
import sys
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, LoadLimits, ModelDataError, ModelFileError,
                                     UnsafeFileError, describe_value, get_load_limits)
from sbtf.common.fileio.safe_zip import check_numeric_dtype

__all__ = [
    "SafeUnpickler", "loads", "check_tree", "Handler", "Function", "RecordClass", "Constant", "Reference",
    "SafeCallable", "SafeBuildable", "SafeNode", "Ref", "Record", "Pending", "Resolver", "table_resolver",
    "NUMPY_HANDLERS", "DATA_HANDLERS", "NDARRAY", "OBJECT_BASE", "plain_dtype", "make_array",
]

_MAX_LINE = 4300            # longest text argument of INT/LONG/FLOAT/GET/PUT (CPython's int digit limit)
_MAX_NAME = 4096            # longest module or name of a global
_MAX_LONG_BYTES = 4096      # longest LONG1/LONG4 integer (a 32768-bit integer)
_MAX_SAME_HASH = 8          # most keys of one dict/set that share a hash value
_SMALL = 32                 # dicts/sets smaller than this are not tracked key by key
_SLACK = 1 << 16            # bytes of arrays/strings a file may build beyond its own size
_UNSET = object()

# items charged when an opcode runs: 1 for every opcode that pushes a value (or, MARK, opens a new stack);
# 0 for those that only move values or charge what they add themselves (APPEND(S), SETITEM(S), ADDITEMS, the
# memo); an empty set is four times a dict's memory.
_OPCODE_ITEMS = bytearray([1]) * 256
for _code in b".\x80\x95" + b"01" + b"aesu\x90" + b"b" + b"pqr\x94":
    _OPCODE_ITEMS[_code] = 0
_OPCODE_ITEMS[0x8F] = 4
_OPCODE_ITEMS = bytes(_OPCODE_ITEMS)


# ------------------------------------------------------------------------------------------------
# what the interpreter may call, build or walk
# ------------------------------------------------------------------------------------------------
class SafeCallable:
    """Base of values the interpreter may call (REDUCE, INST, OBJ) or instantiate (NEWOBJ)."""

    __slots__ = ()
    path = "?"

    def safe_call(self, ctx: "SafeUnpickler", args: tuple) -> Any:
        raise ctx.refuse(self.path, "call")

    def safe_new(self, ctx: "SafeUnpickler", args: tuple, kwargs: dict) -> Any:
        raise ctx.refuse(self.path, "create an object of")


class SafeBuildable:
    """Base of values a BUILD opcode may give state to; ``safe_build`` returns what replaces them."""

    __slots__ = ()

    def safe_build(self, ctx: "SafeUnpickler", state: Any) -> Any:
        raise NotImplementedError


class SafeNode:
    """Base of inert objects whose ``safe_children()`` hold file data (walked by :func:`check_tree`)."""

    __slots__ = ()

    def safe_children(self) -> Iterable[Any]:
        return ()


class Ref:
    """
    An inert reference to a global ``module.name`` of the file that no handler resolves (or a marker a handler
    made). It is never imported; calling it while loading raises :class:`UnsafeFileError`.
    """

    __slots__ = ("module", "name", "kind")

    def __init__(self, module: str, name: str, kind: str = "unknown"):
        object.__setattr__(self, "module", module)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "kind", kind)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("references read from a file are read-only")

    @property
    def path(self) -> str:
        return f"{self.module}.{self.name}"

    def __repr__(self) -> str:
        return f"<file reference {self.kind}:{self.path}>"


class Record(SafeBuildable, SafeNode):
    """
    An inert record of an object of the file (created fresh by each load): which class it named
    (``module``, ``name``, ``kind`` from the handler), the arguments it was created with and its state.
    """

    __slots__ = ("kind", "module", "name", "args", "kwargs", "state")

    def __init__(self, kind: str, module: str, name: str, args: tuple = (), kwargs: Optional[dict] = None):
        self.kind = kind
        self.module = module
        self.name = name
        self.args = args
        self.kwargs = kwargs or {}
        self.state: Any = {}

    @property
    def path(self) -> str:
        return f"{self.module}.{self.name}"

    def safe_build(self, ctx: "SafeUnpickler", state: Any) -> "Record":
        parts: List[dict] = []
        if isinstance(state, tuple) and len(state) == 2 and (state[0] is None or isinstance(state[0], dict)) and (
                state[1] is None or isinstance(state[1], dict)):
            parts = [state[0] or {}, state[1] or {}]  # (dict state, slot state)
        elif isinstance(state, dict):
            parts = [state]
        if not parts:
            self.state = state
            return self
        if isinstance(self.state, dict) and self.state:
            parts.insert(0, self.state)  # a second BUILD updates the first one's state, as pickle does
        if len(parts) == 1:
            self.state = parts[0]
        else:  # merged through the context, so that keys are checked and charged again
            self.state = ctx.make_dict([pair for part in parts for pair in part.items()])
        return self

    def safe_children(self) -> Iterable[Any]:
        return (self.args, self.kwargs, self.state)

    def __repr__(self) -> str:
        keys = (describe_value(list(self.state)[:8]) if isinstance(self.state, dict)
                else type(self.state).__name__)
        return f"<{self.kind} {_clip(self.path)} state: {keys}>"


class Pending(SafeBuildable):
    """A value being built (a numpy array or dtype): BUILD finishes it; without BUILD it takes its default."""

    __slots__ = ("result",)

    def __init__(self) -> None:
        self.result = _UNSET

    def build(self, ctx: "SafeUnpickler", state: Any) -> Any:
        raise NotImplementedError

    def default(self, ctx: "SafeUnpickler") -> Any:
        raise NotImplementedError

    def resolve(self, ctx: "SafeUnpickler") -> Any:
        if self.result is _UNSET:
            self.result = self.default(ctx)
        return self.result

    def safe_build(self, ctx: "SafeUnpickler", state: Any) -> Any:
        if self.result is not _UNSET:
            raise ctx.corrupt(f"BUILD applied to a {type(self).__name__.lstrip('_')} that is already complete")
        self.result = self.build(ctx, state)
        return self.result


# ------------------------------------------------------------------------------------------------
# handlers: what a resolver maps a (module, name) to
# ------------------------------------------------------------------------------------------------
class Handler:
    """What a global of the file resolves to: ``resolve`` gives the value pushed for ``module.name``."""

    __slots__ = ()

    def resolve(self, ctx: "SafeUnpickler", module: str, name: str) -> Any:
        raise NotImplementedError


class _BoundFunction(SafeCallable):
    __slots__ = ("path", "fn", "new")

    def __init__(self, path: str, fn: Callable[..., Any], new: Optional[Callable[..., Any]]):
        self.path, self.fn, self.new = path, fn, new

    def safe_call(self, ctx: "SafeUnpickler", args: tuple) -> Any:
        return self.fn(ctx, *args)

    def safe_new(self, ctx: "SafeUnpickler", args: tuple, kwargs: dict) -> Any:
        if self.new is None:
            raise ctx.refuse(self.path, "create an object of")
        return self.new(ctx, args, kwargs)

    def __repr__(self) -> str:
        return f"<safe builder {self.path}>"


class Function(Handler):
    """
    A global that is called: ``fn(ctx, *args)`` on REDUCE/INST/OBJ; ``new(ctx, args, kwargs)`` on NEWOBJ
    (refused when None).
    """

    __slots__ = ("fn", "new")

    def __init__(self, fn: Callable[..., Any], new: Optional[Callable[..., Any]] = None):
        self.fn, self.new = fn, new

    def resolve(self, ctx: "SafeUnpickler", module: str, name: str) -> Any:
        return _BoundFunction(f"{module}.{name}", self.fn, self.new)


class _RecordMaker(SafeCallable):
    __slots__ = ("path", "module", "name", "kind", "record_type")

    def __init__(self, module: str, name: str, kind: str, record_type: type):
        self.module, self.name, self.kind, self.record_type = module, name, kind, record_type
        self.path = f"{module}.{name}"

    def make(self, ctx: "SafeUnpickler", args: tuple, kwargs: dict) -> Record:
        record = self.record_type(self.kind, self.module, self.name, args, kwargs)
        ctx.register_record(record)
        return record

    def safe_call(self, ctx: "SafeUnpickler", args: tuple) -> Any:
        return self.make(ctx, args, {})

    def safe_new(self, ctx: "SafeUnpickler", args: tuple, kwargs: dict) -> Any:
        return self.make(ctx, args, kwargs)

    def __repr__(self) -> str:
        return f"<record class {self.kind}:{self.path}>"


class RecordClass(Handler):
    """A class whose objects are recorded as fresh ``record_type(kind, module, name, args, kwargs)`` records."""

    __slots__ = ("kind", "record_type")

    def __init__(self, kind: str, record_type: type = Record):
        self.kind, self.record_type = kind, record_type

    def resolve(self, ctx: "SafeUnpickler", module: str, name: str) -> Any:
        return _RecordMaker(module, name, self.kind, self.record_type)


class Constant(Handler):
    """A global that stands for a fixed, immutable value (e.g. ``numpy.float32`` or a marker)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def resolve(self, ctx: "SafeUnpickler", module: str, name: str) -> Any:
        return self.value


class Reference(Handler):
    """A global kept as a fresh ``ref_type(module, name, kind)`` reference (never imported, never called)."""

    __slots__ = ("kind", "ref_type")

    def __init__(self, kind: str, ref_type: type = Ref):
        self.kind, self.ref_type = kind, ref_type

    def resolve(self, ctx: "SafeUnpickler", module: str, name: str) -> Any:
        return self.ref_type(module, name, self.kind)


Resolver = Callable[[str, str], Optional[Handler]]


def table_resolver(*tables: Mapping[Tuple[str, str], Handler]) -> Resolver:
    """A resolver that looks ``(module, name)`` up in the given tables, first match wins."""
    merged: Dict[Tuple[str, str], Handler] = {}
    for table in reversed(tables):
        merged.update(table)
    return lambda module, name: merged.get((module, name))


# ------------------------------------------------------------------------------------------------
# the interpreter
# ------------------------------------------------------------------------------------------------
_LEAF = (1, 0)
_S_I4 = struct.Struct("<i")
_S_U2 = struct.Struct("<H")
_S_U4 = struct.Struct("<I")
_S_U8 = struct.Struct("<Q")
_S_F8 = struct.Struct(">d")


class _Stop(Exception):
    """Raised by STOP to leave the opcode loop with the result."""

    def __init__(self, value: Any):
        super().__init__()
        self.value = value


class SafeUnpickler:
    """
    Read one pickle with a resolver of globals (see the module docstring); ``load()`` returns the value.

    The object is also the context handlers receive (``ctx``): they charge what they build to the limits
    (:meth:`charge`, :meth:`charge_bytes`, :meth:`charge_array`) and build containers through it
    (:meth:`make_tuple`, :meth:`make_list`, :meth:`make_dict`, :meth:`make_set`).

    :param payload: (bytes) the pickle
    :param resolver: (callable or dict) ``(module, name) -> Handler`` or None
    :param what: (str) what is being read, for messages ("the VecNormalize file ...")
    :param advice: (str) appended to refusals (what the user can do)
    :param trusted: (bool) import and run globals the resolver does not know (trusted files only)
    :param unknown: (callable) ``(module, name) -> value`` for unresolved globals (default: :class:`Ref`)
    :param limits: (LoadLimits) default: :func:`get_load_limits`
    """

    def __init__(self, payload: Union[bytes, bytearray, memoryview], resolver: Union[Resolver, Mapping, None],
                 what: str = "the file", advice: str = "", trusted: bool = False,
                 unknown: Optional[Callable[[str, str], Any]] = None, limits: Optional[LoadLimits] = None):
        self.data = bytes(payload)
        self.resolver = table_resolver(resolver) if isinstance(resolver, Mapping) else resolver
        self.what = what
        self.advice = advice
        self.trusted = trusted
        self.unknown = unknown or (lambda module, name: Ref(module, name))
        self.limits = limits or get_load_limits()
        self.max_depth = self.limits.max_depth
        self.max_items = self.limits.max_items
        self.pos = 0
        self.proto = 0
        self.stack: List[Any] = []
        self.metastack: List[List[Any]] = []
        self.memo: Dict[int, Any] = {}
        self.items = 0
        self.string_bytes = 0
        self.array_bytes = 0
        self._info: Dict[int, list] = {}     # id -> [weight, depth, container] (keeps it alive: ids stay unique)
        self._keys: Dict[int, list] = {}     # id -> [non-string keys, {hash: count}]
        self._dispatch = self._make_dispatch()

    # ----- errors --------------------------------------------------------------------------------
    def corrupt(self, detail: str) -> CorruptedFileError:
        return CorruptedFileError(f"{self.what[:1].upper()}{self.what[1:]} is truncated or corrupted: {detail} "
                                  f"(at byte {self.pos}).")

    def refuse(self, path: str, action: str) -> UnsafeFileError:
        return UnsafeFileError(f"Refusing to load {_clip(path)} from {self.what} (the file asks to {action} it): it is not "
                               f"on sbtf's allow-list of data, so loading it could run code.{self.advice}")

    def limit(self, detail: str) -> FileLimitError:
        return FileLimitError(f"{self.what[:1].upper()}{self.what[1:]} {detail}; no real file of this kind does "
                              "that (it is damaged or hostile). If you trust it, raise the limit with "
                              "sbtf.common.file_errors.load_limits().")

    # ----- budgets -------------------------------------------------------------------------------
    def charge(self, count: int) -> None:
        """Count ``count`` items (container elements, memo entries, hashing work) against ``max_items``."""
        self.items += count
        if self.items > self.limits.max_items:
            raise self.limit(f"builds more than {self.limits.max_items:,} items")

    def charge_bytes(self, count: int) -> None:
        """
        Count ``count`` bytes of strings built by handlers against ``max_string_bytes`` and the size of the file
        (every byte of a stored value is in the file once: more means the file reuses data to blow up).
        """
        self.string_bytes += count
        if self.string_bytes > min(self.limits.max_string_bytes, len(self.data) + _SLACK):
            raise self.limit(f"builds {self.string_bytes:,} bytes of strings from {len(self.data):,} bytes")

    def charge_array(self, count: int) -> None:
        """Count ``count`` bytes of arrays against ``max_array_bytes`` and the size of the file."""
        self.array_bytes += count
        if self.array_bytes > min(self.limits.max_array_bytes, len(self.data) + _SLACK):
            raise self.limit(f"builds {self.array_bytes:,} bytes of arrays from {len(self.data):,} bytes")

    # ----- container bookkeeping -----------------------------------------------------------------
    def measure(self, obj: Any) -> Tuple[int, int]:
        """``(weight, depth)`` of a value built by this load (leaves: ``(1, 0)``)."""
        info = self._info.get(id(obj))
        return _LEAF if info is None else (info[0], info[1])

    def _register(self, obj: Any, weight: int, depth: int) -> Any:
        """Measure a container just built by this load (always a new object, so its id is new)."""
        if depth > self.max_depth:
            raise self.limit(f"nests containers more than {self.max_depth} levels deep")
        if weight > self.max_items:
            raise self.limit(f"holds a value of more than {self.max_items:,} items")
        self._info[id(obj)] = [weight, depth, obj]
        return obj

    def _grow(self, container: Any, item: Any, extra: Any = _UNSET) -> None:
        info = self._info.get(id(container))
        if info is None:
            info = self._info[id(container)] = [1, 1, container]
        weight, depth = self.measure(item)
        if extra is not _UNSET:
            w2, d2 = self.measure(extra)
            weight, depth = weight + w2, max(depth, d2)
        info[0] += weight
        if depth + 1 > info[1]:
            info[1] = depth + 1
            if info[1] > self.max_depth:
                raise self.limit(f"nests containers more than {self.max_depth} levels deep")
        if info[0] > self.max_items:
            raise self.limit(f"holds a value of more than {self.max_items:,} items")

    def _check_key(self, container: Any, key: Any) -> None:
        kind = type(key)
        if kind is str or kind is bytes:
            return
        if len(container) < _SMALL and id(container) not in self._keys:
            # small containers: colliding keys cost at most _SMALL probes each; only hashing is charged
            if kind is not int and kind is not float and kind is not bool and kind is not type(None):
                self.charge(self.measure(key)[0])
            return
        stats = self._keys.get(id(container))
        if stats is None:
            stats = self._keys[id(container)] = [0, {}]
        stats[0] += 1
        if stats[0] > self.limits.max_nonstring_keys:
            raise self.limit(f"holds a dict or set with more than {self.limits.max_nonstring_keys:,} non-string keys "
                             "(their hashes can be made to collide, which makes loading quadratic)")
        try:
            digest = hash(hash(key))  # hash() of a hash: the counting dict's own keys cannot collide
        except TypeError as exc:
            raise self.corrupt(f"unhashable {type(key).__name__} used as a dict key or set element") from exc
        same = stats[1].get(digest, 0) + 1
        if same > _MAX_SAME_HASH:
            raise self.limit("holds a dict or set whose keys share one hash value (keys chosen to collide make "
                             "loading quadratic)")
        stats[1][digest] = same
        self.charge(self.measure(key)[0] * same)

    def register_record(self, record: Record) -> None:
        """Record bookkeeping for records made by handlers."""
        weight, depth = 1, 1
        for part in (record.args, record.kwargs):
            w, d = self.measure(part)
            weight, depth = weight + w, max(depth, d + 1)
        self._register(record, weight, depth)

    def make_tuple(self, items: Iterable[Any]) -> tuple:
        """A tuple of file values (measured: tuples are hashed and compared while loading)."""
        value = tuple(items)
        if not value:
            return value  # the shared empty tuple: a leaf
        self.items += len(value)
        if self.items > self.max_items:
            self.charge(0)
        weight, depth = 1, 1
        info = self._info
        for item in value:
            measured = info.get(id(item))
            if measured is None:
                weight += 1
            else:
                weight += measured[0]
                if measured[1] >= depth:
                    depth = measured[1] + 1
        return self._register(value, weight, depth)

    def make_list(self, items: Iterable[Any] = ()) -> list:
        """A list of file values."""
        value: list = []
        self._register(value, 1, 1)
        for item in items:
            self.append(value, item)
        return value

    def make_dict(self, pairs: Iterable[Tuple[Any, Any]] = (), ordered: bool = False) -> dict:
        """A dict (or OrderedDict) of file values; non-string keys are checked."""
        value: dict = collections.OrderedDict() if ordered else {}
        self._register(value, 1, 1)
        for key, item in pairs:
            self.setitem(value, key, item)
        return value

    def make_set(self, items: Iterable[Any] = (), frozen: bool = False) -> Union[set, frozenset]:
        """A set (or frozenset) of file values; elements are checked like dict keys."""
        value: set = set()
        weight, depth = 1, 1
        info = self._info
        for item in items:
            self.charge(1)
            self._check_key(value, item)
            measured = info.get(id(item))
            if measured is None:
                weight += 1
            else:
                weight += measured[0]
                if measured[1] >= depth:
                    depth = measured[1] + 1
            value.add(item)
        if not frozen:
            return self._register(value, weight, depth)
        self._keys.pop(id(value), None)  # the probe set dies here: its id may be reused
        return self._register(frozenset(value), weight, depth)

    def append(self, container: Any, item: Any) -> None:
        self.charge(1)
        self._grow(container, item)
        container.append(item)

    def setitem(self, container: Any, key: Any, item: Any) -> None:
        self.charge(1)
        self._check_key(container, key)
        self._grow(container, key, item)
        container[key] = item

    def add(self, container: Any, item: Any) -> None:
        self.charge(1)
        self._check_key(container, item)
        self._grow(container, item)
        container.add(item)

    # ----- stream reading ------------------------------------------------------------------------
    def _read(self, count: int) -> bytes:
        pos = self.pos
        end = pos + count
        if end > len(self.data):
            raise self.corrupt(f"an argument of {count:,} bytes runs past the end of the stream")
        self.pos = end
        return self.data[pos:end]

    def _read_sized(self, count: int) -> bytes:
        if count > self.limits.max_string_bytes:
            raise self.limit(f"holds a string of {count:,} bytes (more than {self.limits.max_string_bytes:,})")
        return self._read(count)

    def _readline(self, limit: int) -> bytes:
        pos = self.pos
        end = self.data.find(b"\n", pos, pos + limit + 1)
        if end < 0:
            if pos + limit + 1 <= len(self.data):
                raise self.limit(f"holds a text argument longer than {limit:,} bytes")
            raise self.corrupt("a text argument has no end of line")
        self.pos = end + 1
        return self.data[pos:end]

    def _resolve(self, value: Any) -> Any:
        return value.resolve(self) if isinstance(value, Pending) else value

    def _pop(self) -> Any:
        stack = self.stack
        if not stack:
            raise self.corrupt("the stack is empty (a MARK or a value is missing)")
        return stack.pop()

    def _top(self) -> Any:
        if not self.stack:
            raise self.corrupt("the stack is empty (a value is missing)")
        return self.stack[-1]

    def _pop_mark(self) -> List[Any]:
        if not self.metastack:
            raise self.corrupt("no MARK for an opcode that needs one")
        items = self.stack
        self.stack = self.metastack.pop()
        for item in items:
            if isinstance(item, Pending):
                return [v.resolve(self) if isinstance(v, Pending) else v for v in items]
        return items

    # ----- globals -------------------------------------------------------------------------------
    def _global(self, module: str, name: str) -> Any:
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        handler = self.resolver(module, name) if self.resolver is not None else None
        if handler is not None:
            return handler.resolve(self, module, name)
        if self.trusted:
            return _import_global(module, name)
        return self.unknown(module, name)

    def _call(self, func: Any, args: tuple) -> Any:
        if isinstance(func, SafeCallable):
            return func.safe_call(self, args)
        if isinstance(func, Ref):
            raise self.refuse(func.path, "call")
        if self.trusted and callable(func):
            return func(*args)
        raise self.refuse(_describe_callable(func), "call")

    def _new(self, cls: Any, args: tuple, kwargs: dict) -> Any:
        if isinstance(cls, SafeCallable):
            return cls.safe_new(self, args, kwargs)
        if isinstance(cls, Ref):
            raise self.refuse(cls.path, "create an object of")
        if self.trusted and isinstance(cls, type):
            return cls.__new__(cls, *args, **kwargs)
        raise self.refuse(_describe_callable(cls), "create an object of")

    # ----- the loop ------------------------------------------------------------------------------
    def load(self) -> Any:
        """Interpret the stream; return the checked value (see :func:`check_tree`)."""
        collecting = gc.isenabled()
        gc.disable()  # the loop makes many containers: generational collections would make it quadratic
        try:
            value = self._run()
            check_tree(value, self.what, self.limits)
            return value
        except ModelFileError:
            raise
        except MemoryError as exc:
            raise self.limit("needs more memory than is available") from exc
        except RecursionError as exc:
            raise self.limit("nests values too deeply") from exc
        except Exception as exc:  # noqa: BLE001 - every odd failure of a damaged stream becomes one error type
            raise self.corrupt(f"{type(exc).__name__}: {describe_value(str(exc))}") from exc
        finally:
            if collecting:
                gc.enable()

    def _run(self) -> Any:
        data = self.data
        size = len(data)
        dispatch = self._dispatch
        weights = _OPCODE_ITEMS
        max_items = self.max_items
        try:
            while True:
                pos = self.pos
                if pos >= size:
                    raise self.corrupt("the stream ends before its STOP opcode")
                self.pos = pos + 1
                code = data[pos]
                op = dispatch[code]
                if op is None:
                    self.pos = pos
                    raise self.corrupt(f"unknown opcode {data[pos:pos + 1]!r}")
                self.items += weights[code]
                if self.items > max_items:
                    self.charge(0)
                op()
        except _Stop as stop:
            return stop.value

    def _make_dispatch(self) -> List[Optional[Callable[[], None]]]:
        table: List[Optional[Callable[[], None]]] = [None] * 256
        ops = {
            b"(": self._mark, b".": self._stop, b"0": self._pop_op, b"1": self._pop_mark_op, b"2": self._dup,
            b"F": self._float, b"I": self._int, b"J": self._binint, b"K": self._binint1, b"L": self._long,
            b"M": self._binint2, b"N": self._none, b"P": self._persid, b"Q": self._persid, b"R": self._reduce,
            b"S": self._string, b"T": self._binstring, b"U": self._short_binstring, b"V": self._unicode,
            b"X": self._binunicode, b"a": self._append, b"b": self._build, b"c": self._global_op,
            b"d": self._dict, b"}": self._empty_dict, b"e": self._appends, b"g": self._get, b"h": self._binget,
            b"i": self._inst, b"j": self._long_binget, b"l": self._list, b"]": self._empty_list, b"o": self._obj,
            b"p": self._put, b"q": self._binput, b"r": self._long_binput, b"s": self._setitem, b"t": self._tuple,
            b")": self._empty_tuple, b"u": self._setitems, b"G": self._binfloat,
            b"\x80": self._proto, b"\x81": self._newobj, b"\x82": self._ext, b"\x83": self._ext, b"\x84": self._ext,
            b"\x85": self._tuple1, b"\x86": self._tuple2, b"\x87": self._tuple3, b"\x88": self._true,
            b"\x89": self._false, b"\x8a": self._long1, b"\x8b": self._long4,
            b"B": self._binbytes, b"C": self._short_binbytes,
            b"\x8c": self._short_binunicode, b"\x8d": self._binunicode8, b"\x8e": self._binbytes8,
            b"\x8f": self._empty_set, b"\x90": self._additems, b"\x91": self._frozenset, b"\x92": self._newobj_ex,
            b"\x93": self._stack_global, b"\x94": self._memoize, b"\x95": self._frame,
            b"\x96": self._bytearray8, b"\x97": self._buffer, b"\x98": self._buffer,
        }
        for code, op in ops.items():
            table[code[0]] = op
        return table

    # ----- opcodes: structure ----------------------------------------------------------------------
    def _proto(self) -> None:
        proto = self._read(1)[0]
        if proto > 5:
            raise self.corrupt(f"unsupported pickle protocol {proto}")
        self.proto = proto

    def _frame(self) -> None:
        self._read(8)

    def _stop(self) -> None:
        raise _Stop(self._resolve(self._pop()))

    def _mark(self) -> None:
        self.metastack.append(self.stack)
        self.stack = []

    def _pop_op(self) -> None:
        if self.stack:
            self.stack.pop()
        else:
            self._pop_mark()

    def _pop_mark_op(self) -> None:
        self._pop_mark()

    def _dup(self) -> None:
        self.stack.append(self._top())

    def _persid(self) -> None:
        raise UnsafeFileError(f"Refusing {self.what}: it uses persistent ids (PERSID), which resolve objects by a "
                              f"mechanism outside the file; no sbtf or stable-baselines file does.{self.advice}")

    def _ext(self) -> None:
        raise UnsafeFileError(f"Refusing {self.what}: it names objects through the copyreg extension registry "
                              f"(EXT opcodes), which sbtf does not resolve.{self.advice}")

    def _buffer(self) -> None:
        raise self.corrupt("out-of-band buffers (NEXT_BUFFER/READONLY_BUFFER) are not part of a stored file")

    # ----- opcodes: scalars ------------------------------------------------------------------------
    def _none(self) -> None:
        self.stack.append(None)

    def _true(self) -> None:
        self.stack.append(True)

    def _false(self) -> None:
        self.stack.append(False)

    def _int(self) -> None:
        line = self._readline(_MAX_LINE)
        if line == b"00":
            value: Any = False
        elif line == b"01":
            value = True
        else:
            value = int(line, 0) if line[:2] in (b"0x", b"0X") else int(line)
        self.stack.append(value)

    def _binint(self) -> None:
        self.stack.append(_S_I4.unpack(self._read(4))[0])

    def _binint1(self) -> None:
        self.stack.append(self._read(1)[0])

    def _binint2(self) -> None:
        self.stack.append(_S_U2.unpack(self._read(2))[0])

    def _long(self) -> None:
        line = self._readline(_MAX_LINE)
        if line[-1:] == b"L":
            line = line[:-1]
        self.stack.append(int(line))

    def _long_bytes(self, count: int) -> None:
        if count > _MAX_LONG_BYTES:
            raise self.limit(f"holds an integer of {count:,} bytes")
        self.stack.append(int.from_bytes(self._read(count), "little", signed=True))

    def _long1(self) -> None:
        self._long_bytes(self._read(1)[0])

    def _long4(self) -> None:
        count = _S_I4.unpack(self._read(4))[0]
        if count < 0:
            raise self.corrupt("LONG4 with a negative byte count")
        self._long_bytes(count)

    def _float(self) -> None:
        self.stack.append(float(self._readline(_MAX_LINE)))

    def _binfloat(self) -> None:
        self.stack.append(_S_F8.unpack(self._read(8))[0])

    # ----- opcodes: strings ------------------------------------------------------------------------
    def _string(self) -> None:
        line = self._readline(self.limits.max_string_bytes)
        if len(line) >= 2 and line[0] == line[-1] and line[0] in b"\"'":
            line = line[1:-1]
        else:
            raise self.corrupt("the STRING opcode argument must be quoted")
        self.stack.append(codecs.escape_decode(line)[0].decode("latin1"))

    def _binstring(self) -> None:
        count = _S_I4.unpack(self._read(4))[0]
        if count < 0:
            raise self.corrupt("BINSTRING with a negative length")
        self.stack.append(self._read_sized(count).decode("latin1"))

    def _short_binstring(self) -> None:
        self.stack.append(self._read(self._read(1)[0]).decode("latin1"))

    def _unicode(self) -> None:
        self.stack.append(str(self._readline(self.limits.max_string_bytes), "raw-unicode-escape"))

    def _short_binunicode(self) -> None:
        self.stack.append(str(self._read(self._read(1)[0]), "utf-8", "surrogatepass"))

    def _binunicode(self) -> None:
        self.stack.append(str(self._read_sized(_S_U4.unpack(self._read(4))[0]), "utf-8", "surrogatepass"))

    def _binunicode8(self) -> None:
        self.stack.append(str(self._read_sized(_S_U8.unpack(self._read(8))[0]), "utf-8", "surrogatepass"))

    def _binbytes(self) -> None:
        self.stack.append(self._read_sized(_S_U4.unpack(self._read(4))[0]))

    def _short_binbytes(self) -> None:
        self.stack.append(self._read(self._read(1)[0]))

    def _binbytes8(self) -> None:
        self.stack.append(self._read_sized(_S_U8.unpack(self._read(8))[0]))

    def _bytearray8(self) -> None:
        self.stack.append(bytearray(self._read_sized(_S_U8.unpack(self._read(8))[0])))

    # ----- opcodes: containers ---------------------------------------------------------------------
    def _empty_list(self) -> None:
        self.stack.append([])  # measured from its first item on (see _grow)

    def _empty_dict(self) -> None:
        self.stack.append({})

    def _empty_set(self) -> None:
        self.stack.append(set())

    def _empty_tuple(self) -> None:
        self.stack.append(self.make_tuple(()))

    def _tuple(self) -> None:
        value = self.make_tuple(self._pop_mark())  # (pop the mark before self.stack is read)
        self.stack.append(value)

    def _small_tuple(self, size: int) -> None:
        stack = self.stack
        if len(stack) < size:
            raise self.corrupt(f"TUPLE{size} needs {size} values on the stack")
        items = stack[-size:]
        del stack[-size:]
        for item in items:
            if isinstance(item, Pending):
                items = [v.resolve(self) if isinstance(v, Pending) else v for v in items]
                break
        stack.append(self.make_tuple(items))

    def _tuple1(self) -> None:
        self._small_tuple(1)

    def _tuple2(self) -> None:
        self._small_tuple(2)

    def _tuple3(self) -> None:
        self._small_tuple(3)

    def _list(self) -> None:
        value = self.make_list(self._pop_mark())
        self.stack.append(value)

    def _dict(self) -> None:
        items = self._pop_mark()
        if len(items) % 2:
            raise self.corrupt("DICT with an odd number of items")
        self.stack.append(self.make_dict(zip(items[::2], items[1::2])))

    def _frozenset(self) -> None:
        value = self.make_set(self._pop_mark(), frozen=True)
        self.stack.append(value)

    def _list_target(self) -> Any:
        target = self._top()
        if type(target) is list or type(target) is collections.deque:
            return target
        if self.trusted:
            return target
        raise self.corrupt(f"APPEND to a {type(target).__name__}, which is not a list")

    def _append(self) -> None:
        value = self._resolve(self._pop())
        target = self._list_target()
        if self.trusted and not isinstance(target, (list, collections.deque)):
            target.append(value)
            return
        self.append(target, value)

    def _appends(self) -> None:
        items = self._pop_mark()
        target = self._list_target()
        if self.trusted and not isinstance(target, (list, collections.deque)):
            extend = getattr(target, "extend", None)
            if extend is not None:
                extend(items)
            else:
                for item in items:
                    target.append(item)
            return
        for item in items:
            self.append(target, item)

    def _dict_target(self) -> Any:
        target = self._top()
        if isinstance(target, dict) and type(target) in (dict, collections.OrderedDict):
            return target
        if self.trusted:
            return target
        raise self.corrupt(f"SETITEM on a {type(target).__name__}, which is not a dict")

    def _setitem(self) -> None:
        value = self._resolve(self._pop())
        key = self._resolve(self._pop())
        target = self._dict_target()
        if type(target) not in (dict, collections.OrderedDict):
            target[key] = value
            return
        self.setitem(target, key, value)

    def _setitems(self) -> None:
        items = self._pop_mark()
        if len(items) % 2:
            raise self.corrupt("SETITEMS with an odd number of items")
        target = self._dict_target()
        plain = type(target) in (dict, collections.OrderedDict)
        for index in range(0, len(items), 2):
            if plain:
                self.setitem(target, items[index], items[index + 1])
            else:
                target[items[index]] = items[index + 1]

    def _additems(self) -> None:
        items = self._pop_mark()
        target = self._top()
        if type(target) is set:
            for item in items:
                self.add(target, item)
        elif self.trusted:
            for item in items:
                target.add(item)
        else:
            raise self.corrupt(f"ADDITEMS on a {type(target).__name__}, which is not a set")

    # ----- opcodes: memo -------------------------------------------------------------------------
    def _memo_put(self, index: int) -> None:
        if index < 0:
            raise self.corrupt("negative memo index")
        if index > len(self.data):  # a pickler numbers memo entries 0, 1, 2...: never beyond the file's size
            raise self.corrupt(f"memo index {describe_value(index)} is larger than a stream of {len(self.data):,} "
                               "bytes can use")
        if index not in self.memo:
            self.charge(1)
        self.memo[index] = self._top()

    def _memo_get(self, index: int) -> None:
        try:
            value = self.memo[index]
        except KeyError:
            raise self.corrupt(f"memo entry {describe_value(index)} is read before it is written") from None
        if isinstance(value, Pending) and value.result is not _UNSET:
            value = value.result
        self.stack.append(value)

    def _put(self) -> None:
        self._memo_put(int(self._readline(_MAX_LINE)))

    def _binput(self) -> None:
        self._memo_put(self._read(1)[0])

    def _long_binput(self) -> None:
        self._memo_put(_S_U4.unpack(self._read(4))[0])

    def _memoize(self) -> None:
        memo = self.memo
        if not self.stack:
            raise self.corrupt("MEMOIZE with an empty stack")
        self.items += 1
        if self.items > self.limits.max_items:
            self.charge(0)
        memo[len(memo)] = self.stack[-1]

    def _get(self) -> None:
        self._memo_get(int(self._readline(_MAX_LINE)))

    def _binget(self) -> None:
        self._memo_get(self._read(1)[0])

    def _long_binget(self) -> None:
        self._memo_get(_S_U4.unpack(self._read(4))[0])

    # ----- opcodes: objects ------------------------------------------------------------------------
    def _global_name(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.corrupt("a global name is not valid UTF-8") from None

    def _global_op(self) -> None:
        module = self._global_name(self._readline(_MAX_NAME))
        name = self._global_name(self._readline(_MAX_NAME))
        self.stack.append(self._global(module, name))

    def _stack_global(self) -> None:
        name = self._resolve(self._pop())
        module = self._resolve(self._pop())
        if type(module) is not str or type(name) is not str:
            raise self.corrupt("STACK_GLOBAL needs two strings")
        if len(module) > _MAX_NAME or len(name) > _MAX_NAME:
            raise self.limit("names a global longer than 4096 characters")
        self.stack.append(self._global(module, name))

    def _reduce(self) -> None:
        args = self._resolve(self._pop())
        func = self._resolve(self._pop())
        if type(args) is not tuple:
            raise self.corrupt(f"REDUCE with arguments of type {type(args).__name__}, not a tuple")
        self.stack.append(self._call(func, args))

    def _newobj(self) -> None:
        args = self._resolve(self._pop())
        cls = self._resolve(self._pop())
        if type(args) is not tuple:
            raise self.corrupt("NEWOBJ with arguments that are not a tuple")
        self.stack.append(self._new(cls, args, {}))

    def _newobj_ex(self) -> None:
        kwargs = self._resolve(self._pop())
        args = self._resolve(self._pop())
        cls = self._resolve(self._pop())
        if type(args) is not tuple or not isinstance(kwargs, dict):
            raise self.corrupt("NEWOBJ_EX with arguments that are not a tuple and a dict")
        self.stack.append(self._new(cls, args, dict(kwargs)))

    def _inst(self) -> None:
        module = self._global_name(self._readline(_MAX_NAME))
        name = self._global_name(self._readline(_MAX_NAME))
        args = self.make_tuple(self._pop_mark())
        self.stack.append(self._call(self._global(module, name), args))

    def _obj(self) -> None:
        items = self._pop_mark()
        if not items:
            raise self.corrupt("OBJ without a class")
        self.stack.append(self._call(items[0], self.make_tuple(items[1:])))

    def _build(self) -> None:
        state = self._resolve(self._pop())
        target = self._top()
        if isinstance(target, SafeBuildable):
            result = target.safe_build(self, state)
            if isinstance(target, Record):
                self._grow(target, state)
            self.stack[-1] = result
            return
        if isinstance(target, Ref):
            raise self.refuse(target.path, "set the state of")
        if type(target) is collections.OrderedDict and not state:
            return
        if self.trusted and not isinstance(target, SafeCallable):
            _trusted_build(target, state)
            return
        if isinstance(target, SafeCallable):
            raise self.refuse(target.path, "set the state of")
        raise self.corrupt(f"BUILD on a {type(target).__name__}, which takes no state")


def _clip(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters (names of globals read from a file, for messages)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe_callable(value: Any) -> str:
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return f"a {type(value).__name__} value"


def _import_global(module: str, name: str) -> Any:
    """The real global (trusted files only), resolved as ``pickle.Unpickler.find_class`` does."""
    __import__(module, level=0)
    obj: Any = sys.modules[module]
    for part in name.split("."):
        if part == "<locals>":
            raise AttributeError(f"cannot load the local object {name!r} of {module}")
        obj = getattr(obj, part)
    return obj


def _trusted_build(inst: Any, state: Any) -> None:
    """``BUILD`` as ``pickle`` does it (trusted files only)."""
    setstate = getattr(inst, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return
    slotstate = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slotstate = state
    if state:
        inst_dict = inst.__dict__
        for key, value in state.items():
            inst_dict[sys.intern(key) if type(key) is str else key] = value
    if slotstate:
        for key, value in slotstate.items():
            setattr(inst, key, value)


# ------------------------------------------------------------------------------------------------
# the returned value: a bounded tree
# ------------------------------------------------------------------------------------------------
def _children(value: Any) -> Optional[Iterable[Any]]:
    kind = type(value)
    if kind is list or kind is tuple or kind is set or kind is frozenset or kind is collections.deque:
        return value
    if kind is dict or kind is collections.OrderedDict:
        return [item for pair in value.items() for item in pair]
    if isinstance(value, SafeNode):
        return value.safe_children()
    return None


def check_tree(value: Any, what: str = "the file", limits: Optional[LoadLimits] = None) -> None:
    """
    Check that ``value`` (read from a file) is a tree of at most ``max_items`` nodes, ``max_depth`` levels and
    ``max_array_bytes`` of arrays *when expanded* (shared parts counted at each use) and holds no cycle; code
    that walks it naively is then bounded too. Linear in the number of distinct objects.

    :raises FileLimitError: when it is not
    """
    limits = limits or get_load_limits()
    done: Dict[int, Tuple[int, int, int]] = {}   # id -> (size, depth, array bytes) when expanded
    open_ids: set = set()
    keep: List[Any] = []
    todo: List[Tuple[Any, bool]] = [(value, False)]
    label = f"{what[:1].upper()}{what[1:]}"
    while todo:
        node, finished = todo.pop()
        key = id(node)
        children = _children(node)
        if children is None:
            if key not in done:
                nbytes = int(node.nbytes) if isinstance(node, np.ndarray) else 0
                done[key] = (1, 0, nbytes)
                keep.append(node)
            continue
        if finished:
            size, depth, nbytes = 1, 0, 0
            for child in children:
                c_size, c_depth, c_bytes = done[id(child)]
                size += c_size
                nbytes += c_bytes
                if c_depth >= depth:
                    depth = c_depth + 1
            if size > limits.max_items:
                raise FileLimitError(f"{label} holds a value of more than {limits.max_items:,} items once its shared "
                                     "parts are expanded; no real file does that (it is damaged or hostile).")
            if depth > limits.max_depth:
                raise FileLimitError(f"{label} nests values more than {limits.max_depth} levels deep; no real file "
                                     "does that (it is damaged or hostile).")
            if nbytes > limits.max_array_bytes:
                raise FileLimitError(f"{label} refers to more than {limits.max_array_bytes:,} bytes of arrays once "
                                     "its shared parts are expanded (it is damaged or hostile).")
            open_ids.discard(key)
            done[key] = (size, depth, nbytes)
            continue
        if key in done:
            continue
        if key in open_ids:
            raise FileLimitError(f"{label} holds a value that contains itself (a cycle); sbtf reads only tree-shaped "
                                 "data from files.")
        open_ids.add(key)
        keep.append(node)
        if len(open_ids) > limits.max_depth + 1:
            raise FileLimitError(f"{label} nests values more than {limits.max_depth} levels deep; no real file "
                                 "does that (it is damaged or hostile).")
        todo.append((node, True))
        for child in children:
            child_key = id(child)
            if child_key in open_ids:
                raise FileLimitError(f"{label} holds a value that contains itself (a cycle); sbtf reads only "
                                     "tree-shaped data from files.")
            if child_key not in done:
                todo.append((child, False))


# ------------------------------------------------------------------------------------------------
# numpy: arrays, dtypes and scalars rebuilt from plain data
# ------------------------------------------------------------------------------------------------
class _Marker:
    """A named, immutable marker value (``numpy.ndarray`` or ``object`` as a class argument)."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path

    def __repr__(self) -> str:
        return f"<{self.path}>"


NDARRAY = _Marker("numpy.ndarray")
OBJECT_BASE = _Marker("builtins.object")

_DTYPE_CODE = re.compile(r"[<>|=]?(?:b1|[iu][1248]|f(?:2|4|8|16))\Z")
_DTYPE_NAMES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                "float32", "float64"}


def plain_dtype(code: Any, where: str = "A dtype in this file") -> np.dtype:
    """The numpy dtype of a plain numeric type code (``'f8'``, ``'<i4'``, ``'b1'``, ``'float32'``) or ModelDataError."""
    if isinstance(code, np.dtype):
        return check_numeric_dtype(code, where)
    if not isinstance(code, str) or not (_DTYPE_CODE.match(code) or code in _DTYPE_NAMES):
        raise ModelDataError(f"{where} has the dtype {_short_repr(code)}; only plain numeric types (bool, int, uint, "
                             "float) can be read from these files.")
    return check_numeric_dtype(np.dtype(code), where)


def _short_repr(value: Any, limit: int = 60) -> str:
    if isinstance(value, (str, bytes, int, float, type(None))):
        return describe_value(value, limit)
    return f"a {type(value).__name__}"


def _plain_int(value: Any) -> bool:
    return type(value) is int or (isinstance(value, np.integer) and not isinstance(value, np.bool_))


def make_array(ctx: SafeUnpickler, shape: Any, dtype: Any, fortran: Any, raw: Any,
               where: str = "An array in this file") -> np.ndarray:
    """
    A writable numpy array from ``(shape, dtype, Fortran order, bytes)``: numeric dtypes only, the data size must be
    ``prod(shape) * itemsize`` exactly, charged to ``max_array_bytes``.
    """
    if not isinstance(dtype, np.dtype):
        raise ModelDataError(f"{where} has no valid dtype (found {_short_repr(dtype)}).")
    check_numeric_dtype(dtype, where)
    if isinstance(shape, list):
        shape = tuple(shape)
    if not isinstance(shape, tuple) or len(shape) > 32 or not all(_plain_int(s) and s >= 0 for s in shape):
        raise ctx.corrupt(f"{where} has an invalid shape {describe_value(shape)}")
    shape = tuple(int(s) for s in shape)
    if any(s > ctx.limits.max_array_bytes for s in shape):
        raise ctx.limit(f"holds an array of shape {describe_value(shape)}")
    if isinstance(raw, str):
        try:
            raw = raw.encode("latin1")
        except UnicodeEncodeError as exc:
            raise ctx.corrupt(f"{where} has text data that is not bytes") from exc
    if isinstance(raw, list):
        raise ModelDataError(f"{where} holds Python objects instead of numbers; only plain numeric arrays can be read.")
    if not isinstance(raw, (bytes, bytearray)):
        raise ctx.corrupt(f"{where} has data of type {type(raw).__name__}, not bytes")
    count = math.prod(shape)
    if count * dtype.itemsize != len(raw):
        raise ctx.corrupt(f"{where} ({dtype} {describe_value(shape)}) needs {count * dtype.itemsize:,} bytes of data but holds "
                          f"{len(raw):,}")
    if fortran not in (True, False, 0, 1):
        raise ctx.corrupt(f"{where} has an invalid order flag")
    ctx.charge_array(len(raw))
    if dtype.kind == "b":
        flat = np.frombuffer(raw, dtype=np.uint8) != 0
    elif dtype.isnative:
        flat = np.frombuffer(bytearray(raw), dtype=dtype)
    else:  # stored in the other byte order: converted, as numpy's own unpickling does
        flat = np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
    return flat.reshape(shape, order="F" if fortran else "C")


class _PendingDtype(Pending):
    """``numpy.dtype(code, align, copy)`` waiting for its BUILD state (only the byte order is taken from it)."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: np.dtype):
        super().__init__()
        self.dtype = dtype

    def default(self, ctx: SafeUnpickler) -> np.dtype:
        return self.dtype

    def build(self, ctx: SafeUnpickler, state: Any) -> np.dtype:
        if not isinstance(state, tuple) or len(state) < 2 or not isinstance(state[0], int):
            raise ctx.corrupt("a numpy dtype has an invalid state")
        order = state[1]
        if order not in ("<", ">", "|", "="):
            raise ctx.corrupt(f"a numpy dtype has the invalid byte order {_short_repr(order)}")
        if any(part is not None for part in state[2:5]):
            raise ModelDataError("A dtype in this file has fields or sub-arrays; only plain numeric types (bool, int, "
                                 "uint, float) can be read from these files.")
        dtype = self.dtype
        native = "<" if sys.byteorder == "little" else ">"
        if order in "<>" and order != native and dtype.itemsize > 1:
            dtype = dtype.newbyteorder(order)
        return check_numeric_dtype(dtype, "A dtype in this file")


def _numpy_dtype(ctx: SafeUnpickler, code: Any = None, align: Any = False, copy: Any = False) -> _PendingDtype:
    if not isinstance(align, (bool, int)) or not isinstance(copy, (bool, int)):
        raise ctx.corrupt("numpy.dtype called with invalid flags")
    return _PendingDtype(plain_dtype(code))


def _numpy_dtype_new(ctx: SafeUnpickler, args: tuple, kwargs: dict) -> _PendingDtype:
    if kwargs:
        raise ctx.corrupt("numpy.dtype created with keyword arguments")
    return _numpy_dtype(ctx, *args)


class _PendingArray(Pending):
    """``numpy.core.multiarray._reconstruct(ndarray, ...)`` waiting for its BUILD state."""

    __slots__ = ()

    def default(self, ctx: SafeUnpickler) -> np.ndarray:
        return np.zeros((0,), dtype=np.int8)

    def build(self, ctx: SafeUnpickler, state: Any) -> np.ndarray:
        if isinstance(state, tuple) and len(state) == 5 and type(state[0]) is int:
            _, shape, dtype, fortran, raw = state
        elif isinstance(state, tuple) and len(state) == 4:
            shape, dtype, fortran, raw = state
        else:
            raise ctx.corrupt("a numpy array has an invalid state")
        return make_array(ctx, shape, dtype, fortran, raw)


def _numpy_reconstruct(ctx: SafeUnpickler, subtype: Any = None, shape: Any = None, code: Any = None) -> _PendingArray:
    if subtype is NDARRAY:
        return _PendingArray()
    if isinstance(subtype, Ref):
        raise ctx.refuse(subtype.path, "build an array of")
    raise ctx.refuse(_describe_callable(subtype) if isinstance(subtype, type) else getattr(subtype, "path", "?"),
                     "build an array of")


def _numpy_frombuffer(ctx: SafeUnpickler, buf: Any = None, dtype: Any = None, shape: Any = None,
                      order: Any = "C") -> np.ndarray:
    if order not in ("C", "F"):
        raise ctx.corrupt(f"a numpy array has the invalid order {_short_repr(order)}")
    return make_array(ctx, shape, dtype, order == "F", buf)


def _numpy_scalar(ctx: SafeUnpickler, dtype: Any = None, raw: Any = None) -> np.generic:
    if not isinstance(dtype, np.dtype):
        raise ModelDataError(f"A numpy scalar in this file has no valid dtype (found {_short_repr(dtype)}).")
    array = make_array(ctx, (), dtype, False, raw, "A numpy scalar in this file")
    return array[()]


_NUMPY_TYPES = {"bool_": np.bool_, "float16": np.float16, "float32": np.float32, "float64": np.float64,
                "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
                "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "half": np.float16,
                "single": np.float32, "double": np.float64, "intc": np.intc, "uintc": np.uintc,
                "longlong": np.longlong, "ulonglong": np.ulonglong}

NUMPY_HANDLERS: Dict[Tuple[str, str], Handler] = {("numpy", "ndarray"): Constant(NDARRAY),
                                                  ("numpy", "dtype"): Function(_numpy_dtype, new=_numpy_dtype_new)}
for _core in ("numpy.core", "numpy._core"):
    NUMPY_HANDLERS[(f"{_core}.multiarray", "_reconstruct")] = Function(_numpy_reconstruct)
    NUMPY_HANDLERS[(f"{_core}.multiarray", "scalar")] = Function(_numpy_scalar)
    NUMPY_HANDLERS[(f"{_core}.numeric", "_frombuffer")] = Function(_numpy_frombuffer)
    NUMPY_HANDLERS[(f"{_core}.multiarray", "_frombuffer")] = Function(_numpy_frombuffer)
for _name, _type in _NUMPY_TYPES.items():
    NUMPY_HANDLERS[("numpy", _name)] = Constant(_type)


# ------------------------------------------------------------------------------------------------
# builtins and collections that are data
# ------------------------------------------------------------------------------------------------
_LATIN1 = {"latin1", "latin-1", "iso-8859-1", "iso8859-1", "l1", "latin"}


def _codecs_encode(ctx: SafeUnpickler, obj: Any = None, encoding: Any = "utf-8", errors: Any = "strict") -> bytes:
    if not isinstance(encoding, str) or encoding.lower().replace("_", "-") not in _LATIN1:
        raise ctx.refuse(f"_codecs.encode with the encoding {_short_repr(encoding)}", "call")
    if not isinstance(obj, str) or errors != "strict":
        raise ctx.corrupt("_codecs.encode is called on something else than text")
    ctx.charge_bytes(len(obj))
    try:
        return obj.encode("latin1")
    except UnicodeEncodeError as exc:
        raise ctx.corrupt("_codecs.encode of text that is not latin-1") from exc


def _iterable_items(ctx: SafeUnpickler, value: Any, what: str) -> list:
    kind = type(value)
    if kind in (list, tuple, set, frozenset, collections.deque):
        items = list(value)
    elif kind in (dict, collections.OrderedDict):
        items = list(value)
    else:
        raise ctx.corrupt(f"{what} is called on a {kind.__name__}")
    ctx.charge(len(items))
    return items


def _pairs(ctx: SafeUnpickler, value: Any, what: str) -> list:
    if type(value) in (dict, collections.OrderedDict):
        ctx.charge(len(value))
        return list(value.items())
    pairs = []
    for item in _iterable_items(ctx, value, what):
        if type(item) not in (list, tuple) or len(item) != 2:
            raise ctx.corrupt(f"{what} is called with items that are not (key, value) pairs")
        pairs.append((item[0], item[1]))
    return pairs


def _builtin_set(ctx: SafeUnpickler, items: Any = ()) -> set:
    return ctx.make_set(_iterable_items(ctx, items, "set"))


def _builtin_frozenset(ctx: SafeUnpickler, items: Any = ()) -> frozenset:
    return ctx.make_set(_iterable_items(ctx, items, "frozenset"), frozen=True)


def _builtin_list(ctx: SafeUnpickler, items: Any = ()) -> list:
    return ctx.make_list(_iterable_items(ctx, items, "list"))


def _builtin_tuple(ctx: SafeUnpickler, items: Any = ()) -> tuple:
    return ctx.make_tuple(_iterable_items(ctx, items, "tuple"))


def _builtin_dict(ctx: SafeUnpickler, items: Any = ()) -> dict:
    return ctx.make_dict(_pairs(ctx, items, "dict"))


def _ordered_dict(ctx: SafeUnpickler, items: Any = ()) -> collections.OrderedDict:
    return ctx.make_dict(_pairs(ctx, items, "OrderedDict"), ordered=True)


def _deque(ctx: SafeUnpickler, items: Any = (), maxlen: Any = None) -> collections.deque:
    if maxlen is not None and not (_plain_int(maxlen) and 0 <= maxlen <= ctx.limits.max_items):
        raise ctx.corrupt("a deque with an invalid maxlen")
    value: collections.deque = collections.deque(maxlen=None if maxlen is None else int(maxlen))
    ctx._register(value, 1, 1)  # noqa: SLF001 - the context's own bookkeeping
    for item in _iterable_items(ctx, items, "deque"):
        ctx.append(value, item)
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _builtin_complex(ctx: SafeUnpickler, real: Any = 0, imag: Any = 0) -> complex:
    if not (_number(real) and _number(imag)):
        raise ctx.corrupt("complex is called on something else than numbers")
    return complex(real, imag)


def _builtin_slice(ctx: SafeUnpickler, *args: Any) -> slice:
    if not 1 <= len(args) <= 3 or not all(a is None or _plain_int(a) for a in args):
        raise ctx.corrupt("slice is called on something else than integers")
    return slice(*args)


def _bytes_from(ctx: SafeUnpickler, source: Any, encoding: Any, name: str) -> bytes:
    if isinstance(source, (bytes, bytearray)):
        ctx.charge_bytes(len(source))
        return bytes(source)
    if isinstance(source, str):
        if not isinstance(encoding, str) or encoding.lower().replace("_", "-") not in _LATIN1 | {"utf-8", "utf8"}:
            raise ctx.refuse(f"builtins.{name} with the encoding {_short_repr(encoding)}", "call")
        try:
            encoded = source.encode(encoding)
        except UnicodeEncodeError as exc:
            raise ctx.corrupt(f"{name} of text that does not fit its encoding") from exc
        ctx.charge_bytes(len(encoded))
        return encoded
    if type(source) in (list, tuple):
        items = _iterable_items(ctx, source, name)
        if not all(_plain_int(v) and 0 <= v < 256 for v in items):
            raise ctx.corrupt(f"{name} of a list that holds something else than byte values")
        ctx.charge_bytes(len(items))
        return bytes(items)
    if _plain_int(source) or isinstance(source, bool):
        raise UnsafeFileError(f"Refusing to load builtins.{name}({_short_repr(source)}) from {ctx.what}: it would "
                              "allocate memory by size, which no stored value needs (the file is damaged or "
                              f"hostile).{ctx.advice}")
    raise ctx.corrupt(f"{name} is called on a {type(source).__name__}")


def _builtin_bytes(ctx: SafeUnpickler, source: Any = b"", encoding: Any = None, errors: Any = None) -> bytes:
    return _bytes_from(ctx, source, encoding, "bytes")


def _builtin_bytearray(ctx: SafeUnpickler, source: Any = b"", encoding: Any = None,
                       errors: Any = None) -> bytearray:
    return bytearray(_bytes_from(ctx, source, encoding, "bytearray"))


def _empty_new(factory: Callable[[SafeUnpickler], Any]) -> Callable[..., Any]:
    """``cls.__new__(cls, ...)`` of a mutable builtin: an empty container (its items come from later opcodes)."""
    def new(ctx: SafeUnpickler, args: tuple, kwargs: dict) -> Any:
        return factory(ctx)
    return new


def _call_new(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``cls.__new__(cls, *args)`` of an immutable builtin: the same as calling it."""
    def new(ctx: SafeUnpickler, args: tuple, kwargs: dict) -> Any:
        if kwargs:
            raise ctx.corrupt("a builtin created with keyword arguments")
        return fn(ctx, *args)
    return new


def _reconstructor(ctx: SafeUnpickler, cls: Any = None, base: Any = None, state: Any = None) -> Any:
    """``copyreg._reconstructor(cls, object, None)`` (protocol 0/1 objects): only for record classes."""
    if isinstance(cls, _RecordMaker) and base is OBJECT_BASE and state is None:
        return cls.safe_new(ctx, (), {})
    if ctx.trusted and isinstance(cls, type) and not isinstance(cls, SafeCallable):
        real_base = object if base is OBJECT_BASE else base
        return copyreg._reconstructor(cls, real_base, state)  # noqa: SLF001 - trusted files only
    if isinstance(cls, (Ref, SafeCallable)):
        raise ctx.refuse(cls.path, "create an object of")
    raise ctx.corrupt("copyreg._reconstructor is called with invalid arguments")


def _newobj(ctx: SafeUnpickler, cls: Any = None, *args: Any) -> Any:
    """``copyreg.__newobj__(cls, *args)``: NEWOBJ as a function."""
    return ctx._new(cls, ctx.make_tuple(args), {})  # noqa: SLF001 - the context's own dispatch


def _newobj_ex(ctx: SafeUnpickler, cls: Any = None, args: Any = (), kwargs: Any = None) -> Any:
    if type(args) is not tuple or not isinstance(kwargs, (dict, type(None))):
        raise ctx.corrupt("copyreg.__newobj_ex__ with invalid arguments")
    return ctx._new(cls, args, dict(kwargs or {}))  # noqa: SLF001


DATA_HANDLERS: Dict[Tuple[str, str], Handler] = {
    ("builtins", "set"): Function(_builtin_set, new=_empty_new(lambda ctx: ctx.make_set())),
    ("builtins", "frozenset"): Function(_builtin_frozenset, new=_call_new(_builtin_frozenset)),
    ("builtins", "list"): Function(_builtin_list, new=_empty_new(lambda ctx: ctx.make_list())),
    ("builtins", "tuple"): Function(_builtin_tuple, new=_call_new(_builtin_tuple)),
    ("builtins", "dict"): Function(_builtin_dict, new=_empty_new(lambda ctx: ctx.make_dict())),
    ("builtins", "complex"): Function(_builtin_complex, new=_call_new(_builtin_complex)),
    ("builtins", "slice"): Function(_builtin_slice),
    ("builtins", "bytes"): Function(_builtin_bytes, new=_call_new(_builtin_bytes)),
    ("builtins", "bytearray"): Function(_builtin_bytearray, new=_empty_new(lambda ctx: bytearray())),
    ("builtins", "object"): Constant(OBJECT_BASE),
    ("builtins", "int"): Constant(int),
    ("builtins", "float"): Constant(float),
    ("builtins", "bool"): Constant(bool),
    ("builtins", "str"): Constant(str),
    ("collections", "OrderedDict"): Function(_ordered_dict,
                                             new=_empty_new(lambda ctx: ctx.make_dict(ordered=True))),
    ("collections", "deque"): Function(_deque, new=_empty_new(lambda ctx: _deque(ctx))),
    ("copyreg", "_reconstructor"): Function(_reconstructor),
    ("copyreg", "__newobj__"): Function(_newobj),
    ("copyreg", "__newobj_ex__"): Function(_newobj_ex),
    ("_codecs", "encode"): Function(_codecs_encode),
}


# ------------------------------------------------------------------------------------------------
# entry point
# ------------------------------------------------------------------------------------------------
def loads(payload: Union[bytes, bytearray, memoryview], resolver: Union[Resolver, Mapping, None] = None,
          what: str = "the file", advice: str = "", trusted: bool = False,
          unknown: Optional[Callable[[str, str], Any]] = None) -> Any:
    """
    Read a pickle without running code from it (see the module docstring).

    :param payload: (bytes) the pickle
    :param resolver: (callable or dict) ``(module, name) -> Handler`` (default: numpy and data builtins only)
    :param what: (str) what is read, for messages (e.g. ``"the statistics file x.pkl"``)
    :param advice: (str) appended to refusals
    :param trusted: (bool) import and call globals the resolver does not know (trusted files only)
    :param unknown: (callable) ``(module, name) -> value`` for unresolved globals (default :class:`Ref`)
    :return: the value, with :class:`Ref`/:class:`Record` stand-ins where the file named classes
    """
    if resolver is None:
        resolver = table_resolver(NUMPY_HANDLERS, DATA_HANDLERS)
    return SafeUnpickler(payload, resolver, what=what, advice=advice, trusted=trusted, unknown=unknown).load()
