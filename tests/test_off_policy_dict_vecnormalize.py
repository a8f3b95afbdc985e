"""VecNormalize on Dict observations with the off-policy algorithms (as stable-baselines3): the replay buffer stores
the original observations and rewards, and sampled minibatches are normalised key by key, only the keys of
``norm_obs_keys`` (``sbtf.common.storage.packed_normalize``)."""
import copy

import gymnasium as gym
import numpy as np
import pytest

from sbtf import DQN, SAC
from sbtf.common.buffers import ReplayBuffer
from sbtf.common.envs.dict_obs import layout_of
from sbtf.common.storage.obs_storage import PackedObsArray
from sbtf.common.storage.packed_normalize import PackedVecNormalize, for_packed_rows
from sbtf.common.vec_env import DummyVecEnv, VecEnvWrapper, VecNormalize
from sbtf.contrib import QRDQN, TQC


class DriftEnv(gym.Env):
    """
    A 1-D drift with Dict observations on different scales: 'pos' (Box, around (100, -200): needs normalising),
    'vel' (Box in [-1, 1]), 'cells' (uint8 Box of random values) and 'mode' (Discrete(3), the step count mod 3).
    Episodes end when the position leaves [-2, 2] (terminal) or after 12 steps (time limit).
    """

    def __init__(self, discrete: bool = True):
        self.observation_space = gym.spaces.Dict({
            "pos": gym.spaces.Box(-500, 500, (2,), np.float32), "vel": gym.spaces.Box(-1, 1, (1,), np.float32),
            "cells": gym.spaces.Box(0, 255, (3,), np.uint8), "mode": gym.spaces.Discrete(3)})
        self.action_space = gym.spaces.Discrete(2) if discrete else gym.spaces.Box(-1, 1, (1,), np.float32)
        self.discrete = discrete

    def _obs(self):
        return {"pos": np.array([100 + 50 * self.x, -200.0 + self.t], np.float32),
                "vel": np.array([self.v], np.float32),
                "cells": self.np_random.integers(0, 256, 3).astype(np.uint8), "mode": self.t % 3}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.v, self.t = float(self.np_random.uniform(-1, 1)), 0.0, 0
        return self._obs(), {}

    def step(self, action):
        push = 2 * int(action) - 1 if self.discrete else float(np.asarray(action).reshape(-1)[0])
        self.v = float(np.clip(0.5 * self.v + 0.1 * push, -1, 1))
        self.x += self.v
        self.t += 1
        return self._obs(), -abs(self.x), abs(self.x) > 2, self.t >= 12, {}


class RecordRaw(VecEnvWrapper):
    """Records the raw observations (reset and step) and terminal observations of the VecEnv it wraps."""

    def __init__(self, venv):
        super().__init__(venv)
        self.observations, self.terminals = [], []

    def reset(self):
        obs = self.venv.reset()
        self.observations.append(copy.deepcopy(obs))
        return obs

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        self.observations.append(copy.deepcopy(obs))
        self.terminals.append({i: copy.deepcopy(info["terminal_observation"]) for i, info in enumerate(infos)
                               if "terminal_observation" in info})
        return obs, rewards, dones, infos


def make_env(discrete: bool, n_envs: int = 2, record: bool = False, **kwargs):
    venv = DummyVecEnv([lambda: DriftEnv(discrete)] * n_envs)
    if record:
        venv = RecordRaw(venv)
    venv.seed(0)
    return VecNormalize(venv, norm_obs_keys=["pos"], **kwargs)


SMALL = dict(learning_starts=50, batch_size=16, buffer_size=1000, seed=0)


@pytest.mark.parametrize("algo, discrete", [(SAC, False), (DQN, True), (TQC, False), (QRDQN, True)])
def test_learns_with_dict_vecnormalize(algo, discrete):
    env = make_env(discrete)
    model = algo("MultiInputPolicy", env, **SMALL)
    model.learn(200 if algo in (SAC, DQN) else 100)
    assert model.get_vec_normalize_env() is env
    assert isinstance(model._vec_normalize_env, PackedVecNormalize)
    assert env.obs_rms["pos"].count > 100 and set(env.obs_rms) == {"pos"}


@pytest.mark.parametrize("algo, discrete", [(SAC, False), (DQN, True)])
def test_buffer_stores_original_observations_and_samples_them_normalised(algo, discrete):
    env = make_env(discrete, record=True, clip_obs=1e4)  # no clipping: the terminal observations invert exactly
    recorder = env.venv
    model = algo("MultiInputPolicy", env, **SMALL)
    model.learn(300)
    buffer, layout = model.replay_buffer, layout_of(env.observation_space)
    n_steps = len(recorder.terminals)
    assert len(buffer) == 2 * n_steps == 300
    assert isinstance(buffer._obs_t, PackedObsArray)  # per key: 'cells' as uint8, 'mode' as an integer
    assert dict(zip(layout.keys, (f.dtype for f in buffer._obs_t.fields)))["cells"] == np.uint8

    # stored: the original observations (transition t of env i lies in slot 2 t + i); the next observation is the
    # raw next one, or at an episode end the terminal observation (unnormalised: equal up to float32 rounding)
    stored, stored_next = buffer._obs_t[np.arange(len(buffer))], buffer._next_observations(np.arange(len(buffer)))
    n_terminals = 0
    for t in range(n_steps):
        for i in range(2):
            np.testing.assert_array_equal(stored[2 * t + i], layout.pack(recorder.observations[t])[i])
            terminal = recorder.terminals[t].get(i)
            if terminal is None:
                np.testing.assert_array_equal(stored_next[2 * t + i], layout.pack(recorder.observations[t + 1])[i])
            else:
                n_terminals += 1
                np.testing.assert_allclose(stored_next[2 * t + i], layout.pack(terminal)[0], rtol=1e-5, atol=1e-4)
    assert n_terminals > 10
    raw_rewards = buffer._rewards[:len(buffer)]
    assert raw_rewards.max() <= 0 and raw_rewards.min() < -0.5  # -|x|: the env's rewards, not normalised ones

    # sampled with the VecNormalize (as the algorithms sample): the same draw, normalised key by key
    np.random.seed(3)
    batch = buffer.sample_batch(64, env=env)
    np.random.seed(3)
    idx = np.random.randint(0, len(buffer), size=64)
    originals = layout.unpack_np(buffer._obs_t[idx])
    expected = env.normalize_obs(originals)
    sampled = layout.unpack_np(batch.observations)
    rms = env.obs_rms["pos"]
    np.testing.assert_array_equal(sampled["pos"], expected["pos"])
    np.testing.assert_allclose(sampled["pos"], (originals["pos"] - rms.mean) / np.sqrt(rms.var + env.epsilon),
                               rtol=1e-5, atol=1e-5)
    assert np.abs(sampled["pos"]).max() < 5 < np.abs(originals["pos"]).min()
    for key in ("vel", "cells", "mode"):  # not in norm_obs_keys: passed through unchanged
        np.testing.assert_array_equal(sampled[key], originals[key])
    next_expected = env.normalize_obs(layout.unpack_np(buffer._next_observations(idx)))["pos"]
    np.testing.assert_array_equal(layout.unpack_np(batch.next_observations)["pos"], next_expected)
    np.testing.assert_array_equal(batch.rewards, env.normalize_reward(buffer._rewards[idx]))


class ImageEnv(gym.Env):
    """Dict observations with a uint8 image (36x36x1) and a vector far from 0."""

    observation_space = gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (36, 36, 1), np.uint8),
                                         "vec": gym.spaces.Box(-100, 100, (3,), np.float32)})
    action_space = gym.spaces.Discrete(2)

    def _obs(self):
        return {"img": self.np_random.integers(0, 256, (36, 36, 1)).astype(np.uint8),
                "vec": (50 + 5 * self.np_random.normal(size=3)).astype(np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        return self._obs(), 1.0, False, False, {}


@pytest.mark.parametrize("norm_obs_keys", [["vec"], None])
def test_image_keys_pass_through_unless_normalised(norm_obs_keys):
    venv = DummyVecEnv([ImageEnv])
    venv.seed(1)
    env = VecNormalize(venv, norm_obs_keys=norm_obs_keys)
    space = env.observation_space
    layout = layout_of(space)
    buffer = ReplayBuffer(64, observation_space=space)
    env.reset()
    obs = layout.pack(env.get_original_obs())
    for _ in range(40):
        env.step(np.zeros(1, np.int64))
        next_obs = layout.pack(env.get_original_obs())
        buffer.add(obs[0], 0, 1.0, next_obs[0], 0.0)
        obs = next_obs
    assert buffer._obs_t.arrays[0].dtype == np.uint8  # the image stored as uint8
    np.random.seed(0)
    sampled = layout.unpack_np(buffer.sample(16, env=env)[0])
    np.random.seed(0)
    originals = layout.unpack_np(buffer._obs_t[np.random.randint(0, len(buffer), size=16)])
    expected = env.normalize_obs(originals)
    np.testing.assert_array_equal(sampled["vec"], expected["vec"])
    assert np.abs(sampled["vec"]).max() < 10 and originals["vec"].min() > 10
    if norm_obs_keys == ["vec"]:
        np.testing.assert_array_equal(sampled["img"], originals["img"])  # raw 0..255 values
    else:  # every Box key by default: the image too, with its own statistics
        assert set(env.obs_rms) == {"img", "vec"}
        np.testing.assert_array_equal(sampled["img"], expected["img"])
        assert np.abs(sampled["img"]).max() < 10 and originals["img"].max() > 200


def test_unnormalize_obs_inverts_normalize_obs():
    env = make_env(True, n_envs=1)
    env.reset()
    for _ in range(30):
        env.step(np.ones(1, np.int64))
    raw = env.get_original_obs()
    back = env.unnormalize_obs(env.normalize_obs(raw))
    np.testing.assert_allclose(back["pos"], raw["pos"], rtol=1e-5)
    assert back["cells"] is raw["cells"]  # not normalised, passed as it is
    packed = for_packed_rows(env)
    assert isinstance(packed, PackedVecNormalize) and for_packed_rows(packed) is packed
    rows = packed.get_original_obs()
    np.testing.assert_array_equal(rows, layout_of(env.observation_space).pack(raw))
    np.testing.assert_allclose(packed.unnormalize_obs(packed.normalize_obs(rows[0])), rows[0], rtol=1e-5)
    box = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    assert for_packed_rows(box) is box and for_packed_rows(None) is None
    box.reset()
    for _ in range(20):
        box.step(np.zeros(1, np.int64))
    np.testing.assert_allclose(box.unnormalize_obs(box.normalize_obs(box.get_original_obs())), box.get_original_obs(),
                               rtol=1e-4, atol=1e-5)
    rewards = np.array([0.5, -2.0])
    np.testing.assert_allclose(box.unnormalize_reward(box.normalize_reward(rewards)), rewards, rtol=1e-5)


def test_save_load_reproduces_predictions_and_learning_continues(tmp_path):
    env = make_env(False)
    model = SAC("MultiInputPolicy", env, **SMALL)
    model.learn(150)
    model.save(tmp_path / "sac.zip")
    env.save(tmp_path / "vecnormalize.pkl")
    model.save_replay_buffer(tmp_path / "buffer.npz")

    raw = {"pos": np.array([[120.0, -195.0], [60.0, -190.0]], np.float32), "vel": np.array([[0.2], [-0.4]], np.float32),
           "cells": np.array([[1, 2, 3], [200, 100, 0]], np.uint8), "mode": np.array([0, 2])}
    env.training = False
    actions, _ = model.predict(env.normalize_obs(raw), deterministic=True)

    fresh = DummyVecEnv([lambda: DriftEnv(False)] * 2)
    loaded_env = VecNormalize.load(tmp_path / "vecnormalize.pkl", fresh)
    loaded_env.training = False
    loaded = SAC.load(tmp_path / "sac.zip", env=loaded_env)
    np.testing.assert_allclose(loaded.predict(loaded_env.normalize_obs(raw), deterministic=True)[0], actions,
                               rtol=1e-5, atol=1e-6)

    loaded_env.training = True
    loaded.load_replay_buffer(tmp_path / "buffer.npz")
    assert len(loaded.replay_buffer) == len(model.replay_buffer)
    loaded.learn(100, reset_num_timesteps=False)
    assert len(loaded.replay_buffer) == len(model.replay_buffer) + 100


def test_box_observations_are_stored_original_too():
    """The Box path (one VecNormalize statistic) is unchanged: originals stored, terminal observations unnormalised."""
    venv = RecordRaw(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    venv.seed(0)
    env = VecNormalize(venv, clip_obs=1e4)
    model = DQN("MlpPolicy", env, **SMALL)
    model.learn(150)
    buffer = model.replay_buffer
    stored, stored_next = buffer._obs_t[:150], buffer._next_observations(np.arange(150))
    np.testing.assert_array_equal(stored, np.concatenate(venv.observations[:150]))
    ends = [t for t, terminal in enumerate(venv.terminals) if terminal]
    assert ends
    for t in range(150):
        expected = venv.terminals[t][0] if t in ends else venv.observations[t + 1][0]
        np.testing.assert_allclose(stored_next[t], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(buffer._rewards[:150], 1.0)  # CartPole's raw rewards
