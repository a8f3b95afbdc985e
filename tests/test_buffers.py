"""Replay buffers (uniform, prioritized) and segment trees: SB2 API, vectorised maths, atomic save/load."""
from __future__ import annotations

import os

import numpy as np
import pytest

from sbtf.common.buffers import PrioritizedReplayBuffer, ReplayBuffer, load_buffer
from sbtf.common.segment_tree import MinSegmentTree, SegmentTree, SumSegmentTree


# ----------------------------------------------------------------------------------------------- segment trees
@pytest.mark.parametrize("capacity", [1, 2, 16, 64])
def test_segment_trees_match_brute_force(capacity):
    rng = np.random.default_rng(capacity)
    values = rng.random(capacity) * 10
    sum_tree, min_tree = SumSegmentTree(capacity), MinSegmentTree(capacity)
    for i, value in enumerate(values):  # scalar path
        sum_tree[i] = value
        min_tree[i] = value
    for _ in range(50):
        start = int(rng.integers(0, capacity))
        end = int(rng.integers(start + 1, capacity + 1))
        assert sum_tree.sum(start, end) == pytest.approx(values[start:end].sum())
        assert min_tree.min(start, end) == pytest.approx(values[start:end].min())
    assert sum_tree.sum() == pytest.approx(values.sum())
    assert min_tree.min() == pytest.approx(values.min())
    # vectorised update with repeated indices: the last value wins, as for a NumPy array
    idx = rng.integers(0, capacity, size=2 * capacity)
    new = rng.random(2 * capacity)
    sum_tree[idx] = new
    min_tree[idx] = new
    values[idx] = new
    assert np.allclose(sum_tree[np.arange(capacity)], values)
    assert sum_tree.sum() == pytest.approx(values.sum())
    assert min_tree.min() == pytest.approx(values.min())
    for start in range(capacity):
        assert sum_tree.sum(start, capacity) == pytest.approx(values[start:].sum())
        assert min_tree.min(0, start + 1) == pytest.approx(values[:start + 1].min())


def test_find_prefixsum_idx_matches_brute_force():
    rng = np.random.default_rng(0)
    tree = SumSegmentTree(32)
    values = rng.random(32)
    values[[3, 7, 20]] = 0.0  # zero-priority leaves are never found
    tree[np.arange(32)] = values
    prefix = rng.random(1000) * values.sum()
    expected = np.searchsorted(np.cumsum(values), prefix, side="right")
    found = tree.find_prefixsum_idx(prefix)
    assert np.array_equal(found, expected)
    assert not np.isin(found, [3, 7, 20]).any()
    assert tree.find_prefixsum_idx(0.0)[0] == 0
    with pytest.raises(ValueError):
        tree.find_prefixsum_idx(values.sum() * 2)


def test_segment_tree_rejects_bad_capacity_and_indices():
    with pytest.raises(ValueError, match="power of 2"):
        SegmentTree(6, np.add, 0.0)
    tree = SumSegmentTree(4)
    with pytest.raises(IndexError):
        tree[4] = 1.0
    with pytest.raises(IndexError):
        tree[np.array([0, 5])] = 1.0


# ----------------------------------------------------------------------------------------------- uniform buffer
def _fill(buffer, n, obs_shape=(3,), offset=0):
    for i in range(n):
        value = offset + i
        buffer.add(np.full(obs_shape, value, np.float32), np.array([value, -value], np.float32), float(value),
                   np.full(obs_shape, value + 0.5, np.float32), value % 2 == 0)


def test_replay_buffer_ring_and_sb2_api():
    buffer = ReplayBuffer(5)
    assert len(buffer) == 0 and buffer.buffer_size == 5 and not buffer.can_sample(1)
    _fill(buffer, 3)
    assert len(buffer) == 3 and buffer.can_sample(3) and not buffer.can_sample(4) and not buffer.is_full()
    _fill(buffer, 4, offset=3)  # 7 transitions in a buffer of 5: slots 0, 1 overwritten by 5, 6
    assert len(buffer) == 5 and buffer.is_full() and buffer.next_idx == 2
    rewards = [entry[2] for entry in buffer.storage]
    assert rewards == [5.0, 6.0, 2.0, 3.0, 4.0]
    obs_t, action, reward, obs_tp1, done = buffer.storage[0]
    assert np.allclose(obs_t, 5) and np.allclose(action, [5, -5]) and np.allclose(obs_tp1, 5.5) and done == 0.0
    obs, actions, rews, next_obs, dones = buffer.sample(64)
    assert obs.shape == (64, 3) and actions.shape == (64, 2) and rews.shape == (64,) and dones.shape == (64,)
    assert rews.dtype == np.float32 and dones.dtype == np.float32
    assert set(rews.tolist()) <= {2.0, 3.0, 4.0, 5.0, 6.0}
    assert np.allclose(obs[:, 0], rews) and np.allclose(next_obs[:, 0], rews + 0.5)
    assert np.allclose(actions[:, 0], rews) and np.allclose(dones, (rews % 2 == 0))



def test_sample_batch_names_the_same_draw_as_sample():
    from sbtf.common.buffers import ReplayBatch

    buffer = ReplayBuffer(8)
    _fill(buffer, 6)
    np.random.seed(3)
    obs, actions, rewards, next_obs, dones = buffer.sample(16)
    np.random.seed(3)
    batch = buffer.sample_batch(16)
    assert isinstance(batch, ReplayBatch) and len(batch) == 16
    for named, positional in ((batch.observations, obs), (batch.actions, actions), (batch.rewards, rewards),
                              (batch.next_observations, next_obs), (batch.dones, dones)):
        np.testing.assert_array_equal(named, positional)
    assert batch.weights is None and batch.indexes is None
    prioritized = PrioritizedReplayBuffer(8, alpha=0.6)
    _fill(prioritized, 6)
    np.random.seed(4)
    *_, weights, idxes = prioritized.sample(5, beta=0.4)
    np.random.seed(4)
    named = prioritized.sample_batch(5, beta=0.4)
    np.testing.assert_array_equal(named.weights, weights)
    np.testing.assert_array_equal(named.indexes, idxes)


def test_replay_buffer_extend_wraps_and_keeps_uint8():
    buffer = ReplayBuffer(6)
    images = np.arange(4 * 2 * 2 * 1, dtype=np.uint8).reshape(4, 2, 2, 1)
    buffer.extend(images, np.arange(4), np.arange(4, dtype=np.float32), images + 1, np.zeros(4))
    buffer.extend(images, np.arange(4, 8), np.arange(4, 8, dtype=np.float32), images + 1, np.ones(4))
    assert len(buffer) == 6 and buffer.next_idx == 2
    obs, actions, rewards, next_obs, dones = buffer.sample(10)
    assert obs.dtype == np.uint8 and next_obs.dtype == np.uint8 and actions.dtype == np.int64
    assert np.array_equal([entry[2] for entry in buffer.storage], [6, 7, 2, 3, 4, 5])
    buffer.extend(images.repeat(3, axis=0), np.arange(12), np.arange(12, dtype=np.float32), images.repeat(3, 0),
                  np.zeros(12))  # more than the capacity: only the last 6 survive
    assert sorted(entry[2] for entry in buffer.storage) == [6, 7, 8, 9, 10, 11]
    with pytest.raises(ValueError, match="same length"):
        buffer.extend(images, np.arange(3), np.arange(4), images, np.zeros(4))
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(3).sample(2)


# ----------------------------------------------------------------------------------------------- prioritized
def test_prioritized_sampling_is_proportional_to_priority():
    np.random.seed(0)
    alpha = 0.7
    buffer = PrioritizedReplayBuffer(10, alpha=alpha)
    _fill(buffer, 10)
    priorities = np.arange(1, 11, dtype=np.float64)
    buffer.update_priorities(np.arange(10), priorities)
    n = 40000
    _, _, rewards, _, _, weights, idxes = buffer.sample(n, beta=0.5)
    counts = np.bincount(idxes, minlength=10)
    expected = priorities ** alpha / np.sum(priorities ** alpha)
    # every index within 5 standard deviations of its binomial expectation
    std = np.sqrt(n * expected * (1 - expected))
    assert np.all(np.abs(counts - n * expected) < 5 * std)
    assert np.allclose(rewards, idxes)  # the sampled data are the transitions at those indices


def test_prioritized_importance_weights_formula():
    np.random.seed(1)
    alpha, beta = 0.6, 0.4
    buffer = PrioritizedReplayBuffer(16, alpha=alpha)
    _fill(buffer, 12)
    priorities = np.random.rand(12) + 0.1
    buffer.update_priorities(np.arange(12), priorities)
    *_, weights, idxes = buffer.sample(200, beta=beta)
    probs = priorities ** alpha / np.sum(priorities ** alpha)
    max_weight = (probs.min() * 12) ** (-beta)
    expected = (probs[idxes] * 12) ** (-beta) / max_weight
    assert weights.dtype == np.float32
    assert np.allclose(weights, expected, rtol=1e-5)
    assert weights.max() <= 1.0 + 1e-6


def test_prioritized_new_transitions_get_max_priority_and_validation():
    buffer = PrioritizedReplayBuffer(8, alpha=1.0)
    _fill(buffer, 4)
    buffer.update_priorities([0, 1], [5.0, 0.5])
    _fill(buffer, 2, offset=4)
    assert np.allclose(buffer._it_sum[np.arange(6)], [5.0, 0.5, 1.0, 1.0, 5.0, 5.0])
    buffer.extend(np.zeros((2, 3)), np.zeros((2, 2)), np.zeros(2), np.zeros((2, 3)), np.zeros(2))
    assert np.allclose(buffer._it_sum[np.arange(8)], [5.0, 0.5, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0])
    with pytest.raises(ValueError, match="beta"):
        buffer.sample(4, beta=0)
    with pytest.raises(ValueError, match="> 0"):
        buffer.update_priorities([0], [0.0])
    with pytest.raises(ValueError, match="indices"):
        buffer.update_priorities([9], [1.0])
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedReplayBuffer(4, alpha=-1)


# ----------------------------------------------------------------------------------------------- save / load
@pytest.mark.parametrize("prioritized", [False, True])
def test_buffer_save_load_roundtrip(tmp_path, prioritized):
    buffer = PrioritizedReplayBuffer(7, alpha=0.6) if prioritized else ReplayBuffer(7)
    _fill(buffer, 9)
    if prioritized:
        buffer.update_priorities([0, 3, 5], [2.0, 0.1, 7.0])
    path = tmp_path / "sub" / "buffer.npz"
    buffer.save(path)
    assert sorted(os.listdir(path.parent)) == ["buffer.npz"]  # no temporary file left behind
    loaded = load_buffer(path)
    assert type(loaded) is type(buffer)
    assert len(loaded) == len(buffer) and loaded.next_idx == buffer.next_idx
    assert loaded.buffer_size == buffer.buffer_size
    for a, b in zip(loaded.storage, buffer.storage):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)
    if prioritized:
        assert np.allclose(loaded._it_sum[np.arange(7)], buffer._it_sum[np.arange(7)])
        assert loaded._it_min.min() == pytest.approx(buffer._it_min.min())
        assert loaded._max_priority == buffer._max_priority and loaded.alpha == buffer.alpha
    # the loaded buffer keeps working as a ring
    _fill(loaded, 1, offset=100)
    assert loaded.storage[buffer.next_idx][2] == 100.0


def test_empty_buffer_and_bad_files(tmp_path):
    path = tmp_path / "empty.npz"
    ReplayBuffer(3).save(path)
    assert len(load_buffer(path)) == 0
    not_a_buffer = tmp_path / "other.npz"
    np.savez(not_a_buffer, x=np.zeros(3))
    with pytest.raises(ValueError, match="not a replay buffer"):
        load_buffer(not_a_buffer)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match="not a replay buffer"):
        load_buffer(garbage)
    with pytest.raises(TypeError):
        PrioritizedReplayBuffer.load(path)


def test_sample_normalizes_with_vec_normalize():
    class FakeVecNormalize:
        @staticmethod
        def normalize_obs(obs):
            return obs * 2

        @staticmethod
        def normalize_reward(reward):
            return reward - 1

    buffer = ReplayBuffer(4)
    _fill(buffer, 4)
    obs, _, rewards, next_obs, _ = buffer.sample(16, env=FakeVecNormalize())
    raw = rewards + 1
    assert np.allclose(obs[:, 0], 2 * raw) and np.allclose(next_obs[:, 0], 2 * (raw + 0.5))


# ----------------------------------------------------------------------------------------------- Dict observations
def _dict_space():
    import gymnasium as gym

    return gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (12, 12, 3), np.uint8),
                            "vec": gym.spaces.Box(-1, 1, (3,), np.float64),
                            "pos": gym.spaces.Discrete(5, start=-2)})


def _dict_transitions(space, n, seed=0):
    """n packed transitions (obs, action, reward, next_obs, done); every 4th ends an episode with a next observation
    that differs from the following observation."""
    from sbtf.common.envs.dict_obs import layout_of

    layout = layout_of(space)
    space.seed(seed)
    rows = layout.pack({key: np.stack([space[key].sample() for _ in range(n + 1)]) for key in layout.keys})
    terminal = layout.pack({key: np.stack([space[key].sample() for _ in range(n)]) for key in layout.keys})
    dones = (np.arange(n) % 4 == 3).astype(np.float32)
    next_rows = np.where(dones[:, None] > 0, terminal, rows[1:])
    actions = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    return rows[:-1], actions, np.arange(n, dtype=np.float32), next_rows, dones


def _fill_dict(buffer, transitions, n_envs=1):
    obs, actions, rewards, next_obs, dones = transitions
    if n_envs == 1:
        for i in range(len(rewards)):
            buffer.add(obs[i], actions[i], rewards[i], next_obs[i], dones[i])
    else:
        for start in range(0, len(rewards), n_envs):
            part = slice(start, start + n_envs)
            buffer.extend(obs[part], actions[part], rewards[part], next_obs[part], dones[part])


def _same_samples(a, b, seed=5, **kwargs):
    np.random.seed(seed)
    first = a.sample(64, **kwargs)
    np.random.seed(seed)
    second = b.sample(64, **kwargs)
    for x, y in zip(first, second):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)
    return first


@pytest.mark.parametrize("kind", ["uniform", "prioritized", "optimize_memory_usage"])
def test_dict_observations_are_stored_per_key_and_sampled_identically(kind):
    from sbtf.common.storage.obs_storage import PackedObsArray

    space = _dict_space()
    transitions = _dict_transitions(space, 40)
    n_envs = 2 if kind == "optimize_memory_usage" else 1

    def make(observation_space):
        if kind == "prioritized":
            return PrioritizedReplayBuffer(32, alpha=0.6, observation_space=observation_space)
        return ReplayBuffer(32, optimize_memory_usage=kind == "optimize_memory_usage", n_envs=n_envs,
                            observation_space=observation_space)

    flat, native = make(None), make(space)
    _fill_dict(flat, transitions, n_envs)
    _fill_dict(native, transitions, n_envs)
    assert isinstance(native._obs_t, PackedObsArray) and not isinstance(flat._obs_t, PackedObsArray)
    assert [a.dtype for a in native._obs_t.arrays] == [np.uint8, np.dtype(np.int8), np.float32]  # sorted keys
    # 432 uint8 + 1 int8 + 3 float32 bytes a row instead of 436 float32
    assert native.observation_nbytes * (436 * 4) == flat.observation_nbytes * (432 + 1 + 12)
    assert native.observation_nbytes < 0.26 * flat.observation_nbytes
    kwargs = dict(beta=0.4) if kind == "prioritized" else {}
    obs = _same_samples(flat, native, **kwargs)[0]
    assert obs.dtype == np.float32 and obs.shape == (64, 436)
    for x, y in zip(flat.storage, native.storage):
        for a, b in zip(x, y):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("optimize", [False, True])
def test_dict_buffer_save_load_keeps_native_dtypes_and_reads_old_files(tmp_path, optimize):
    from sbtf.common.storage.obs_storage import PackedObsArray

    space = _dict_space()
    transitions = _dict_transitions(space, 30, seed=1)
    n_envs = 2 if optimize else 1
    native = ReplayBuffer(24, optimize_memory_usage=optimize, n_envs=n_envs, observation_space=space)
    flat = ReplayBuffer(24, optimize_memory_usage=optimize, n_envs=n_envs)
    _fill_dict(native, transitions, n_envs)
    _fill_dict(flat, transitions, n_envs)
    native.save(tmp_path / "native.npz")
    flat.save(tmp_path / "flat.npz")  # packed float32 rows: the format older sbtf versions wrote
    assert os.path.getsize(tmp_path / "native.npz") < 0.4 * os.path.getsize(tmp_path / "flat.npz")
    loaded = load_buffer(tmp_path / "native.npz")
    assert isinstance(loaded._obs_t, PackedObsArray) and loaded._obs_t.arrays[0].dtype == np.uint8
    _same_samples(native, loaded)
    old = load_buffer(tmp_path / "flat.npz")
    assert old._obs_t.dtype == np.float32 and not isinstance(old._obs_t, PackedObsArray)
    old.use_observation_space(space)  # what model.load_replay_buffer does
    assert isinstance(old._obs_t, PackedObsArray) and old.observation_nbytes == native.observation_nbytes
    _same_samples(native, old)
    # all keep working as rings after loading
    more = _dict_transitions(space, 6, seed=2)
    for buffer in (native, loaded, old):
        _fill_dict(buffer, more, n_envs)
    _same_samples(native, loaded, seed=7)
    _same_samples(native, old, seed=7)


def test_packed_obs_array_round_trips_and_rejects_other_shapes():
    from sbtf.common.envs.dict_obs import layout_of
    from sbtf.common.storage.obs_storage import PackedObsArray, obs_fields, storage_dtype
    import gymnasium as gym

    space = _dict_space()
    fields = obs_fields(space)
    assert storage_dtype(gym.spaces.Discrete(300)) == np.uint16 and storage_dtype(gym.spaces.MultiBinary(3)) == np.int8
    assert obs_fields(gym.spaces.Dict({"a": gym.spaces.Box(0, 1, (2,))})) is None  # float keys only: nothing to save
    assert obs_fields(gym.spaces.Box(0, 255, (4, 4, 1), np.uint8)) is None
    rows = _dict_transitions(space, 10)[0]
    array = PackedObsArray.from_rows(rows, fields, chunk=3)
    np.testing.assert_array_equal(array[:], rows)
    np.testing.assert_array_equal(array[4], rows[4])
    np.testing.assert_array_equal(array[np.array([True, False] * 5)], rows[::2])
    assert array.shape == (10, layout_of(space).size) and array.dtype == np.float32
    with pytest.raises(ValueError):
        array[0] = np.zeros(5, np.float32)
