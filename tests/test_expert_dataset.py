"""ExpertDataset / DataLoader / generate_expert_traj (stable-baselines 2.x expert-dataset format)."""
import importlib.util
import os
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from sbtf.gail import DataLoader, ExpertDataset, generate_expert_traj
from sbtf.gail.dataset import dataset as dataset_module

FIXTURES = Path(__file__).parents[2] / "shared" / "fixtures" / "sb2_expert"
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(),
                                    reason=f"SB2 expert fixtures not found at {FIXTURES}")

# name -> (n transitions, obs dim, action dtype kind)
FIXTURE_FILES = {
    "expert_cartpole.npz": (49527, 4, "i"),
    "expert_pendulum.npz": (20000, 3, "f"),
}


def _raw(name):
    with np.load(FIXTURES / name) as archive:
        return {key: archive[key] for key in archive.files}


def _row_index(observations, row):
    matches = np.flatnonzero(np.all(observations == row, axis=1))
    assert len(matches) >= 1
    return matches


# ------------------------------------------------------------------------------------------
# real SB2 datasets
# ------------------------------------------------------------------------------------------
@needs_fixtures
@pytest.mark.parametrize("name", sorted(FIXTURE_FILES))
def test_load_sb2_fixture(name):
    n_total, obs_dim, act_kind = FIXTURE_FILES[name]
    raw = _raw(name)
    np.random.seed(0)
    ds = ExpertDataset(expert_path=str(FIXTURES / name), batch_size=64, verbose=0)

    assert ds.observations.shape == (n_total, obs_dim)
    assert ds.actions.shape == (n_total, 1)
    assert ds.actions.dtype.kind == act_kind
    assert ds.num_traj == 100
    assert ds.num_transition == n_total
    np.testing.assert_array_equal(ds.returns, raw["episode_returns"])
    assert ds.avg_ret == pytest.approx(raw["episode_returns"].mean())
    assert ds.std_ret == pytest.approx(raw["episode_returns"].std())

    # train/val split on shuffled indices
    train, val = ds.train_loader.original_indices, ds.val_loader.original_indices
    assert len(train) == int(0.7 * n_total)
    assert len(val) == n_total - int(0.7 * n_total)
    np.testing.assert_array_equal(np.sort(np.concatenate([train, val])), np.arange(n_total))
    assert not np.array_equal(np.sort(train), np.arange(len(train)))  # shuffled, not the first 70 %

    for split, indices in (("train", train), ("val", val)):
        obs, actions = ds.get_next_batch(split)
        assert obs.shape == (64, obs_dim) and actions.shape == (64, 1)
        # each (obs, action) pair is a row of the dataset taken from this split
        for row, action in zip(obs[:5], actions[:5]):
            candidates = _row_index(raw["obs"], row)
            assert np.isin(candidates, indices).any()
            assert any(np.array_equal(raw["actions"][i], action) for i in candidates)

    with pytest.raises(ValueError, match="init_dataloader"):
        ds.get_next_batch()
    ds.init_dataloader(32)
    obs, actions = ds.get_next_batch()
    assert obs.shape == (32, obs_dim) and actions.shape == (32, 1)
    assert len(ds.dataloader) == int(np.ceil(n_total / 32))


@needs_fixtures
@pytest.mark.parametrize("name,n_traj", [("expert_cartpole.npz", 10), ("expert_pendulum.npz", 3),
                                         ("expert_cartpole.npz", 1)])
def test_traj_limitation_keeps_first_episodes(name, n_traj):
    raw = _raw(name)
    starts = np.flatnonzero(raw["episode_starts"])
    ds = ExpertDataset(expert_path=str(FIXTURES / name), traj_limitation=n_traj, verbose=0)
    n_keep = starts[n_traj]
    assert ds.num_traj == n_traj
    assert ds.num_transition == n_keep
    np.testing.assert_array_equal(ds.observations, raw["obs"][:n_keep])
    np.testing.assert_array_equal(ds.actions, raw["actions"][:n_keep])
    np.testing.assert_array_equal(ds.returns, raw["episode_returns"][:n_traj])
    assert ds.avg_ret == pytest.approx(raw["episode_returns"][:n_traj].mean())
    assert len(ds.train_loader.indices) + len(ds.val_loader.indices) == n_keep
    # only the kept transitions can be sampled
    assert ds.train_loader.original_indices.max() < n_keep


@needs_fixtures
def test_traj_limitation_larger_than_dataset_and_verbose_output(capsys):
    ds = ExpertDataset(expert_path=str(FIXTURES / "expert_pendulum.npz"), traj_limitation=500, verbose=1)
    assert ds.num_traj == 100 and ds.num_transition == 20000
    out = capsys.readouterr().out
    assert "obs (20000, 3)" in out
    assert "Total trajectories: 100" in out
    assert "Total transitions: 20000" in out


@needs_fixtures
def test_expert_path_without_extension_and_plot(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ds = ExpertDataset(expert_path=str(FIXTURES / "expert_pendulum"), traj_limitation=20, verbose=0)
    assert ds.num_traj == 20
    fig = ds.plot()
    try:
        heights = [patch.get_height() for patch in fig.axes[0].patches]
        assert sum(heights) == 20
    finally:
        plt.close(fig)


# ------------------------------------------------------------------------------------------
# DataLoader
# ------------------------------------------------------------------------------------------
def _toy_loader(**kwargs):
    obs = np.arange(10, dtype=np.float32).reshape(10, 1)
    actions = (np.arange(10) * 10).reshape(10, 1)
    return DataLoader(np.arange(10), obs, actions, batch_size=4, **kwargs)


def test_dataloader_epochs_and_partial_minibatch():
    loader = _toy_loader()
    assert len(loader) == 3
    batches = list(loader)
    assert [len(b[0]) for b in batches] == [4, 4, 2]
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]).ravel(), np.arange(10))
    for obs, actions in batches:
        np.testing.assert_array_equal(actions, obs.astype(np.int64) * 10)
    # infinite loop: after the StopIteration that ended the epoch, the next call starts a new one
    obs, _ = next(loader)
    np.testing.assert_array_equal(obs.ravel(), [0, 1, 2, 3])
    next(loader)
    next(loader)
    with pytest.raises(StopIteration):
        next(loader)
    obs, _ = next(loader)
    np.testing.assert_array_equal(obs.ravel(), [0, 1, 2, 3])

    finite = _toy_loader(infinite_loop=False)
    assert len(list(finite)) == 3
    with pytest.raises(StopIteration):
        next(finite)
    with pytest.raises(StopIteration):
        next(finite)
    assert len(list(finite)) == 3  # iter() restarts it

    full = _toy_loader(partial_minibatch=False)
    assert len(full) == 2
    assert [len(b[0]) for b in full] == [4, 4]

    exact = DataLoader(np.arange(8), np.arange(8).reshape(8, 1), np.arange(8).reshape(8, 1), batch_size=4)
    assert len(exact) == 2 and [len(b[0]) for b in exact] == [4, 4]  # no empty trailing minibatch


def test_dataloader_shuffles_every_epoch():
    np.random.seed(1)
    loader = _toy_loader(shuffle=True)
    epochs = [np.concatenate([b[0] for b in loader]).ravel() for _ in range(3)]
    for order in epochs:
        np.testing.assert_array_equal(np.sort(order), np.arange(10))
    assert not all(np.array_equal(epochs[0], order) for order in epochs[1:])
    assert not np.array_equal(epochs[0], np.arange(10))


def test_get_next_batch_wraps_around_epochs():
    data = {"obs": np.arange(20, dtype=np.float32).reshape(20, 1), "actions": np.arange(20).reshape(20, 1),
            "rewards": np.ones(20), "episode_returns": np.array([10.0, 10.0]),
            "episode_starts": np.array([True] + [False] * 9 + [True] + [False] * 9)}
    ds = ExpertDataset(traj_data=data, train_fraction=0.5, batch_size=3, verbose=0)
    seen = []
    for _ in range(3 * len(ds.train_loader) + 1):  # more calls than one epoch holds
        obs, actions = ds.get_next_batch("train")
        np.testing.assert_array_equal(actions.ravel(), obs.ravel().astype(np.int64))
        seen.extend(obs.ravel().tolist())
    assert set(seen) == set(ds.observations[ds.train_loader.original_indices].ravel().tolist())
    assert ds.num_traj == 2 and ds.avg_ret == 10.0


# ------------------------------------------------------------------------------------------
# recording
# ------------------------------------------------------------------------------------------
def _cartpole_expert(obs):
    return int(obs[2] + 0.5 * obs[3] > 0)


def _assert_layout(data, n_episodes):
    n = len(data["obs"])
    assert data["actions"].shape[0] == n
    assert data["rewards"].shape == (n,) and data["rewards"].dtype == np.float64
    assert data["episode_starts"].shape == (n,) and data["episode_starts"].dtype == bool
    assert data["episode_returns"].shape == (n_episodes,)
    assert data["episode_starts"][0] and data["episode_starts"].sum() == n_episodes
    starts = np.flatnonzero(data["episode_starts"])
    np.testing.assert_allclose(np.add.reduceat(data["rewards"], starts), data["episode_returns"])


def test_record_cartpole_with_callable(tmp_path):
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    save_path = str(tmp_path / "expert_cartpole")
    data = generate_expert_traj(_cartpole_expert, save_path, env=env, n_episodes=3)
    env.close()

    _assert_layout(data, 3)
    assert data["obs"].dtype == np.float32 and data["obs"].shape[1:] == (4,)
    assert data["actions"].shape == (len(data["obs"]), 1) and data["actions"].dtype == np.int64
    # every recorded action is the expert's answer to the recorded observation
    np.testing.assert_array_equal(data["actions"].ravel(), [_cartpole_expert(o) for o in data["obs"]])
    assert np.all(data["episode_returns"] > 100)  # the heuristic balances the pole

    assert sorted(os.listdir(tmp_path)) == ["expert_cartpole.npz"]  # atomic write, no temp left
    with np.load(save_path + ".npz") as archive:
        assert sorted(archive.files) == ["actions", "episode_returns", "episode_starts", "obs", "rewards"]
        for key in archive.files:
            np.testing.assert_array_equal(archive[key], data[key])

    ds = ExpertDataset(expert_path=save_path + ".npz", batch_size=16, verbose=0)
    assert ds.num_traj == 3 and ds.num_transition == len(data["obs"])
    assert ds.avg_ret == pytest.approx(data["episode_returns"].mean())
    obs, actions = ds.get_next_batch("train")
    assert obs.shape == (16, 4) and actions.shape == (16, 1)
    np.testing.assert_array_equal(actions.ravel(), [_cartpole_expert(o) for o in obs])

    ds2 = ExpertDataset(expert_path=save_path + ".npz", traj_limitation=2, verbose=0)
    assert ds2.num_traj == 2 and ds2.num_transition == np.flatnonzero(data["episode_starts"])[2]


def test_record_pendulum_box_actions(tmp_path):
    env = gymnasium.make("Pendulum-v1")
    env.reset(seed=1)
    data = generate_expert_traj(lambda obs: np.array([np.clip(-2.0 * obs[1], -2, 2)]),
                                str(tmp_path / "pend.npz"), env=env, n_episodes=2)
    env.close()
    _assert_layout(data, 2)
    assert data["obs"].shape == (400, 3) and data["actions"].shape == (400, 1)
    assert data["actions"].dtype == np.float32
    np.testing.assert_array_equal(np.flatnonzero(data["episode_starts"]), [0, 200])  # time-limit truncation
    np.testing.assert_allclose(data["actions"].ravel(), np.clip(-2.0 * data["obs"][:, 1], -2, 2), rtol=1e-6)
    assert os.path.isfile(tmp_path / "pend.npz")  # '.npz' not doubled
    ds = ExpertDataset(expert_path=str(tmp_path / "pend.npz"), verbose=0)
    assert ds.actions.shape == (400, 1) and ds.num_traj == 2


class OneEnvVecEnv:
    """Minimal SB2-API VecEnv around one gymnasium env (auto-reset, terminal_observation)."""

    def __init__(self, env):
        self.env = env
        self.num_envs = 1
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self._actions = None
        self.closed = False

    def reset(self):
        obs, _ = self.env.reset()
        return obs[None]

    def step_async(self, actions):
        self._actions = actions

    def step_wait(self):
        obs, reward, terminated, truncated, info = self.env.step(int(self._actions[0]))
        done = terminated or truncated
        if done:
            info["terminal_observation"] = obs
            obs, _ = self.env.reset()
        return obs[None], np.array([reward], dtype=np.float32), np.array([done]), [info]

    def step(self, actions):
        self.step_async(actions)
        return self.step_wait()

    def close(self):
        self.closed = True
        self.env.close()


class FakeModel:
    """Quacks like an sbtf model: predict(obs, state, mask) on batched obs, learn(), get_env()."""

    def __init__(self, env):
        self.env = env
        self.learned = []
        self.masks = []

    def get_env(self):
        return self.env

    def learn(self, total_timesteps):
        self.learned.append(total_timesteps)
        return self

    def predict(self, observation, state=None, mask=None, deterministic=False):
        assert observation.shape == (1, 4)
        self.masks.append(list(mask))
        return np.array([_cartpole_expert(observation[0])]), state


def test_record_from_model_and_vecenv(tmp_path):
    inner = gymnasium.make("CartPole-v1")
    inner.reset(seed=3)
    venv = OneEnvVecEnv(inner)
    model = FakeModel(venv)
    data = generate_expert_traj(model, str(tmp_path / "vec"), n_timesteps=7, n_episodes=2)
    assert model.learned == [7]
    assert not venv.closed  # the caller's env stays open
    _assert_layout(data, 2)
    assert data["obs"].shape[1:] == (4,) and data["actions"].shape == (len(data["obs"]), 1)
    np.testing.assert_array_equal(data["actions"].ravel(), [_cartpole_expert(o) for o in data["obs"]])
    # SB2 masks: True at the start, then the done flag of the previous step
    assert model.masks[0] == [True]
    second_start = np.flatnonzero(data["episode_starts"])[1]
    assert model.masks[second_start] == [True] and model.masks[second_start - 1] == [False]
    ds = ExpertDataset(expert_path=str(tmp_path / "vec.npz"), verbose=0)
    assert ds.num_traj == 2


def test_record_from_env_id(tmp_path):
    if importlib.util.find_spec("sbtf.common.envs.gym_compat") is None:
        pytest.skip("sbtf.common.envs.gym_compat (wrap_env) is not available yet")
    data = generate_expert_traj(_cartpole_expert, str(tmp_path / "from_id"), env="CartPole-v1", n_episodes=1)
    _assert_layout(data, 1)
    assert data["obs"].shape[1:] == (4,)
    assert os.path.isfile(tmp_path / "from_id.npz")


class OldGymCartPole:
    """A CartPole with the old gym API (reset() -> obs, 4-tuple step), as SB2-era envs had."""

    def __init__(self):
        self._env = gymnasium.make("CartPole-v1")
        self._env.reset(seed=5)
        self.observation_space = self._env.observation_space
        self.action_space = self._env.action_space
        self.metadata = {}

    def reset(self):
        return self._env.reset()[0]

    def step(self, action):
        obs, reward, terminated, truncated, info = self._env.step(action)
        return obs, reward, terminated or truncated, info

    def seed(self, seed=None):
        return [seed]

    def render(self, mode="human"):
        return None

    def close(self):
        self._env.close()


def test_record_from_old_gym_env_and_sbtf_dummy_vec_env(tmp_path):
    if importlib.util.find_spec("sbtf.common.envs.gym_compat") is None:
        pytest.skip("sbtf.common.envs.gym_compat (wrap_env) is not available yet")
    data = generate_expert_traj(_cartpole_expert, None, env=OldGymCartPole(), n_episodes=2)
    _assert_layout(data, 2)
    np.testing.assert_array_equal(data["actions"].ravel(), [_cartpole_expert(o) for o in data["obs"]])

    try:
        from sbtf.common.vec_env.dummy_vec_env import DummyVecEnv
    except ImportError:
        pytest.skip("sbtf's DummyVecEnv is not available yet")
    venv = DummyVecEnv([lambda: gymnasium.make("CartPole-v1")])
    venv.seed(2)
    data = generate_expert_traj(lambda obs: [_cartpole_expert(o) for o in obs], None, env=venv, n_episodes=2)
    venv.close()
    _assert_layout(data, 2)
    np.testing.assert_array_equal(data["actions"].ravel(), [_cartpole_expert(o) for o in data["obs"]])


class TinyImageEnv(gymnasium.Env):
    """Random uint8 images, Discrete(3) actions, 4-step episodes, reward = action."""

    def __init__(self, channels=3, ep_len=4):
        self.observation_space = spaces.Box(0, 255, (6, 5, channels), np.uint8)
        self.action_space = spaces.Discrete(3)
        self.ep_len = ep_len
        self._rng = np.random.default_rng(42)
        self.t = 0

    def _obs(self):
        return self._rng.integers(0, 256, self.observation_space.shape, dtype=np.uint8)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action)
        self.t += 1
        return self._obs(), float(action), self.t >= self.ep_len, False, {}


class ImageExpert:
    def __init__(self):
        self.seen = []

    def __call__(self, obs):
        self.seen.append(obs.copy())
        return int(obs.sum()) % 3


@pytest.mark.parametrize("backend", ["cv2", "pil"])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_record_and_load_image_env(tmp_path, monkeypatch, backend, channels):
    if backend == "cv2" and dataset_module._cv2() is None:
        pytest.skip("OpenCV (cv2) is not installed")
    if backend == "pil":
        monkeypatch.setattr(dataset_module, "_cv2", lambda: None)
    monkeypatch.chdir(tmp_path)
    expert = ImageExpert()
    data = generate_expert_traj(expert, os.path.join("data", "expert_img"), env=TinyImageEnv(channels),
                                n_episodes=3, image_folder="imgs")
    _assert_layout(data, 3)
    assert data["obs"].dtype.kind == "U" and data["obs"].shape == (12,)
    assert data["actions"].shape == (12, 1)
    assert data["obs"][5] == os.path.join("data", "imgs", "5.png")
    assert sorted(os.listdir(tmp_path / "data" / "imgs")) == sorted(f"{i}.png" for i in range(12))

    # the data set is read from another working directory: paths resolve next to the .npz
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    np.random.seed(0)
    ds = ExpertDataset(expert_path=str(tmp_path / "data" / "expert_img.npz"), train_fraction=0.5,
                       batch_size=4, verbose=0)
    assert ds.num_traj == 3 and ds.num_transition == 12
    obs, actions = ds.get_next_batch("train")
    assert obs.shape == (4, 6, 5, channels) and obs.dtype == np.uint8
    seen = {img.tobytes(): int(img.sum()) % 3 for img in expert.seen}
    for img, action in zip(obs, actions):
        assert seen[img.tobytes()] == action[0]  # lossless round trip, pairs kept together

    # in recording order: each image equals what the expert was shown
    loader = DataLoader(np.arange(12), ds.observations, ds.actions, batch_size=5)
    loaded = np.concatenate([b[0] for b in loader])
    np.testing.assert_array_equal(loaded, np.stack(expert.seen))


def test_image_env_without_save_path_keeps_arrays():
    expert = ImageExpert()
    with pytest.warns(UserWarning, match="no save path"):
        data = generate_expert_traj(expert, None, env=TinyImageEnv(3), n_episodes=2)
    assert data["obs"].shape == (8, 6, 5, 3) and data["obs"].dtype == np.uint8
    np.testing.assert_array_equal(data["obs"], np.stack(expert.seen))
    ds = ExpertDataset(traj_data=data, batch_size=2, verbose=0)
    obs, _ = ds.get_next_batch("val")
    assert obs.shape == (2, 6, 5, 3)


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------
def _small_data(n=10):
    return {"obs": np.zeros((n, 2), np.float32), "actions": np.zeros((n, 1), np.int64), "rewards": np.ones(n),
            "episode_returns": np.array([float(n)]), "episode_starts": np.array([True] + [False] * (n - 1))}


def test_dataset_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        ExpertDataset(expert_path=str(tmp_path / "nope.npz"), verbose=0)
    (tmp_path / "garbage.npz").write_text("not a zip")
    with pytest.raises(ValueError, match="not an .npz archive"):
        ExpertDataset(expert_path=str(tmp_path / "garbage.npz"), verbose=0)
    np.savez(tmp_path / "pickled.npz", **{**_small_data(), "obs": np.array([{}] * 10, dtype=object)})
    with pytest.raises(ValueError, match="pickled object arrays"):
        ExpertDataset(expert_path=str(tmp_path / "pickled.npz"), verbose=0)

    with pytest.raises(ValueError, match="Cannot specify both"):
        ExpertDataset(expert_path="x.npz", traj_data=_small_data(), verbose=0)
    with pytest.raises(ValueError, match="Must specify one"):
        ExpertDataset(verbose=0)

    data = _small_data()
    del data["episode_starts"]
    np.savez(tmp_path / "nokey.npz", **data)
    with pytest.raises(KeyError, match="episode_starts"):
        ExpertDataset(expert_path=str(tmp_path / "nokey.npz"), verbose=0)

    with pytest.raises(ValueError, match=r"number of actions \(9\) and observations \(10\) differ"):
        ExpertDataset(traj_data={**_small_data(), "actions": np.zeros((9, 1))}, verbose=0)
    with pytest.raises(ValueError, match="'episode_starts' has 8 entries"):
        ExpertDataset(traj_data={**_small_data(), "episode_starts": np.zeros(8, bool)}, verbose=0)
    with pytest.raises(ValueError, match="'rewards' has 3 entries"):
        ExpertDataset(traj_data={**_small_data(), "rewards": np.ones(3)}, verbose=0)
    with pytest.raises(ValueError, match="No sample for the training set"):
        ExpertDataset(traj_data=_small_data(2), train_fraction=0.3, verbose=0)
    with pytest.raises(ValueError, match="train_fraction"):
        ExpertDataset(traj_data=_small_data(), train_fraction=1.0, verbose=0)

    ds = ExpertDataset(traj_data=_small_data(), verbose=0)
    with pytest.raises(ValueError, match="split must be"):
        ds.get_next_batch("test")

    paths = {**_small_data(3), "obs": np.array([str(tmp_path / "img" / f"{i}.png") for i in range(3)])}
    with pytest.raises(FileNotFoundError, match="first image was not found"):
        ExpertDataset(traj_data=paths, verbose=0)
    with pytest.raises(FileNotFoundError, match="Image observation not found"):
        loader = DataLoader(np.arange(3), paths["obs"], paths["actions"], batch_size=2)
        next(loader)


def test_record_errors(tmp_path):
    multi = gymnasium.make("CartPole-v1")
    with pytest.raises(ValueError, match="set the env"):
        generate_expert_traj(_cartpole_expert, None)
    with pytest.raises(TypeError, match="callable"):
        generate_expert_traj(42, None, env=multi)
    with pytest.raises(ValueError, match="n_episodes"):
        generate_expert_traj(_cartpole_expert, None, env=multi, n_episodes=0)
    with pytest.raises(ValueError, match="Discrete action space"):
        generate_expert_traj(lambda obs: [0, 1], None, env=multi, n_episodes=1)
    multi.close()

    class MultiDiscreteEnv(TinyImageEnv):
        def __init__(self):
            super().__init__(3)
            self.action_space = spaces.MultiDiscrete([2, 2])

    with pytest.raises(TypeError, match="Action space type not supported"):
        generate_expert_traj(lambda obs: [0, 0], None, env=MultiDiscreteEnv(), n_episodes=1)
    assert not os.listdir(tmp_path)


def test_gail_is_lazy():
    import sbtf.gail

    if importlib.util.find_spec("sbtf.gail.model") is None:
        with pytest.raises(ImportError, match="sbtf.gail.model"):
            from sbtf.gail import GAIL  # noqa: F401
    else:
        from sbtf.gail import GAIL
        from sbtf.gail.model import GAIL as model_gail

        assert GAIL is model_gail
    with pytest.raises(AttributeError):
        sbtf.gail.not_a_thing  # noqa: B018
