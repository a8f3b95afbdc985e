"""Bounded reads of zip archives and ``.npz``/``.npy`` data from files that may be hostile.

``np.load`` trusts an ``.npy`` header: it allocates whatever shape and dtype the header announces before it
reads a byte of data (a 400-byte member can ask for gigabytes), accepts structured and sub-array dtypes, and
a zip member may decompress to far more than its stored size. Here every size is checked *before* anything
is allocated or decompressed:

* a zip member is read only when its declared size is within the limit (and the read stops there);
* an ``.npy`` header must describe a plain numeric array (bool, int, uint, float; no fields, no sub-arrays,
  no objects), its data size must equal what the member holds, and the total must fit the caller's
  expectation (e.g. the model's own parameter shapes) or the configured cap.

All failures raise :mod:`sbtf.common.file_errors` types.
"""
from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib
from collections import OrderedDict
from typing import IO, Dict, Iterable, Mapping, Optional, Tuple, Union

import numpy as np

from sbtf.common.file_errors import CorruptedFileError, FileLimitError, ModelDataError, get_load_limits

__all__ = ["read_file_limited", "open_zip", "read_member", "check_member_size", "npy_header", "read_npz", "read_npy", "NUMERIC_KINDS", "check_numeric_dtype"]

NUMERIC_KINDS = "biuf"
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, struct.error, NotImplementedError, RuntimeError,
               ValueError, IndexError, KeyError, UnicodeDecodeError, zipfile.LargeZipFile)

Source = Union[bytes, bytearray, str, os.PathLike, IO[bytes]]


def read_file_limited(source: Union[bytes, bytearray, str, os.PathLike, IO[bytes]], what: str = "file") -> bytes:
    """The bytes of a path, binary file or bytes, refusing files beyond the ``max_file_bytes`` limit before reading."""
    limit = get_load_limits().max_file_bytes
    if isinstance(source, (bytes, bytearray)):
        payload = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        if os.path.isdir(source):
            raise CorruptedFileError(f"{os.fspath(source)} is a folder, not a {what}.")
        size = os.path.getsize(source)
        if size > limit:
            raise FileLimitError(f"{os.fspath(source)} is {size:,} bytes, larger than the {limit:,}-byte limit for a "
                                 f"{what}; raise it with sbtf.common.file_errors.load_limits(max_file_bytes=...) if "
                                 "you trust the file.")
        with open(source, "rb") as handle:
            payload = handle.read(limit + 1)
    else:
        payload = source.read(limit + 1)
        if not isinstance(payload, (bytes, bytearray)):
            raise CorruptedFileError(f"The {what} was opened in text mode; open it in binary mode ('rb').")
        payload = bytes(payload)
    if len(payload) > limit:
        raise FileLimitError(f"The {what} is larger than the {limit:,}-byte limit; raise it with "
                             "sbtf.common.file_errors.load_limits(max_file_bytes=...) if you trust the file.")
    return payload


def open_zip(source: Source, what: str = "file") -> zipfile.ZipFile:
    """Open a zip archive; a damaged one raises :class:`CorruptedFileError`."""
    try:
        if isinstance(source, (bytes, bytearray)):
            return zipfile.ZipFile(io.BytesIO(bytes(source)))
        return zipfile.ZipFile(source)
    except _ZIP_ERRORS as exc:
        raise CorruptedFileError(f"The {what} is not a readable zip archive: it is truncated or corrupted "
                                 f"({type(exc).__name__}: {exc}).") from exc


_RATIO_FREE_BYTES = 16 << 20


def check_member_size(info: zipfile.ZipInfo, max_bytes: int, what: str) -> None:
    """Refuse a member that declares more than ``max_bytes``, or a large one that is compressed like a zip bomb."""
    limits = get_load_limits()
    if info.file_size > max_bytes:
        raise FileLimitError(f"Member {info.filename!r} of the {what} declares {info.file_size:,} bytes once "
                             f"decompressed, more than the limit of {max_bytes:,} for it; the file is damaged or "
                             "hostile (a zip bomb). If you trust it, raise the limit with "
                             "sbtf.common.file_errors.load_limits().")
    if info.file_size > _RATIO_FREE_BYTES and info.file_size > limits.max_compression_ratio * max(info.compress_size, 1):
        raise FileLimitError(f"Member {info.filename!r} of the {what} inflates {info.compress_size:,} bytes to "
                             f"{info.file_size:,}, a ratio no real model file has (a zip bomb). If you trust it, "
                             "raise max_compression_ratio with sbtf.common.file_errors.load_limits().")


def read_member(archive: zipfile.ZipFile, name: str, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of one zip member, refusing members that declare more than ``max_bytes``."""
    try:
        info = archive.getinfo(name)
    except KeyError as exc:
        raise CorruptedFileError(f"The {what} has no {name!r} member; it is truncated or not this kind of "
                                 "file.") from exc
    check_member_size(info, max_bytes, what)
    try:
        with archive.open(info) as handle:
            payload = handle.read(info.file_size + 1)
    except _ZIP_ERRORS as exc:
        raise CorruptedFileError(f"Member {name!r} of the {what} cannot be read: the file is truncated or corrupted "
                                 f"({type(exc).__name__}: {exc}).") from exc
    if len(payload) != info.file_size:
        raise CorruptedFileError(f"Member {name!r} of the {what} holds {len(payload):,} bytes but declares "
                                 f"{info.file_size:,}; the file is corrupted.")
    return payload


def check_numeric_dtype(dtype: np.dtype, where: str) -> np.dtype:
    """``dtype`` itself when it is a plain numeric dtype, else :class:`ModelDataError`."""
    if (not isinstance(dtype, np.dtype) or dtype.kind not in NUMERIC_KINDS or dtype.fields is not None
            or dtype.subdtype is not None or dtype.hasobject or dtype.itemsize > 16):
        raise ModelDataError(f"{where} has dtype {dtype!s}; only plain numeric arrays (bool, int, uint, float) can "
                             "be stored in these files.")
    return dtype


def _element_count(shape: Tuple[int, ...], where: str) -> int:
    if not isinstance(shape, tuple) or not all(isinstance(s, int) and s >= 0 for s in shape) or len(shape) > 32:
        raise CorruptedFileError(f"{where} has an invalid shape {shape!r}.")
    count = 1
    for size in shape:
        count *= size
    return count


def npy_header(handle: IO[bytes], where: str) -> Tuple[Tuple[int, ...], bool, np.dtype, int]:
    """Parse an ``.npy`` header: ``(shape, fortran_order, dtype, data bytes)``; nothing is allocated."""
    from numpy.lib import format as npy_format

    try:
        version = npy_format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(handle, max_header_size=10000)
        elif version == (2, 0):
            shape, fortran, dtype = npy_format.read_array_header_2_0(handle, max_header_size=10000)
        else:
            shape, fortran, dtype = npy_format._read_array_header(handle, version, max_header_size=10000)  # noqa
    except (ValueError, TypeError, SyntaxError, struct.error, OSError, EOFError, zlib.error, zipfile.BadZipFile,
            KeyError, RecursionError, MemoryError, OverflowError, UnicodeDecodeError, RuntimeError) as exc:
        raise CorruptedFileError(f"{where} has no valid .npy header ({type(exc).__name__}: {exc}).") from exc
    check_numeric_dtype(dtype, where)
    nbytes = _element_count(shape, where) * dtype.itemsize
    return shape, bool(fortran), dtype, nbytes


def _read_array(handle: IO[bytes], shape: Tuple[int, ...], fortran: bool, dtype: np.dtype, nbytes: int,
                where: str) -> np.ndarray:
    try:
        data = handle.read(nbytes + 1)
    except _ZIP_ERRORS as exc:
        raise CorruptedFileError(f"{where} cannot be read: truncated or corrupted ({type(exc).__name__}: "
                                 f"{exc}).") from exc
    if len(data) != nbytes:
        raise CorruptedFileError(f"{where} holds {len(data):,} bytes of data but its header announces {nbytes:,}; the "
                                 "file is truncated or corrupted.")
    array = np.frombuffer(bytearray(data), dtype=dtype)
    return array.reshape(shape[::-1]).transpose() if fortran else array.reshape(shape)


def read_npz(source: Source, names: Optional[Iterable[str]] = None,
             expected_sizes: Optional[Mapping[str, int]] = None, max_bytes: Optional[int] = None,
             what: str = "parameters") -> "OrderedDict[str, np.ndarray]":
    """
    Read the arrays of an ``.npz`` archive safely.

    :param source: (bytes, path or binary file) the archive
    :param names: (iterable of str) the arrays to read, in this order (None: all, in archive order); a missing
        one raises :class:`CorruptedFileError`
    :param expected_sizes: (dict) name -> number of elements the caller expects; an array of another size is
        refused from its header, before its data is read
    :param max_bytes: (int) most array bytes in total (default: the ``max_array_bytes`` limit)
    :param what: (str) what the archive is, for messages
    :return: (OrderedDict) name -> array
    """
    limits = get_load_limits()
    budget = limits.max_array_bytes if max_bytes is None else max_bytes
    archive = open_zip(source, what)
    with archive:
        try:
            infos = archive.infolist()
        except _ZIP_ERRORS as exc:  # pragma: no cover - infolist is built on open
            raise CorruptedFileError(f"The {what} archive is corrupted ({exc}).") from exc
        if len(infos) > limits.max_items:
            raise FileLimitError(f"The {what} archive has {len(infos):,} members, more than the limit "
                                 f"({limits.max_items:,}).")
        by_key: Dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            by_key[key] = info
        wanted = list(by_key) if names is None else [str(n) for n in names]
        missing = [n for n in wanted if n not in by_key]
        if missing:
            raise CorruptedFileError(f"The {what} are incomplete: {missing[:5]}{' ...' if len(missing) > 5 else ''} "
                                     "listed but not stored; the file is truncated or corrupted.")
        out: "OrderedDict[str, np.ndarray]" = OrderedDict()
        total = 0
        for key in wanted:
            info = by_key[key]
            where = f"Array {key!r} of the {what}"
            check_member_size(info, budget - total + 65536, f"{what} archive")
            try:
                handle = archive.open(info)
            except _ZIP_ERRORS as exc:
                raise CorruptedFileError(f"{where} cannot be opened ({type(exc).__name__}: {exc}).") from exc
            with handle:
                shape, fortran, dtype, nbytes = npy_header(handle, where)
                if nbytes > info.file_size:
                    raise CorruptedFileError(f"{where} announces {nbytes:,} bytes of data ({dtype} {shape}) but the "
                                             f"member holds only {info.file_size:,}; the file is truncated or "
                                             "corrupted.")
                if expected_sizes is not None and key in expected_sizes:
                    count = nbytes // dtype.itemsize if dtype.itemsize else 0
                    if count != int(expected_sizes[key]):
                        raise ModelDataError(f"{where} has shape {shape} ({count:,} values) but the model expects "
                                             f"{int(expected_sizes[key]):,} values; the file belongs to another "
                                             "network or is corrupted.")
                if total + nbytes > budget:
                    raise FileLimitError(f"{where} announces {nbytes:,} bytes ({dtype} {shape}), beyond the "
                                         f"{budget:,}-byte limit for this file; the file is damaged or hostile. If you "
                                         "trust it, raise the limit with "
                                         "sbtf.common.file_errors.load_limits(max_array_bytes=...).")
                out[key] = _read_array(handle, shape, fortran, dtype, nbytes, where)
                total += nbytes
        return out


def _remaining_bytes(handle: IO[bytes]) -> Optional[int]:
    try:
        position = handle.tell()
        end = handle.seek(0, io.SEEK_END)
        handle.seek(position)
        return end - position
    except (OSError, AttributeError, ValueError):
        return None


def read_npy(source: Source, max_bytes: Optional[int] = None, what: str = "array file") -> np.ndarray:
    """Read one ``.npy`` file safely (numeric dtypes only; size checked from its header first)."""
    budget = get_load_limits().max_array_bytes if max_bytes is None else max_bytes
    try:
        handle = open(source, "rb") if isinstance(source, (str, os.PathLike)) else (
            io.BytesIO(bytes(source)) if isinstance(source, (bytes, bytearray)) else source)
    except OSError:
        raise
    with handle:
        shape, fortran, dtype, nbytes = npy_header(handle, f"The {what}")
        remaining = _remaining_bytes(handle)
        if remaining is not None and nbytes > remaining:
            raise CorruptedFileError(f"The {what} announces {nbytes:,} bytes of data ({dtype} {shape}) but holds "
                                     f"{remaining:,}; it is truncated or corrupted.")
        if nbytes > budget:
            raise FileLimitError(f"The {what} announces {nbytes:,} bytes ({dtype} {shape}), beyond the {budget:,}-byte "
                                 "limit; raise it with sbtf.common.file_errors.load_limits(max_array_bytes=...) if "
                                 "you trust the file.")
        return _read_array(handle, shape, fortran, dtype, nbytes, f"The {what}")
