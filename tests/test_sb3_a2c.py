"""stable-baselines3's A2C in sbtf (``sbtf.sb3.A2C``; ``sbtf.A2C`` stays stable-baselines 2's): SB3 2.x's constructor
and defaults, RMSprop as SB3 sets it, one gradient step per rollout, learning, save/load, the command line."""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import tensorflow as tf

import sbtf
from sbtf.common.cmd_util import make_vec_env
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.file_errors import ModelFileError
from sbtf.common.optimizers import TorchAdam, TorchStyleRMSProp
from sbtf.sb3 import A2C
from sbtf.sb3.a2c import CnnPolicy, MlpPolicy, MultiInputPolicy

#: stable-baselines3 2.x's A2C.__init__ after (policy, env), checked against stable_baselines3/a2c/a2c.py
SB3_A2C_DEFAULTS = dict(
    learning_rate=7e-4, n_steps=5, gamma=0.99, gae_lambda=1.0, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
    rms_prop_eps=1e-5, use_rms_prop=True, use_sde=False, sde_sample_freq=-1, rollout_buffer_class=None,
    rollout_buffer_kwargs=None, normalize_advantage=False, stats_window_size=100, tensorboard_log=None,
    policy_kwargs=None, verbose=0, seed=None, device="auto", _init_setup_model=True)
SB3_A2C_LEARN = dict(callback=None, log_interval=100, tb_log_name="A2C", reset_num_timesteps=True, progress_bar=False)


def test_constructor_and_learn_match_stable_baselines3():
    params = inspect.signature(A2C.__init__).parameters
    assert list(params)[1:] == ["policy", "env", *SB3_A2C_DEFAULTS]
    assert {name: params[name].default for name in SB3_A2C_DEFAULTS} == SB3_A2C_DEFAULTS
    learn = inspect.signature(A2C.learn).parameters
    assert list(learn)[1:] == ["total_timesteps", *SB3_A2C_LEARN]
    assert {name: learn[name].default for name in SB3_A2C_LEARN} == SB3_A2C_LEARN
    assert sbtf.A2C is not A2C and sbtf.algorithms.get("a2c_sb3").load() is A2C  # sbtf.A2C is SB2's
    assert (MlpPolicy, CnnPolicy, MultiInputPolicy) == tuple(A2C.policy_aliases[name] for name in
                                                               ("MlpPolicy", "CnnPolicy", "MultiInputPolicy"))


def test_rmsprop_as_sb3_sets_it_or_adam():
    model = A2C("MlpPolicy", "CartPole-v1", rms_prop_eps=1e-4, seed=0)
    optimizer = model.policy.optimizer
    assert isinstance(optimizer, TorchStyleRMSProp)  # PyTorch's RMSprop: v starts at 0, eps outside the root
    assert (optimizer.decay, optimizer.epsilon, optimizer.momentum) == (0.99, 1e-4, 0.0)
    assert model.policy_kwargs["optimizer_class"] == "RMSprop"  # as SB3, which writes it into policy_kwargs
    adam = A2C("MlpPolicy", "CartPole-v1", use_rms_prop=False, seed=0)
    assert isinstance(adam.policy.optimizer, TorchAdam) and adam.policy.optimizer.epsilon == 1e-5
    own = A2C("MlpPolicy", "CartPole-v1", policy_kwargs=dict(optimizer_class="Adam"), seed=0)
    assert isinstance(own.policy.optimizer, TorchAdam)  # the policy's optimizer_class wins, as in SB3


def test_one_gradient_step_per_rollout_with_nstep_returns():
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = A2C("MlpPolicy", env, n_steps=5, seed=0)
    batches = []
    train = model.train

    def recording_train(batch):
        batches.append(batch)
        return train(batch)

    model.train = recording_train
    model.learn(50)
    assert model._n_train_updates == 5 == len(batches) and model._train_step.n_traces == 1
    batch = batches[-1]
    np.testing.assert_allclose(batch.advantages, batch.returns - batch.values, rtol=1e-5, atol=1e-5)
    # gae_lambda=1: the returns are n-step returns bootstrapped from the value after the rollout
    rewards = batch.rewards.reshape(2, 5)
    starts = batch.masks.reshape(2, 5)
    returns = batch.returns.reshape(2, 5)
    for env_index in range(2):
        for t in range(4):
            if not starts[env_index, t + 1]:
                assert returns[env_index, t] == pytest.approx(
                    rewards[env_index, t] + 0.99 * returns[env_index, t + 1], rel=1e-5)


def test_a2c_learns_cartpole():
    env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
    model = A2C("MlpPolicy", env, n_steps=8, seed=0).learn(25_000)
    mean_reward, _ = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=100), n_eval_episodes=10)
    assert mean_reward >= 150


def test_save_load_reproduces_predictions_and_names_the_algorithm(tmp_path):
    model = A2C("MlpPolicy", "Pendulum-v1", n_steps=8, normalize_advantage=True, use_sde=True, seed=0,
                policy_kwargs=dict(net_arch=[32], activation_fn=tf.nn.relu, log_std_init=-1.0)).learn(64)
    model.save(tmp_path / "a2c")
    loaded = A2C.load(tmp_path / "a2c")
    for name in ("n_steps", "gae_lambda", "rms_prop_eps", "use_rms_prop", "normalize_advantage", "use_sde",
                 "learning_rate", "num_timesteps"):
        assert getattr(loaded, name) == getattr(model, name), name
    obs = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    with pytest.raises(ModelFileError, match="a2c_sb3"):  # stable-baselines 2's A2C does not take the file
        sbtf.A2C.load(tmp_path / "a2c")


def test_log_block_has_sb3_keys(capsys):
    A2C("MlpPolicy", "Pendulum-v1", n_steps=8, verbose=1, seed=0).learn(16, log_interval=1)
    out = capsys.readouterr().out
    for key in ("time/fps", "train/entropy_loss", "train/explained_variance", "train/n_updates", "train/policy_loss",
                "train/std", "train/value_loss"):
        assert key[:20] in out, key


def test_cli_trains_a2c_sb3_with_the_zoo_hyperparameters(tmp_path):
    from sbtf.cli import hyperparams, main

    table = hyperparams.load_default_hyperparams("a2c_sb3")
    assert {"CartPole-v1", "Pendulum-v1", "LunarLander-v3", "Acrobot-v1", "MountainCarContinuous-v0"} <= set(table)
    for entry in table.values():
        hyperparams.check_hyperparameter_names("a2c_sb3", entry, hyperparams.valid_hyperparameters("a2c_sb3", A2C))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["train", "--algo", "a2c_sb3", "--env", "CartPole-v1", "-n", "200", "-f", str(tmp_path),
                     "--seed", "1", "--eval-freq", "0", "--no-progress"]) == 0
    model = A2C.load(tmp_path / "a2c_sb3" / "CartPole-v1_1" / "CartPole-v1.zip")
    assert (model.n_envs, model.n_steps, model.ent_coef) == (8, 5, 0.0)
