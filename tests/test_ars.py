"""ARS (sbtf.contrib): sb3-contrib's defaults and update maths, candidates evaluated side by side on the VecEnv (equal
to one at a time), online observation normalisation, learning CartPole, files, export."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

import sbtf
from sbtf.common.callbacks import BaseCallback
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.vec_env import DummyVecEnv, VecNormalize
from sbtf.contrib import ARS


def _cartpoles(n):
    return DummyVecEnv([lambda: gym.make("CartPole-v1")] * n)


def test_sb3_contrib_defaults_and_policies():
    model = ARS("LinearPolicy", "CartPole-v1")
    assert (model.n_delta, model.n_top, model.learning_rate, model.delta_std, model.zero_policy,
            model.alive_bonus_offset, model.n_eval_episodes) == (8, 8, 0.02, 0.05, True, 0, 1)
    assert sbtf.ARS is ARS and np.all(model.weights == 0)
    assert list(model.get_parameters()["policy"]) == ["model/action/w:0"]  # linear: no bias
    mlp = ARS("MlpPolicy", "Pendulum-v1", zero_policy=False)
    shapes = [tuple(v.shape) for v in mlp.get_parameters()["policy"].values()]
    assert shapes == [(3, 64), (64,), (64, 64), (64,), (64, 1), (1,)]
    assert np.any(mlp.weights != 0)
    with pytest.warns(UserWarning, match="n_top"):
        assert ARS("LinearPolicy", "CartPole-v1", n_delta=2, n_top=5).n_top == 2


def test_batched_candidates_equal_the_policy_with_those_weights():
    model = ARS("MlpPolicy", "Pendulum-v1", zero_policy=False, policy_kwargs=dict(net_arch=[8]), seed=0)
    policy = model.policy_tf
    rng = np.random.default_rng(0)
    candidates = rng.normal(size=(5, model.n_params)).astype(np.float32)
    obs = rng.normal(size=(5, 3)).astype(np.float32)
    batched = policy.actions_from_outputs(policy.batched_outputs(candidates, obs))
    for i in range(5):
        policy.set_flat_weights(candidates[i])
        np.testing.assert_allclose(batched[i], model.predict(obs[i])[0], rtol=1e-5, atol=1e-5)


def test_one_update_follows_sb3_contrib_maths():
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=4, n_top=2, learning_rate=0.1, delta_std=0.3, seed=3)
    model.weights = np.linspace(-1, 1, model.n_params).astype(np.float32)
    target = np.arange(model.n_params, dtype=np.float32)
    evaluated = []

    def fake_evaluation(candidates, callback):
        evaluated.append(candidates.copy())
        return -np.sum((candidates - target) ** 2, axis=1), True

    model._evaluate_candidates = fake_evaluation
    model._lr_fn = lambda _: 0.1
    model._delta_std_fn = lambda _: 0.3
    rng = np.random.default_rng(11)
    model._rng = np.random.default_rng(11)
    start = model.weights.copy()
    model._do_one_update(None, 1.0)
    deltas = rng.standard_normal((4, model.n_params)).astype(np.float32)
    np.testing.assert_allclose(evaluated[0], np.concatenate([start + 0.3 * deltas, start - 0.3 * deltas]), rtol=1e-6)
    returns = -np.sum((evaluated[0] - target) ** 2, axis=1)
    plus, minus = returns[:4], returns[4:]
    top = np.argsort(-np.maximum(plus, minus))[:2]
    std = np.concatenate([plus[top], minus[top]]).std(ddof=1)
    expected = start + 0.1 / (2 * std + 1e-6) * ((plus[top] - minus[top]) @ deltas[top])
    np.testing.assert_allclose(model.weights, expected, rtol=1e-5)
    np.testing.assert_allclose(model.policy_tf.get_flat_weights(), model.weights)


class _CountSteps(BaseCallback):
    def __init__(self):
        super().__init__()
        self.steps = self.rollouts = 0

    def _on_step(self):
        self.steps += 1
        return True

    def _on_rollout_start(self):
        self.rollouts += 1


class _SteeringEnv(gym.Env):
    """Deterministic: observation (1, t / 10); reward -|a - 0.3|; the episode ends after 10 steps, or at once when
    a > 0.8 (episodes of different lengths)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([1.0, 0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        a = float(np.asarray(action).reshape(-1)[0])
        done = self.t >= 10 or a > 0.8
        return np.array([1.0, self.t / 10], np.float32), -abs(a - 0.3), done, False, {}


def test_side_by_side_evaluation_equals_one_at_a_time():
    """The same candidates get the same returns on 1 env or spread over 3 (8 candidates: some envs wait idle)."""
    candidates = np.random.default_rng(0).normal(0, 0.6, size=(8, 2)).astype(np.float32)
    returns = []
    for n_envs in (1, 3):
        model = ARS("LinearPolicy", DummyVecEnv([_SteeringEnv] * n_envs), n_delta=4, n_eval_episodes=2)
        callback = _CountSteps()
        callback.init_callback(model)
        got, _ = model._evaluate_candidates(candidates, callback)
        returns.append(got)
        lengths = sum(info["l"] for info in model.ep_info_buf)
        assert callback.rollouts == 1 and model.num_timesteps == lengths and len(model.ep_info_buf) == 16
    np.testing.assert_allclose(returns[0], returns[1], rtol=1e-6)
    assert len(set(np.round(returns[0], 4))) > 4  # the candidates differ


def test_learns_cartpole_and_counts_steps():
    model = ARS("LinearPolicy", _cartpoles(2), seed=0)
    callback = _CountSteps()
    model.learn(30_000, callback=callback)
    assert model.num_timesteps >= 30_000 and callback.steps >= model.num_timesteps // 2
    mean_reward, _ = evaluate_policy(model, _cartpoles(1), n_eval_episodes=5)
    assert mean_reward >= 400, mean_reward


def test_online_observation_normalisation_updates_during_evaluation():
    env = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")] * 2), norm_reward=False)
    model = ARS("MlpPolicy", env, n_delta=2, policy_kwargs=dict(net_arch=[16]), seed=0)
    model.learn(1600)
    assert env.obs_rms.count > 1600 and np.all(env.obs_rms.var > 0)


@pytest.fixture(scope="module", params=["LinearPolicy-CartPole-v1", "MlpPolicy-Pendulum-v1"])
def trained(request):
    policy, env_id = request.param.split("-", 1)
    model = ARS(policy, env_id, n_delta=2, zero_policy=False, seed=0)
    return model.learn(1000)


def test_save_load_gives_identical_predictions(trained, tmp_path):
    obs = np.stack([trained.observation_space.sample() for _ in range(10)])
    trained.save(tmp_path / "ars")
    loaded = ARS.load(tmp_path / "ars")
    np.testing.assert_array_equal(loaded.predict(obs)[0], trained.predict(obs)[0])
    np.testing.assert_array_equal(loaded.weights, trained.weights)
    assert loaded.n_delta == 2 and type(loaded.policy_tf) is type(trained.policy_tf)


def test_export_equals_predict(trained, tmp_path):
    obs = np.stack([trained.observation_space.sample() for _ in range(16)]).astype(np.float32)
    path = trained.export(str(tmp_path / "saved"))
    out = tf.saved_model.load(path).signatures["serving_default"](observation=tf.constant(obs))
    np.testing.assert_allclose(out["action"].numpy(), trained.predict(obs)[0], atol=1e-5)


@pytest.mark.slow
def test_rl_zoo_cartpole():
    model = ARS("LinearPolicy", _cartpoles(2), seed=0).learn(200_000)
    mean_reward, _ = evaluate_policy(model, _cartpoles(1), n_eval_episodes=10)
    assert mean_reward >= 475, mean_reward


def test_feature_extractors_are_refused_clearly():
    from sbtf.common.extractors import NatureCNN

    for kwargs in (dict(features_extractor_class=NatureCNN), dict(features_extractor_kwargs=dict(features_dim=8))):
        with pytest.raises(ValueError, match="ARS takes no.*always flatten"):
            ARS("MlpPolicy", "CartPole-v1", policy_kwargs=kwargs)


# ------------------------------------------------------------------------------------------------ AsyncEval
#: the tests' workers are forked from the test process (its modules loaded: no TensorFlow import per worker, seconds
#: instead of a minute on a loaded 2-core machine); the default start method (forkserver) is the slow test's
_FAST_START = "fork"


def _steering_vec_env():
    return DummyVecEnv([_SteeringEnv])


def test_async_eval_matches_the_side_by_side_evaluation_and_closes():
    """sb3-contrib's AsyncEval (at its module path): candidate i on worker i % 2, each episode run in the worker with
    the policy's NumPy CandidateActor; the same returns, episode statistics and step count as the evaluation on the
    model's own VecEnv, and on_step once per n_workers steps."""
    from sbtf.contrib.common.vec_env.async_eval import AsyncEval

    candidates = np.random.default_rng(0).normal(0, 0.6, size=(8, 2)).astype(np.float32)
    model = ARS("LinearPolicy", DummyVecEnv([_SteeringEnv] * 3), n_delta=4, n_eval_episodes=2)
    callback = _CountSteps()
    callback.init_callback(model)
    expected, _ = model._evaluate_candidates(candidates, callback)
    expected_episodes = sorted((info["r"], info["l"]) for info in model.ep_info_buf)
    steps = model.num_timesteps

    async_eval = AsyncEval([_steering_vec_env] * 2, model.policy, start_method=_FAST_START)
    try:
        model.num_timesteps = 0
        callback = _CountSteps()
        callback.init_callback(model)
        got, continue_training = model._evaluate_candidates_async(candidates, callback, async_eval)
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        assert continue_training and model.num_timesteps == steps and callback.rollouts == 1
        assert callback.steps == steps // 2  # sb3-contrib: one on_step per n_workers steps
        got_episodes = sorted((info["r"], info["l"]) for info in model.ep_info_buf)
        np.testing.assert_allclose(np.array(got_episodes), np.array(expected_episodes), rtol=1e-6)
        before = model.weights.copy()
        model.learn(200, async_eval=async_eval)
        assert model.num_timesteps >= 200 and not np.array_equal(model.weights, before)
    finally:
        async_eval.close()
    assert async_eval.closed and not any(p.is_alive() for p in async_eval.processes)
    with pytest.raises(ValueError, match="closed"):
        async_eval.send_jobs(candidates, 8)
    with pytest.raises(ValueError, match="ARS policies"):
        AsyncEval([_steering_vec_env], object())


@pytest.mark.parametrize("start_method", [
    _FAST_START, pytest.param(None, marks=pytest.mark.slow, id="default-start-method")])
def test_learns_cartpole_with_async_eval(start_method):
    from sbtf.contrib.common.vec_env import AsyncEval

    model = ARS("LinearPolicy", _cartpoles(1), seed=0)
    async_eval = AsyncEval([lambda: _cartpoles(1)] * 2, model.policy, start_method=start_method)
    model.learn(30_000, async_eval=async_eval)
    assert async_eval.closed and model.num_timesteps >= 30_000
    mean_reward, _ = evaluate_policy(model, _cartpoles(1), n_eval_episodes=5)
    assert mean_reward >= 400, mean_reward


def test_async_eval_merges_the_workers_observation_statistics():
    from sbtf.contrib.common.vec_env import AsyncEval

    def normalized():
        return VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")]), norm_reward=False)

    env = normalized()
    model = ARS("LinearPolicy", env, n_delta=2, seed=0)
    async_eval = AsyncEval([normalized] * 2, model.policy, start_method=_FAST_START)
    model.learn(800, async_eval=async_eval)  # one update: 4 candidates x 200 steps, in the workers only
    assert env.obs_rms.count == pytest.approx(800 + 1e-4, rel=1e-6)  # the model's env took no step itself
    assert np.all(env.obs_rms.var > 0)
