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
import gc
import struct
import sys
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, LoadLimits, ModelFileError, UnsafeFileError,
                                     describe_value, get_load_limits)
from sbtf.common.fileio.pickle_handlers import (DATA_HANDLERS, NDARRAY, NUMPY_HANDLERS, OBJECT_BASE, make_array,
                                                plain_dtype)
from sbtf.common.fileio.pickle_values import (Constant, Function, Handler, Pending, Record, RecordClass, Ref,
                                              Reference, Resolver, SafeBuildable, SafeCallable, SafeNode, _clip,
                                              _describe_callable, _UNSET, check_tree, table_resolver)

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

# items charged when an opcode runs: 1 for every opcode that pushes a value (or, MARK, opens a new stack);
# 0 for those that only move values or charge what they add themselves (APPEND(S), SETITEM(S), ADDITEMS, the
# memo); an empty set is four times a dict's memory.
_OPCODE_ITEMS = bytearray([1]) * 256
for _code in b".\x80\x95" + b"01" + b"aesu\x90" + b"b" + b"pqr\x94":
    _OPCODE_ITEMS[_code] = 0
_OPCODE_ITEMS[0x8F] = 4
_OPCODE_ITEMS = bytes(_OPCODE_ITEMS)



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
        return UnsafeFileError(f"Refusing to load {_clip(path)} from {self.what} (the file asks to {action} it): "
                               f"it is not on sbtf's allow-list of data, so loading it could run code.{self.advice}")

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
