"""Bounded reads of zip archives and ``.npz``/``.npy`` data from files that may be hostile.

``np.load`` trusts an ``.npy`` header: it allocates whatever shape and dtype the header announces before it
reads a byte of data (a 400-byte member can ask for gigabytes), accepts structured and sub-array dtypes, and
a zip member may decompress to far more than its stored size. Here every size is checked *before* anything
is allocated or decompressed:

* a zip member is read only when its declared size is within the limit, and every member is inflated by
  sbtf's own decompressors (stored, deflate, bzip2, lzma: every method :mod:`zipfile` supports), which stop
  at the member's declared size (a member that inflates further, or to less, is corrupted) and charge what
  they produce to one output budget per archive (``16 MiB + max_compression_ratio x archive size``, at most
  ``max_file_bytes``); corrupt compressed data raises :class:`CorruptedFileError`, never a ``zlib``/``bz2``/
  ``lzma`` error. :func:`open_zip` returns such an archive, so every ``archive.open``/``archive.read`` of a
  caller is bounded too;
* an ``.npy`` header must describe a plain numeric array (bool, int, uint, float; no fields, no sub-arrays,
  no objects), its data size must equal what the member holds, and the total must fit the caller's
  expectation (e.g. the model's own parameter shapes) or the configured cap.

All failures raise :mod:`sbtf.common.file_errors` types.
"""
from __future__ import annotations

import bz2
import copy
import io
import lzma
import os
import struct
import zipfile
import zlib
from collections import OrderedDict
from typing import IO, Any, Dict, Iterable, Mapping, Optional, Tuple, Union

import numpy as np

from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, ModelDataError, ModelFileError,
                                     describe_value, get_load_limits)

__all__ = ["read_file_limited", "open_zip", "BoundedZipFile", "BoundedMember", "read_member", "check_member_size",
           "npy_header", "parse_npy_header", "read_npz", "read_npy", "NUMERIC_KINDS", "check_numeric_dtype",
           "MAX_NPY_DIMS"]

NUMERIC_KINDS = "biuf"
MAX_NPY_DIMS = 32           # most dimensions of a stored array (numpy 1.x's own limit; numpy 2 allows 64)
_CHUNK = 1 << 18            # compressed bytes fed to a decompressor at a time
_READ_CHUNK = 16 << 20      # most bytes one internal read asks a member for (arrays are read in such chunks)
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
        with open(source, "rb") as handle:  # read(n) allocates n bytes first: ask for what the file has
            payload = handle.read(size + 1)
    else:
        payload = source.read(limit + 1)
        if not isinstance(payload, (bytes, bytearray)):
            raise CorruptedFileError(f"The {what} was opened in text mode; open it in binary mode ('rb').")
        payload = bytes(payload)
    if len(payload) > limit:
        raise FileLimitError(f"The {what} is larger than the {limit:,}-byte limit; raise it with "
                             "sbtf.common.file_errors.load_limits(max_file_bytes=...) if you trust the file.")
    return payload


def _source_size(source: Source) -> Optional[int]:
    """The size in bytes of an archive source (None when it cannot be told without reading it)."""
    if isinstance(source, (bytes, bytearray)):
        return len(source)
    if isinstance(source, (str, os.PathLike)):
        try:
            return os.path.getsize(source)
        except OSError:
            return None
    try:
        position = source.tell()
        end = source.seek(0, io.SEEK_END)
        source.seek(position)
        return int(end)
    except (OSError, AttributeError, ValueError):
        return None


def open_zip(source: Source, what: str = "file") -> "BoundedZipFile":
    """
    Open a zip archive for bounded reading (:class:`BoundedZipFile`); a damaged one raises
    :class:`CorruptedFileError`.
    """
    size = _source_size(source)
    try:
        if isinstance(source, (bytes, bytearray)):
            return BoundedZipFile(io.BytesIO(source), what=what, size=size)
        return BoundedZipFile(source, what=what, size=size)
    except _ZIP_ERRORS as exc:
        raise CorruptedFileError(f"The {what} is not a readable zip archive: it is truncated or corrupted "
                                 f"({type(exc).__name__}: {describe_value(str(exc))}).") from exc


_RATIO_FREE_BYTES = 16 << 20


def output_budget(archive_bytes: Optional[int]) -> int:
    """
    Most bytes all members of one archive of ``archive_bytes`` bytes may inflate to, together:
    ``16 MiB + max_compression_ratio x archive_bytes``, never more than ``max_file_bytes``.
    """
    limits = get_load_limits()
    if archive_bytes is None:
        return limits.max_file_bytes
    return min(limits.max_file_bytes, _RATIO_FREE_BYTES + limits.max_compression_ratio * max(int(archive_bytes), 0))


class BoundedZipFile(zipfile.ZipFile):
    """
    A read-only :class:`zipfile.ZipFile` whose members are inflated by :class:`BoundedMember` (sbtf's own
    decompressors, which never produce more than a member declares) and whose members together never produce
    more than :func:`output_budget` of the archive's size. ``bytes_out`` counts what was produced.

    :param file: (path or binary file) the archive
    :param what: (str) what the archive is, for messages
    :param size: (int) the archive's size in bytes (None: unknown, then only ``max_file_bytes`` bounds the output)
    """

    def __init__(self, file: Union[str, os.PathLike, IO[bytes]], what: str = "file", size: Optional[int] = None):
        super().__init__(file, "r")
        self.what = what
        self.output_limit = output_budget(size)
        self.bytes_out = 0

    def charge_output(self, count: int, member: str) -> None:
        """Count ``count`` bytes produced by a member against the archive's output budget."""
        self.bytes_out += count
        if self.bytes_out > self.output_limit:
            raise FileLimitError(f"The {self.what}'s members inflate to more than {self.output_limit:,} bytes in all "
                                 f"(reached while reading {describe_value(member)}), a ratio to the archive's size no "
                                 "real file has (a zip bomb). If you trust it, raise max_compression_ratio or "
                                 "max_file_bytes with sbtf.common.file_errors.load_limits().")

    def open(self, name: Union[str, zipfile.ZipInfo], mode: str = "r", pwd: Optional[bytes] = None, *,
             force_zip64: bool = False) -> "BoundedMember":  # type: ignore[override]
        """A :class:`BoundedMember` reading ``name`` (reading only; ``pwd`` is refused: encrypted members are)."""
        if mode != "r":
            raise ValueError("archives opened by sbtf.common.fileio.safe_zip are read-only")
        if isinstance(name, zipfile.ZipInfo):
            info = name
        else:
            try:
                info = self.getinfo(name)
            except KeyError as exc:
                raise CorruptedFileError(f"The {self.what} has no {describe_value(name)} member; it is truncated or "
                                         "not this kind of file.") from exc
        return BoundedMember(self, info)


_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate", zipfile.ZIP_BZIP2: "bzip2",
            zipfile.ZIP_LZMA: "lzma"}
_DECOMPRESS_ERRORS = (zlib.error, lzma.LZMAError, OSError, EOFError, ValueError, TypeError, struct.error,
                      zipfile.BadZipFile, NotImplementedError, RuntimeError, IndexError, KeyError)


class BoundedMember(io.RawIOBase):
    """
    One member of a :class:`BoundedZipFile`, inflated by sbtf's own decompressor: never more than the member's
    declared size is produced (a stream that would give more, or ends before, raises :class:`CorruptedFileError`;
    so does a wrong CRC), each call inflates at most what it was asked for, and every byte is charged to the
    archive's output budget. Corrupt data of any method raises :class:`CorruptedFileError`.
    """

    def __init__(self, archive: BoundedZipFile, info: zipfile.ZipInfo):
        super().__init__()
        self._archive = archive
        self._info = info
        self._where = f"Member {describe_value(info.filename)} of the {archive.what}"
        self._left = int(info.file_size)
        self._crc = 0
        self._tail = b""
        self._raw_count = 0
        self._decompressor: Any = None
        self._finished = False
        method = info.compress_type
        if method not in _METHODS:
            raise CorruptedFileError(f"{self._where} is compressed with method {describe_value(method)}, which sbtf "
                                     "does not read (stored, deflate, bzip2 and lzma are read).")
        if info.flag_bits & 0x41:  # encrypted (traditional or strong)
            raise CorruptedFileError(f"{self._where} is encrypted; sbtf does not read encrypted files.")
        if method == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise CorruptedFileError(f"{self._where} is stored uncompressed but declares {info.file_size:,} bytes for "
                                     f"{info.compress_size:,} stored; the file is corrupted.")
        self._method = method
        raw_info = copy.copy(info)  # the member's compressed bytes, read as a stored member without a CRC check
        raw_info.compress_type = zipfile.ZIP_STORED
        raw_info.file_size = info.compress_size
        try:
            del raw_info.CRC
        except AttributeError:
            pass
        try:
            self._raw = zipfile.ZipFile.open(archive, raw_info)
        except ModelFileError:
            raise
        except _DECOMPRESS_ERRORS as exc:
            raise self._corrupt("cannot be opened", exc) from exc
        if method == zipfile.ZIP_DEFLATED:
            self._decompressor = zlib.decompressobj(-15)
        elif method == zipfile.ZIP_BZIP2:
            self._decompressor = bz2.BZ2Decompressor()

    # ----- errors --------------------------------------------------------------------------------
    def _corrupt(self, detail: str, exc: Optional[BaseException] = None) -> CorruptedFileError:
        cause = f" ({type(exc).__name__}: {describe_value(str(exc))})" if exc is not None else ""
        return CorruptedFileError(f"{self._where} {detail}{cause}; the file is truncated or corrupted.")

    # ----- io ------------------------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def read(self, size: Optional[int] = -1) -> bytes:
        """At most ``size`` bytes (all that remain when ``size`` is None or negative); ``b""`` at the end."""
        if self.closed:
            raise ValueError("read from a closed member")
        want = self._left if size is None or size < 0 else min(int(size), self._left)
        if want <= 0:
            self._finish()
            return b""
        parts = []
        got = 0
        while got < want:
            chunk = self._produce(min(want - got, _READ_CHUNK))
            parts.append(chunk)
            got += len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[:len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            raw = getattr(self, "_raw", None)
            if raw is not None:
                raw.close()
        super().close()

    # ----- decompression -------------------------------------------------------------------------
    def _raw_read(self, count: int) -> bytes:
        try:
            data = self._raw.read(count)
            self._raw_count += len(data)
            return data
        except ModelFileError:
            raise
        except _DECOMPRESS_ERRORS as exc:
            raise self._corrupt("cannot be read", exc) from exc

    def _start_lzma(self) -> None:
        """zip's LZMA: a 4-byte header (version, properties size), 5 property bytes, then a raw LZMA1 stream."""
        header = self._raw_read(4)
        if len(header) != 4:
            raise self._corrupt("has a truncated LZMA header")
        size = struct.unpack("<H", header[2:4])[0]
        props = self._raw_read(size)
        if size != 5 or len(props) != 5 or props[0] >= 9 * 5 * 5:
            raise self._corrupt("has invalid LZMA properties")
        lc, rest = props[0] % 9, props[0] // 9
        lp, pb = rest % 5, rest // 5
        declared = int.from_bytes(props[1:5], "little")
        # the window never needs to be larger than what the member holds (liblzma allocates all of it)
        dict_size = max(4096, min(declared, max(self._left, 4096)))
        try:
            self._decompressor = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[
                {"id": lzma.FILTER_LZMA1, "dict_size": dict_size, "lc": lc, "lp": lp, "pb": pb}])
        except _DECOMPRESS_ERRORS as exc:
            raise self._corrupt("has invalid LZMA properties", exc) from exc

    def _inflate(self, max_length: int) -> Tuple[bytes, bool]:
        """Up to ``max_length`` (> 0) bytes from the decompressor; ``(data, input left)``."""
        decompressor = self._decompressor
        if self._method == zipfile.ZIP_DEFLATED:
            if not self._tail:
                self._tail = self._raw_read(_CHUNK)
            had_input = bool(self._tail)
            out = decompressor.decompress(self._tail, max_length)
            self._tail = decompressor.unconsumed_tail
            return out, had_input or bool(self._tail)
        if decompressor.eof:
            return b"", False
        data = b""
        if decompressor.needs_input:
            data = self._raw_read(_CHUNK)
            if not data:
                return b"", False
        return decompressor.decompress(data, max_length), True

    def _at_end(self) -> bool:
        decompressor = self._decompressor
        return decompressor is not None and getattr(decompressor, "eof", False)

    def _produce(self, want: int) -> bytes:
        """Between 1 and ``want`` bytes (``want`` <= what is left), or an error: the stream ends too early."""
        room = self._archive.output_limit - self._archive.bytes_out
        want = max(1, min(want, room + 1))  # never more than one byte past the archive's budget
        try:
            if self._method == zipfile.ZIP_STORED:
                out = self._raw_read(want)
            else:
                if self._decompressor is None:
                    self._start_lzma()
                out = b""
                stalls = 0
                while not out:
                    before = (self._raw_count, len(self._tail))
                    out, more = self._inflate(want)
                    if not out and (not more or self._at_end()):
                        break
                    if not out and (self._raw_count, len(self._tail)) == before:
                        stalls += 1  # no input taken, nothing given: a decompressor that cannot move on
                        if stalls > 2:
                            raise self._corrupt("holds compressed data that does not decode")
        except ModelFileError:
            raise
        except MemoryError as exc:
            raise FileLimitError(f"{self._where} needs more memory to inflate than is available.") from exc
        except _DECOMPRESS_ERRORS as exc:
            raise self._corrupt("holds corrupt compressed data", exc) from exc
        if not out:
            raise self._corrupt(f"ends {self._left:,} bytes before its declared size of {self._info.file_size:,}")
        if len(out) > want:  # the decompressors honour max_length; this cannot happen with a correct one
            raise self._corrupt("inflates to more than asked")
        self._archive.charge_output(len(out), self._info.filename)
        self._left -= len(out)
        self._crc = zlib.crc32(out, self._crc)
        if self._left == 0:
            self._finish()
        return out

    def _finish(self) -> None:
        """At the declared size: the stream must not inflate further and the CRC must match."""
        if self._finished:
            return
        self._finished = True
        if self._method != zipfile.ZIP_STORED and self._decompressor is not None:
            try:
                while not self._at_end():
                    extra, more = self._inflate(1)
                    if extra:
                        raise self._corrupt(f"inflates to more than its declared size of {self._info.file_size:,} "
                                            "bytes (a zip bomb or a damaged header)")
                    if not more:
                        break
            except ModelFileError:
                raise
            except _DECOMPRESS_ERRORS as exc:
                raise self._corrupt("holds corrupt compressed data", exc) from exc
        if self._crc != self._info.CRC:
            raise self._corrupt("fails its CRC check")


def check_member_size(info: zipfile.ZipInfo, max_bytes: int, what: str) -> None:
    """Refuse a member that declares more than ``max_bytes``, or a large one that is compressed like a zip bomb."""
    limits = get_load_limits()
    if info.file_size > max_bytes:
        raise FileLimitError(f"Member {describe_value(info.filename)} of the {what} declares {info.file_size:,} bytes "
                             f"once decompressed, more than the limit of {max_bytes:,} for it; the file is damaged or "
                             "hostile (a zip bomb). If you trust it, raise the limit with "
                             "sbtf.common.file_errors.load_limits().")
    if (info.file_size > _RATIO_FREE_BYTES
            and info.file_size > limits.max_compression_ratio * max(info.compress_size, 1)):
        raise FileLimitError(f"Member {describe_value(info.filename)} of the {what} inflates {info.compress_size:,} "
                             f"bytes to {info.file_size:,}, a ratio no real model file has (a zip bomb). If you trust "
                             "it, raise max_compression_ratio with sbtf.common.file_errors.load_limits().")


def _bounded(archive: zipfile.ZipFile) -> BoundedZipFile:
    if not isinstance(archive, BoundedZipFile):
        raise TypeError("open archives with sbtf.common.fileio.safe_zip.open_zip: only its members are read bounded")
    return archive


def read_member(archive: zipfile.ZipFile, name: str, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of one member of an archive from :func:`open_zip`, refusing members that declare more than
    ``max_bytes`` (and, while inflating, any that would give more than they declare)."""
    archive = _bounded(archive)
    try:
        info = archive.getinfo(name)
    except KeyError as exc:
        raise CorruptedFileError(f"The {what} has no {describe_value(name)} member; it is truncated or not this kind "
                                 "of file.") from exc
    check_member_size(info, max_bytes, what)
    with archive.open(info) as handle:
        payload = handle.read()
        handle.read(1)  # at the end: checks that nothing follows and the CRC
    if len(payload) != info.file_size:  # pragma: no cover - BoundedMember gives exactly the declared size
        raise CorruptedFileError(f"Member {describe_value(name)} of the {what} holds {len(payload):,} bytes but "
                                 f"declares {info.file_size:,}; the file is corrupted.")
    return payload


def check_numeric_dtype(dtype: np.dtype, where: str) -> np.dtype:
    """``dtype`` itself when it is a plain numeric dtype, else :class:`ModelDataError`."""
    if (not isinstance(dtype, np.dtype) or dtype.kind not in NUMERIC_KINDS or dtype.fields is not None
            or dtype.subdtype is not None or dtype.hasobject or dtype.itemsize > 16):
        raise ModelDataError(f"{where} has dtype {describe_value(str(dtype))}; only plain numeric arrays (bool, int, "
                             "uint, float) can be stored in these files.")
    return dtype


def _element_count(shape: Tuple[int, ...], where: str) -> int:
    if (not isinstance(shape, tuple) or len(shape) > MAX_NPY_DIMS
            or not all(type(s) is int and s >= 0 for s in shape)):
        raise CorruptedFileError(f"{where} has an invalid shape {describe_value(shape)} (at most {MAX_NPY_DIMS} "
                                 "non-negative integer dimensions).")
    count = 1
    for size in shape:
        count *= size
    return count


def parse_npy_header(handle: IO[bytes], where: str) -> Tuple[Tuple[int, ...], bool, np.dtype]:
    """
    ``(shape, fortran_order, dtype)`` of an ``.npy`` header, whatever its dtype; nothing is allocated. Any malformed
    header (bad magic, unknown version, a ``descr`` numpy cannot read, a shape that is not a tuple of at most
    :data:`MAX_NPY_DIMS` non-negative integers, ``True`` included) raises :class:`CorruptedFileError`.
    """
    from numpy.lib import format as npy_format

    try:
        version = npy_format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(handle, max_header_size=10000)
        elif version == (2, 0):
            shape, fortran, dtype = npy_format.read_array_header_2_0(handle, max_header_size=10000)
        elif version == (3, 0):
            shape, fortran, dtype = npy_format._read_array_header(handle, version, max_header_size=10000)  # noqa
        else:
            raise ValueError(f"unknown .npy format version {version}")
    except ModelFileError:
        raise
    except MemoryError as exc:
        raise FileLimitError(f"{where} has an .npy header that needs more memory than is available.") from exc
    except Exception as exc:  # noqa: BLE001 - numpy raises many kinds (IndexError, TypeError...) on odd headers
        raise CorruptedFileError(f"{where} has no valid .npy header ({type(exc).__name__}: "
                                 f"{describe_value(str(exc))}).") from exc
    _element_count(shape, where)
    if not isinstance(dtype, np.dtype) or type(fortran) is not bool:
        raise CorruptedFileError(f"{where} has no valid .npy header (dtype {describe_value(dtype)}, order "
                                 f"{describe_value(fortran)}).")
    return shape, fortran, dtype


def npy_header(handle: IO[bytes], where: str) -> Tuple[Tuple[int, ...], bool, np.dtype, int]:
    """Parse a numeric ``.npy`` header: ``(shape, fortran_order, dtype, data bytes)``; nothing is allocated."""
    shape, fortran, dtype = parse_npy_header(handle, where)
    check_numeric_dtype(dtype, where)
    nbytes = _element_count(shape, where) * dtype.itemsize
    return shape, bool(fortran), dtype, nbytes


def read_exactly(handle: IO[bytes], nbytes: int, where: str, check_end: bool = True) -> bytearray:
    """
    ``nbytes`` bytes of ``handle`` in a bytearray, read in chunks (nothing is allocated beyond what the stream
    really gives), then (``check_end``) checks that the stream holds nothing more; otherwise
    :class:`CorruptedFileError`.
    """
    data = bytearray()
    try:
        while len(data) < nbytes:
            chunk = handle.read(min(nbytes - len(data), _READ_CHUNK))
            if not chunk:
                break
            data += chunk
        extra = handle.read(1) if check_end and len(data) == nbytes else b""
    except ModelFileError:
        raise
    except _ZIP_ERRORS as exc:
        raise CorruptedFileError(f"{where} cannot be read: truncated or corrupted ({type(exc).__name__}: "
                                 f"{describe_value(str(exc))}).") from exc
    if len(data) != nbytes or extra:
        raise CorruptedFileError(f"{where} holds {'more than ' if extra else ''}{len(data):,} bytes of data but its "
                                 f"header announces {nbytes:,}; the file is truncated or corrupted.")
    return data


def _read_array(handle: IO[bytes], shape: Tuple[int, ...], fortran: bool, dtype: np.dtype, nbytes: int,
                where: str, check_end: bool = True) -> np.ndarray:
    array = np.frombuffer(read_exactly(handle, nbytes, where, check_end), dtype=dtype)
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
        infos = archive.infolist()
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
            raise CorruptedFileError(f"The {what} are incomplete: {describe_value(missing)} listed but not stored; the "
                                     "file is truncated or corrupted.")
        out: "OrderedDict[str, np.ndarray]" = OrderedDict()
        total = 0
        for key in wanted:
            info = by_key[key]
            where = f"Array {describe_value(key)} of the {what}"
            check_member_size(info, budget - total + 65536, f"{what} archive")
            with archive.open(info) as handle:
                shape, fortran, dtype, nbytes = npy_header(handle, where)
                if nbytes > info.file_size:
                    raise CorruptedFileError(f"{where} announces {nbytes:,} bytes of data ({dtype} "
                                             f"{describe_value(shape)}) but the "
                                             f"member holds only {info.file_size:,}; the file is truncated or "
                                             "corrupted.")
                if expected_sizes is not None and key in expected_sizes:
                    count = nbytes // dtype.itemsize if dtype.itemsize else 0
                    if count != int(expected_sizes[key]):
                        raise ModelDataError(f"{where} has shape {describe_value(shape)} ({count:,} values) but the "
                                             "model expects "
                                             f"{int(expected_sizes[key]):,} values; the file belongs to another "
                                             "network or is corrupted.")
                if total + nbytes > budget:
                    raise FileLimitError(f"{where} announces {nbytes:,} bytes ({dtype} {describe_value(shape)}), "
                                         "beyond the "
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
            raise CorruptedFileError(f"The {what} announces {nbytes:,} bytes of data ({dtype} {describe_value(shape)}) "
                                     "but holds "
                                     f"{remaining:,}; it is truncated or corrupted.")
        if nbytes > budget:
            raise FileLimitError(f"The {what} announces {nbytes:,} bytes ({dtype} {describe_value(shape)}), beyond the "
                                 f"{budget:,}-byte "
                                 "limit; raise it with sbtf.common.file_errors.load_limits(max_array_bytes=...) if "
                                 "you trust the file.")
        return _read_array(handle, shape, fortran, dtype, nbytes, f"The {what}", check_end=False)
