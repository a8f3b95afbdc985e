"""ACKTR: learning (CartPole, Pendulum), K-FAC wiring, policies (MLP, LSTM, CNN), save/load, retracing."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from sbtf import ACKTR
from sbtf.common.identity_env import IdentityEnv, IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from sbtf.common.vec_env import DummyVecEnv, VecNormalize

from conftest import evaluate

SB2_PENDULUM_PARAMS = ["model/pi_fc0/w:0", "model/pi_fc0/b:0", "model/vf_fc0/w:0", "model/vf_fc0/b:0",
                       "model/pi_fc1/w:0", "model/pi_fc1/b:0", "model/vf_fc1/w:0", "model/vf_fc1/b:0",
                       "model/vf/w:0", "model/vf/b:0", "model/pi/w:0", "model/pi/b:0", "model/pi/logstd:0",
                       "model/q/w:0", "model/q/b:0"]


def vec(env_id: str, n_envs: int) -> DummyVecEnv:
    return DummyVecEnv([lambda: gym.make(env_id) for _ in range(n_envs)])


def test_acktr_learns_cartpole_fast(tmp_path):
    model = ACKTR("MlpPolicy", vec("CartPole-v1", 8), seed=1, ent_coef=0.0)
    model.learn(30000)
    assert evaluate(model, "CartPole-v1", n_episodes=5) >= 200
    # Discrete save / load: identical predictions and probabilities
    model.save(tmp_path / "acktr_cartpole")
    loaded = ACKTR.load(tmp_path / "acktr_cartpole.zip")
    obs = np.random.RandomState(0).randn(8, 4).astype(np.float32)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    np.testing.assert_allclose(model.action_probability(obs), loaded.action_probability(obs), rtol=1e-6)


@pytest.mark.slow
def test_acktr_reaches_zoo_level_on_cartpole():
    model = ACKTR("MlpPolicy", vec("CartPole-v1", 8), seed=0, ent_coef=0.0)
    model.learn(150000)
    assert evaluate(model, "CartPole-v1", n_episodes=10) >= 475


def test_acktr_improves_on_pendulum():
    # zoo hyperparameters (constant lr 0.06, n_steps 16, 4 envs) with gamma 0.95; rewards normalised so that the
    # value loss does not use up the KL budget of the K-FAC step (seeds 3, 4, 5 all gain > 450 in 40k steps)
    env = VecNormalize(vec("Pendulum-v1", 4), norm_obs=False, norm_reward=True, gamma=0.95)
    model = ACKTR("MlpPolicy", env, n_steps=16, gamma=0.95, learning_rate=0.06, lr_schedule="constant",
                  ent_coef=0.0, seed=3)
    before = evaluate(model, "Pendulum-v1", n_episodes=4)
    model.learn(40000)
    after = evaluate(model, "Pendulum-v1", n_episodes=4)
    assert after > before + 300, (before, after)


def test_box_kfac_wiring_and_save_load(tmp_path):
    env = DummyVecEnv([lambda: gym.make("Pendulum-v1") for _ in range(2)])
    with pytest.warns(UserWarning, match="synchronously"):
        model = ACKTR("MlpPolicy", env, n_steps=8, seed=0, gae_lambda=0.95, kfac_update=2, async_eigen_decomp=True,
                      verbose=1, n_cpu_tf_sess=None)
    assert [b.name for b in model.optim.blocks] == ["pi_fc0", "vf_fc0", "pi_fc1", "vf_fc1", "vf", "pi", "q"]
    assert [model.get_parameter_list()[i].name for i in model.optim.plain_indices] == ["logstd"]
    q_before = model.get_parameters()["model/q/w:0"]
    model.learn(8 * 2 * 15, log_interval=1000)  # 15 updates: past the cold start
    optim = model.optim
    assert int(optim.sgd_step.numpy()) == 10 and int(optim.global_step.numpy()) == 15
    assert int(optim.factor_step.numpy()) == 3  # eigen-decompositions at stats_step 10, 12, 14 (kfac_update=2)
    assert float(optim.v_f_v.numpy()) > 0
    # statistics are symmetric positive semi-definite; the q head (unused by ACKTR) gets none and does not move
    for block in optim.blocks[:-1]:
        a, g = block.a_stats.numpy(), block.g_stats.numpy()
        np.testing.assert_allclose(a, a.T, atol=1e-5)
        assert np.linalg.eigvalsh(a.astype(np.float64)).min() > -1e-4 and np.trace(g) > 0
    assert np.all(optim.blocks[-1].a_stats.numpy() == 0)
    np.testing.assert_array_equal(model.get_parameters()["model/q/w:0"], q_before)

    assert list(model.get_parameters()) == SB2_PENDULUM_PARAMS  # K-FAC statistics are not saved
    model.save(tmp_path / "acktr.zip")
    loaded = ACKTR.load(tmp_path / "acktr.zip", env=env, verbose=0)
    obs = np.random.RandomState(0).randn(6, 3).astype(np.float32)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    mean_a, std_a = model.action_probability(obs)
    mean_b, std_b = loaded.action_probability(obs)
    np.testing.assert_allclose(mean_a, mean_b, rtol=1e-6)
    np.testing.assert_allclose(std_a, std_b, rtol=1e-6)
    for name in ("gae_lambda", "kfac_update", "vf_fisher_coef", "kfac_clip", "async_eigen_decomp"):
        assert getattr(loaded, name) == getattr(model, name)
    loaded.learn(32)  # a loaded model trains (fresh K-FAC state)
    assert int(loaded.optim.global_step.numpy()) == 2


def test_no_retracing_after_warmup_and_seeded_reproducibility():
    model = ACKTR("MlpPolicy", vec("CartPole-v1", 2), n_steps=5, seed=42)
    model.learn(150)
    params = model.get_parameters()
    traces = model._train_step.n_traces
    model.learn(400, reset_num_timesteps=False)  # crosses the cold start and the first eigen-decompositions
    assert model._train_step.n_traces == traces == 1
    again = ACKTR("MlpPolicy", vec("CartPole-v1", 2), n_steps=5, seed=42)
    again.learn(150)
    for name, value in again.get_parameters().items():
        np.testing.assert_allclose(value, params[name], atol=1e-6, err_msg=name)


def test_recurrent_policy_runs():
    env = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    model = ACKTR("MlpLstmPolicy", env, n_steps=5, seed=0, policy_kwargs={"n_lstm": 8})
    model.learn(200)
    # the dense layers before the LSTM are factored; the LSTM's own weights get the plain gradient
    assert [b.name for b in model.optim.blocks] == ["pi_fc0", "pi_fc1", "vf", "pi", "q"]
    action, state = model.predict(env.reset())
    assert action.shape == (2,) and state.shape == (2, 16)
    assert all(np.all(np.isfinite(p)) for p in model.get_parameters().values())


class _TinyImageEnv(gym.Env):
    """40x40 grey images whose brightness tells which of 2 actions pays: exercises the conv factors."""

    observation_space = gym.spaces.Box(0, 255, (40, 40, 1), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def _obs(self):
        self._target = int(self.np_random.integers(2))
        return np.full((40, 40, 1), 200 if self._target else 20, np.uint8)

    def step(self, action):
        reward = float(int(action) == self._target)
        self._t += 1
        return self._obs(), reward, False, self._t >= 10, {}


def test_cnn_policy_uses_conv_factors():
    env = DummyVecEnv([_TinyImageEnv for _ in range(2)])
    model = ACKTR("CnnPolicy", env, n_steps=4, seed=0)
    kinds = {b.name: b.kind for b in model.optim.blocks}
    assert kinds["c1"] == "conv" and kinds["c3"] == "conv" and kinds["fc1"] == "dense"
    assert model.optim.blocks[0].a_dim == 8 * 8 * 1 + 1
    model.learn(8 * 13)
    assert int(model.optim.factor_step.numpy()) >= 1
    assert np.trace(model.optim.blocks[0].a_stats.numpy()) > 0
    assert all(np.all(np.isfinite(p)) for p in model.get_parameters().values())


def test_nprocs_is_deprecated():
    env = DummyVecEnv([lambda: IdentityEnv(2)])
    with pytest.warns(DeprecationWarning, match="nprocs"):
        model = ACKTR("MlpPolicy", env, nprocs=1, _init_setup_model=False)
    assert model.n_cpu_tf_sess == 1


@pytest.mark.parametrize("env_cls", [IdentityEnvMultiDiscrete, IdentityEnvMultiBinary])
def test_multidiscrete_and_multibinary_learn(env_cls):
    env = DummyVecEnv([lambda: env_cls(3) for _ in range(2)])
    model = ACKTR("MlpPolicy", env, n_steps=8, seed=0)
    model.learn(3000)
    obs = env.reset()
    total = 0.0
    for _ in range(50):
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, _, _ = env.step(action)
        total += float(np.mean(reward))
    assert total / 50 > 0.9
