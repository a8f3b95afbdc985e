"""VecNormalize over a Dict observation space: per-entry statistics for the Box entries (stable-baselines 2 built
such a VecNormalize; the entries follow stable-baselines 3's ``norm_obs_keys``)."""
import numpy as np
import gymnasium
import pytest
from gymnasium import spaces

from sbtf.common.bit_flipping_env import BitFlippingEnv
from sbtf.common.file_errors import ModelDataError
from sbtf.common.vec_env import DummyVecEnv, VecNormalize


class PositionEnv(gymnasium.Env):
    """Dict observations: 'pos' ~ N([5, -3], 1) (Box), 'flag' the step count mod 3 (Discrete); 4-step episodes."""

    observation_space = spaces.Dict({"pos": spaces.Box(-100, 100, (2,), np.float32), "flag": spaces.Discrete(3)})
    action_space = spaces.Discrete(2)

    def _obs(self):
        return {"pos": (np.array([5.0, -3.0]) + self.np_random.normal(size=2)).astype(np.float32),
                "flag": self.t % 3}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, self.t >= 4, False, {}


def _run(venv, steps=60):
    venv.reset()
    for _ in range(steps):
        obs, _, dones, infos = venv.step(np.zeros(venv.num_envs, dtype=np.int64))
    return obs, dones, infos


def test_box_entries_are_normalised_and_the_others_pass_through():
    venv = VecNormalize(DummyVecEnv([PositionEnv, PositionEnv]), clip_obs=5.0)
    assert venv.norm_obs_keys == ["pos"] and set(venv.obs_rms) == {"pos"}
    obs, _, _ = _run(venv, 200)
    np.testing.assert_allclose(venv.obs_rms["pos"].mean, [5.0, -3.0], atol=0.3)
    raw = venv.get_original_obs()
    expected = (raw["pos"] - venv.obs_rms["pos"].mean) / np.sqrt(venv.obs_rms["pos"].var + venv.epsilon)
    np.testing.assert_allclose(obs["pos"], np.clip(expected, -5, 5), rtol=1e-5)
    assert obs["pos"].dtype == np.float32 and np.abs(obs["pos"]).max() < 5
    np.testing.assert_array_equal(obs["flag"], raw["flag"])  # Discrete entry untouched
    assert raw["pos"] is not venv.old_obs["pos"]  # a copy


def test_terminal_observations_are_normalised_per_entry():
    venv = VecNormalize(DummyVecEnv([PositionEnv]))
    venv.seed(0)
    venv.reset()
    for _ in range(40):  # ten episodes: enough samples for stable statistics (4 samples can give a tiny variance)
        _, _, dones, infos = venv.step(np.zeros(1, dtype=np.int64))
    assert dones[0]
    terminal = infos[0]["terminal_observation"]
    assert terminal["pos"].dtype == np.float32 and abs(float(terminal["pos"][0])) < 4  # raw values are near 5
    assert terminal["flag"] == 4 % 3


def test_goal_env_without_box_entries_builds_and_passes_observations_through():
    venv = VecNormalize(DummyVecEnv([lambda: BitFlippingEnv(4)]))
    assert venv.norm_obs_keys == [] and venv.obs_rms == {}
    obs = venv.reset()
    assert set(obs) == {"observation", "achieved_goal", "desired_goal"} and obs["observation"].dtype == np.int8


def test_norm_obs_keys_are_checked():
    with pytest.raises(ValueError, match="'flag' is a Discrete"):
        VecNormalize(DummyVecEnv([PositionEnv]), norm_obs_keys=["flag"])
    with pytest.raises(ValueError, match="'speed' is not an entry"):
        VecNormalize(DummyVecEnv([PositionEnv]), norm_obs_keys=["speed"])
    with pytest.raises(ValueError, match="only applies to Dict"):
        VecNormalize(DummyVecEnv([lambda: gymnasium.make("CartPole-v1")]), norm_obs_keys=["pos"])
    venv = VecNormalize(DummyVecEnv([PositionEnv]), norm_obs_keys=[])
    obs = venv.reset()
    assert obs["pos"].dtype == np.float32 and abs(float(obs["pos"][0, 0])) > 1  # not normalised


def test_save_load_round_trip_and_mismatches(tmp_path):
    venv = VecNormalize(DummyVecEnv([PositionEnv]))
    _run(venv, 40)
    path = str(tmp_path / "vecnormalize.pkl")
    venv.save(path)
    loaded = VecNormalize.load(path, DummyVecEnv([PositionEnv]))
    assert loaded.norm_obs_keys == ["pos"]
    np.testing.assert_array_equal(loaded.obs_rms["pos"].mean, venv.obs_rms["pos"].mean)
    assert loaded.obs_rms["pos"].count == venv.obs_rms["pos"].count
    with pytest.raises(ModelDataError, match="Dict entries"):
        VecNormalize.load(path, DummyVecEnv([lambda: gymnasium.make("CartPole-v1")]))
    with pytest.raises(ValueError, match="Dict observation space"):
        venv.save_running_average(str(tmp_path))
    # a Box-space file keeps its format (no norm_obs_keys entry)
    box = VecNormalize(DummyVecEnv([lambda: gymnasium.make("CartPole-v1")]))
    assert "norm_obs_keys" not in box.__getstate__() and box.norm_obs_keys is None
