"""Safe load, round two (issue #34): spaces, networks, buffers, statistics and datasets built from a file are first
compared with what the file itself carries, values are checked against their meaning, errors are typed and their
messages bounded. Each case is a crafted file built here; memory is bounded with tracemalloc (NumPy and Python
allocations), never with seconds."""
from __future__ import annotations

import pickle
import struct
import tracemalloc
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import legacy_fixtures as lf
from crafted_files import with_data
from sbtf import A2C, ACKTR, DQN, PPO2, SAC
from sbtf.common.fileio import load_budget
from sbtf.common.buffers import MAX_BUFFER_SIZE, PrioritizedReplayBuffer, ReplayBuffer, load_buffer
from sbtf.common.file_errors import FileLimitError, ModelDataError, ModelFileError, load_limits
from sbtf.common.segment_tree import MinSegmentTree, SumSegmentTree
from sbtf.common.vec_env import DummyVecEnv, VecNormalize

MB = 1 << 20


def peak_bytes(fn, *args, **kwargs):
    """(result or exception, tracemalloc peak in bytes) of ``fn(*args, **kwargs)``."""
    tracemalloc.start()
    try:
        try:
            outcome = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome = exc
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def assert_refused(outcome, error=ModelFileError, *words):
    assert isinstance(outcome, error), f"expected {error.__name__}, got {outcome!r}"
    text = str(outcome)
    assert len(text) < 1500, "the message must stay short"
    for word in words:
        assert word in text, f"{word!r} not in {text!r}"


def space(kind, **fields):
    return {"__space__": {"type": kind, **fields}}


@pytest.fixture(scope="module")
def ppo2_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("objects")
    path = folder / "ppo2.zip"
    PPO2("MlpPolicy", "CartPole-v1", n_steps=8, nminibatches=1, seed=0).save(path)
    PPO2.load(path)  # warm up: imports, TF initialisation
    return path


# ------------------------------------------------------------------------------------------------ spaces, sbtf zips
@pytest.mark.parametrize("key,value,words", [
    ("observation_space", space("Box", low=0, high=1, shape=[2_000_000], dtype="float32"), ["2,000,000 elements"]),
    ("observation_space", space("MultiBinary", n=[1000, 2000]), ["MultiBinary", "2,000,000 elements"]),
    ("observation_space", space("Discrete", n=2_000_000, start=0), ["Discrete", "2,000,000 elements"]),
    ("action_space", space("Discrete", n=2_000_000, start=0), ["Discrete", "2,000,000 elements"]),
    ("action_space", space("MultiDiscrete", nvec=[1_000_000, 1_000_000], dtype="int64"), ["one-hot"]),
    ("not_a_ppo2_key", space("Box", low=0, high=1, shape=[2_000_000], dtype="float32"), ["2,000,000 elements"]),
], ids=["box", "multibinary", "discrete_obs", "discrete_action", "multidiscrete", "unknown_key"])
def test_spaces_are_compared_with_the_stored_parameters_before_being_built(ppo2_file, tmp_path, key, value, words):
    path = with_data(ppo2_file, tmp_path / "m.zip", lambda d: d.update({key: value}))
    outcome, peak = peak_bytes(PPO2.load, path)
    assert_refused(outcome, FileLimitError, "largest array holds 4,096 values", *words)
    assert peak < 4 * MB, f"{peak / MB:.1f} MB for a {path.stat().st_size} B file"


def test_spaces_beyond_the_hard_cap_are_refused_whatever_the_file_stores(ppo2_file, tmp_path):
    path = with_data(ppo2_file, tmp_path / "m.zip", lambda d: d.update(
        observation_space=space("Box", low=0, high=1, shape=[500_000_000], dtype="float32")))
    outcome, peak = peak_bytes(PPO2.load, path)
    assert_refused(outcome, FileLimitError, "500,000,000 elements", "max_space_elements")
    assert peak < 4 * MB
    with load_limits(max_space_elements=100):  # the cap is a load limit
        assert_refused(peak_bytes(PPO2.load, with_data(ppo2_file, tmp_path / "n.zip", lambda d: d.update(
            observation_space=space("Box", low=0, high=1, shape=[101], dtype="float32"))))[0], FileLimitError)


def test_a_network_cannot_outgrow_the_parameters_the_file_stores(ppo2_file, tmp_path):
    """A space under the floor (65,536 elements) with a wide first layer: refused when the layer is about to be
    created (64 Ki x 4 Ki weights = 1 GiB), not after."""
    path = with_data(ppo2_file, tmp_path / "m.zip", lambda d: d.update(
        observation_space=space("Box", low=0, high=1, shape=[65_536], dtype="float32"),
        policy_kwargs={"net_arch": [4096]}))
    outcome, _ = peak_bytes(PPO2.load, path)
    assert_refused(outcome, FileLimitError, "would create the weight", "shared_fc0/w", "(65536, 4096)")
    assert load_budget.NETWORK_BUDGET_FACTOR * 10_000 + load_budget.NETWORK_BUDGET_SLACK < 65_536 * 4096


def test_a_trusted_file_with_a_large_space_loads_inside_a_raised_floor(ppo2_file, tmp_path):
    path = with_data(ppo2_file, tmp_path / "m.zip", lambda d: d.update(
        observation_space=space("Box", low=0, high=1, shape=[70_000], dtype="float32")))
    assert_refused(peak_bytes(PPO2.load, path)[0], FileLimitError, "space_elements_floor")
    with load_limits(space_elements_floor=100_000):  # the space passes; the network is still bounded by the file
        assert_refused(peak_bytes(PPO2.load, path)[0], FileLimitError, "would create the weight pi_fc0/w")


def test_a_good_file_still_loads_and_acts_identically(ppo2_file):
    model = PPO2.load(ppo2_file)
    again = PPO2.load(ppo2_file)
    obs = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_array_equal(model.action_probability(obs), again.action_probability(obs))


def test_sbtf_export_prints_one_line_for_an_oversized_space(ppo2_file, tmp_path, capsys):
    from sbtf import cli

    path = with_data(ppo2_file, tmp_path / "m.zip", lambda d: d.update(
        observation_space=space("MultiBinary", n=[1000, 2000])))
    code = cli.main(["export", str(path), "--format", "savedmodel", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "2,000,000 elements" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


# ------------------------------------------------------------------------------------------------ constructor errors
@pytest.mark.parametrize("cls", [PPO2, A2C, ACKTR])
def test_files_without_n_envs_raise_a_model_data_error_naming_it(cls, tmp_path):
    kwargs = dict(nminibatches=1) if cls is PPO2 else {}
    good = tmp_path / "good.zip"
    cls("MlpPolicy", "CartPole-v1", n_steps=8, seed=0, **kwargs).save(good)
    outcome, _ = peak_bytes(cls.load, with_data(good, tmp_path / "m.zip", lambda d: d.pop("n_envs")))
    assert_refused(outcome, ModelDataError, "'n_envs'", cls.__name__)


# ------------------------------------------------------------------------------------------------ replay buffers
@pytest.fixture(scope="module")
def dqn_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("dqn") / "dqn.zip"
    DQN("MlpPolicy", "CartPole-v1", prioritized_replay=True, buffer_size=100, learning_starts=10, seed=0).save(path)
    DQN.load(path)
    return path


def test_a_prioritized_dqn_of_2_27_transitions_loads_without_allocating_its_buffer(dqn_file, tmp_path):
    path = with_data(dqn_file, tmp_path / "m.zip", lambda d: d.update(buffer_size=2 ** 27))
    model, peak = peak_bytes(DQN.load, path)
    assert isinstance(model.replay_buffer, PrioritizedReplayBuffer) and model.replay_buffer.buffer_size == 2 ** 27
    assert peak < 16 * MB, f"{peak / MB:.0f} MB"  # the sum and min trees of 2**27 leaves took 4 GiB
    assert model.replay_buffer._it_sum.stored_leaves <= 1024


def test_a_sac_with_a_prioritized_buffer_of_2_26_loads_small(tmp_path):
    good = tmp_path / "sac.zip"
    SAC("MlpPolicy", "Pendulum-v1", buffer_size=100, replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=dict(alpha=0.6), seed=0).save(good)
    SAC.load(good)
    model, peak = peak_bytes(SAC.load, with_data(good, tmp_path / "m.zip", lambda d: d.update(buffer_size=2 ** 26)))
    assert isinstance(model.replay_buffer, PrioritizedReplayBuffer), model
    assert peak < 16 * MB, f"{peak / MB:.0f} MB"


def test_buffer_size_beyond_any_real_buffer_is_a_model_data_error(dqn_file, tmp_path):
    outcome, _ = peak_bytes(DQN.load, with_data(dqn_file, tmp_path / "m.zip", lambda d: d.update(buffer_size=2 ** 62)))
    assert_refused(outcome, ModelDataError, "buffer_size", f"{MAX_BUFFER_SIZE:,}")
    with pytest.raises(ValueError, match="replay buffer size"):
        ReplayBuffer(MAX_BUFFER_SIZE + 1)


def _buffer_file(path: Path, **arrays) -> Path:
    """A replay buffer file (``np.savez`` of its state) with some entries replaced."""
    buffer = PrioritizedReplayBuffer(8, alpha=0.6)
    state = buffer._state()
    state.update(arrays)
    with open(path, "wb") as handle:
        np.savez(handle, **state)
    return path


def test_a_small_prioritized_buffer_file_announcing_29_million_slots_allocates_what_it_holds(tmp_path):
    path = _buffer_file(tmp_path / "b.npz", maxsize=np.array(29_000_000))
    assert path.stat().st_size < 4096
    buffer, peak = peak_bytes(load_buffer, path)
    assert isinstance(buffer, PrioritizedReplayBuffer) and buffer.buffer_size == 29_000_000
    assert peak < 2 * MB, f"{peak / MB:.0f} MB"  # the trees of 2**25 leaves took 1 GiB
    for i in range(50):  # and it works: transitions, priorities, sampling
        buffer.add(np.full(3, i, np.float32), 0, float(i), np.zeros(3), False)
    buffer.update_priorities(np.arange(50), np.arange(1, 51, dtype=np.float64))
    sample = buffer.sample(16, beta=0.4)
    assert sample[0].shape == (16, 3) and np.all(sample[-1] < 50)


def test_a_loaded_buffer_grows_as_transitions_arrive_and_keeps_its_content(tmp_path):
    rng = np.random.default_rng(0)
    reference, saved = ReplayBuffer(1000), ReplayBuffer(1000)
    for i in range(30):
        transition = (rng.standard_normal(4), rng.integers(2), float(i), rng.standard_normal(4), i % 7 == 0)
        reference.add(*transition)
        saved.add(*transition)
    saved.save(tmp_path / "b.npz")
    loaded = load_buffer(tmp_path / "b.npz")
    assert loaded.allocated_slots < 100  # the 30 slots the file fills, not 1000
    for i in range(2000):  # past the capacity: the ring wraps as before
        transition = (rng.standard_normal(4), rng.integers(2), float(i), rng.standard_normal(4), False)
        reference.add(*transition)
        loaded.add(*transition)
    assert loaded.allocated_slots == 1000 and len(loaded) == 1000 and loaded.next_idx == reference.next_idx
    for mine, theirs in zip(loaded.storage, reference.storage):
        for a, b in zip(mine, theirs):
            np.testing.assert_array_equal(a, b)


def test_buffer_shapes_whose_product_wraps_around_int64_are_refused(tmp_path):
    good = ReplayBuffer(10)
    good.add(np.zeros(4), 0, 0.0, np.zeros(4), False)
    state = good._state()
    state.update(size=np.array(0), next_idx=np.array(0), obs_shape=np.array([2 ** 62 + 1, 4]),
                 obs_t=np.zeros((0, 0)), obs_tp1=np.zeros((0, 0)), actions=np.zeros((0,)), rewards=np.zeros(0),
                 dones=np.zeros(0))
    with open(tmp_path / "b.npz", "wb") as handle:
        np.savez(handle, **state)
    with pytest.raises(ModelFileError):
        load_buffer(tmp_path / "b.npz")


@pytest.mark.parametrize("capacity", [1, 4, 2048, 2 ** 20])
def test_lazy_segment_trees_give_the_results_of_full_trees(capacity):
    rng = np.random.default_rng(capacity)
    sums, mins = SumSegmentTree(capacity), MinSegmentTree(capacity)
    leaves = np.zeros(capacity)
    filled = min(capacity, 1500)
    for chunk in np.array_split(np.arange(filled), 7):
        values = rng.random(len(chunk)) + 0.1
        sums[chunk] = values
        mins[chunk] = values
        leaves[chunk] = values
    assert sums.stored_leaves <= max(2048, 1024) and sums.capacity == capacity
    assert sums.sum() == pytest.approx(leaves.sum()) and mins.min() == pytest.approx(leaves[:filled].min())
    for start, end in ((0, capacity), (0, filled), (filled // 3, capacity), (capacity - 1, capacity)):
        assert sums.sum(start, end) == pytest.approx(leaves[start:end].sum())
        expected = leaves[start:end][leaves[start:end] > 0].min() if np.any(leaves[start:end] > 0) else np.inf
        assert mins.min(start, end) == pytest.approx(expected)
    total = leaves.sum()
    masses = np.concatenate([rng.random(200) * total, [0.0, total]])
    cumulative = np.cumsum(leaves)
    expected = np.minimum(np.searchsorted(cumulative, masses, side="right"), capacity - 1)
    np.testing.assert_array_equal(sums.find_prefixsum_idx(masses), expected)
    np.testing.assert_array_equal(sums[np.array([0, capacity - 1])], leaves[[0, capacity - 1]])
    assert sums.leaves(filled).shape == (filled,)


# ------------------------------------------------------------------------------------------------ HER buffers
def test_a_her_goal_shape_whose_product_wraps_around_int64_is_refused_at_load(tmp_path):
    from sbtf.common.bit_flipping_env import BitFlippingEnv
    from sbtf.her.her_replay_buffer import HerReplayBuffer

    env = DummyVecEnv([lambda: BitFlippingEnv(4, max_steps=4)])
    model = DQN("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer, learning_starts=1000, buffer_size=200,
                replay_buffer_kwargs=dict(n_sampled_goal=2, goal_selection_strategy="future"), seed=0)
    model.learn(20)
    model.save_replay_buffer(tmp_path / "her.npz")
    with np.load(tmp_path / "her.npz") as archive:
        state = dict(archive)
    assert list(state["goal_shape"]) == [4]
    state["goal_shape"] = np.array([2 ** 62 + 1, 4])  # an int64 product wraps to 4
    with open(tmp_path / "bad.npz", "wb") as handle:
        np.savez(handle, **state)
    with pytest.raises(ModelFileError, match="goal_shape"):
        model.load_replay_buffer(tmp_path / "bad.npz")
    model.load_replay_buffer(tmp_path / "her.npz")  # the good file still loads, and learning continues
    model.learn(20, reset_num_timesteps=False)


# ------------------------------------------------------------------------------------------------ VecNormalize
def _vecnormalize_data():
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    venv.reset()
    for _ in range(5):
        venv.step(np.array([0]))
    return venv._to_data()


@pytest.mark.parametrize("edit,words", [
    (lambda d: d["obs_rms"].update(mean=np.array([0.0, np.nan, 0.0, 0.0])), ["mean", "NaN"]),
    (lambda d: d["obs_rms"].update(var=np.array([1.0, -1.0, 1.0, 1.0])), ["variance", "negative"]),
    (lambda d: d["ret_rms"].update(var=np.array(np.inf)), ["variance"]),
    (lambda d: d.update(epsilon=0.0), ["epsilon"]),
    (lambda d: d.update(epsilon=-1e-8), ["epsilon"]),
    (lambda d: d.update(clip_obs=float("inf")), ["clip_obs"]),
    (lambda d: d.update(clip_obs=float("nan")), ["clip_obs"]),
    (lambda d: d.update(clip_reward=-1.0), ["clip_reward"]),
    (lambda d: d.update(gamma=2.0), ["gamma"]),
], ids=["nan_mean", "negative_var", "inf_var", "zero_epsilon", "negative_epsilon", "inf_clip", "nan_clip",
        "negative_clip", "gamma"])
def test_vecnormalize_statistics_are_checked_against_their_meaning(tmp_path, edit, words):
    data = _vecnormalize_data()
    edit(data)
    path = tmp_path / "vecnormalize.pkl"
    path.write_bytes(pickle.dumps(data))
    venv = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    with pytest.raises(ModelDataError) as info:
        VecNormalize.load(str(path), venv)
    for word in words:
        assert word in str(info.value)


def shared_bomb_opcodes(first_memo: int = 100_000) -> bytes:
    """``[[s] * 1000] * 1900`` with one 200 kB string ``s`` (memo references): 200 kB in the file, 380 GB as text."""
    s = b"a" * 200_000
    put = lambda i: b"r" + struct.pack("<I", i)  # noqa: E731 - LONG_BINPUT
    get = lambda i: b"j" + struct.pack("<I", i)  # noqa: E731 - LONG_BINGET
    return (b"X" + struct.pack("<I", len(s)) + s + put(first_memo) + b"0"
            + b"]" + put(first_memo + 1) + b"(" + get(first_memo) * 1000 + b"e" + b"0"
            + b"](" + get(first_memo + 1) * 1900 + b"e")


def test_a_hostile_clip_obs_is_reported_in_a_few_hundred_characters(tmp_path):
    data = _vecnormalize_data()
    data["clip_obs"] = 12345.678
    payload = pickle.dumps(data, protocol=2)
    marker = b"G" + struct.pack(">d", 12345.678)
    assert payload.count(marker) == 1
    path = tmp_path / "vecnormalize.pkl"
    path.write_bytes(payload.replace(marker, shared_bomb_opcodes()))
    venv = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    outcome, peak = peak_bytes(VecNormalize.load, str(path), venv)
    assert_refused(outcome, ModelDataError, "clip_obs")
    assert peak < 8 * path.stat().st_size


# ------------------------------------------------------------------------------------------------ SB2 files
class _Raw:
    def __init__(self, data: bytes):
        self.data = data


class _RawWriter(lf._Writer):
    def save(self, obj):
        if isinstance(obj, _Raw):
            self.w(obj.data)
        else:
            super().save(obj)


def sb2_pickle(value) -> bytes:
    writer = _RawWriter()
    writer.w(b"\x80\x04")
    writer.save(value)
    writer.w(b".")
    return writer.out.getvalue()


def big_box(n: int = 500_000_000):
    """An old gym Box of shape (n,) with 0-d bounds: a few bytes in the file, 2 GB per bound once built."""
    return lf.NewObj(lf.G("gym.spaces.box", "Box"), (), {
        "low": np.array(0.0, np.float32), "high": np.array(1.0, np.float32), "shape": (n,),
        "dtype": lf.dtype_call(np.float32)})


SB2_PARAMS = lf.mlp_params(4, 3, [], [64, 64], [64, 64], box_logstd=False, seed=1)


def sb2_data(**changes):
    data = lf.ppo2_data(lf.box(-1, 1, (4,)), lf.discrete(3), lf.policy("MlpPolicy"))
    data.update(changes)
    return data


@pytest.fixture(scope="module")
def sb2_warm(tmp_path_factory):
    path = tmp_path_factory.mktemp("sb2") / "good.pkl"
    path.write_bytes(sb2_pickle((sb2_data(), list(SB2_PARAMS.values()))))
    PPO2.load(path)
    return path


@pytest.mark.parametrize("changes,error,words", [
    (dict(observation_space=big_box()), FileLimitError, ["500,000,000 elements"]),
    (dict(unknown_key=big_box()), FileLimitError, ["500,000,000 elements"]),
    (dict(observation_space=big_box(2_000_000)), FileLimitError, ["2,000,000 elements", "largest array"]),
    (dict(gamma=_Raw(shared_bomb_opcodes(0))), ModelDataError, ["'gamma'"]),
    (dict(policy_kwargs=_Raw(shared_bomb_opcodes(0))), ModelFileError, ["policy_kwargs"]),
    (dict(policy_kwargs={"net_arch": _Raw(shared_bomb_opcodes(0))}), ModelDataError, []),
], ids=["box", "box_unknown_key", "box_2m", "gamma", "policy_kwargs", "net_arch"])
def test_sb2_files_are_checked_before_anything_large_is_built(sb2_warm, tmp_path, changes, error, words):
    path = tmp_path / "m.pkl"
    path.write_bytes(sb2_pickle((sb2_data(**changes), list(SB2_PARAMS.values()))))
    outcome, peak = peak_bytes(PPO2.load, path)
    assert_refused(outcome, error, *words)
    assert peak < 4 * path.stat().st_size + 2 * MB, f"{peak / MB:.1f} MB for {path.stat().st_size} B"


def test_an_sb2_parameter_named_by_a_hostile_key_is_refused_in_bounded_memory(sb2_warm, tmp_path):
    params = lf._Writer()
    params.save(lf.Call(lf.G("collections", "OrderedDict"), ()))
    s = b"a" * 200_000
    key = (b"X" + struct.pack("<I", len(s)) + s + b"q\x00" + b"0" + b"(" + b"h\x00" * 1000 + b"tq\x01" + b"0"
           + b"(" + b"h\x01" * 1900 + b"t")  # a tuple of 1900 tuples of 1000 references to s
    params.w(b"(" + key)
    params.save(np.zeros(3, np.float32))
    params.w(b"u")
    path = tmp_path / "m.pkl"
    path.write_bytes(sb2_pickle((sb2_data(), _Raw(params.out.getvalue()))))
    outcome, peak = peak_bytes(PPO2.load, path)
    assert_refused(outcome, ModelFileError, "not by strings")
    assert peak < 4 * path.stat().st_size + 2 * MB


def test_sbtf_convert_refuses_an_oversized_space_in_the_vecnormalize_folder(sb2_warm, tmp_path, capsys):
    from sbtf import cli

    folder = tmp_path / "stats"
    folder.mkdir()
    rms = lambda shape: lf.NewObj(lf.G("stable_baselines.common.running_mean_std", "RunningMeanStd"), (),  # noqa
                                  {"mean": np.zeros(shape), "var": np.ones(shape), "count": 10.0})
    vecnormalize = lf.NewObj(lf.G("stable_baselines.common.vec_env.vec_normalize", "VecNormalize"), (), {
        "observation_space": big_box(), "action_space": lf.discrete(3), "obs_rms": rms((4,)), "ret_rms": rms(()),
        "clip_obs": 10.0, "clip_reward": 10.0, "gamma": 0.99, "epsilon": 1e-8, "training": True,
        "norm_obs": True, "norm_reward": True})
    (folder / "vecnormalize.pkl").write_bytes(sb2_pickle(vecnormalize))
    code = cli.main(["convert", str(sb2_warm), str(tmp_path / "new.zip"), "--vecnormalize-folder", str(folder)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "500,000,000 elements" in err and "Traceback" not in err


# ------------------------------------------------------------------------------------------------ expert datasets
def test_an_expert_dataset_without_episode_starts_is_a_typed_error(tmp_path):
    from sbtf.gail import ExpertDataset

    path = tmp_path / "expert.npz"
    np.savez(path, actions=np.zeros((20, 1)), obs=np.zeros((20, 4), np.float32), rewards=np.ones(20),
             episode_returns=np.array([10.0, 10.0]))
    with pytest.raises(ModelDataError, match="episode_starts") as info:
        ExpertDataset(expert_path=str(path), verbose=0)
    assert isinstance(info.value, KeyError)  # as before, for code that caught KeyError
    np.savez(path, actions=np.zeros((7, 1)), obs=np.zeros((20, 4), np.float32), episode_returns=np.array([1.0]),
             episode_starts=np.zeros(20, bool))
    with pytest.raises(ModelDataError, match="actions"):
        ExpertDataset(expert_path=str(path), verbose=0)


def test_discrete_observations_are_one_hot_encoded_in_batch_times_n_values():
    from sbtf.common.input import preprocess_obs_np

    obs_space = gym.spaces.Discrete(2_000_000)
    out, peak = peak_bytes(preprocess_obs_np, np.array([0, 5, 1_999_999]), obs_space)
    assert out.shape == (3, 2_000_000) and out.sum() == 3 and out[2, -1] == 1
    assert peak < 3 * 2_000_000 * 4 + MB  # np.eye(n) took n**2 values
    multi = preprocess_obs_np(np.array([[1, 2]]), gym.spaces.MultiDiscrete([3, 4]))
    np.testing.assert_array_equal(multi, [[0, 1, 0, 0, 0, 1, 0]])


@pytest.mark.parametrize("seed", [-1, -2 ** 62, 2 ** 32])
def test_seeds_outside_numpys_range_are_model_data_errors(ppo2_file, tmp_path, seed):
    outcome, _ = peak_bytes(PPO2.load, with_data(ppo2_file, tmp_path / "m.zip", lambda d: d.update(seed=seed)))
    assert_refused(outcome, ModelDataError, "'seed'")


def test_sb2_data_keys_that_are_not_names_are_dropped_without_being_formatted(sb2_warm, tmp_path):
    s = b"a" * 200_000
    key = (b"X" + struct.pack("<I", len(s)) + s + b"q\x00" + b"0" + b"(" + b"h\x00" * 1000 + b"tq\x01" + b"0"
           + b"(" + b"h\x01" * 1900 + b"t")
    data = sb2_data()
    data[_Raw(key)] = 1  # a dict key: the writer emits the raw opcodes
    path = tmp_path / "m.pkl"
    path.write_bytes(sb2_pickle((data, list(SB2_PARAMS.values()))))
    model, peak = peak_bytes(PPO2.load, path)
    assert isinstance(model, PPO2), model
    assert peak < 4 * path.stat().st_size + 8 * MB
