"""The handlers of the safe pickle reader (:mod:`sbtf.common.fileio.safe_pickle`) for data globals: numpy arrays,
dtypes and scalars rebuilt from plain data (:data:`NUMPY_HANDLERS`), builtins and collections
(:data:`DATA_HANDLERS`)."""
from __future__ import annotations

import collections
import copyreg
import math
import re
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, Tuple

import numpy as np

from sbtf.common.file_errors import ModelDataError, UnsafeFileError, describe_value
from sbtf.common.fileio.pickle_values import (Constant, Function, Handler, Pending, Ref, SafeCallable,
                                              _describe_callable, _RecordMaker)
from sbtf.common.fileio.safe_zip import check_numeric_dtype

if TYPE_CHECKING:  # the interpreter that calls these (it imports this module)
    from sbtf.common.fileio.safe_pickle import SafeUnpickler


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
        raise ctx.corrupt(f"{where} ({dtype} {describe_value(shape)}) needs {count * dtype.itemsize:,} bytes of data "
                          f"but holds {len(raw):,}")
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
