"""save_replay_buffer / load_replay_buffer with HerReplayBuffer (as stable-baselines3): the episodes, settings and goal
layout are saved in sbtf's replay buffer file (no pickle), the loaded buffer samples the same relabelled goals, and
learning continues; damaged or hostile files raise typed errors."""
import numpy as np
import pytest

from sbtf import DQN
from sbtf.common.bit_flipping_env import BitFlippingEnv
from sbtf.common.buffers import ReplayBuffer, load_buffer
from sbtf.common.file_errors import CorruptedFileError, ModelDataError, ModelFileError
from sbtf.common.registry import register_class
from sbtf.common.vec_env import DummyVecEnv
from sbtf.her.her_replay_buffer import HerReplayBuffer

N_BITS = 4


def make_env(n_envs):
    return DummyVecEnv([lambda: BitFlippingEnv(N_BITS, max_steps=N_BITS)] * n_envs)


def make_model(n_envs, seed=0, **kwargs):
    return DQN("MultiInputPolicy", make_env(n_envs), replay_buffer_class=HerReplayBuffer,
               replay_buffer_kwargs=dict(n_sampled_goal=3, goal_selection_strategy="future"), learning_starts=40,
               batch_size=16, buffer_size=1000, seed=seed, **kwargs)


def stored(buffer):
    """The stored transitions and episodes of a HerReplayBuffer."""
    n, rows = len(buffer), len(buffer) // buffer.n_envs
    return dict(obs=buffer._obs_t[:n], next_obs=buffer._obs_tp1[:n], actions=buffer._actions[:n],
                rewards=buffer._rewards[:n], dones=buffer._dones[:n], ep_start=buffer._ep_start[:rows],
                ep_length=buffer._ep_length[:rows], current_ep_start=buffer._current_ep_start)


@pytest.fixture(scope="module", params=[1, 2], ids=["1env", "2envs"])
def trained(request, tmp_path_factory):
    """A DQN + HerReplayBuffer model after 202 steps per env (the last episodes unfinished), and its buffer file."""
    n_envs = request.param
    model = make_model(n_envs)
    model.learn(202 * n_envs)
    path = tmp_path_factory.mktemp("her") / "buffer.npz"
    model.save_replay_buffer(path)
    return model, path


def test_loaded_buffer_holds_the_same_transitions_and_episodes(trained):
    model, path = trained
    buffer = model.replay_buffer
    n_envs = buffer.n_envs
    assert len(buffer) == 202 * n_envs
    assert 0 < len(buffer) - buffer.n_episode_transitions() < N_BITS * n_envs  # the last episodes are unfinished
    loaded = make_model(n_envs, seed=1)
    loaded.load_replay_buffer(path, truncate_last_traj=False)
    copy = loaded.replay_buffer
    assert isinstance(copy, HerReplayBuffer) and copy is not buffer
    assert (len(copy), copy.buffer_size, copy.n_envs, copy.n_sampled_goal, copy.goal_selection_strategy) == \
        (len(buffer), buffer.buffer_size, n_envs, 3, buffer.goal_selection_strategy)
    assert copy.n_episode_transitions() == buffer.n_episode_transitions() and copy._pos == buffer._pos
    assert copy.goal_layout == buffer.goal_layout and copy.env is loaded.env  # the model's env, for compute_reward
    for key, value in stored(buffer).items():
        np.testing.assert_array_equal(stored(copy)[key], value, err_msg=key)

    # the same draws relabel the same goals, with the rewards compute_reward gives them
    np.random.seed(5)
    expected = buffer.sample(96)
    np.random.seed(5)
    batch = copy.sample(96)
    for x, y in zip(expected, batch):
        np.testing.assert_array_equal(x, y)
    layout, n_virtual = copy.goal_layout, int(copy.her_ratio * 96)
    obs, _, rewards, next_obs, _ = batch
    np.testing.assert_array_equal(obs[:, layout.desired_goal], next_obs[:, layout.desired_goal])
    achieved, desired = next_obs[:n_virtual, layout.achieved_goal], next_obs[:n_virtual, layout.desired_goal]
    np.testing.assert_array_equal(rewards[:n_virtual], -np.any(achieved != desired, axis=1).astype(np.float32))
    assert np.any(rewards[:n_virtual] == 0.0) and np.all(np.isin(desired, [0.0, 1.0]))


def test_learning_continues_after_loading(trained):
    model, path = trained
    n_envs = model.replay_buffer.n_envs
    loaded = make_model(n_envs, seed=2)
    loaded.load_replay_buffer(path)  # SB3's default: the unfinished episodes are closed (time-limit cuts)
    buffer = loaded.replay_buffer
    assert buffer.n_episode_transitions() == len(buffer) == 202 * n_envs
    assert buffer._dones[:len(buffer)].sum() == model.replay_buffer._dones[:len(buffer)].sum()  # cuts: no terminals
    loaded.learn(100 * n_envs)
    assert loaded.replay_buffer is buffer and len(buffer) == 302 * n_envs
    assert buffer.n_episode_transitions() >= (302 - N_BITS) * n_envs
    assert np.all(buffer.sample(64)[2] <= 0.0)

    # kept open at load, the saved episodes are still closed when learn() resets the env: none runs on into the new
    # episodes
    kept = make_model(n_envs, seed=3)
    kept.load_replay_buffer(path, truncate_last_traj=False)
    assert kept.replay_buffer.n_episode_transitions() < 202 * n_envs
    kept.learn(100 * n_envs)
    np.testing.assert_array_equal(kept.replay_buffer._ep_start[202], 202)
    assert np.all(kept.replay_buffer._ep_length[:202] > 0)


def test_save_refuses_info_dicts_and_load_checks_the_env(tmp_path):
    buffer = HerReplayBuffer(20, env=make_env(1), copy_info_dict=True)
    with pytest.raises(ValueError, match="copy_info_dict=True.*without pickle"):
        buffer.save(tmp_path / "b.npz")
    assert not (tmp_path / "b.npz").exists()
    model = make_model(2)
    model.learn(40)
    model.save_replay_buffer(tmp_path / "two.npz")
    one_env = make_model(1)
    with pytest.raises(ValueError, match="episodes of 2 env.*has 1"):
        one_env.load_replay_buffer(tmp_path / "two.npz")


def _tampered(path, tmp_path, **changes):
    """The buffer file ``path`` with some arrays replaced (None: removed)."""
    with np.load(path) as archive:
        data = {key: archive[key] for key in archive.files}
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    out = tmp_path / f"tampered{len(list(tmp_path.iterdir()))}.npz"
    with open(out, "wb") as handle:
        np.savez(handle, **data)
    return out


class Payload:
    """Creates a file when unpickled."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return open, (self.target, "w")


class NotRestorable(ReplayBuffer):
    pass


def test_damaged_or_hostile_files_raise_typed_errors(trained, tmp_path):
    model, path = trained
    rows = len(model.replay_buffer) // model.replay_buffer.n_envs
    n_envs = model.replay_buffer.n_envs
    ep_length = np.load(path)["ep_length"]
    register_class(NotRestorable, "replay_buffer", "NotRestorable")
    cases = [
        (dict(class_name=np.array("os.system")), CorruptedFileError, "unknown replay buffer class"),
        (dict(class_name=np.array("NotRestorable")), CorruptedFileError, "unknown replay buffer class"),
        (dict(her_format_version=np.array(99)), CorruptedFileError, "newer sbtf"),
        (dict(ep_start=None), ModelDataError, "'ep_start'"),
        (dict(ep_start=np.full((rows, n_envs), 10 ** 6)), ModelDataError, "'ep_start'"),
        (dict(ep_length=ep_length + 50), ModelDataError, "episodes .* do not lie"),
        (dict(ep_length=ep_length.astype(np.float64)), ModelDataError, "'ep_length'"),
        (dict(pos=np.array(3)), ModelDataError, "size and write position"),
        (dict(full=np.array(1)), ModelDataError, "'full'"),
        (dict(n_envs=np.array(7)), ModelDataError, "rows of 7 envs|size and write position"),
        (dict(goal_selection_strategy=np.array(3)), ModelDataError, "goal_selection_strategy"),
        (dict(goal_slices=np.array([[4, 8], [8, 9]])), ModelDataError, "goals"),
        (dict(goal_slices=np.array([[4, 8], [8, 10 ** 6]])), ModelDataError, "goal layout"),
    ]
    for changes, error, match in cases:
        with pytest.raises(error, match=match):
            load_buffer(_tampered(path, tmp_path, **changes))
    marker = tmp_path / "unpickled"
    hostile = _tampered(path, tmp_path, ep_start=np.array([Payload(str(marker))], dtype=object))
    with pytest.raises(ModelFileError):
        load_buffer(hostile)
    assert not marker.exists()
