"""The values the safe pickle reader (:mod:`sbtf.common.fileio.safe_pickle`) builds and calls: inert nodes and
records, the handlers a resolver maps globals to, and the check that a result is a bounded tree."""
from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from sbtf.common.file_errors import FileLimitError, LoadLimits, describe_value, get_load_limits

if TYPE_CHECKING:  # the interpreter that calls these (it imports this module)
    from sbtf.common.fileio.safe_pickle import SafeUnpickler

_UNSET = object()


def _clip(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters (names of globals read from a file, for messages)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe_callable(value: Any) -> str:
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return f"a {type(value).__name__} value"


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
