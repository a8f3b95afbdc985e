"""SAC and TD3: SB2 names and defaults, NumPy fast path, learning, save/load, VecEnvs, train-step details, errors."""
from __future__ import annotations

import inspect

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from conftest import evaluate
from sbtf import SAC, TD3
from sbtf.common import make_vec_env
from sbtf.common.noise import NormalActionNoise
from test_dqn import SmallImageEnv, randomize_parameters

SMALL = dict(layers=[16, 16])


def _random_return(env_id: str, n_episodes: int = 5, seed: int = 0) -> float:
    env = gym.make(env_id)
    env.action_space.seed(seed)
    returns = []
    for episode in range(n_episodes):
        env.reset(seed=seed + episode)
        done, total = False, 0.0
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


#: stable-baselines3's replay buffer arguments, after SB2's
SB3_REPLAY_ARGS = ["replay_buffer_class", "replay_buffer_kwargs", "optimize_memory_usage"]


def test_constructors_match_sb2_signatures():
    sac = inspect.signature(SAC.__init__).parameters
    expected = dict(gamma=0.99, learning_rate=3e-4, buffer_size=50000, learning_starts=100, train_freq=1,
                    batch_size=64, tau=0.005, ent_coef='auto', target_update_interval=1, gradient_steps=1,
                    target_entropy='auto', action_noise=None, random_exploration=0.0, verbose=0, tensorboard_log=None,
                    _init_setup_model=True, policy_kwargs=None, full_tensorboard_log=False, seed=None,
                    n_cpu_tf_sess=None)
    assert list(sac)[3:] == list(expected) + SB3_REPLAY_ARGS + ["use_sde", "sde_sample_freq", "use_sde_at_warmup"]
    assert all(sac[name].default == default for name, default in expected.items())
    td3 = inspect.signature(TD3.__init__).parameters
    expected = dict(gamma=0.99, learning_rate=3e-4, buffer_size=50000, learning_starts=100, train_freq=100,
                    gradient_steps=100, batch_size=128, tau=0.005, policy_delay=2, action_noise=None,
                    target_policy_noise=0.2, target_noise_clip=0.5, random_exploration=0.0, verbose=0,
                    tensorboard_log=None, _init_setup_model=True, policy_kwargs=None, full_tensorboard_log=False,
                    seed=None, n_cpu_tf_sess=None)
    assert list(td3)[3:] == list(expected) + SB3_REPLAY_ARGS + ["use_sde"]  # use_sde=True raises
    assert all(td3[name].default == default for name, default in expected.items())


def test_sac_parameter_names():
    model = SAC("MlpPolicy", "Pendulum-v1", seed=0)
    shapes = {name: value.shape for name, value in model.get_parameters().items()}
    names = list(shapes)
    assert names[:8] == [f"model/pi/{layer}/{v}:0" for layer in ("fc0", "fc1", "dense", "dense_1")
                         for v in ("kernel", "bias")]
    assert names[8:14] == [f"model/values_fn/vf/{layer}/{v}:0" for layer in ("fc0", "fc1", "vf")
                           for v in ("kernel", "bias")]
    assert shapes["model/values_fn/qf1/fc0/kernel:0"] == (4, 64)
    assert shapes["model/values_fn/qf2/qf2/kernel:0"] == (64, 1)
    assert names[26] == "model/log_ent_coef:0" and shapes[names[26]] == ()
    assert names[27:] == [f"target/values_fn/vf/{layer}/{v}:0" for layer in ("fc0", "fc1", "vf")
                          for v in ("kernel", "bias")]
    fixed = SAC("LnMlpPolicy", "Pendulum-v1", ent_coef=0.2, policy_kwargs=dict(layers=[8]), seed=0)
    names = list(fixed.get_parameters())
    assert "model/log_ent_coef:0" not in names
    assert names[:4] == ["model/pi/fc0/kernel:0", "model/pi/fc0/bias:0", "model/pi/LayerNorm/beta:0",
                         "model/pi/LayerNorm/gamma:0"]


def test_td3_and_cnn_parameter_names():
    model = TD3("MlpPolicy", "Pendulum-v1", seed=0)
    names = list(model.get_parameters())
    assert len(names) == 36
    assert names[4:6] == ["model/pi/dense/kernel:0", "model/pi/dense/bias:0"]
    assert names[6] == "model/values_fn/qf1/fc0/kernel:0" and names[18] == "target/pi/fc0/kernel:0"
    assert names[24] == "target/values_fn/qf1/fc0/kernel:0"
    env = SmallImageEnv(action_space=gym.spaces.Box(-1, 1, (2,), np.float32))
    cnn = SAC("CnnPolicy", env, seed=0, policy_kwargs=dict(layers=[8]))
    names = list(cnn.get_parameters())
    assert names[:8] == [f"model/pi/{layer}/{v}:0" for layer in ("c1", "c2", "c3", "fc1") for v in ("w", "b")]
    assert names[8:10] == ["model/pi/fc0/kernel:0", "model/pi/fc0/bias:0"]
    assert "model/values_fn/c1/w:0" in names and "target/values_fn/c1/w:0" in names
    assert cnn.get_parameters()["model/values_fn/qf1/fc0/kernel:0"].shape == (512 + 2, 8)


def test_numpy_fast_paths_match_keras():
    obs_space = gym.spaces.Box(-3, 3, (6,), np.float32)
    act_space = gym.spaces.Box(-2, 2, (3,), np.float32)
    obs = np.random.default_rng(0).normal(size=(9, 6)).astype(np.float32)
    from sbtf.sac.policies import LnMlpPolicy as SacLn, MlpPolicy as SacMlp
    from sbtf.td3.policies import LnMlpPolicy as Td3Ln, MlpPolicy as Td3Mlp
    for cls in (SacMlp, SacLn):
        policy = cls(None, obs_space, act_space, layers=[32, 16])
        policy.make_actor()
        for var in policy.trainable_variables:
            var.assign(var + tf.random.normal(var.shape, stddev=0.3))
        policy.weights_changed()  # raw assigns above: not a tracked write
        assert policy.acts_in_numpy
        mu_, log_std = policy.actor_mu_log_std(obs)
        np.testing.assert_allclose(policy.step(obs, deterministic=True), np.tanh(mu_.numpy()), atol=1e-5)
        mean, std = policy.proba_step(obs)
        np.testing.assert_allclose(mean, mu_.numpy(), atol=1e-5)
        np.testing.assert_allclose(std, np.exp(log_std.numpy()), rtol=1e-5)
    for cls in (Td3Mlp, Td3Ln):
        policy = cls(None, obs_space, act_space, layers=[32, 16])
        policy.make_actor()
        for var in policy.trainable_variables:
            var.assign(var + tf.random.normal(var.shape, stddev=0.3))
        policy.weights_changed()  # raw assigns above: not a tracked write
        np.testing.assert_allclose(policy.step(obs), policy.actor(obs).numpy(), atol=1e-5)


def test_sac_improves_over_random_on_pendulum():
    # two gradient steps per env step (one compiled call each): a clear improvement within 3000 steps
    model = SAC("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, batch_size=128, learning_starts=300, gradient_steps=2,
                seed=0)
    model.learn(3000)
    assert evaluate(model, "Pendulum-v1", n_episodes=5) > _random_return("Pendulum-v1") + 400


def test_td3_improves_over_random_on_pendulum():
    noise = NormalActionNoise(mean=np.zeros(1), sigma=0.1 * np.ones(1))
    model = TD3("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, train_freq=1, gradient_steps=2, batch_size=128,
                learning_starts=300, action_noise=noise, seed=0)
    model.learn(3000)
    assert evaluate(model, "Pendulum-v1", n_episodes=5) > _random_return("Pendulum-v1") + 400


@pytest.mark.slow
def test_sac_learns_pendulum():
    model = SAC("MlpPolicy", "Pendulum-v1", learning_starts=1000, batch_size=256, buffer_size=100000,
                policy_kwargs=dict(layers=[256, 256]), seed=0)
    model.learn(10000)
    assert evaluate(model, "Pendulum-v1", n_episodes=10) >= -300


@pytest.mark.slow
def test_td3_learns_pendulum():
    noise = NormalActionNoise(mean=np.zeros(1), sigma=0.1 * np.ones(1))
    model = TD3("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, buffer_size=100000, train_freq=1, gradient_steps=1,
                batch_size=256, action_noise=noise, policy_kwargs=dict(layers=[400, 300]), seed=0)
    model.learn(10000)
    assert evaluate(model, "Pendulum-v1", n_episodes=10) >= -300


@pytest.mark.parametrize("algo,policy,env_fn", [
    (SAC, "MlpPolicy", lambda: "Pendulum-v1"), (SAC, "LnMlpPolicy", lambda: "Pendulum-v1"),
    (TD3, "MlpPolicy", lambda: "Pendulum-v1"), (TD3, "LnMlpPolicy", lambda: "Pendulum-v1"),
    (SAC, "CnnPolicy", lambda: SmallImageEnv(gym.spaces.Box(-1, 1, (2,), np.float32))),
    (TD3, "LnCnnPolicy", lambda: SmallImageEnv(gym.spaces.Box(-1, 1, (2,), np.float32)))])
def test_save_load_gives_identical_predictions(tmp_path, algo, policy, env_fn):
    model = algo(policy, env_fn(), buffer_size=500, policy_kwargs=dict(layers=[8]), seed=2)
    randomize_parameters(model)
    obs = np.stack([model.observation_space.sample() for _ in range(5)])
    actions, _ = model.predict(obs)
    assert actions.shape == (5,) + model.action_space.shape
    assert np.all(actions >= model.action_space.low) and np.all(actions <= model.action_space.high)
    path = tmp_path / "model.zip"
    model.save(path)
    loaded = algo.load(path)
    np.testing.assert_allclose(loaded.predict(obs)[0], actions, atol=1e-6)
    for name, value in model.get_parameters().items():
        assert np.array_equal(loaded.get_parameters()[name], value), name


def test_sac_entropy_coefficient_options_and_save_data(tmp_path):
    auto = SAC("MlpPolicy", "Pendulum-v1", ent_coef="auto_0.1", policy_kwargs=SMALL, seed=0)
    assert np.isclose(np.exp(auto.get_parameters()["model/log_ent_coef:0"]), 0.1)
    assert auto.target_entropy == -1.0
    auto.save(tmp_path / "auto.zip")
    loaded = SAC.load(tmp_path / "auto.zip")
    assert loaded.ent_coef == "auto"  # SB2 writes 'auto'; the learned value is the log_ent_coef parameter
    assert np.isclose(np.exp(loaded.get_parameters()["model/log_ent_coef:0"]), 0.1)
    fixed = SAC("MlpPolicy", "Pendulum-v1", ent_coef=0.05, target_entropy=-3.0, policy_kwargs=SMALL, seed=0)
    assert fixed.log_ent_coef is None and fixed.target_entropy == -3.0
    with pytest.raises(ValueError, match="ent_coef"):
        SAC("MlpPolicy", "Pendulum-v1", ent_coef="bogus", policy_kwargs=SMALL)
    with pytest.raises(ValueError, match="greater than 0"):
        SAC("MlpPolicy", "Pendulum-v1", ent_coef="auto_0", policy_kwargs=SMALL)


def test_sac_train_step_updates_networks_and_target_by_polyak():
    model = SAC("MlpPolicy", "Pendulum-v1", learning_starts=10, batch_size=16, tau=0.5, policy_kwargs=SMALL, seed=3)
    model.learn(20)  # fills the buffer (and trains)
    before = model.get_parameters()
    model._run_train([True], 1e-3)
    after = model.get_parameters()
    for name in before:
        if name.startswith("model/"):
            assert not np.array_equal(before[name], after[name]), name
    source = "model/values_fn/vf/fc0/kernel:0"
    target = "target/values_fn/vf/fc0/kernel:0"
    np.testing.assert_allclose(after[target], 0.5 * before[target] + 0.5 * after[source], atol=1e-6)
    model._run_train([False], 1e-3)
    np.testing.assert_array_equal(model.get_parameters()[target], after[target])


def test_sac_value_target_is_per_sample_unless_sb2_broadcast_is_asked():
    from sbtf.sac.sac import sac_value_loss

    rng = np.random.default_rng(0)
    v, min_q, ent_logp = (rng.normal(size=8).astype(np.float32) for _ in range(3))
    v_tf = tf.Variable(v)
    with tf.GradientTape(persistent=True) as tape:
        per_sample = sac_value_loss(v_tf, tf.constant(min_q), tf.constant(ent_logp))
        sb2 = sac_value_loss(v_tf, tf.constant(min_q), tf.constant(ent_logp), sb2_broadcast=True)
    # intended SAC target: V(s_i) -> min Q(s_i, a_i) - ent_coef * logp(a_i | s_i), sample by sample
    np.testing.assert_allclose(per_sample.numpy(), 0.5 * np.mean((v - (min_q - ent_logp)) ** 2), rtol=1e-5)
    np.testing.assert_allclose(tape.gradient(per_sample, v_tf).numpy(), (v - (min_q - ent_logp)) / 8, rtol=1e-5,
                               atol=1e-7)
    # SB2's graph: value_fn (B, 1) - (min_qf_pi (B, 1) - ent * logp_pi (B,)) is (B, B)
    sb2_matrix = v[:, None] - (min_q[:, None] - ent_logp[None, :])
    np.testing.assert_allclose(sb2.numpy(), 0.5 * np.mean(sb2_matrix ** 2), rtol=1e-5)
    np.testing.assert_allclose(tape.gradient(sb2, v_tf).numpy(), (v - (min_q - ent_logp.mean())) / 8, rtol=1e-5,
                               atol=1e-7)
    assert SAC.sb2_value_target_broadcast is False


def test_sac_value_network_learns_the_per_sample_target():
    # one gradient step from the same weights on the same minibatch, with the per-sample value target (default) and
    # with SB2's broadcast one (opt-in): Adam's first moment after one step is 0.1 * gradient, so it shows the gradients
    grads = {}
    for broadcast in (False, True):
        model = SAC("MlpPolicy", "Pendulum-v1", learning_starts=100, batch_size=16, ent_coef=5.0,
                    policy_kwargs=SMALL, seed=3)
        model.sb2_value_target_broadcast = broadcast
        model.learn(20)  # fills the buffer, no training yet
        np.random.seed(123)  # same minibatch and actor noise
        model._run_train([False], 1e-3)
        names = list(model.policy_tf.named_parameters("model"))[-len(model._critic_vars):]
        assert len(names) == len(model.value_optimizer.m)
        grads[broadcast] = {name: m.numpy() / 0.1 for name, m in zip(names, model.value_optimizer.m)}
    per_sample, sb2 = grads[False], grads[True]
    # the value head's kernel sees the per-sample entropy terms; its bias only their batch mean (the same in both)
    assert not np.allclose(per_sample["model/values_fn/vf/vf/kernel:0"], sb2["model/values_fn/vf/vf/kernel:0"],
                           rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(per_sample["model/values_fn/vf/vf/bias:0"], sb2["model/values_fn/vf/vf/bias:0"],
                               rtol=1e-4, atol=1e-7)
    for name in per_sample:  # the Q-networks' gradients do not depend on the value target
        if "/qf" in name:
            np.testing.assert_array_equal(per_sample[name], sb2[name], err_msg=name)


def test_sac_time_limit_truncation_is_bootstrapped():
    # Pendulum-v1 always ends by its 200-step time limit: those ends are stored with done = 0 (bootstrapped, as SB3's
    # handle_timeout_termination), and the stored next observation is the episode's terminal observation
    model = SAC("MlpPolicy", "Pendulum-v1", learning_starts=1000, policy_kwargs=SMALL, seed=0)
    model.learn(450)
    storage = model.replay_buffer.storage
    assert len(storage) == 450
    assert all(entry[4] == 0.0 for entry in storage)
    obs_t = np.array([entry[0] for entry in storage])
    obs_tp1 = np.array([entry[3] for entry in storage])
    continues = np.all(np.isclose(obs_tp1[:-1], obs_t[1:]), axis=1)
    assert list(np.flatnonzero(~continues)) == [199, 399]  # the two resets


def test_td3_policy_delay():
    model = TD3("MlpPolicy", "Pendulum-v1", learning_starts=10, batch_size=16, train_freq=1, gradient_steps=1,
                policy_kwargs=SMALL, seed=4)
    model.learn(20)
    before = model.get_parameters()
    model._run_train([False], 1e-3)  # critic only
    mid = model.get_parameters()
    assert np.array_equal(before["model/pi/fc0/kernel:0"], mid["model/pi/fc0/kernel:0"])
    assert np.array_equal(before["target/pi/fc0/kernel:0"], mid["target/pi/fc0/kernel:0"])
    assert not np.array_equal(before["model/values_fn/qf1/fc0/kernel:0"], mid["model/values_fn/qf1/fc0/kernel:0"])
    model._run_train([True], 1e-3)
    after = model.get_parameters()
    assert not np.array_equal(mid["model/pi/fc0/kernel:0"], after["model/pi/fc0/kernel:0"])
    np.testing.assert_allclose(after["target/pi/fc0/kernel:0"],
                               0.995 * mid["target/pi/fc0/kernel:0"] + 0.005 * after["model/pi/fc0/kernel:0"],
                               atol=1e-6)
    # acting uses the new actor weights at once (NumPy cache refreshed from the train call)
    obs = np.zeros((1, 3), np.float32)
    np.testing.assert_allclose(model.policy_tf.step(obs), model.policy_tf.actor(obs).numpy(), atol=1e-5)


@pytest.mark.parametrize("algo", [SAC, TD3])
def test_multiple_envs_and_no_retracing(algo):
    env = make_vec_env("Pendulum-v1", n_envs=3, seed=0)
    # SAC with a fixed entropy coefficient here (the learned one is exercised by the other SAC runs)
    extra = dict(train_freq=1, gradient_steps=1) if algo is TD3 else dict(ent_coef=0.05)
    model = algo("MlpPolicy", env, learning_starts=61, batch_size=32, policy_kwargs=SMALL, seed=5, **extra)
    model.learn(300)
    assert model.num_timesteps == 300 and len(model.replay_buffer) == 300
    # 3 envs, train_freq 1: 3 gradient steps per iteration, in one compiled call (traced once)
    assert {key[0] for key in model._train_steps.keys()} == {3}
    traces = model.n_traces
    model.learn(150, reset_num_timesteps=False)
    assert model.n_traces == traces and len(model.replay_buffer) == 450
    dones = np.array([entry[4] for entry in model.replay_buffer.storage])
    assert not dones.any()  # Pendulum only ends by its time limit: never stored as a termination
    actions, _ = model.predict(env.reset())
    assert actions.shape == (3, 1)


def test_replay_buffer_save_load_then_resume(tmp_path):
    model = SAC("MlpPolicy", "Pendulum-v1", learning_starts=50, batch_size=16, policy_kwargs=SMALL, seed=6)
    model.learn(100)
    model.save(tmp_path / "sac.zip")
    model.save_replay_buffer(tmp_path / "buffer.npz")
    loaded = SAC.load(tmp_path / "sac.zip", env="Pendulum-v1")
    loaded.load_replay_buffer(tmp_path / "buffer.npz")
    assert len(loaded.replay_buffer) == 100
    loaded.learn(50, reset_num_timesteps=False)
    assert len(loaded.replay_buffer) == 150 and loaded.num_timesteps == 150


def test_predict_and_probability_rules():
    noise = NormalActionNoise(mean=np.zeros(1), sigma=0.5 * np.ones(1))
    td3 = TD3("MlpPolicy", "Pendulum-v1", action_noise=noise, policy_kwargs=SMALL, seed=7)
    obs = np.zeros(3, np.float32)
    deterministic, _ = td3.predict(obs)
    np.testing.assert_allclose(deterministic, 2.0 * td3.policy_tf.actor(obs[None]).numpy()[0], atol=1e-5)
    noisy = np.array([td3.predict(obs, deterministic=False)[0] for _ in range(20)])
    assert noisy.std() > 0.1
    sac = SAC("MlpPolicy", "Pendulum-v1", policy_kwargs=SMALL, seed=7)
    mu_, _ = sac.policy_tf.actor_mu_log_std(obs[None])
    np.testing.assert_allclose(sac.predict(obs)[0], 2.0 * np.tanh(mu_.numpy()[0]), atol=1e-5)
    assert np.std([sac.predict(obs, deterministic=False)[0] for _ in range(20)]) > 0.01
    for model in (sac, td3):
        with pytest.warns(UserWarning):
            assert model.action_probability(obs) is None
        with pytest.raises(ValueError, match="action probabilities"):
            model.action_probability(obs, actions=np.zeros(1))
        with pytest.raises(ValueError, match="Unexpected observation shape"):
            model.predict(np.zeros(4))


@pytest.mark.parametrize("algo", [SAC, TD3])
def test_clear_errors(algo):
    with pytest.raises(NotImplementedError, match=fr"{algo.__name__} does not support action space.*Discrete"):
        algo("MlpPolicy", "CartPole-v1")
    with pytest.raises(ValueError, match="at least one hidden layer"):
        algo("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(layers=[]))
    with pytest.raises(ValueError, match="image observations"):
        algo("CnnPolicy", "Pendulum-v1")


@pytest.mark.parametrize("algo", [SAC, TD3])
def test_pretrain_fits_unscaled_actions(algo):
    model = algo("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(layers=[32]), seed=8)
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, size=(400, 3)).astype(np.float32)
    actions = np.clip(1.5 * obs[:, :1], -2, 2).astype(np.float32)  # env units ([-2, 2])

    class Dataset:
        class Loader:
            def __init__(self, n):
                self.n = n

            def __len__(self):
                return self.n

        train_loader, val_loader = Loader(8), Loader(2)

        @staticmethod
        def get_next_batch(split):
            idx = rng.integers(0, 400, size=64)
            return obs[idx], actions[idx]

    model.pretrain(Dataset(), n_epochs=40, learning_rate=5e-3)
    predicted, _ = model.predict(obs)
    assert np.mean(np.abs(predicted - actions)) < 0.15
