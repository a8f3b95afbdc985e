"""Replay buffers with the stable-baselines 2.x API (``common/buffers.py``), stored in preallocated NumPy arrays.

``ReplayBuffer(size)`` is a ring buffer of transitions ``(obs_t, action, reward, obs_tp1, done)``;
``PrioritizedReplayBuffer(size, alpha)`` samples transitions in proportion to ``priority ** alpha`` and returns
importance weights (Schaul et al. 2015). Compared with SB2's list of tuples:

* the arrays are allocated on the first ``add`` from the shapes and dtypes of that transition (``np.zeros``,
  so memory is only committed as the buffer fills); image observations stay ``uint8``;
* packed Dict observations (``sbtf.common.envs.dict_obs``) are stored key by key in each key's own dtype
  (``sbtf.common.storage.obs_storage.PackedObsArray``: uint8 images as uint8, Discrete keys as integers) once the
  buffer knows the Dict space (``observation_space=`` or ``use_observation_space``; the models pass it), and sampled
  back as the same packed float32 rows;
* ``sample`` draws all indices at once and gathers each field with one fancy-indexing operation; it returns SB2's
  tuple, ``sample_batch`` the same draw as a named ``ReplayBatch`` (what the algorithms use);
* ``optimize_memory_usage=True`` (stable-baselines3's option) keeps one observation array: the next observation of
  a transition is the observation stored ``n_envs`` slots later (the same env's next step), and only the next
  observations that differ from it (episode ends, transitions added out of order) are kept aside, so time-limit
  truncations keep their true final observation (SB3 cannot combine the option with ``handle_timeout_termination``);
* ``save(path)`` writes the content atomically (temporary file + ``os.replace``) with ``np.savez`` (no pickle),
  and ``load_buffer(path)`` reads it back (``sbtf.common.fileio.safe_zip``: numeric arrays only, sizes checked from
  their headers), so training can resume with its experience (``model.save_replay_buffer`` /
  ``model.load_replay_buffer``).

Indices are drawn with NumPy's global generator, so ``set_global_seeds`` makes sampling reproducible.
"""
from __future__ import annotations

import io
import math
import os
import struct
import tempfile
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from sbtf.common.file_errors import CorruptedFileError, FileLimitError, ModelDataError, get_load_limits
from sbtf.common.fileio.load_budget import checked_prod, count_text
from sbtf.common.storage.obs_storage import ObsField, PackedObsArray, obs_fields, row_nbytes, rows_differ, take_rows
from sbtf.common.storage.packed_normalize import for_packed_rows
from sbtf.common.registry import register_class, registered_classes
from sbtf.common.fileio.safe_zip import open_zip, read_member, read_npz
from sbtf.common.segment_tree import MinSegmentTree, SumSegmentTree

BUFFER_FORMAT = "sbtf_replay_buffer"
#: 2: packed Dict observations saved key by key (``obs_fields``, ``obs_t__<i>`` ...); buffers without them are
#: still written as version 1
BUFFER_FORMAT_VERSION = 2
#: the observation arrays of a saved buffer
_OBS_MEMBERS = ("obs_t", "obs_tp1", "obs_ahead")
#: the largest replay buffer (transitions): far beyond any real one (SB2/SB3 zoo buffers hold up to ~10**7)
MAX_BUFFER_SIZE = 1 << 32


@dataclass(frozen=True)
class ReplayBatch:
    """
    A minibatch of transitions (``sample_batch``), field by field. ``weights`` and ``indexes`` are set by the
    prioritized buffer only (importance weights, and the slots to pass to ``update_priorities``).
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_observations: np.ndarray
    dones: np.ndarray
    weights: Optional[np.ndarray] = None
    indexes: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return int(self.rewards.shape[0])


class ReplayBuffer(object):
    """
    A ring buffer (FIFO) of transitions.

    :param size: (int) Max number of transitions to store in the buffer. When the buffer overflows the old
        memories are dropped.
    :param optimize_memory_usage: (bool) store each observation once (stable-baselines3's memory-efficient variant):
        the next observation of a transition is read from the slot ``n_envs`` further on
    :param n_envs: (int) how many envs add their transitions in turn (``extend`` with one transition per env), so
        that an env's next transition lies ``n_envs`` slots further on
    :param observation_space: (gymnasium.Space) the model's observation space: a Dict space's packed observations
        are stored key by key in their own dtypes (see ``use_observation_space``)
    """

    def __init__(self, size: int, optimize_memory_usage: bool = False, n_envs: int = 1, observation_space=None):
        size = int(size)
        if size <= 0 or size > MAX_BUFFER_SIZE:
            raise ValueError(f"Error: the replay buffer size must be in [1, {MAX_BUFFER_SIZE:,}], got "
                             f"{count_text(size)}.")
        if int(n_envs) < 1:
            raise ValueError(f"Error: n_envs must be positive, got {n_envs}.")
        self._maxsize = size
        self._next_idx = 0
        self._size = 0
        self.optimize_memory_usage = bool(optimize_memory_usage)
        self.n_envs = int(n_envs)
        self._obs_t: Optional[np.ndarray] = None
        self._actions: Optional[np.ndarray] = None
        self._rewards: Optional[np.ndarray] = None
        self._obs_tp1: Optional[np.ndarray] = None
        self._dones: Optional[np.ndarray] = None
        # optimize_memory_usage: which slots hold a transition, which hold a next observation written ahead, and the
        # next observations that differ from the observation ``n_envs`` slots further on
        self._valid: Optional[np.ndarray] = None
        self._ahead: Optional[np.ndarray] = None
        self._own_next: dict = {}
        # packed Dict observations: how each key is stored (None: the packed rows as they come)
        self._obs_fields: Optional[tuple] = None
        if observation_space is not None:
            self.use_observation_space(observation_space)

    # ------------------------------------------------------------------ SB2 properties
    def __len__(self) -> int:
        return self._size

    @property
    def storage(self) -> list:
        """[(obs_t, action, reward, obs_tp1, done)]: the content of the replay buffer, in slot order (a copy)."""
        next_obs = self._next_observations(np.arange(self._size))
        return [(self._obs_t[i].copy(), self._actions[i].copy(), float(self._rewards[i]), next_obs[i].copy(),
                 float(self._dones[i])) for i in range(self._size)]

    @property
    def buffer_size(self) -> int:
        """int: Max capacity of the buffer."""
        return self._maxsize

    @property
    def next_idx(self) -> int:
        """int: the slot the next transition is written to."""
        return self._next_idx

    def can_sample(self, n_samples: int) -> bool:
        """
        Check if n_samples samples can be sampled from the buffer.

        :param n_samples: (int)
        :return: (bool)
        """
        return self._size >= n_samples

    def is_full(self) -> bool:
        """
        Check whether the replay buffer is full or not.

        :return: (bool)
        """
        return self._size == self._maxsize

    # ------------------------------------------------------------------ storage
    def use_observation_space(self, space) -> None:
        """
        Store the packed observations of the Dict space ``space`` key by key in each key's own dtype (uint8 images
        as uint8, Discrete keys as integers: ``sbtf.common.storage.obs_storage``); sampled batches stay the same packed
        float32 rows. Other spaces change nothing. Observations already stored as packed float32 rows (e.g. a buffer
        saved by an older sbtf) are converted.

        :param space: (gymnasium.Space) the model's observation space
        """
        fields = obs_fields(space)
        if fields is None:
            return
        self._obs_fields = fields
        size = sum(f.size for f in fields)
        for name in ("_obs_t", "_obs_tp1"):
            array = getattr(self, name)
            if array is None or isinstance(array, PackedObsArray):
                continue
            if array.shape[1:] != (size,):
                raise ValueError(f"Error: the replay buffer holds observations of shape {array.shape[1:]}, not the "
                                 f"packed rows of size {size} of the Dict space {space}.")
            setattr(self, name, PackedObsArray.from_rows(array, fields))

    @property
    def observation_nbytes(self) -> int:
        """Bytes the stored observations take (both arrays; 0 before the first ``add``)."""
        return int(sum(a.nbytes for a in (self._obs_t, self._obs_tp1) if a is not None))

    def _new_obs_array(self, n: int, shape: tuple, dtype: np.dtype):
        """An observation array of ``n`` rows: per key for a known Dict space, else one array."""
        if self._obs_fields is not None and tuple(shape) == (sum(f.size for f in self._obs_fields),):
            return PackedObsArray(n, self._obs_fields)
        return np.zeros((n,) + tuple(shape), dtype=dtype)

    @staticmethod
    def _storage_dtype(value: np.ndarray, kind: str) -> np.dtype:
        if kind == "action" and value.dtype == np.float64:
            return np.dtype(np.float32)
        if value.dtype == np.bool_ and kind == "obs":
            return np.dtype(np.bool_)
        return value.dtype

    def _allocate(self, obs_t: np.ndarray, action: np.ndarray, rows: Optional[int] = None) -> None:
        """Create the arrays from one (unbatched) transition, with ``rows`` slots (default: the capacity; ``np.zeros``
        commits memory only as slots are written). Fewer rows grow on demand (``_reserve``)."""
        n = self._maxsize if rows is None else int(rows)
        obs_dtype = self._storage_dtype(obs_t, "obs")
        self._obs_t = self._new_obs_array(n, obs_t.shape, obs_dtype)
        if self.optimize_memory_usage:
            self._valid = np.zeros((n,), dtype=bool)
            self._ahead = np.zeros((n,), dtype=bool)
            self._own_next = {}
        else:
            self._obs_tp1 = self._new_obs_array(n, obs_t.shape, obs_dtype)
        self._actions = np.zeros((n,) + action.shape, dtype=self._storage_dtype(action, "action"))
        self._rewards = np.zeros((n,), dtype=np.float32)
        self._dones = np.zeros((n,), dtype=np.float32)

    def add(self, obs_t, action, reward, obs_tp1, done) -> None:
        """
        add a new transition to the buffer

        :param obs_t: (Union[np.ndarray, int]) the last observation
        :param action: (Union[np.ndarray, int]) the action
        :param reward: (float) the reward of the transition
        :param obs_tp1: (Union[np.ndarray, int]) the current observation
        :param done: (bool) is the episode done
        """
        if self._obs_t is None:
            self._allocate(np.asarray(obs_t), np.asarray(action))
        idx = self._next_idx
        self._reserve(idx + (self.n_envs if self.optimize_memory_usage else 0))
        self._write(idx, obs_t, action, reward, obs_tp1, done, ((idx, obs_t, obs_tp1),))
        self._next_idx = (idx + 1) % self._maxsize
        if self._size < self._maxsize:
            self._size += 1

    def _extend_indices(self, n_items: int) -> np.ndarray:
        return (self._next_idx + np.arange(n_items)) % self._maxsize

    def extend(self, obs_t, action, reward, obs_tp1, done) -> None:
        """
        add a new batch of transitions to the buffer

        :param obs_t: (Union[Tuple[Union[np.ndarray, int]], np.ndarray]) the last batch of observations
        :param action: (Union[Tuple[Union[np.ndarray, int]]], np.ndarray]) the batch of actions
        :param reward: (Union[Tuple[float], np.ndarray]) the batch of the rewards of the transition
        :param obs_tp1: (Union[Tuple[Union[np.ndarray, int]], np.ndarray]) the current batch of observations
        :param done: (Union[Tuple[bool], np.ndarray]) terminal status of the batch

        Note: uses the same names as .add to keep compatibility with named argument passing
            but expects iterables and arrays with more than 1 dimensions
        """
        obs_t = np.asarray(obs_t)
        action = np.asarray(action)
        reward = np.asarray(reward, dtype=np.float32).reshape(-1)
        obs_tp1 = np.asarray(obs_tp1)
        done = np.asarray(done, dtype=np.float32).reshape(-1)
        n_items = reward.shape[0]
        if not (obs_t.shape[0] == action.shape[0] == obs_tp1.shape[0] == done.shape[0] == n_items):
            raise ValueError(f"Error: extend() needs batches of the same length, got {obs_t.shape[0]} observations, "
                             f"{action.shape[0]} actions, {n_items} rewards, {obs_tp1.shape[0]} next observations and "
                             f"{done.shape[0]} dones.")
        if n_items == 0:
            return
        if self._obs_t is None:
            self._allocate(obs_t[0], action[0])
        if n_items > self._maxsize:  # only the last maxsize transitions survive
            skip = n_items - self._maxsize
            self._next_idx = (self._next_idx + skip) % self._maxsize
            obs_t, action, reward, obs_tp1, done = (x[skip:] for x in (obs_t, action, reward, obs_tp1, done))
            n_items = self._maxsize
        idxs = self._extend_indices(n_items)
        self._reserve(int(idxs.max()) + (self.n_envs if self.optimize_memory_usage else 0))
        self._write(idxs, obs_t, action, reward, obs_tp1, done, zip(idxs, obs_t, obs_tp1))
        self._next_idx = int((self._next_idx + n_items) % self._maxsize)
        self._size = min(self._size + n_items, self._maxsize)

    @property
    def allocated_slots(self) -> int:
        """How many slots the arrays hold now (0 before the first transition; a loaded buffer holds what its file
        carries and grows, doubling, up to ``buffer_size`` as transitions arrive)."""
        return 0 if self._rewards is None else int(len(self._rewards))

    @staticmethod
    def _grown(array: Any, rows: int) -> Any:
        if array is None:
            return None
        if isinstance(array, PackedObsArray):
            grown = PackedObsArray(rows, array.fields)
            for target, source in zip(grown.arrays, array.arrays):
                target[:len(source)] = source
            return grown
        grown = np.zeros((rows,) + array.shape[1:], dtype=array.dtype)
        grown[:len(array)] = array
        return grown

    def _reserve(self, top: int) -> None:
        """Make slot ``min(top, buffer_size - 1)`` exist: the arrays double (up to ``buffer_size``) when needed."""
        rows = self.allocated_slots
        top = min(int(top), self._maxsize - 1)
        if top < rows or rows == 0:
            return
        while rows <= top:
            rows *= 2
        rows = min(rows, self._maxsize)
        for name in ("_obs_t", "_obs_tp1", "_actions", "_rewards", "_dones", "_valid", "_ahead"):
            setattr(self, name, self._grown(getattr(self, name), rows))

    def _write(self, idx, obs_t, action, reward, obs_tp1, done, shared_writes) -> None:
        """Store transitions in slot ``idx`` (one slot, or an array of slots with batches of values); with
        ``optimize_memory_usage`` the observations go through ``_write_shared`` as the (slot, observation, next
        observation) triples ``shared_writes``."""
        try:
            if self.optimize_memory_usage:
                for slot, obs, next_obs in shared_writes:
                    self._write_shared(int(slot), obs, next_obs)
            else:
                self._obs_t[idx] = obs_t
                self._obs_tp1[idx] = obs_tp1
            self._actions[idx] = action
        except ValueError as exc:
            raise ValueError(f"Error: transition shapes do not match the replay buffer (observations "
                             f"{self._obs_t.shape[1:]}, actions {self._actions.shape[1:]}): {exc}") from exc
        self._rewards[idx] = reward
        self._dones[idx] = done

    def _write_shared(self, idx: int, obs, next_obs) -> None:
        """``optimize_memory_usage``: store the observation of slot ``idx`` and write its next observation ahead, into
        the slot ``n_envs`` further on (the transition there, the oldest, is dropped)."""
        size = self._maxsize
        obs = np.asarray(obs)
        if self._ahead[idx]:
            # this slot held the next observation of the transition n_envs slots back: keep it if it differs
            previous = (idx - self.n_envs) % size
            if self._valid[previous] and previous not in self._own_next and \
                    not np.array_equal(self._obs_t[idx], obs):
                self._own_next[previous] = self._obs_t[idx].copy()
            self._ahead[idx] = False
        self._obs_t[idx] = obs
        self._own_next.pop(idx, None)
        self._valid[idx] = True
        ahead = (idx + self.n_envs) % size
        if ahead == idx:  # a buffer of at most n_envs slots: nowhere to write ahead
            self._own_next[idx] = np.array(next_obs, dtype=self._obs_t.dtype)
            return
        if self._valid[ahead]:
            self._valid[ahead] = False
            self._own_next.pop(ahead, None)
        self._obs_t[ahead] = next_obs
        self._ahead[ahead] = True

    def _next_observations(self, idxes: np.ndarray, stored: bool = False) -> np.ndarray:
        """The next observations of the transitions in slots ``idxes`` (``stored``: as stored, a PackedObsArray for
        Dict observations, else packed rows)."""
        index = take_rows if stored else (lambda array, idx: array[idx])
        if not self.optimize_memory_usage:
            return index(self._obs_tp1, idxes)
        next_obs = index(self._obs_t, (idxes + self.n_envs) % self._maxsize)
        if self._own_next:
            for i, idx in enumerate(np.asarray(idxes).reshape(-1)):
                own = self._own_next.get(int(idx))
                if own is not None:
                    next_obs[i] = own
        return next_obs

    # ------------------------------------------------------------------ sampling
    @staticmethod
    def _normalize_obs(obs: np.ndarray, env=None) -> np.ndarray:
        """Helper for normalizing the observation (``env``: a VecNormalize; packed Dict observations are normalised
        key by key, only the keys it normalises: ``sbtf.common.storage.packed_normalize``)."""
        if env is not None:
            return for_packed_rows(env).normalize_obs(obs)
        return obs

    @staticmethod
    def _normalize_reward(reward: np.ndarray, env=None) -> np.ndarray:
        """Helper for normalizing the reward (``env``: a VecNormalize)."""
        if env is not None:
            return env.normalize_reward(reward)
        return reward

    def _encode_sample(self, idxes: np.ndarray, env=None):
        return (self._normalize_obs(self._obs_t[idxes], env),
                self._actions[idxes],
                self._normalize_reward(self._rewards[idxes], env),
                self._normalize_obs(self._next_observations(idxes), env),
                self._dones[idxes])

    def _check_can_sample(self, batch_size: int) -> None:
        if self._size == 0:
            raise ValueError("Error: cannot sample from an empty replay buffer.")

    def sample(self, batch_size: int, env=None, **_kwargs):
        """
        Sample a batch of experiences (uniformly, with replacement).

        :param batch_size: (int) How many transitions to sample.
        :param env: (Optional[VecNormalize]) associated VecNormalize to normalize the observations/rewards when
            sampling
        :return:
            - obs_batch: (np.ndarray) batch of observations
            - act_batch: (numpy float) batch of actions executed given obs_batch
            - rew_batch: (numpy float) rewards received as results of executing act_batch
            - next_obs_batch: (np.ndarray) next set of observations seen after executing act_batch
            - done_mask: (numpy float) done_mask[i] = 1 if executing act_batch[i] resulted in the end of an episode
                and 0 otherwise.
        """
        self._check_can_sample(batch_size)
        idxes = np.random.randint(0, self._size, size=batch_size)
        if self.optimize_memory_usage:  # at most n_envs slots were dropped for next observations written ahead
            invalid = ~self._valid[idxes]
            while invalid.any():
                idxes[invalid] = np.random.randint(0, self._size, size=int(invalid.sum()))
                invalid = ~self._valid[idxes]
        return self._encode_sample(idxes, env=env)

    def sample_batch(self, batch_size: int, env=None, **kwargs) -> ReplayBatch:
        """
        ``sample`` as a named ``ReplayBatch`` (same draws from NumPy's generator as ``sample``).

        :param batch_size: (int) How many transitions to sample.
        :param env: (Optional[VecNormalize]) associated VecNormalize to normalize the observations/rewards
        :param kwargs: further arguments of ``sample`` (``beta`` for the prioritized buffer)
        :return: (ReplayBatch) the transitions
        """
        return ReplayBatch(*self.sample(batch_size, env=env, **kwargs))

    # ------------------------------------------------------------------ save / load
    def _state(self) -> dict:
        state = {
            "format": np.array(BUFFER_FORMAT),
            "format_version": np.array(1),  # 2 (BUFFER_FORMAT_VERSION) with Dict observations stored key by key
            "class_name": np.array(type(self).__name__),
            "maxsize": np.array(self._maxsize),
            "next_idx": np.array(self._next_idx),
            "size": np.array(self._size),
        }
        if self.optimize_memory_usage:
            state.update(optimize_memory_usage=np.array(True), n_envs=np.array(self.n_envs))
        if self._obs_t is not None:
            n = self._size
            observations = dict(obs_t=take_rows(self._obs_t, slice(0, n)),
                                obs_tp1=self._next_observations(np.arange(n), stored=True))
            if self.optimize_memory_usage:
                # the observations written ahead live in slots beyond the filled ones until the buffer is full
                state.update(valid=self._valid[:n])
                observations["obs_ahead"] = take_rows(self._obs_t, self._ahead)
            state.update(actions=self._actions[:n], rewards=self._rewards[:n], dones=self._dones[:n],
                         action_shape=np.array(self._actions.shape[1:], dtype=np.int64),
                         obs_shape=np.array(self._obs_t.shape[1:], dtype=np.int64))
            for name, array in observations.items():
                if isinstance(array, PackedObsArray):  # key by key, in the keys' dtypes (format version 2)
                    state["format_version"] = np.array(BUFFER_FORMAT_VERSION)
                    state["obs_fields"] = np.array([(f.offset, f.size) for f in array.fields], dtype=np.int64)
                    for i, part in enumerate(array.arrays):
                        state[f"{name}__{i}"] = part
                else:
                    state[name] = array
        return state

    def _restore(self, data: Any) -> None:
        size = int(data["size"])
        self._next_idx = int(data["next_idx"])
        self._size = size
        if "obs_t" in data:
            obs_t, actions = data["obs_t"], data["actions"]
            obs_shape = tuple(int(s) for s in data["obs_shape"])
            action_shape = tuple(int(s) for s in data["action_shape"])
            if isinstance(obs_t, PackedObsArray):
                self._obs_fields = obs_t.fields
            # the slots the file fills (and those written ahead), not the capacity it announces: more grow on demand
            rows = min(self._maxsize, max(size, self._next_idx + 1, 1) + (self.n_envs if self.optimize_memory_usage
                                                                          else 0))
            self._obs_t = self._new_obs_array(rows, obs_shape, obs_t.dtype)
            self._actions = np.zeros((rows,) + action_shape, dtype=actions.dtype)
            self._rewards = np.zeros((rows,), dtype=np.float32)
            self._dones = np.zeros((rows,), dtype=np.float32)
            self._obs_t[:size] = obs_t
            if self.optimize_memory_usage:
                self._restore_shared(data, size)
            else:
                self._obs_tp1 = self._new_obs_array(rows, obs_shape, obs_t.dtype)
                self._obs_tp1[:size] = data["obs_tp1"]
            self._actions[:size] = actions
            self._rewards[:size] = data["rewards"]
            self._dones[:size] = data["dones"]

    def _restore_shared(self, data: Any, size: int) -> None:
        """``optimize_memory_usage``: the slots' flags, the observations written ahead and the next observations
        kept aside, from a saved buffer."""
        n = self._maxsize
        rows = self.allocated_slots
        self._valid = np.zeros((rows,), dtype=bool)
        self._valid[:size] = np.asarray(data["valid"], dtype=bool)
        self._ahead = np.zeros((rows,), dtype=bool)
        ahead = (self._next_idx + np.arange(min(self.n_envs, n))) % n
        if "obs_ahead" in data and len(data["obs_ahead"]) == len(ahead) and n > self.n_envs:
            self._obs_t[ahead] = data["obs_ahead"]
            self._ahead[ahead] = True
        next_obs = data["obs_tp1"]
        follow = take_rows(self._obs_t, (np.arange(size) + self.n_envs) % n)
        differs = rows_differ(next_obs, follow) if size else np.zeros(0, bool)
        self._own_next = {int(i): np.array(next_obs[i], dtype=self._obs_t.dtype)
                          for i in np.flatnonzero(differs & self._valid[:size])}

    def save(self, path: Union[str, os.PathLike]) -> None:
        """
        Save the buffer's content to ``path`` (``np.savez`` format, no pickle), atomically: the data is written to
        a temporary file in the same folder, which then replaces ``path``.

        :param path: (str or PathLike) the file to write (written exactly there: no extension is added)
        """
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp_path = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                np.savez(handle, **self._state())
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp_path, path)
        except BaseException:
            if os.path.exists(tmp_path):
                os.remove(tmp_path)
            raise

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "ReplayBuffer":
        """Load a buffer written by ``save`` (of this class or a subclass)."""
        buffer = load_buffer(path)
        if not isinstance(buffer, cls):
            raise TypeError(f"Error: {path} holds a {type(buffer).__name__}, not a {cls.__name__}.")
        return buffer


class PrioritizedReplayBuffer(ReplayBuffer):
    """
    Prioritized replay buffer: transition ``i`` is sampled with probability ``p_i ** alpha / sum_k p_k ** alpha``.

    :param size: (int) Max number of transitions to store in the buffer. When the buffer overflows the old memories
        are dropped.
    :param alpha: (float) how much prioritization is used (0 - no prioritization, 1 - full prioritization)
    :param observation_space: (gymnasium.Space) the model's observation space (see ``ReplayBuffer``)
    """

    def __init__(self, size: int, alpha: float, observation_space=None):
        super().__init__(size, observation_space=observation_space)
        if alpha < 0:
            raise ValueError(f"Error: alpha must be >= 0, got {alpha}.")
        self._alpha = float(alpha)
        it_capacity = 1
        while it_capacity < self._maxsize:
            it_capacity *= 2
        self._it_sum = SumSegmentTree(it_capacity)
        self._it_min = MinSegmentTree(it_capacity)
        self._max_priority = 1.0

    @property
    def alpha(self) -> float:
        return self._alpha

    def add(self, obs_t, action, reward, obs_tp1, done) -> None:
        """
        add a new transition to the buffer (with the highest priority seen so far)

        :param obs_t: (Any) the last observation
        :param action: ([float]) the action
        :param reward: (float) the reward of the transition
        :param obs_tp1: (Any) the current observation
        :param done: (bool) is the episode done
        """
        idx = self._next_idx
        super().add(obs_t, action, reward, obs_tp1, done)
        priority = self._max_priority ** self._alpha
        self._it_sum[idx] = priority
        self._it_min[idx] = priority

    def extend(self, obs_t, action, reward, obs_tp1, done) -> None:
        """
        add a new batch of transitions to the buffer (see ``ReplayBuffer.extend``)

        :param obs_t: (Union[Tuple[Union[np.ndarray, int]], np.ndarray]) the last batch of observations
        :param action: (Union[Tuple[Union[np.ndarray, int]]], np.ndarray]) the batch of actions
        :param reward: (Union[Tuple[float], np.ndarray]) the batch of the rewards of the transition
        :param obs_tp1: (Union[Tuple[Union[np.ndarray, int]], np.ndarray]) the current batch of observations
        :param done: (Union[Tuple[bool], np.ndarray]) terminal status of the batch
        """
        n_items = min(len(np.asarray(reward).reshape(-1)), self._maxsize)
        super().extend(obs_t, action, reward, obs_tp1, done)
        idxs = (self._next_idx - n_items + np.arange(n_items)) % self._maxsize
        priority = self._max_priority ** self._alpha
        self._it_sum[idxs] = priority
        self._it_min[idxs] = priority

    def _sample_proportional(self, batch_size: int) -> np.ndarray:
        total = self._it_sum.sum(0, self._size)
        mass = np.random.random(size=batch_size) * total
        idx = self._it_sum.find_prefixsum_idx(mass)
        # floating-point round-off can walk past the last filled leaf: stay inside the buffer
        return np.minimum(idx, self._size - 1)

    def sample(self, batch_size: int, beta: float = 0, env=None):
        """
        Sample a batch of experiences, in proportion to their priorities.

        Compared to ``ReplayBuffer.sample`` it also returns importance weights and the indices of the sampled
        experiences.

        :param batch_size: (int) How many transitions to sample.
        :param beta: (float) To what degree to use importance weights (0 - no corrections, 1 - full correction);
            must be > 0
        :param env: (Optional[VecNormalize]) associated VecNormalize to normalize the observations/rewards when
            sampling
        :return:
            - obs_batch: (np.ndarray) batch of observations
            - act_batch: (numpy float) batch of actions executed given obs_batch
            - rew_batch: (numpy float) rewards received as results of executing act_batch
            - next_obs_batch: (np.ndarray) next set of observations seen after executing act_batch
            - done_mask: (numpy float) done_mask[i] = 1 if executing act_batch[i] resulted in the end of an episode
                and 0 otherwise.
            - weights: (numpy float) Array of shape (batch_size,) and dtype np.float32 denoting importance weight of
                each sampled transition: ``(N * P(i)) ** -beta / max_j (N * P(j)) ** -beta``
            - idxes: (numpy int) Array of shape (batch_size,) indexes in buffer of sampled experiences
        """
        if not beta > 0:
            raise ValueError(f"Error: beta must be > 0 for prioritized sampling, got {beta}.")
        self._check_can_sample(batch_size)
        idxes = self._sample_proportional(batch_size)
        total = self._it_sum.sum()
        p_min = self._it_min.min() / total
        max_weight = (p_min * self._size) ** (-beta)
        p_sample = self._it_sum[idxes] / total
        weights = ((p_sample * self._size) ** (-beta) / max_weight).astype(np.float32)
        encoded_sample = self._encode_sample(idxes, env=env)
        return tuple(list(encoded_sample) + [weights, idxes])

    def update_priorities(self, idxes, priorities) -> None:
        """
        Update priorities of sampled transitions: the priority of transition ``idxes[i]`` becomes
        ``priorities[i]``.

        :param idxes: ([int]) List of idxes of sampled transitions
        :param priorities: ([float]) List of updated priorities corresponding to transitions at the sampled idxes
            denoted by variable `idxes`.
        """
        idxes = np.asarray(idxes, dtype=np.int64).reshape(-1)
        priorities = np.asarray(priorities, dtype=np.float64).reshape(-1)
        if idxes.shape != priorities.shape:
            raise ValueError(f"Error: {idxes.shape[0]} indices but {priorities.shape[0]} priorities.")
        if idxes.size == 0:
            return
        if not np.all(priorities > 0):
            raise ValueError("Error: priorities must be > 0 (add a small epsilon to the TD errors).")
        if idxes.min() < 0 or idxes.max() >= self._size:
            raise ValueError(f"Error: indices must lie in [0, {self._size}).")
        self._it_sum[idxes] = priorities ** self._alpha
        self._it_min[idxes] = priorities ** self._alpha
        self._max_priority = max(self._max_priority, float(np.max(priorities)))

    def _state(self) -> dict:
        state = super()._state()
        state.update(alpha=np.array(self._alpha), max_priority=np.array(self._max_priority),
                     priorities_alpha=self._it_sum.leaves(self._size))
        return state

    def _restore(self, data: Any) -> None:
        super()._restore(data)
        self._max_priority = float(data["max_priority"])
        # only the leaves of the stored transitions take memory (the trees grow as transitions arrive)
        self._it_sum.set_leaves(data["priorities_alpha"])
        self._it_min.set_leaves(data["priorities_alpha"])


_BUFFER_CLASSES = {"ReplayBuffer": ReplayBuffer, "PrioritizedReplayBuffer": PrioritizedReplayBuffer}


def _read_text(archive: Any, name: str, path: str) -> str:
    """A small ``.npy`` member holding one text value (the format marker, the class name), header checked first."""
    from numpy.lib import format as npy_format

    where = f"Member {name!r} of {path}"
    payload = read_member(archive, name, 4096, f"replay buffer file {path}")
    handle = io.BytesIO(payload)
    try:
        version = npy_format.read_magic(handle)
        shape, fortran, dtype = npy_format._read_array_header(handle, version, max_header_size=1000)  # noqa: SLF001
    except (ValueError, TypeError, SyntaxError, struct.error, EOFError, KeyError, OverflowError,
            UnicodeDecodeError) as exc:
        raise CorruptedFileError(f"{where} has no valid .npy header ({type(exc).__name__}: {exc}).") from exc
    data = payload[handle.tell():]
    if shape != () or dtype.kind != "U" or dtype.fields is not None or len(data) != dtype.itemsize:
        raise CorruptedFileError(f"{where} is not a text value ({dtype} {shape}).")
    return str(np.frombuffer(data, dtype=dtype)[0])


def saved_int(data: dict, key: str, path: str, low: int, high: int) -> int:
    """
    The integer ``data[key]`` of the replay buffer file ``path``, checked to lie in ``[low, high]``.

    :raises ModelDataError: when it is missing, not an integer or out of range
    """
    value = data.get(key)
    if not isinstance(value, np.ndarray) or value.shape != () or value.dtype.kind not in "iu":
        raise ModelDataError(f"Error: {key!r} of the replay buffer file {path} is not an integer; the file is "
                             "corrupted.")
    number = int(value)
    if not low <= number <= high:
        raise ModelDataError(f"Error: {key!r} of the replay buffer file {path} is {number}, outside [{low}, {high}]; "
                             "the file is corrupted.")
    return number


def saved_flag(data: dict, key: str, path: str) -> bool:
    """
    The boolean ``data[key]`` of the replay buffer file ``path``.

    :raises ModelDataError: when it is missing or not a boolean
    """
    value = data.get(key)
    if not isinstance(value, np.ndarray) or value.shape != () or value.dtype.kind != "b":
        raise ModelDataError(f"Error: {key!r} of the replay buffer file {path} is not a boolean; the file is "
                             "corrupted.")
    return bool(value)


def saved_index_array(data: dict, key: str, path: str, shape: tuple, low: int, high: int) -> np.ndarray:
    """
    The integer array ``data[key]`` of the replay buffer file ``path`` (int64), checked for its shape and for values in
    ``[low, high]``.

    :raises ModelDataError: when it is missing, of another shape or dtype, or out of range
    """
    value = data.get(key)
    if not isinstance(value, np.ndarray) or value.shape != tuple(shape) or value.dtype.kind not in "iu":
        raise ModelDataError(f"Error: {key!r} of the replay buffer file {path} is not an integer array of shape "
                             f"{tuple(shape)}; the file is corrupted.")
    if value.size and (int(value.min()) < low or int(value.max()) > high):
        raise ModelDataError(f"Error: {key!r} of the replay buffer file {path} has values outside [{low}, {high}]; "
                             "the file is corrupted.")
    return value.astype(np.int64)


def _saved_buffer_class(class_name: str, path: str) -> type:
    """The class a buffer file names: sbtf's ``ReplayBuffer`` / ``PrioritizedReplayBuffer``, or a registered replay
    buffer class that restores itself from a file (``_from_saved``, e.g. ``HerReplayBuffer``). Only registered
    classes are looked up (``sbtf.common.registry``): a name read from a file is never imported."""
    cls = _BUFFER_CLASSES.get(class_name)
    if cls is None:
        cls = registered_classes("replay_buffer").get(class_name)
        if not (isinstance(cls, type) and issubclass(cls, ReplayBuffer) and "_from_saved" in vars(cls)):
            raise CorruptedFileError(f"Error: {path} holds an unknown replay buffer class {class_name!r}.")
    return cls


def _check_buffer_data(data: dict, path: str, prioritized: bool) -> None:
    """Validate what ``_restore`` will use, and the memory the restored buffer will take, before allocating it."""
    limits = get_load_limits()
    maxsize = saved_int(data, "maxsize", path, 1, MAX_BUFFER_SIZE)
    size = saved_int(data, "size", path, 0, maxsize)
    saved_int(data, "next_idx", path, 0, maxsize - 1)
    slot_bytes = 8 + (64 if prioritized else 0)  # at least a reward; segment trees
    if "obs_t" in data:
        for key in ("obs_shape", "action_shape"):
            shape = data.get(key)
            if not isinstance(shape, np.ndarray) or shape.ndim != 1 or shape.dtype.kind not in "iu" or len(shape) > 32 \
                    or np.any(shape < 0):
                raise ModelDataError(f"Error: {key!r} of the replay buffer file {path} is not a shape; the file is "
                                     "corrupted.")
        obs_shape = tuple(int(s) for s in data["obs_shape"])
        action_shape = tuple(int(s) for s in data["action_shape"])
        # products with Python ints (NumPy's wrap around int64), bounded before any row is allocated
        for key, shape in (("obs_shape", obs_shape), ("action_shape", action_shape)):
            checked_prod(shape, f"{key!r} of the replay buffer file {path}", limits.max_array_bytes)
        expected = {"obs_t": (size,) + obs_shape, "obs_tp1": (size,) + obs_shape, "actions": (size,) + action_shape,
                    "rewards": (size,), "dones": (size,)}
        for key, shape in expected.items():
            if key not in data or data[key].shape != shape:
                found = data[key].shape if key in data else "missing"
                raise ModelDataError(f"Error: {key!r} of the replay buffer file {path} has shape {found}, expected "
                                     f"{shape}; the file is corrupted.")
        if "optimize_memory_usage" in data:
            valid, ahead = data.get("valid"), data.get("obs_ahead")
            if not isinstance(valid, np.ndarray) or valid.shape != (size,) or valid.dtype.kind != "b":
                raise ModelDataError(f"Error: 'valid' of the replay buffer file {path} does not flag its {size} "
                                     "transitions; the file is corrupted.")
            if not isinstance(ahead, (np.ndarray, PackedObsArray)) or ahead.shape[1:] != obs_shape or \
                    len(ahead) > maxsize or ahead.dtype != data["obs_t"].dtype or \
                    isinstance(ahead, PackedObsArray) != isinstance(data["obs_t"], PackedObsArray):
                raise ModelDataError(f"Error: 'obs_ahead' of the replay buffer file {path} does not hold observations "
                                     f"of shape {obs_shape}; the file is corrupted.")
        slot_bytes += 2 * row_nbytes(data["obs_t"]) + 8
        slot_bytes += data["actions"].itemsize * math.prod(action_shape)
    if prioritized:
        for key in ("alpha", "max_priority"):
            value = data.get(key)
            if not isinstance(value, np.ndarray) or value.shape != () or value.dtype.kind not in "iuf" or not (
                    np.isfinite(value) and value >= 0):
                raise ModelDataError(f"Error: {key!r} of the replay buffer file {path} is not a number >= 0; the file "
                                     "is corrupted.")
        leaves = data.get("priorities_alpha")
        if not isinstance(leaves, np.ndarray) or leaves.shape != (size,) or leaves.dtype.kind not in "iuf":
            raise ModelDataError(f"Error: the priorities of the replay buffer file {path} do not match its {size} "
                                 "transitions; the file is corrupted.")
    if maxsize * slot_bytes > limits.max_array_bytes:
        raise FileLimitError(f"Error: the replay buffer file {path} restores a buffer of {maxsize:,} transitions, "
                             f"{maxsize * slot_bytes:,} bytes, beyond the {limits.max_array_bytes:,}-byte limit. If "
                             "you trust it, raise the limit with "
                             "sbtf.common.file_errors.load_limits(max_array_bytes=...).")


def _gather_packed_observations(data: dict, path: str) -> None:
    """Format 2: the observation arrays saved key by key (``obs_fields``, ``obs_t__<i>`` ...) become
    PackedObsArrays under their usual names (``obs_t``, ``obs_tp1``, ``obs_ahead``), checked against each other."""
    if "obs_fields" not in data:
        return
    places = data["obs_fields"]
    if not isinstance(places, np.ndarray) or places.ndim != 2 or places.shape[1] != 2 or places.dtype.kind not in "iu" \
            or not 0 < len(places) <= 4096 or np.any(places < 0):
        raise ModelDataError(f"Error: 'obs_fields' of the replay buffer file {path} is not a list of (offset, size); "
                             "the file is corrupted.")
    fields = []
    offset = 0
    for i, (start, size) in enumerate(places.tolist()):
        part = data.get(f"obs_t__{i}")
        if start != offset or size < 1 or not isinstance(part, np.ndarray) or part.dtype.kind not in "iubf" or \
                part.ndim < 1 or math.prod(part.shape[1:]) != size:
            raise ModelDataError(f"Error: key {i} of the observations in the replay buffer file {path} does not match "
                                 "'obs_fields'; the file is corrupted.")
        fields.append(ObsField(int(start), int(size), tuple(int(s) for s in part.shape[1:]), part.dtype))
        offset += size
    for name in _OBS_MEMBERS:
        parts = [data.pop(f"{name}__{i}", None) for i in range(len(fields))]
        if all(part is None for part in parts):
            continue
        if any(part is None or part.dtype != field.dtype or part.shape[1:] != field.shape or len(part) != len(parts[0])
               for part, field in zip(parts, fields)):
            raise ModelDataError(f"Error: the {name!r} observations of the replay buffer file {path} do not match "
                                 "'obs_fields'; the file is corrupted.")
        data[name] = PackedObsArray(0, fields, parts)


def load_buffer(path: Union[str, os.PathLike]) -> ReplayBuffer:
    """
    Load a replay buffer written by ``ReplayBuffer.save`` / ``model.save_replay_buffer`` (no pickle is read; array
    sizes are checked from their headers and the restored buffer's size against the limits before anything is
    allocated).

    :param path: (str or PathLike) the file
    :return: (ReplayBuffer, PrioritizedReplayBuffer or HerReplayBuffer) the buffer, with its content, write position
        and priorities (a HerReplayBuffer with its episodes; attach the env again: ``set_env``)
    :raises ModelFileError: (a ValueError) when the file is not a valid replay buffer file
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"Error: the replay buffer file {path} does not exist.")
    try:
        with open_zip(path, f"replay buffer file {path}") as archive:
            members = set(archive.namelist())
            if "format.npy" not in members or _read_text(archive, "format.npy", path) != BUFFER_FORMAT:
                raise CorruptedFileError(f"no {BUFFER_FORMAT!r} marker")
            class_name = _read_text(archive, "class_name.npy", path) if "class_name.npy" in members else "?"
    except CorruptedFileError as exc:
        raise CorruptedFileError(f"Error: {path} is not a replay buffer file written by sbtf ({exc}).") from exc
    names = [name[:-4] for name in sorted(members) if name.endswith(".npy")
             and name not in ("format.npy", "class_name.npy")]
    data = read_npz(path, names=names, what=f"arrays of the replay buffer file {path}")
    version = saved_int(data, "format_version", path, 0, 1 << 30)
    if version > BUFFER_FORMAT_VERSION:
        raise CorruptedFileError(f"Error: {path} was written by a newer sbtf (replay buffer format {version}); "
                                 "upgrade sbtf to read it.")
    buffer_class = _saved_buffer_class(class_name, path)
    prioritized = class_name == "PrioritizedReplayBuffer"
    _gather_packed_observations(data, path)
    _check_buffer_data(data, path, prioritized)
    if class_name not in _BUFFER_CLASSES:  # a class that restores itself (checks its own entries first)
        return buffer_class._from_saved(data, path)
    maxsize = int(data["maxsize"])
    if prioritized:
        buffer: ReplayBuffer = PrioritizedReplayBuffer(maxsize, float(data["alpha"]))
    elif "optimize_memory_usage" in data:
        buffer = ReplayBuffer(maxsize, optimize_memory_usage=True,
                              n_envs=saved_int(data, "n_envs", path, 1, 1 << 16))
    else:
        buffer = ReplayBuffer(maxsize)
    buffer._restore(data)
    return buffer


# ``replay_buffer_class`` is stored in model files by the class name
for _cls in (ReplayBuffer, PrioritizedReplayBuffer):
    register_class(_cls, "replay_buffer", _cls.__name__)

__all__ = ["ReplayBatch", "ReplayBuffer", "PrioritizedReplayBuffer", "load_buffer", "saved_int", "saved_flag",
           "MAX_BUFFER_SIZE",
           "saved_index_array"]
