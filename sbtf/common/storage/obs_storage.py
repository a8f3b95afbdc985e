"""
Replay storage of packed Dict observations in each key's own dtype.

sbtf carries a ``gymnasium.spaces.Dict`` observation as one packed float32 row (``sbtf.common.envs.dict_obs``). A replay
buffer that kept those rows would hold a uint8 image in 4 bytes per pixel; :class:`PackedObsArray` keeps one array per
key instead, in the key's storage dtype (:func:`storage_dtype`: uint8 images stay uint8, Discrete keys are the
smallest integer type of their range), and behaves like the ``(n, size)`` float32 array of packed rows it replaces:
indexing returns packed float32 rows (bit-identical to the rows that were written), assignment takes packed rows.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np


class ObsField(NamedTuple):
    """One key of a packed row: where it lies (``offset``, ``size``), its shape and the dtype it is stored in."""

    offset: int
    size: int
    shape: Tuple[int, ...]
    dtype: np.dtype


def _int_range_dtype(low: np.ndarray, high: np.ndarray) -> np.dtype:
    """The smallest integer dtype holding every value in ``[low, high]``."""
    lowest, highest = int(np.min(low)), int(np.max(high))
    candidates = (np.uint8, np.uint16, np.uint32, np.uint64) if lowest >= 0 else (np.int8, np.int16, np.int32, np.int64)
    for dtype in candidates:
        info = np.iinfo(dtype)
        if info.min <= lowest and highest <= info.max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def storage_dtype(space: gym.Space) -> np.dtype:
    """
    The dtype a replay buffer stores a Dict key in: integer / bool Box keys their own dtype, Discrete /
    MultiDiscrete keys the smallest integer type of their range, MultiBinary its dtype, float Box keys float32 (the
    precision of the packed row).

    :param space: (gymnasium.Space) a sub-space of the Dict observation space
    :return: (np.dtype)
    """
    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        return _int_range_dtype(np.array([start]), np.array([start + int(space.n) - 1]))
    if isinstance(space, gym.spaces.MultiDiscrete):
        start = np.asarray(getattr(space, "start", np.zeros_like(space.nvec)), np.int64)
        return _int_range_dtype(start, start + np.asarray(space.nvec, np.int64) - 1)
    dtype = np.dtype(space.dtype) if space.dtype is not None else np.dtype(np.float32)
    if dtype.kind in "iub":
        return dtype
    return np.dtype(np.float32)


def obs_fields(space: Any) -> Optional[Tuple[ObsField, ...]]:
    """
    The per-key storage of a Dict observation space, or None when storing the packed float32 rows is as small (not a
    Dict space, or every key is stored as float32).

    :param space: (gymnasium.Space) the model's observation space
    :return: (tuple of ObsField or None)
    """
    if not isinstance(space, gym.spaces.Dict):
        return None
    from sbtf.common.envs.dict_obs import layout_of

    fields = tuple(ObsField(e.offset, e.size, tuple(e.shape), storage_dtype(e.space)) for e in layout_of(space).entries)
    if all(f.dtype == np.float32 for f in fields):
        return None
    return fields


def _encode(part: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Packed float32 values of one key in its storage dtype (integers rounded and kept in the dtype's range)."""
    if dtype.kind == "b":
        return part != 0
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(part), info.min, info.max).astype(dtype)
    return part.astype(dtype, copy=False)


class PackedObsArray:
    """
    An ``(n, size)`` float32 array of packed Dict observations, stored as one array per key in its own dtype.

    :param n: (int) number of rows
    :param fields: (tuple of ObsField) the keys' places and storage dtypes
    :param arrays: (list of np.ndarray) the per-key arrays ``(n,) + shape`` (default: zeros)
    """

    dtype = np.dtype(np.float32)
    ndim = 2

    def __init__(self, n: int, fields: Sequence[ObsField], arrays: Optional[Sequence[np.ndarray]] = None):
        self.fields = tuple(fields)
        self.size = sum(f.size for f in self.fields)
        if arrays is None:
            arrays = [np.zeros((int(n),) + f.shape, dtype=f.dtype) for f in self.fields]
        self.arrays = list(arrays)

    # ------------------------------------------------------------------ array-like description
    @property
    def shape(self) -> Tuple[int, int]:
        return (int(self.arrays[0].shape[0]), self.size)

    def __len__(self) -> int:
        return int(self.arrays[0].shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the per-key arrays."""
        return int(sum(a.nbytes for a in self.arrays))

    @property
    def row_nbytes(self) -> int:
        """Bytes one row takes."""
        return int(sum(f.dtype.itemsize * f.size for f in self.fields))

    def same_fields(self, fields: Sequence[ObsField]) -> bool:
        return len(self.fields) == len(fields) and all(
            a.offset == b.offset and a.size == b.size and tuple(a.shape) == tuple(b.shape) and
            np.dtype(a.dtype) == np.dtype(b.dtype) for a, b in zip(self.fields, fields))

    # ------------------------------------------------------------------ indexing
    def take(self, index: Any) -> "PackedObsArray":
        """The rows ``index`` (a slice, integer or boolean array) as a new PackedObsArray (no decoding)."""
        return PackedObsArray(0, self.fields, [a[index] for a in self.arrays])

    def __getitem__(self, index: Any) -> np.ndarray:
        """Packed float32 rows (one row, shape ``(size,)``, for an integer index)."""
        if isinstance(index, (int, np.integer)):
            return self[np.array([index])][0]
        parts = [a[index] for a in self.arrays]
        n = int(parts[0].shape[0])
        out = np.empty((n, self.size), np.float32)
        for field, part in zip(self.fields, parts):
            out[:, field.offset:field.offset + field.size] = part.reshape(n, field.size)
        return out

    def __setitem__(self, index: Any, value: Any) -> None:
        """Write packed rows (or the rows of a PackedObsArray of the same fields, copied key by key)."""
        if isinstance(value, PackedObsArray):
            if not self.same_fields(value.fields):
                raise ValueError("Error: the stored observations have another per-key layout.")
            for array, part in zip(self.arrays, value.arrays):
                array[index] = part
            return
        rows = np.asarray(value, dtype=np.float32)
        if rows.shape[-1:] != (self.size,):
            raise ValueError(f"could not broadcast observations of shape {rows.shape} into rows of size {self.size}")
        single = isinstance(index, (int, np.integer))
        rows = rows.reshape(-1, self.size)
        lead = () if single else (rows.shape[0],)
        for field, array in zip(self.fields, self.arrays):
            part = rows[:, field.offset:field.offset + field.size]
            array[index] = _encode(part, field.dtype).reshape(lead + field.shape)

    def equal_rows(self, other: "PackedObsArray") -> np.ndarray:
        """Row by row, whether ``self`` and ``other`` (same fields and length) hold the same observations."""
        n = len(self)
        same = np.ones(n, dtype=bool)
        for a, b in zip(self.arrays, other.arrays):
            same &= (a == b).reshape(n, -1).all(axis=1)
        return same

    @classmethod
    def from_rows(cls, rows: np.ndarray, fields: Sequence[ObsField], chunk: int = 4096) -> "PackedObsArray":
        """Packed float32 rows ``(n, size)`` re-stored per key (in chunks, to bound the temporary memory)."""
        out = cls(len(rows), fields)
        for start in range(0, len(rows), chunk):
            out[slice(start, start + chunk)] = rows[start:start + chunk]
        return out


def take_rows(array: Any, index: Any) -> Any:
    """``array[index]`` without decoding a :class:`PackedObsArray` (``take``); plain arrays are indexed."""
    return array.take(index) if isinstance(array, PackedObsArray) else array[index]


def rows_differ(x: Any, y: Any) -> np.ndarray:
    """Row by row, whether two observation arrays (packed rows or PackedObsArrays, the same length) differ."""
    if isinstance(x, PackedObsArray) and isinstance(y, PackedObsArray):
        return ~x.equal_rows(y)
    x, y = np.asarray(x[:] if isinstance(x, PackedObsArray) else x), np.asarray(y[:] if isinstance(y, PackedObsArray)
                                                                                else y)
    n = len(x)
    return (x != y).reshape(n, -1).any(axis=1) if n else np.zeros(0, bool)


def row_nbytes(array: Any) -> int:
    """Bytes one row of an observation array takes."""
    if isinstance(array, PackedObsArray):
        return array.row_nbytes
    return int(array.itemsize * int(np.prod(array.shape[1:])))


__all__ = ["ObsField", "PackedObsArray", "obs_fields", "storage_dtype", "take_rows", "rows_differ", "row_nbytes"]
