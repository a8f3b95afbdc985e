"""stable-baselines3's PPO in sbtf (``sbtf.sb3.PPO``, also ``sbtf.PPO``): SB3 2.x's constructor and defaults, its
``policy_kwargs`` forms, its maths (per-minibatch advantage normalisation, value clipping, target_kl early stop),
learning, save/load, the command line. Long learning checks with the zoo's hyperparameters are ``-m slow``."""
from __future__ import annotations

import inspect
import warnings

import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

import sbtf
from sbtf.common.cmd_util import make_vec_env
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.extractors import BaseFeaturesExtractor
from sbtf.common.identity_env import IdentityEnv, IdentityEnvBox, IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from sbtf.common.multi_input_envs import SimpleMultiObsEnv
from sbtf.common.optimizers import TorchAdam, TorchStyleRMSProp
from sbtf.sb3 import PPO
from sbtf.sb3.common.policies import ActorCriticPolicy
from sbtf.sb3.ppo import CnnPolicy, MlpPolicy, MultiInputPolicy

#: stable-baselines3 2.x's PPO.__init__ after (policy, env), checked against stable_baselines3/ppo/ppo.py
SB3_PPO_DEFAULTS = dict(
    learning_rate=3e-4, n_steps=2048, batch_size=64, n_epochs=10, gamma=0.99, gae_lambda=0.95, clip_range=0.2,
    clip_range_vf=None, normalize_advantage=True, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, use_sde=False,
    sde_sample_freq=-1, rollout_buffer_class=None, rollout_buffer_kwargs=None, target_kl=None, stats_window_size=100,
    tensorboard_log=None, policy_kwargs=None, verbose=0, seed=None, device="auto", _init_setup_model=True)
SB3_PPO_LEARN = dict(callback=None, log_interval=1, tb_log_name="PPO", reset_num_timesteps=True, progress_bar=False)


def _small(env="CartPole-v1", **kwargs) -> PPO:
    settings = dict(n_steps=64, batch_size=32, n_epochs=2, seed=0)
    settings.update(kwargs)
    return PPO(settings.pop("policy", "MlpPolicy"), env, **settings)


def _shapes(model) -> dict:
    return {name: tuple(var.shape) for name, var in model.policy.named_parameters().items()}


# ------------------------------------------------------------------------------------------------ API
def test_constructor_and_learn_match_stable_baselines3():
    params = inspect.signature(PPO.__init__).parameters
    assert list(params)[1:] == ["policy", "env", *SB3_PPO_DEFAULTS]
    assert {name: params[name].default for name in SB3_PPO_DEFAULTS} == SB3_PPO_DEFAULTS
    learn = inspect.signature(PPO.learn).parameters
    assert list(learn)[1:] == ["total_timesteps", *SB3_PPO_LEARN]
    assert {name: learn[name].default for name in SB3_PPO_LEARN} == SB3_PPO_LEARN
    model = PPO("MlpPolicy", "CartPole-v1", _init_setup_model=False)
    for name, default in SB3_PPO_DEFAULTS.items():
        if name not in ("policy_kwargs", "_init_setup_model", "rollout_buffer_class", "rollout_buffer_kwargs",
                        "device"):
            assert getattr(model, name) == default, name
    assert model.device.type == "cpu"  # SB3: device="auto" resolves to a torch.device (cpu without CUDA)
    assert sbtf.PPO is PPO and sbtf.algorithms.get("ppo").load() is PPO and sbtf.algorithms.get("PPO").load() is PPO
    assert (MlpPolicy, CnnPolicy, MultiInputPolicy) == tuple(PPO.policy_aliases[name] for name in
                                                               ("MlpPolicy", "CnnPolicy", "MultiInputPolicy"))


def test_model_policy_is_the_policy_object_with_its_optimizer():
    model = _small()
    assert isinstance(model.policy, ActorCriticPolicy) and model.policy_class is MlpPolicy
    assert isinstance(model.policy.optimizer, TorchAdam) and model.policy.optimizer.epsilon == 1e-5  # SB3: eps=1e-5
    assert model.policy.acts_in_numpy  # an MLP acts in NumPy (no TF call per env step)
    assert model.policy.log_std is None  # Discrete actions: no log std (as SB3)


def test_batch_size_and_rollout_checks():
    with pytest.warns(UserWarning, match="mini-batch size of 48.*truncated mini-batch of size 16"):
        model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=48, n_epochs=3, seed=0)
    model.learn(64)  # minibatches of 48 and 16
    assert model._n_train_updates == 3
    with pytest.raises(ValueError, match="batch_size.*greater than 1"):
        PPO("MlpPolicy", "CartPole-v1", batch_size=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 64 % 1 == 0: no warning
        PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=1, n_epochs=1, normalize_advantage=False).learn(64)
    with pytest.raises(ValueError, match=r"n_steps \* n_envs. must be greater than 1"):
        PPO("MlpPolicy", "CartPole-v1", n_steps=1, batch_size=2)
    with pytest.raises(ValueError, match="clip_range_vf must be > 0, got -0.1"):
        PPO("MlpPolicy", "CartPole-v1", clip_range_vf=-0.1)
    with pytest.raises(ValueError, match="rollout_buffer_class"):
        PPO("MlpPolicy", "CartPole-v1", rollout_buffer_class=dict)
    with pytest.raises(ValueError, match="pass use_sde to PPO"):
        PPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(use_sde=True))


# ------------------------------------------------------------------------------------------------ policy_kwargs
def test_net_arch_forms():
    default = _shapes(_small())
    assert default["model/pi_fc0/w:0"] == (4, 64) and default["model/pi_fc1/w:0"] == (64, 64)
    assert default["model/vf_fc1/w:0"] == (64, 64) and default["model/pi/w:0"] == (64, 2)
    same = _shapes(_small(policy_kwargs=dict(net_arch=[32, 16])))  # SB3 2.x: a list is pi and vf alike
    assert (same["model/pi_fc0/w:0"], same["model/pi_fc1/w:0"]) == ((4, 32), (32, 16))
    assert (same["model/vf_fc0/w:0"], same["model/vf_fc1/w:0"], same["model/vf/w:0"]) == ((4, 32), (32, 16), (16, 1))
    split = _shapes(_small(policy_kwargs=dict(net_arch=dict(pi=[32], vf=[8, 8]))))
    assert (split["model/pi_fc0/w:0"], split["model/pi/w:0"]) == ((4, 32), (32, 2))
    assert (split["model/vf_fc1/w:0"], split["model/vf/w:0"]) == ((8, 8), (8, 1)) and "model/pi_fc1/w:0" not in split
    with pytest.raises(ValueError, match="'pi' and 'vf'"):
        _small(policy_kwargs=dict(net_arch=dict(pi=[32], qf=[8])))


def test_activation_fn_forms_act_alike_and_in_numpy():
    obs = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    flats = []
    for activation in (tf.nn.relu, keras.activations.relu, "relu"):
        model = _small(policy_kwargs=dict(activation_fn=activation))
        assert model.policy.acts_in_numpy
        flats.append(model.policy.flat_params(obs))
        tf_flat = model.policy.network_tf(tf.constant(obs))[0].numpy()
        np.testing.assert_allclose(flats[-1], tf_flat, atol=1e-6)
    np.testing.assert_array_equal(flats[0], flats[1])
    np.testing.assert_array_equal(flats[0], flats[2])
    tanh = _small().policy.flat_params(obs)  # the default, tf.nn.tanh, on the same initial weights
    assert not np.allclose(tanh, flats[0])


def test_ortho_init_gains_log_std_init_and_optimizer_settings():
    ortho = _small().get_parameters()["policy"]
    assert np.abs(ortho["model/pi/w:0"]).max() < 0.05  # gain 0.01 on the action net
    torch_init = _small(policy_kwargs=dict(ortho_init=False)).get_parameters()["policy"]
    bound = 1 / np.sqrt(64)  # nn.Linear's U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert 0.05 < np.abs(torch_init["model/pi/w:0"]).max() <= bound
    box = _small("Pendulum-v1", policy_kwargs=dict(log_std_init=-1.0))
    np.testing.assert_allclose(np.exp(box.policy.log_std.numpy()), np.exp(-1.0), rtol=1e-6)
    rms = _small(policy_kwargs=dict(optimizer_class="RMSprop", optimizer_kwargs=dict(alpha=0.9, eps=1e-6)))
    assert isinstance(rms.policy.optimizer, TorchStyleRMSProp)
    assert (rms.policy.optimizer.decay, rms.policy.optimizer.epsilon) == (0.9, 1e-6)
    keras_adam = _small(policy_kwargs=dict(optimizer_class=keras.optimizers.Adam, optimizer_kwargs=dict(eps=1e-7)))
    assert isinstance(keras_adam.policy.optimizer, TorchAdam) and keras_adam.policy.optimizer.epsilon == 1e-7
    with pytest.raises(ValueError, match="optimizer_class"):
        _small(policy_kwargs=dict(optimizer_class=keras.optimizers.SGD))
    with pytest.raises(ValueError, match="weight_decay"):
        _small(policy_kwargs=dict(optimizer_kwargs=dict(weight_decay=0.1)))


class TwoLayerExtractor(BaseFeaturesExtractor):
    """A user's Keras features extractor (SB3's custom ``BaseFeaturesExtractor``)."""

    def __init__(self, observation_space: gym.Space, features_dim: int = 16):
        super().__init__(observation_space, features_dim)
        self.dense = keras.layers.Dense(features_dim, activation="relu")

    def call(self, observations):
        return self.dense(observations)


def test_features_extractor_class_and_separate_extractors(tmp_path):
    shared = _small(policy_kwargs=dict(features_extractor_class=TwoLayerExtractor,
                                       features_extractor_kwargs=dict(features_dim=16), net_arch=[8]))
    names = _shapes(shared)
    assert names["model/pi_fc0/w:0"] == (16, 8) and any(n.startswith("model/features_extractor/") for n in names)
    separate = _small(policy_kwargs=dict(features_extractor_class=TwoLayerExtractor,
                                         share_features_extractor=False, net_arch=[8])).learn(64)
    names = _shapes(separate)
    assert any(n.startswith("model/pi_features_extractor/") for n in names)
    assert any(n.startswith("model/vf_features_extractor/") for n in names)
    obs = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    separate.save(tmp_path / "separate")
    loaded = PPO.load(tmp_path / "separate")
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0],
                                  separate.predict(obs, deterministic=True)[0])


# ------------------------------------------------------------------------------------------------ maths
def test_callable_schedules_read_sb3_progress():
    seen = []

    def learning_rate(progress):
        seen.append(progress)
        return 1e-3 * progress

    model = _small(n_epochs=1, learning_rate=learning_rate, clip_range=lambda p: 0.1 + 0.1 * p).learn(256)
    # SB3: after each rollout, progress_remaining = 1 - num_timesteps / total_timesteps
    np.testing.assert_allclose(seen, [0.75, 0.5, 0.25, 0.0])
    assert model._current_clip_range == pytest.approx(0.1)


def test_target_kl_stops_the_epochs_before_the_step(capsys):
    free = _small(batch_size=16, n_epochs=20).learn(128)
    assert free._n_train_updates == 2 * 20
    stopped = _small(batch_size=16, n_epochs=20, target_kl=1e-6, verbose=1).learn(128)
    assert 2 <= stopped._n_train_updates < 2 * 20  # SB3 counts the epoch that stopped
    assert "Early stopping at step" in capsys.readouterr().out


def test_clip_range_vf_keeps_the_value_network_near_its_old_predictions():
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32) * 0.1

    def value_change(clip_range_vf):
        # RMSprop has no momentum: once the clipped values stop the value gradient, the value network stops
        model = _small(n_epochs=10, learning_rate=3e-4, clip_range_vf=clip_range_vf,
                       policy_kwargs=dict(optimizer_class="RMSprop"))
        before = model.policy.value(obs)
        model.learn(64)
        return float(np.abs(model.policy.value(obs) - before).mean())

    # clipped to 1e-12 around the rollout's values, only a minibatch whose values still equal the rollout's (the
    # first one) moves the value network; unclipped, all 20 steps move it towards the returns
    assert value_change(1e-12) < 0.2 * value_change(None)


@pytest.mark.parametrize("env", [IdentityEnv(4), IdentityEnvMultiDiscrete(3), IdentityEnvMultiBinary(3),
                                 IdentityEnvBox(eps=0.5)], ids=["Discrete", "MultiDiscrete", "MultiBinary", "Box"])
def test_every_action_space(env):
    model = _small(env, n_steps=32, batch_size=16).learn(64)
    obs = np.stack([env.observation_space.sample() for _ in range(3)])
    actions, _ = model.predict(obs)
    assert len(actions) == 3 and all(env.action_space.contains(a) for a in actions)


def test_gsde_learns_and_reloads(tmp_path):
    model = _small("Pendulum-v1", use_sde=True, sde_sample_freq=4).learn(128)
    assert model.policy.log_std.shape == (64, 1)  # full_std: (latent, action)
    obs = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    model.save(tmp_path / "sde")
    loaded = PPO.load(tmp_path / "sde")
    assert loaded.use_sde and loaded.sde_sample_freq == 4
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


# ------------------------------------------------------------------------------------------------ learning
def test_ppo_learns_cartpole():
    env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=128, n_epochs=10, learning_rate=1e-3, gae_lambda=0.9,
                gamma=0.98, seed=0).learn(16384)
    mean_reward, _ = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=100), n_eval_episodes=10)
    assert mean_reward >= 200


def test_learn_twice_traces_the_train_step_once():
    model = _small().learn(128)
    model.learn(128, reset_num_timesteps=False)
    assert model._train_step.n_traces == 1 and model.num_timesteps == 256


def test_log_block_has_sb3_keys(capsys):
    _small("Pendulum-v1", verbose=1, clip_range_vf=0.5).learn(64)
    out = capsys.readouterr().out
    for key in ("time/fps", "time/total_timesteps", "train/approx_kl", "train/clip_fraction", "train/clip_range",
                "train/clip_range_vf", "train/entropy_loss", "train/explained_variance", "train/loss",
                "train/n_updates", "train/policy_gradient_loss", "train/std", "train/value_loss"):
        assert key[:20] in out, key


# ------------------------------------------------------------------------------------------------ files
def test_save_load_reproduces_predictions(tmp_path):
    model = _small("Pendulum-v1", learning_rate=lambda p: 1e-3 * p,
                   policy_kwargs=dict(net_arch=dict(pi=[32], vf=[16]), activation_fn=tf.nn.relu)).learn(128)
    model.save(tmp_path / "ppo")
    loaded = PPO.load(tmp_path / "ppo")
    assert type(loaded) is PPO and loaded.policy_kwargs == model.policy_kwargs
    for name in ("n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "clip_range", "normalize_advantage",
                 "ent_coef", "vf_coef", "max_grad_norm", "target_kl", "stats_window_size", "num_timesteps"):
        assert getattr(loaded, name) == getattr(model, name), name
    obs = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    model.set_random_seed(7)
    loaded.set_random_seed(7)
    np.testing.assert_array_equal(loaded.predict(obs)[0], model.predict(obs)[0])
    for name, value in model.get_parameters()["policy"].items():
        np.testing.assert_array_equal(loaded.get_parameters()["policy"][name], value)
    loaded.set_env(make_vec_env("Pendulum-v1", n_envs=1, seed=0))
    loaded.learn(64)  # a loaded model trains on


def test_multi_input_policy_on_dict_observations(tmp_path):
    env = SimpleMultiObsEnv(random_start=False)
    model = PPO("MultiInputPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0,
                policy_kwargs=dict(features_extractor_kwargs=dict(cnn_output_dim=8), net_arch=[16])).learn(64)
    assert any(name.startswith("model/features_extractor/img/") for name in _shapes(model))
    obs = {key: np.stack([space.sample() for _ in range(4)]) for key, space in env.observation_space.spaces.items()}
    model.save(tmp_path / "dict")
    loaded = PPO.load(tmp_path / "dict")
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


class TinyImageEnv(gym.Env):
    """36x36x1 uint8 images whose brightness says which of two actions pays (one step per episode)."""

    observation_space = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def _obs(self):
        self.good = int(self.np_random.integers(2))
        return np.full((36, 36, 1), 255 * self.good, np.uint8)

    def step(self, action):
        return self._obs(), float(action == self.good), True, False, {}


def test_cnn_policy_on_images(tmp_path):
    model = PPO("CnnPolicy", TinyImageEnv(), n_steps=32, batch_size=16, n_epochs=1, seed=0,
                policy_kwargs=dict(features_extractor_kwargs=dict(features_dim=32))).learn(32)
    shapes = _shapes(model)
    assert shapes["model/pi/w:0"] == (32, 2)  # net_arch [] behind the NatureCNN
    assert any(name.startswith("model/features_extractor/") for name in shapes)
    obs = np.stack([np.full((36, 36, 1), v, np.uint8) for v in (0, 255, 0)])
    model.save(tmp_path / "cnn")
    loaded = PPO.load(tmp_path / "cnn")
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


# ------------------------------------------------------------------------------------------------ command line
def test_cli_trains_and_plays_ppo_with_the_zoo_hyperparameters(tmp_path):
    from sbtf.cli import hyperparams, main

    table = hyperparams.load_default_hyperparams("ppo")
    assert {"CartPole-v1", "Pendulum-v1", "LunarLander-v3", "Acrobot-v1", "MountainCarContinuous-v0"} <= set(table)
    for entry in table.values():  # every shipped entry names arguments PPO takes
        hyperparams.check_hyperparameter_names("ppo", entry, hyperparams.valid_hyperparameters("ppo", PPO))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["train", "--algo", "ppo", "--env", "CartPole-v1", "-n", "256", "-f", str(tmp_path), "--seed",
                     "1", "--eval-freq", "0", "--no-progress"]) == 0
    model = PPO.load(tmp_path / "ppo" / "CartPole-v1_1" / "CartPole-v1.zip")
    assert (model.n_steps, model.batch_size, model.n_epochs, model.gae_lambda, model.n_envs) == (32, 256, 20, 0.8, 8)
    assert main(["enjoy", "--algo", "ppo", "--env", "CartPole-v1", "-f", str(tmp_path), "--episodes", "1"]) == 0


# ------------------------------------------------------------------------------------------------ slow: the zoo's runs
@pytest.mark.slow
def test_ppo_pendulum_with_the_zoo_hyperparameters():
    """rl-baselines3-zoo's tuned Pendulum-v1 (4 envs, gSDE, 1e5 steps); the zoo's benchmark reports about -172 +- 104
    for SB3's PPO. Measured here (2026-11-28, seed 0): -225 +- 122 over 10 episodes."""
    env = make_vec_env("Pendulum-v1", n_envs=4, seed=0)
    model = PPO("MlpPolicy", env, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
                learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4, seed=0).learn(100_000)
    mean_reward, _ = evaluate_policy(model, make_vec_env("Pendulum-v1", n_envs=1, seed=100), n_eval_episodes=10)
    assert mean_reward >= -400


@pytest.mark.slow
def test_ppo_lunar_lander_with_the_zoo_hyperparameters():
    """rl-baselines3-zoo's LunarLander entry (16 envs, 1e6 steps); SB3's benchmark reports about 240."""
    env = make_vec_env("LunarLander-v3", n_envs=16, seed=0)
    model = PPO("MlpPolicy", env, n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4,
                ent_coef=0.01, seed=0).learn(1_000_000)
    mean_reward, _ = evaluate_policy(model, make_vec_env("LunarLander-v3", n_envs=1, seed=100), n_eval_episodes=10)
    assert mean_reward >= 200
