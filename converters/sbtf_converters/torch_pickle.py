"""Read PyTorch ``.pth`` files (``torch.save`` of state dicts and tensors) as NumPy arrays, without PyTorch.

Two layouts exist and both are pickles that rebuild tensors from raw storages:

* the zip layout (PyTorch >= 1.6): ``<root>/data.pkl`` whose persistent ids ``('storage', <torch.XStorage>, key,
  location, numel)`` name the members ``<root>/data/<key>``, plus ``<root>/byteorder`` (absent: little endian);
* the legacy layout (older files): consecutive pickles (magic number, protocol version, system info, the value, the
  list of storage keys), then each storage as an 8-byte little-endian element count and its raw bytes.

The pickles are read by :class:`sbtf.common.fileio.safe_pickle.SafeUnpickler` with an allow-list: the torch storage
types (plain numeric dtypes only), ``torch._utils._rebuild_tensor_v2`` / ``_rebuild_tensor`` / ``_rebuild_parameter``
(turned into inert :class:`TensorSpec` records), ``collections.OrderedDict`` and the numpy / builtin data handlers.
A state dict's ``_metadata`` (module versions) is dropped. Once a file's storages are known, every tensor is
materialised with its dtype, shape, stride and offset checked against the storage's real size; tensors may not
outgrow the arrays limit (``sbtf.common.file_errors.get_load_limits().max_array_bytes``) together. Anything else the
pickle names is refused with :class:`UnsafeFileError` (or imported only when ``allow_pickle=True`` for a trusted
file, as for the other readers).
"""
from __future__ import annotations

import collections
import struct
from typing import Any, Dict, Optional, Tuple

import numpy as np

from sbtf.common.fileio import safe_pickle
from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, ModelDataError, UnsafeFileError,
                                     describe_value, get_load_limits)
from sbtf.common.fileio.safe_zip import open_zip, read_member

__all__ = ["TORCH_STORAGE_DTYPES", "TensorSpec", "read_torch_file", "torch_resolver"]

#: the torch storage classes a file may name, and the NumPy dtype of their elements
TORCH_STORAGE_DTYPES: Dict[str, np.dtype] = {
    "DoubleStorage": np.dtype("<f8"), "FloatStorage": np.dtype("<f4"), "HalfStorage": np.dtype("<f2"),
    "LongStorage": np.dtype("<i8"), "IntStorage": np.dtype("<i4"), "ShortStorage": np.dtype("<i2"),
    "CharStorage": np.dtype("<i1"), "ByteStorage": np.dtype("<u1"), "BoolStorage": np.dtype("?"),
}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_MAX_DIMS = 32


class _StorageType(safe_pickle.SafeNode):
    """An allow-listed torch storage class (``torch.FloatStorage``...), as the persistent ids name it."""

    def __init__(self, name: str):
        self.name = name
        self.dtype = TORCH_STORAGE_DTYPES[name]

    def safe_children(self):
        return ()


class _Storage(safe_pickle.SafeNode):
    """A storage the pickle refers to by key (its bytes are read afterwards)."""

    def __init__(self, key: str, dtype: np.dtype, numel: int):
        self.key = key
        self.dtype = dtype
        self.numel = numel

    def safe_children(self):
        return ()


class TensorSpec(safe_pickle.SafeNode):
    """A tensor to rebuild: ``(storage, offset, size, stride)`` as ``_rebuild_tensor_v2`` receives them."""

    def __init__(self, storage: _Storage, offset: int, size: Tuple[int, ...], stride: Tuple[int, ...]):
        self.storage = storage
        self.offset = offset
        self.size = size
        self.stride = stride

    def safe_children(self):
        return ()


def _plain_int(value: Any) -> bool:
    return type(value) is int


def _int_tuple(ctx: safe_pickle.SafeUnpickler, value: Any, what: str) -> Tuple[int, ...]:
    if type(value) not in (tuple, list) or len(value) > _MAX_DIMS or not all(_plain_int(v) and v >= 0 for v in value):
        raise ctx.corrupt(f"a tensor's {what} is not a tuple of at most {_MAX_DIMS} non-negative integers")
    return tuple(value)


def _rebuild_tensor_v2(ctx: safe_pickle.SafeUnpickler, storage: Any = None, offset: Any = 0, size: Any = (),
                       stride: Any = (), requires_grad: Any = False, backward_hooks: Any = None,
                       metadata: Any = None) -> TensorSpec:
    if not isinstance(storage, _Storage):
        raise ctx.corrupt("a tensor is rebuilt from something else than a storage")
    if not _plain_int(offset) or offset < 0:
        raise ctx.corrupt("a tensor's storage offset is not a non-negative integer")
    size_t = _int_tuple(ctx, size, "size")
    stride_t = _int_tuple(ctx, stride, "stride")
    if len(size_t) != len(stride_t):
        raise ctx.corrupt("a tensor's size and stride have different lengths")
    return TensorSpec(storage, offset, size_t, stride_t)


def _rebuild_tensor(ctx: safe_pickle.SafeUnpickler, storage: Any = None, offset: Any = 0, size: Any = (),
                    stride: Any = ()) -> TensorSpec:
    return _rebuild_tensor_v2(ctx, storage, offset, size, stride)


def _rebuild_parameter(ctx: safe_pickle.SafeUnpickler, data: Any = None, requires_grad: Any = False,
                       backward_hooks: Any = None, state: Any = None) -> TensorSpec:
    if not isinstance(data, TensorSpec):
        raise ctx.corrupt("a parameter is rebuilt from something else than a tensor")
    return data


class _StorageTypeHandler(safe_pickle.Handler):
    def resolve(self, ctx, module, name):
        return _StorageType(name)


_TORCH_HANDLERS: Dict[Tuple[str, str], safe_pickle.Handler] = {
    ("torch._utils", "_rebuild_tensor_v2"): safe_pickle.Function(_rebuild_tensor_v2),
    ("torch._utils", "_rebuild_tensor"): safe_pickle.Function(_rebuild_tensor),
    ("torch._utils", "_rebuild_parameter"): safe_pickle.Function(_rebuild_parameter),
    ("torch._utils", "_rebuild_parameter_with_state"): safe_pickle.Function(_rebuild_parameter),
}
for _name in TORCH_STORAGE_DTYPES:
    _TORCH_HANDLERS[("torch", _name)] = _StorageTypeHandler()


def torch_resolver(module: str, name: str) -> Optional[safe_pickle.Handler]:
    """The allow-list of a ``.pth`` pickle: torch's tensor rebuilds and storage types, numpy and data builtins."""
    return _TORCH_HANDLERS.get((module, name)) or safe_pickle.NUMPY_HANDLERS.get((module, name)) or \
        safe_pickle.DATA_HANDLERS.get((module, name))


class _TorchUnpickler(safe_pickle.SafeUnpickler):
    """The safe interpreter with torch's persistent ids (BINPERSID) and state dicts' ``_metadata``."""

    def __init__(self, payload: bytes, what: str, trusted: bool, legacy: bool):
        super().__init__(payload, torch_resolver, what=what, trusted=trusted,
                         advice=" A PyTorch file holds tensors only; pass allow_pickle=True only if you trust it.")
        self.legacy = legacy
        self.storages: Dict[str, _Storage] = {}

    def _persid(self) -> None:  # PERSID ('P', text ids) stays refused: torch writes BINPERSID
        if self.data[self.pos - 1:self.pos] != b"Q":
            super()._persid()
        pid = self._resolve(self._pop())
        if type(pid) is not tuple or len(pid) < 5 or pid[0] != "storage":
            raise self.corrupt("a persistent id that is not a torch storage")
        storage_type, key, numel = pid[1], pid[2], pid[4]  # pid[3]: the device, not used
        if not isinstance(storage_type, _StorageType):
            if isinstance(storage_type, safe_pickle.Ref):
                raise self.refuse(storage_type.path, "rebuild tensors of")
            raise self.corrupt("a storage of an unknown type")
        if not isinstance(key, str) or len(key) > 64 or not _plain_int(numel) or numel < 0:
            raise self.corrupt("a storage with an invalid key or size")
        if self.legacy and len(pid) > 5 and pid[5] is not None:
            raise UnsafeFileError(f"{self.what} uses storage views (a legacy PyTorch layout sbtf does not read); "
                                  "re-save it with a recent PyTorch.")
        known = self.storages.get(key)
        if known is None:
            self.charge(1)
            known = self.storages[key] = _Storage(key, storage_type.dtype, numel)
        elif known.dtype != storage_type.dtype or known.numel != numel:
            raise self.corrupt(f"the storage {key!r} is declared twice with different types or sizes")
        self.stack.append(known)

    def _build(self) -> None:
        state = self.stack[-1] if self.stack else None
        target = self.stack[-2] if len(self.stack) > 1 else None
        if type(target) is collections.OrderedDict and type(state) is dict and set(state) == {"_metadata"}:
            self.stack.pop()  # a state dict's module versions: not data sbtf needs
            return
        super()._build()


def _unpickle(payload: bytes, what: str, trusted: bool, legacy: bool = False) -> Tuple[Any, int, Dict[str, _Storage]]:
    reader = _TorchUnpickler(payload, what, trusted, legacy)
    value = reader.load()
    return value, reader.pos, reader.storages


def _materialise(value: Any, buffers: Dict[str, bytes], byteorder: str, what: str) -> Any:
    """Replace every :class:`TensorSpec` in ``value`` by its checked NumPy array."""
    limits = get_load_limits()
    total = [0]

    def array(spec: TensorSpec) -> np.ndarray:
        storage = spec.storage
        raw = buffers.get(storage.key)
        if raw is None:
            raise CorruptedFileError(f"{what} has no data for its storage {storage.key!r}.")
        dtype = storage.dtype.newbyteorder(">" if byteorder == "big" else "<") if storage.dtype.itemsize > 1 \
            else storage.dtype
        if len(raw) != storage.numel * dtype.itemsize:
            raise CorruptedFileError(f"{what}: the storage {storage.key!r} declares {storage.numel:,} elements of "
                                     f"{dtype.itemsize} bytes but holds {len(raw):,} bytes.")
        count = 1
        for dim in spec.size:
            count *= dim
        if count:
            last = spec.offset + sum((dim - 1) * step for dim, step in zip(spec.size, spec.stride))
            if last >= storage.numel:
                raise CorruptedFileError(f"{what}: a tensor of shape {spec.size} (stride {spec.stride}, offset "
                                         f"{spec.offset}) reaches past the end of its storage {storage.key!r} "
                                         f"({storage.numel:,} elements).")
        nbytes = count * dtype.itemsize
        total[0] += nbytes
        if nbytes > len(raw) or total[0] > limits.max_array_bytes:
            raise FileLimitError(f"{what} rebuilds tensors of more bytes than its storages hold or than the arrays "
                                 f"limit ({limits.max_array_bytes:,} bytes) allows; it is damaged or hostile.")
        base = np.frombuffer(raw, dtype=dtype)
        if not count:
            return np.zeros(spec.size, dtype=dtype.newbyteorder("="))
        view = np.lib.stride_tricks.as_strided(base[spec.offset:], shape=spec.size,
                                               strides=tuple(s * dtype.itemsize for s in spec.stride), writeable=False)
        return np.array(view, dtype=dtype.newbyteorder("="), copy=True)

    def walk(node: Any) -> Any:
        if isinstance(node, TensorSpec):
            return array(node)
        if type(node) in (dict, collections.OrderedDict):
            return type(node)((key, walk(item)) for key, item in node.items())
        if type(node) in (list, tuple):
            return type(node)(walk(item) for item in node)
        return node

    return walk(value)


def _read_zip_layout(payload: bytes, what: str, trusted: bool) -> Any:
    limits = get_load_limits()
    with open_zip(payload, what) as archive:
        names = archive.namelist()
        pickles = [name for name in names if name.endswith("/data.pkl") and name.count("/") == 1]
        if len(pickles) != 1:
            raise CorruptedFileError(f"{what} is a zip archive without one '<name>/data.pkl' member: not a PyTorch "
                                     "file.")
        root = pickles[0][: -len("data.pkl")]
        value, _, storages = _unpickle(read_member(archive, pickles[0], limits.max_json_bytes, what),
                                       f"the pickle of {what}", trusted)
        byteorder = "little"
        if f"{root}byteorder" in names:
            byteorder = read_member(archive, f"{root}byteorder", 16, what).decode("ascii", "replace").strip()
            if byteorder not in ("little", "big"):
                raise CorruptedFileError(f"{what} declares the byte order {byteorder[:16]!r}.")
        buffers = {}
        budget = limits.max_array_bytes
        for key, storage in storages.items():
            expected = storage.numel * storage.dtype.itemsize
            if expected > budget:
                raise FileLimitError(f"{what} declares storages of more than {limits.max_array_bytes:,} bytes; it is "
                                     "damaged or hostile.")
            budget -= expected
            member = f"{root}data/{key}"
            if member not in names:
                raise CorruptedFileError(f"{what} has no member {member!r} for a storage its pickle uses.")
            buffers[key] = read_member(archive, member, expected, what)
    return _materialise(value, buffers, byteorder, what)


def _read_legacy_layout(payload: bytes, what: str, trusted: bool) -> Any:
    limits = get_load_limits()
    pos = 0
    header = []
    for _ in range(3):  # magic number, protocol version, system info
        item, used, _ = _unpickle(payload[pos:], f"the header of {what}", False)
        header.append(item)
        pos += used
    if header[0] != _LEGACY_MAGIC:
        raise CorruptedFileError(f"{what} is not a PyTorch file (wrong magic number).")
    if header[1] != 1001:
        raise CorruptedFileError(f"{what} has the PyTorch protocol version {describe_value(header[1])}, "
                                 "not 1001.")
    sys_info = header[2]
    if type(sys_info) is dict and sys_info.get("little_endian") is False:
        byteorder = "big"
    else:
        byteorder = "little"
    value, used, storages = _unpickle(payload[pos:], f"the pickle of {what}", trusted, legacy=True)
    pos += used
    keys, used, _ = _unpickle(payload[pos:], f"the storage list of {what}", False)
    pos += used
    if type(keys) is not list or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
        raise CorruptedFileError(f"{what} has no valid list of storage keys.")
    buffers = {}
    for key in keys:
        storage = storages.get(key)
        if storage is None:
            raise CorruptedFileError(f"{what} stores a storage {key[:64]!r} that its pickle never uses.")
        if pos + 8 > len(payload):
            raise CorruptedFileError(f"{what} is truncated (in the storage {key[:64]!r}).")
        (numel,) = struct.unpack("<q", payload[pos:pos + 8])
        pos += 8
        if numel != storage.numel:
            raise CorruptedFileError(f"{what}: the storage {key[:64]!r} is declared with {storage.numel:,} elements "
                                     f"but stored with {numel:,}.")
        nbytes = numel * storage.dtype.itemsize
        if nbytes > limits.max_array_bytes or pos + nbytes > len(payload):
            raise CorruptedFileError(f"{what} is truncated or lies about the size of its storage {key[:64]!r}.")
        buffers[key] = payload[pos:pos + nbytes]
        pos += nbytes
    if set(keys) != set(storages):
        raise CorruptedFileError(f"{what} lacks the data of some storages its pickle uses.")
    return _materialise(value, buffers, byteorder, what)


def read_torch_file(payload: bytes, what: str = "the PyTorch file", allow_pickle: bool = False) -> Any:
    """
    The value a ``.pth`` file holds (a state dict: an ``OrderedDict`` of name -> ``np.ndarray``), read without
    PyTorch and without running code from the file.

    :param payload: (bytes) the file
    :param what: (str) the file, for messages
    :param allow_pickle: (bool) import globals the allow-list does not know (trusted files only)
    :raises ModelFileError: typed errors (``CorruptedFileError``, ``UnsafeFileError``, ``FileLimitError``)
    """
    if payload[:2] == b"PK":
        return _read_zip_layout(payload, what, allow_pickle)
    if payload[:1] == b"\x80":
        return _read_legacy_layout(payload, what, allow_pickle)
    raise CorruptedFileError(f"{what} is not a PyTorch file (neither a zip archive nor a pickle).")


def state_dict_arrays(value: Any, what: str) -> "collections.OrderedDict[str, np.ndarray]":
    """``value`` checked to be a mapping of names to arrays (what ``policy.pth`` holds)."""
    if type(value) not in (dict, collections.OrderedDict):
        raise ModelDataError(f"{what} does not hold a state dict (a mapping of names to tensors).")
    out: "collections.OrderedDict[str, np.ndarray]" = collections.OrderedDict()
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, np.ndarray):
            raise ModelDataError(f"{what} holds {describe_value(key)} -> "
                                 f"{type(item).__name__}, not a named tensor.")
        out[key] = item
    return out


__all__ += ["state_dict_arrays"]
