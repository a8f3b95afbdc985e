"""stable-baselines3's VecEnv wrappers on sbtf: VecMonitor, VecTransposeImage, VecExtractDictObs."""
import os

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from sbtf.bench import Monitor, load_results
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.vec_env import DummyVecEnv, VecExtractDictObs, VecMonitor, VecTransposeImage


class StepCountEnv(gymnasium.Env):
    """Reward 1 per step; an episode lasts ``ep_len`` steps; info carries ``"level"``; image + vector obs option."""

    def __init__(self, ep_len=3, dict_obs=False):
        image = spaces.Box(0, 255, (6, 5, 3), np.uint8)
        vector = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict({"img": image, "vec": vector}) if dict_obs else image
        self.action_space = spaces.Discrete(2)
        self.ep_len = ep_len
        self.t = 0

    def _obs(self):
        image = np.arange(6 * 5 * 3, dtype=np.uint8).reshape(6, 5, 3) + np.uint8(self.t)
        if isinstance(self.observation_space, spaces.Dict):
            return {"img": image, "vec": np.full(2, self.t / 10, np.float32)}
        return image

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, self.t >= self.ep_len, False, {"level": self.t * 10}


def test_vec_monitor_records_episodes_and_writes_monitor_csv(tmp_path):
    venv = VecMonitor(DummyVecEnv([lambda: StepCountEnv(3), lambda: StepCountEnv(5)]),
                      filename=str(tmp_path / "run"), info_keywords=("level",))
    venv.reset()
    episodes = []
    for _ in range(10):
        _, _, dones, infos = venv.step(np.zeros(2, np.int64))
        for env_index in np.flatnonzero(dones):
            episodes.append((int(env_index), infos[env_index]["episode"]))
        assert all("episode" not in info for i, info in enumerate(infos) if not dones[i])
    venv.close()
    assert [(i, e["r"], e["l"], e["level"]) for i, e in episodes] == [
        (0, 3.0, 3, 30), (1, 5.0, 5, 50), (0, 3.0, 3, 30), (0, 3.0, 3, 30), (1, 5.0, 5, 50)]
    assert venv.episode_count == 5
    assert os.path.isfile(tmp_path / "run.monitor.csv")
    results = load_results(str(tmp_path))
    assert list(results["r"]) == [3.0, 5.0, 3.0, 3.0, 5.0]
    assert list(results["level"]) == [30, 50, 30, 30, 50]


def test_vec_monitor_warns_over_monitor_and_counts_for_evaluate_policy():
    with pytest.warns(UserWarning, match="already wrapped with a `Monitor`"):
        VecMonitor(DummyVecEnv([lambda: Monitor(StepCountEnv(3), None)]))

    class ConstantModel:
        def predict(self, obs, state=None, mask=None, deterministic=True):
            return np.zeros(len(obs), np.int64), None

    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "not wrapped with a Monitor" warning: VecMonitor counts as one
        rewards, lengths = evaluate_policy(ConstantModel(), VecMonitor(DummyVecEnv([lambda: StepCountEnv(4)])),
                                           n_eval_episodes=2, return_episode_rewards=True)
    assert rewards == [4.0, 4.0] and lengths == [4, 4]


def test_vec_transpose_image_moves_channels_first_with_terminal_observation():
    inner = DummyVecEnv([lambda: StepCountEnv(2)])
    venv = VecTransposeImage(inner)
    assert venv.observation_space.shape == (3, 6, 5)
    assert venv.observation_space.dtype == np.uint8
    obs = venv.reset()
    assert obs.shape == (1, 3, 6, 5)
    expected = np.transpose(StepCountEnv(2)._obs(), (2, 0, 1))
    np.testing.assert_array_equal(obs[0], expected)
    venv.step(np.zeros(1, np.int64))
    _, _, dones, infos = venv.step(np.zeros(1, np.int64))
    assert dones[0]
    terminal = infos[0]["terminal_observation"]
    assert terminal.shape == (3, 6, 5)
    assert terminal[0, 0, 0] == 2  # the image of step 2, channel-first
    assert VecTransposeImage(inner, skip=True).observation_space.shape == (6, 5, 3)


def test_vec_transpose_image_on_dict_transposes_only_images_and_refuses_channel_first():
    venv = VecTransposeImage(DummyVecEnv([lambda: StepCountEnv(2, dict_obs=True)]))
    assert venv.image_space_keys == ["img"]
    assert venv.observation_space["img"].shape == (3, 6, 5)
    assert venv.observation_space["vec"].shape == (2,)
    obs = venv.reset()
    assert obs["img"].shape == (1, 3, 6, 5) and obs["vec"].shape == (1, 2)
    channel_first = spaces.Box(0, 255, (3, 6, 5), np.uint8)
    with pytest.raises(ValueError, match="channel last"):
        VecTransposeImage.transpose_space(channel_first)
    with pytest.raises(ValueError, match="image or dictionary"):
        VecTransposeImage(DummyVecEnv([lambda: gymnasium.make("CartPole-v1")]))


def test_vec_extract_dict_obs_keeps_one_entry_everywhere():
    venv = VecExtractDictObs(DummyVecEnv([lambda: StepCountEnv(2, dict_obs=True)]), "vec")
    assert venv.observation_space == spaces.Box(-1.0, 1.0, (2,), np.float32)
    np.testing.assert_allclose(venv.reset(), np.zeros((1, 2)))
    venv.step(np.zeros(1, np.int64))
    obs, _, dones, infos = venv.step(np.zeros(1, np.int64))
    assert dones[0]
    np.testing.assert_allclose(infos[0]["terminal_observation"], [0.2, 0.2])
    np.testing.assert_allclose(obs, np.zeros((1, 2)))  # the reset observation of the next episode
    with pytest.raises(KeyError, match="no key 'missing'"):
        VecExtractDictObs(DummyVecEnv([lambda: StepCountEnv(2, dict_obs=True)]), "missing")
    with pytest.raises(ValueError, match="Dict obs space"):
        VecExtractDictObs(DummyVecEnv([lambda: StepCountEnv(2)]), "img")


def test_vec_env_render_mode_is_the_envs():
    """SB3's ``VecEnv.render_mode``: the envs' render mode, seen through wrappers; None when they render nothing."""
    import gymnasium

    from sbtf.common.vec_env import DummyVecEnv, VecNormalize

    plain = DummyVecEnv([lambda: gymnasium.make("CartPole-v1")])
    assert plain.render_mode is None and VecNormalize(plain).render_mode is None
    rgb = DummyVecEnv([lambda: gymnasium.make("CartPole-v1", render_mode="rgb_array")])
    assert rgb.render_mode == "rgb_array" and VecNormalize(rgb).render_mode == "rgb_array"


def test_vec_normalize_returns_is_sb3s_name_of_ret():
    import gymnasium

    from sbtf.common.vec_env import DummyVecEnv, VecNormalize

    env = VecNormalize(DummyVecEnv([lambda: gymnasium.make("CartPole-v1")] * 2), gamma=0.5)
    env.reset()
    env.step(np.zeros(2, dtype=np.int64))
    env.step(np.zeros(2, dtype=np.int64))
    np.testing.assert_allclose(env.returns, [1.5, 1.5])  # 1 * 0.5 + 1, per env
    assert env.returns is env.ret
    env.returns = np.zeros(2)
    np.testing.assert_allclose(env.ret, 0.0)
