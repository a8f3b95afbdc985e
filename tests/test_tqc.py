"""TQC (sbtf.contrib.tqc): sb3-contrib's truncated target and losses, arguments, learning, save/load, export, traces."""
from __future__ import annotations

import inspect

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

import sbtf
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.noise import NormalActionNoise
from sbtf.common.vec_env import DummyVecEnv
from sbtf.contrib import TQC
from sbtf.contrib.common.quantiles import truncated_quantile_target
from test_qrdqn import numpy_quantile_huber_loss

FAST_PENDULUM = dict(learning_rate=1e-3, train_freq=64, gradient_steps=64, learning_starts=100,
                     policy_kwargs=dict(net_arch=[64, 64]))


# ------------------------------------------------------------------------------------------------ the maths
def numpy_truncated_target(next_quantiles, n_target, rewards, dones, gamma, entropy_term):
    """sb3-contrib's TQC target: pool every critic's quantiles, sort, keep the n_target smallest, backup."""
    batch = next_quantiles.shape[0]
    out = np.zeros((batch, 1, n_target))
    for b in range(batch):
        kept = np.sort(next_quantiles[b].reshape(-1))[:n_target]
        out[b, 0] = rewards[b] + (1 - dones[b]) * gamma * (kept - entropy_term[b])
    return out


def test_truncated_quantile_target_is_sb3_contribs():
    rng = np.random.default_rng(0)
    next_quantiles = rng.normal(size=(6, 3, 5)).astype(np.float32)
    rewards, dones = rng.normal(size=6).astype(np.float32), np.array([0, 1, 0, 0, 1, 0], np.float32)
    entropy = rng.normal(size=6).astype(np.float32)
    got = truncated_quantile_target(tf.constant(next_quantiles), 15 - 2 * 3, tf.constant(rewards),
                                    tf.constant(dones), 0.97, tf.constant(entropy))
    np.testing.assert_allclose(got.numpy(), numpy_truncated_target(next_quantiles, 9, rewards, dones, 0.97, entropy),
                               rtol=1e-6, atol=1e-6)


def test_one_gradient_step_is_sb3_contribs_losses():
    """Critic and actor losses of a compiled step (learning rate 0: nothing moves) against NumPy statements, with
    a near-deterministic actor (log-std at its floor) and a fixed entropy coefficient of 0."""
    model = TQC("MlpPolicy", "Pendulum-v1", batch_size=8, ent_coef=0.0, top_quantiles_to_drop_per_net=2,
                policy_kwargs=dict(net_arch=[16], n_quantiles=5, n_critics=3), seed=4)
    policy = model.policy_tf
    rng = np.random.default_rng(3)
    policy.actor.log_std.kernel.assign(np.zeros(policy.actor.log_std.kernel.shape, np.float32))
    policy.actor.log_std.bias.assign(np.full(policy.actor.log_std.bias.shape, -30.0, np.float32))
    for var in policy.critic_target_variables():  # a target that differs from the critic
        var.assign(var + rng.normal(scale=0.2, size=var.shape).astype(np.float32))
    obs, next_obs = rng.normal(size=(1, 8, 3)).astype(np.float32), rng.normal(size=(1, 8, 3)).astype(np.float32)
    actions = rng.uniform(-1, 1, size=(1, 8, 1)).astype(np.float32)
    rewards, dones = rng.normal(size=(1, 8)).astype(np.float32), (rng.random((1, 8)) < 0.3).astype(np.float32)

    next_actions = np.tanh(policy.actor.mean_log_std(tf.constant(next_obs[0]))[0].numpy())
    next_quantiles = policy.critic_target.quantiles(tf.constant(next_obs[0]), tf.constant(next_actions)).numpy()
    target = numpy_truncated_target(next_quantiles, 15 - 2 * 3, rewards[0], dones[0], 0.99, np.zeros(8))
    current = policy.critic.quantiles(tf.constant(obs[0]), tf.constant(actions[0])).numpy()
    pi_actions = np.tanh(policy.actor.mean_log_std(tf.constant(obs[0]))[0].numpy())
    qf_pi = policy.critic.quantiles(tf.constant(obs[0]), tf.constant(pi_actions)).numpy().mean(axis=(1, 2))

    step = model._train_steps.get(1)
    out = step(obs=obs, next_obs=next_obs, actions=actions, rewards=rewards, dones=dones, learning_rate=0.0,
               seeds=np.zeros((1, 2), np.float32), flags=np.zeros(1, np.float32))
    np.testing.assert_allclose(out["critic_loss"], numpy_quantile_huber_loss(current, target, False), rtol=1e-5)
    np.testing.assert_allclose(out["actor_loss"], -qf_pi.mean(), rtol=1e-5, atol=1e-6)
    assert out["ent_coef"] == 0.0


# ------------------------------------------------------------------------------------------------ the API
def test_sb3_contribs_arguments_and_defaults():
    params = inspect.signature(TQC.__init__).parameters
    expected = dict(learning_rate=3e-4, buffer_size=1000000, learning_starts=100, batch_size=256, tau=0.005,
                    gamma=0.99, train_freq=1, gradient_steps=1, action_noise=None, replay_buffer_class=None,
                    replay_buffer_kwargs=None, optimize_memory_usage=False, n_steps=1, ent_coef="auto",
                    target_update_interval=1, target_entropy="auto", top_quantiles_to_drop_per_net=2, use_sde=False,
                    sde_sample_freq=-1, use_sde_at_warmup=False, stats_window_size=100, tensorboard_log=None,
                    policy_kwargs=None, verbose=0, seed=None, device="auto", _init_setup_model=True)
    assert {name: params[name].default for name in expected} == expected
    model = TQC("MlpPolicy", "Pendulum-v1")
    policy = model.policy_tf
    assert (policy.n_quantiles, policy.n_critics, policy.net_arch) == (25, 2, [256, 256])
    assert model.stats_names == ["actor_loss", "critic_loss", "ent_coef", "ent_coef_loss"]
    assert sbtf.TQC is TQC and sbtf.contrib.TQC is TQC
    names = list(model.get_parameters()["policy"])
    assert names[0] == "model/actor/fc0/kernel:0" and "model/critic/qf1/out/bias:0" in names
    assert "model/critic_target/qf1/out/bias:0" in names and names[-1] == "model/log_ent_coef:0"
    critic = TQC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(net_arch=dict(pi=[8], qf=[16, 16]), n_critics=3))
    shapes = {name: value.shape for name, value in critic.get_parameters()["policy"].items()}
    assert shapes["model/actor/fc0/kernel:0"] == (3, 8) and shapes["model/critic/qf2/fc1/kernel:0"] == (16, 16)
    assert shapes["model/critic/qf2/fc0/kernel:0"] == (3 + 1, 16)  # concat[features, action]


def test_unsupported_and_wrong_options_say_so():
    with pytest.raises(ValueError, match="use_sde"):  # gSDE is the algorithm's argument (tests/test_sde.py)
        TQC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(use_sde=True))
    with pytest.raises(ValueError, match="top_quantiles_to_drop_per_net"):
        TQC("MlpPolicy", "Pendulum-v1", top_quantiles_to_drop_per_net=25)
    with pytest.raises(ValueError, match="ent_coef"):
        TQC("MlpPolicy", "Pendulum-v1", ent_coef="learned")
    with pytest.raises(NotImplementedError, match="Box"):
        TQC("MlpPolicy", "CartPole-v1")


def test_multi_env_action_noise_and_target_updates():
    env = DummyVecEnv([lambda: gym.make("Pendulum-v1") for _ in range(2)])
    model = TQC("MlpPolicy", env, batch_size=16, learning_starts=20, train_freq=4, gradient_steps=3,
                target_update_interval=2, action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)),
                policy_kwargs=dict(net_arch=[16], n_quantiles=4), seed=0)
    before = [v.numpy().copy() for v in model.policy_tf.critic_target_variables()]
    model.learn(200)
    assert model.num_timesteps == 200 and model._n_updates == 3 * (100 // 4 - 20 // 2 // 4)
    after = [v.numpy() for v in model.policy_tf.critic_target_variables()]
    assert any(not np.allclose(a, b) for a, b in zip(before, after))  # the target follows the critic
    actions, _ = model.predict(env.reset(), deterministic=False)
    assert actions.shape == (2, 1) and np.all(np.abs(actions) <= 2.0)


# ------------------------------------------------------------------------------------------------ learning
def test_learns_pendulum():
    model = TQC("MlpPolicy", "Pendulum-v1", seed=0, **FAST_PENDULUM)
    model.learn(3500)
    eval_env = gym.make("Pendulum-v1")
    eval_env.reset(seed=123)  # unseeded, five episodes' start states alone moved the mean by 500
    mean_reward, _ = evaluate_policy(model, eval_env, n_eval_episodes=5, deterministic=True)
    assert mean_reward > -500, mean_reward
    ent_coef = model.get_parameters()["policy"]["model/log_ent_coef:0"]
    assert np.exp(ent_coef) < 0.5  # 'auto' learns the entropy coefficient down from 1
    traces = model.n_traces
    assert traces == 1
    model.learn(256, reset_num_timesteps=False)
    assert model.n_traces == traces  # no retracing after warm-up


@pytest.mark.slow
def test_reaches_the_zoo_score_on_pendulum():
    model = TQC("MlpPolicy", "Pendulum-v1", seed=1, learning_rate=1e-3, train_freq=64, gradient_steps=64,
                policy_kwargs=dict(net_arch=[64, 64]))
    model.learn(20000)
    mean_reward, _ = evaluate_policy(model, gym.make("Pendulum-v1"), n_eval_episodes=20, deterministic=True)
    assert mean_reward > -200, mean_reward


# ------------------------------------------------------------------------------------------------ files
def _model(seed=0, **kwargs):
    """A small TQC (freshly initialised weights are random, biases included, as PyTorch initialises them)."""
    return TQC("MlpPolicy", "Pendulum-v1", batch_size=32, learning_starts=50, train_freq=16, gradient_steps=8,
               policy_kwargs=dict(net_arch=[32, 32], n_quantiles=6), seed=seed, **kwargs)


def test_save_load_gives_identical_predictions(tmp_path):
    model = _model()
    model.learn(300)
    obs = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)
    model.save(tmp_path / "tqc")
    loaded = TQC.load(tmp_path / "tqc", env=gym.make("Pendulum-v1"))
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    for name, value in model.get_parameters()["policy"].items():
        np.testing.assert_array_equal(loaded.get_parameters()["policy"][name], value)
    assert loaded.ent_coef == "auto" and loaded.policy_kwargs == model.policy_kwargs and loaded.n_traces == 0
    fixed = _model(seed=1, ent_coef=0.05)
    fixed.save(tmp_path / "fixed")
    again = TQC.load(tmp_path / "fixed")
    assert again.ent_coef == 0.05 and "model/log_ent_coef:0" not in again.get_parameters()["policy"]
    np.testing.assert_array_equal(again.predict(obs, deterministic=True)[0], fixed.predict(obs, deterministic=True)[0])


def test_export_equals_predict(tmp_path):
    model = _model(seed=2)
    obs = np.random.default_rng(1).normal(size=(16, 3)).astype(np.float32)
    path = model.export(tmp_path / "saved", format="savedmodel")
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    out = {k: v.numpy() for k, v in serve(observation=tf.constant(obs)).items()}
    np.testing.assert_allclose(out["action"], model.predict(obs, deterministic=True)[0], atol=1e-5, rtol=1e-5)
    mean, std = model.policy_tf.proba_step(obs)
    np.testing.assert_allclose(out["mean"], mean, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(out["std"], std, atol=1e-5, rtol=1e-5)


def test_onnx_export_equals_predict(tmp_path):
    pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx: pip install 'sbtf[export]'")
    ort = pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime: pip install 'sbtf[export]'")
    model = _model(seed=3)
    obs = np.random.default_rng(2).normal(size=(9, 3)).astype(np.float32)
    path = model.export(tmp_path / "policy.onnx", format="onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    out = dict(zip(names, session.run(None, {"observation": obs})))
    np.testing.assert_allclose(out["action"], model.predict(obs, deterministic=True)[0], atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------------------ command line
def test_cli_trains_with_the_zoo_hyperparameters(tmp_path):
    from sbtf.cli import hyperparams, main

    table = hyperparams.load_default_hyperparams("tqc")
    assert {"Pendulum-v1", "MountainCarContinuous-v0", "LunarLanderContinuous-v3", "BipedalWalker-v3"} <= set(table)
    for entry in table.values():  # every shipped entry names arguments TQC takes (no gSDE ones)
        hyperparams.check_hyperparameter_names("tqc", entry, hyperparams.valid_hyperparameters("tqc", TQC))
        assert "use_sde" not in entry
    assert main(["train", "--algo", "tqc", "--env", "Pendulum-v1", "-n", "300", "-f", str(tmp_path), "--eval-freq",
                 "0", "--no-progress", "--hyperparams", "learning_starts:150", "noise_type:'normal'",
                 "noise_std:0.1"]) == 0
    model = TQC.load(tmp_path / "tqc" / "Pendulum-v1_1" / "Pendulum-v1.zip")
    assert model.train_freq == 64 and model.policy_tf.net_arch == [64, 64]
    assert isinstance(model.action_noise, NormalActionNoise)
    assert main(["enjoy", "--algo", "tqc", "--env", "Pendulum-v1", "-f", str(tmp_path), "--episodes", "1"]) == 0


# ------------------------------------------------------------------------------------------------ Dict observations
def test_multi_input_policy_with_an_image_key(tmp_path):
    from sbtf.common.multi_input_envs import SimpleMultiObsEnv

    model = TQC("MultiInputPolicy", SimpleMultiObsEnv(discrete_actions=False), batch_size=8, learning_starts=20,
                train_freq=10, gradient_steps=2, policy_kwargs=dict(net_arch=[16], n_quantiles=3,
                                                                    features_extractor_kwargs=dict(cnn_output_dim=8)),
                seed=0)
    assert not model.policy_tf.acts_in_numpy  # the image key's CNN acts through one compiled TF call
    names = list(model.get_parameters()["policy"])
    assert "model/actor/features_extractor/img/c1/w:0" in names
    assert "model/critic/features_extractor/img/c1/w:0" in names
    model.learn(60)
    obs = model.get_env().reset()
    actions, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "dict")
    np.testing.assert_allclose(TQC.load(tmp_path / "dict").predict(obs, deterministic=True)[0], actions, atol=1e-6)
