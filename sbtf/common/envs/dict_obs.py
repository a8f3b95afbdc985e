"""
Dict observations carried through sbtf as one flat float32 vector.

Every runner, rollout buffer, replay buffer, compiled train step and MPI path of sbtf works on arrays of shape
``(n,) + obs_shape``. A ``gymnasium.spaces.Dict`` observation is therefore *packed* into one float32 row per
observation where it enters sbtf (``VecPackDictObs``, ``predict``) and *unpacked* again inside the policy, just before
the per-key pre-processing and the feature extractor. :class:`DictObsLayout` is that packing:

* the sub-spaces in the Dict space's own key order (gymnasium sorts the keys of a plain ``dict``; an
  ``OrderedDict`` keeps its order), each with its offset and size in the flat row;
* Box values are stored raw (uint8 images as their 0..255 values, exact in float32), Discrete as the integer,
  MultiDiscrete and MultiBinary as their integers;
* unpacking restores each key's shape and gives Discrete / MultiDiscrete keys back as int32, so the usual
  pre-processing one-hot encodes them.

Nested Dict / Tuple sub-spaces are refused with an error naming the key.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Mapping, NamedTuple, Sequence, Tuple

import gymnasium as gym
import numpy as np

#: largest integer float32 holds exactly (Discrete / MultiDiscrete values are stored as float32)
_MAX_EXACT_INT = 2 ** 24

#: sub-space types a Dict observation may hold
SUPPORTED_SUBSPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


class DictObsKey(NamedTuple):
    """Where one key of a Dict observation lives in the flat row."""

    key: str
    space: gym.Space
    offset: int
    size: int
    shape: Tuple[int, ...]  # shape of one observation of this key (``()`` for Discrete)
    dtype: np.dtype  # dtype the key is unpacked to (int32 for Discrete / MultiDiscrete, float32 otherwise)

    @property
    def is_integer(self) -> bool:
        return isinstance(self.space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete))


def _check_subspace(key: str, space: gym.Space) -> None:
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        raise NotImplementedError(
            f"Error: the Dict observation key {key!r} holds a nested {type(space).__name__} space {space!r}; sbtf "
            "supports Dict observations of Box, Discrete, MultiDiscrete and MultiBinary sub-spaces only (flatten the "
            "nested space, e.g. with gymnasium.wrappers.FlattenObservation on that part).")
    if not isinstance(space, SUPPORTED_SUBSPACES):
        raise NotImplementedError(
            f"Error: the Dict observation key {key!r} holds the unsupported space {space!r} "
            f"({type(space).__name__}); supported sub-spaces: Box, Discrete, MultiDiscrete, MultiBinary.")
    if isinstance(space, gym.spaces.Discrete) and int(space.start) + int(space.n) > _MAX_EXACT_INT:
        raise NotImplementedError(f"Error: the Dict observation key {key!r} is a Discrete space of {space.n} values, "
                                  f"more than float32 stores exactly ({_MAX_EXACT_INT}).")
    if isinstance(space, gym.spaces.MultiDiscrete) and int(np.max(space.nvec)) > _MAX_EXACT_INT:
        raise NotImplementedError(f"Error: the Dict observation key {key!r} is a MultiDiscrete space with more values "
                                  f"per component than float32 stores exactly ({_MAX_EXACT_INT}).")


def _key_shape(space: gym.Space) -> Tuple[int, ...]:
    if isinstance(space, gym.spaces.Discrete):
        return ()
    return tuple(int(d) for d in space.shape)


class DictObsLayout:
    """
    The flat float32 layout of a ``gymnasium.spaces.Dict`` observation space (see the module docstring).

    :param space: (gymnasium.spaces.Dict) the observation space
    """

    def __init__(self, space: gym.spaces.Dict):
        if not isinstance(space, gym.spaces.Dict):
            raise TypeError(f"Error: DictObsLayout needs a gymnasium.spaces.Dict observation space, got {space!r}")
        if len(space.spaces) == 0:
            raise ValueError("Error: the Dict observation space has no keys")
        self.space = space
        entries: List[DictObsKey] = []
        offset = 0
        for key, sub in space.spaces.items():
            _check_subspace(key, sub)
            shape = _key_shape(sub)
            size = int(np.prod(shape)) if shape else 1
            dtype = np.dtype(np.int32) if isinstance(sub, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)) \
                else np.dtype(np.float32)
            entries.append(DictObsKey(str(key), sub, offset, size, shape, dtype))
            offset += size
        self.entries: Tuple[DictObsKey, ...] = tuple(entries)
        self.size = offset
        self.flat_space = gym.spaces.Box(low=self._bound("low"), high=self._bound("high"), shape=(self.size,),
                                         dtype=np.float32)

    # ------------------------------------------------------------------ description
    @property
    def keys(self) -> List[str]:
        """The keys in layout order."""
        return [entry.key for entry in self.entries]

    def __getitem__(self, key: str) -> DictObsKey:
        for entry in self.entries:
            if entry.key == key:
                return entry
        raise KeyError(key)

    def __len__(self) -> int:
        return len(self.entries)

    def _bound(self, which: str) -> np.ndarray:
        parts = []
        for entry in self.entries:
            sub = entry.space
            if isinstance(sub, gym.spaces.Box):
                part = np.asarray(getattr(sub, which), np.float64).reshape(-1)
            elif isinstance(sub, gym.spaces.Discrete):
                part = np.array([sub.start if which == "low" else sub.start + sub.n - 1], np.float64)
            elif isinstance(sub, gym.spaces.MultiDiscrete):
                low = np.asarray(getattr(sub, "start", np.zeros_like(sub.nvec)), np.float64).reshape(-1)
                part = low if which == "low" else low + np.asarray(sub.nvec, np.float64).reshape(-1) - 1
            else:  # MultiBinary
                part = np.full(entry.size, 0.0 if which == "low" else 1.0)
            parts.append(part)
        with np.errstate(over="ignore"):  # bounds beyond float32 become +-inf
            return np.concatenate(parts).astype(np.float32)

    def __repr__(self) -> str:
        keys = ", ".join(f"{e.key}@{e.offset}:{e.size}" for e in self.entries)
        return f"DictObsLayout({keys}; size={self.size})"

    # ------------------------------------------------------------------ packing (NumPy)
    def is_batched(self, obs: Mapping[str, Any]) -> bool:
        """Whether a dict observation is a batch (each value has one more leading axis than its key's shape)."""
        entry = self.entries[0]
        value = np.asarray(obs[entry.key])
        if value.shape == entry.shape:
            return False
        if value.shape[1:] == entry.shape:
            return True
        raise ValueError(f"Error: unexpected shape {value.shape} for the Dict observation key {entry.key!r}; "
                         f"expected {entry.shape} or (n_env, {', '.join(map(str, entry.shape))}).")

    def pack(self, obs: Mapping[str, Any]) -> np.ndarray:
        """
        A dict observation (one observation or a batch, every key present) as flat float32 rows ``(n, size)``.

        :param obs: (dict) ``{key: value}`` of one observation, or of a batch (leading axis n)
        :return: (np.ndarray) shape (n, size), float32
        """
        if not isinstance(obs, Mapping):
            raise TypeError(f"Error: a Dict observation space needs dict observations, got {type(obs).__name__}")
        missing = [e.key for e in self.entries if e.key not in obs]
        if missing:
            raise KeyError(f"Error: the dict observation has no key(s) {missing}; the space has keys {self.keys}")
        batched = self.is_batched(obs)
        n = int(np.asarray(obs[self.entries[0].key]).shape[0]) if batched else 1
        out = np.empty((n, self.size), np.float32)
        for entry in self.entries:
            value = np.asarray(obs[entry.key])
            expected = ((n,) if batched else ()) + entry.shape
            if value.shape != expected:
                raise ValueError(f"Error: the Dict observation key {entry.key!r} has shape {value.shape}, expected "
                                 f"{expected}.")
            out[:, entry.offset:entry.offset + entry.size] = value.reshape(n, entry.size)
        return out

    def unpack_np(self, x: np.ndarray) -> "OrderedDict[str, np.ndarray]":
        """Flat rows ``(n, size)`` back to ``{key: (n,) + shape}`` (int32 for Discrete / MultiDiscrete keys)."""
        x = np.asarray(x, np.float32).reshape(-1, self.size)
        out: OrderedDict[str, np.ndarray] = OrderedDict()
        for entry in self.entries:
            part = x[:, entry.offset:entry.offset + entry.size].reshape((x.shape[0],) + entry.shape)
            out[entry.key] = np.rint(part).astype(np.int32) if entry.is_integer else part
        return out

    def unpack_tf(self, x) -> "OrderedDict[str, Any]":
        """TensorFlow form of :meth:`unpack_np` (inside compiled functions)."""
        import tensorflow as tf

        out: OrderedDict[str, Any] = OrderedDict()
        for entry in self.entries:
            part = tf.reshape(x[:, entry.offset:entry.offset + entry.size], (-1,) + entry.shape)
            out[entry.key] = tf.cast(tf.round(part), tf.int32) if entry.is_integer else tf.cast(part, tf.float32)
        return out

    def unpack(self, x, ops) -> "OrderedDict[str, Any]":
        """:meth:`unpack_np` or :meth:`unpack_tf` by the backend ``ops`` (``sbtf.common.nn.network_ops``)."""
        return self.unpack_np(x) if getattr(ops, "is_numpy", False) else self.unpack_tf(x)

    def split_batch(self, obs: Mapping[str, Any]) -> List[Dict[str, np.ndarray]]:
        """A batched dict observation as a list of per-row dicts (e.g. terminal observations)."""
        packed = self.pack(obs)
        return [dict(self.unpack_np(row[None]).items()) for row in packed]


def preprocess_dict(ops, x, layout: DictObsLayout, scaled_keys=frozenset()) -> "OrderedDict[str, Any]":
    """
    Packed Dict observations ``x`` (n, size) to ``{key: pre-processed batch}`` in the backend ``ops``
    (``sbtf.common.nn.network_ops``): Discrete / MultiDiscrete keys one-hot, MultiBinary and Box keys float32, and the
    Box keys in ``scaled_keys`` (images, when the policy normalises them) rescaled to [0, 1] by their bounds.
    """
    out: OrderedDict[str, Any] = OrderedDict()
    for key, value in layout.unpack(x, ops).items():
        space = layout[key].space
        if isinstance(space, gym.spaces.MultiDiscrete):
            nvec = np.asarray(space.nvec).reshape(-1)
            start = np.asarray(getattr(space, "start", 0)).reshape(-1)
            flat = ops.flatten(value) if len(value.shape) > 2 else value
            if np.any(start != 0):
                flat = flat - start.astype(np.int32)
            out[key] = ops.concat([ops.one_hot(flat[:, i], int(n)) for i, n in enumerate(nvec)])
        elif isinstance(space, gym.spaces.Discrete):
            out[key] = ops.one_hot(value - int(space.start) if int(space.start) else value, int(space.n))
        else:
            out[key] = ops.preprocess(value, space, key in scaled_keys)
    return out


def is_dict_space(space: Any) -> bool:
    """Whether ``space`` is a ``gymnasium.spaces.Dict``."""
    return isinstance(space, gym.spaces.Dict)


def pack_if_dict(obs: Any, space: gym.Space) -> Any:
    """``DictObsLayout(space).pack(obs)`` when ``space`` is a Dict space and ``obs`` a dict, else ``obs`` unchanged
    (a flat array already packed is passed through)."""
    if isinstance(space, gym.spaces.Dict) and isinstance(obs, Mapping):
        return layout_of(space).pack(obs)
    return obs


_LAYOUTS: Dict[int, Tuple[gym.spaces.Dict, DictObsLayout]] = {}


def layout_of(space: gym.spaces.Dict) -> DictObsLayout:
    """The (cached) :class:`DictObsLayout` of a Dict space."""
    cached = _LAYOUTS.get(id(space))
    if cached is not None and cached[0] is space:
        return cached[1]
    layout = DictObsLayout(space)
    if len(_LAYOUTS) > 256:
        _LAYOUTS.clear()
    _LAYOUTS[id(space)] = (space, layout)
    return layout


def stack_dict_obs(observations: Sequence[Mapping[str, Any]]) -> Dict[str, np.ndarray]:
    """A list of single dict observations as one batched dict."""
    keys = list(observations[0].keys())
    return {key: np.stack([np.asarray(o[key]) for o in observations]) for key in keys}


__all__ = ["DictObsLayout", "DictObsKey", "SUPPORTED_SUBSPACES", "is_dict_space", "pack_if_dict", "layout_of",
           "preprocess_dict",
           "stack_dict_obs"]
