"""DDPG: SB2 names and defaults, NumPy acting, the fused train call against the per-step (MPI) path, parameter noise,
normalisation, learning, save/load, errors, and ``mpirun -np 2`` runs (ranks in sync, a failing rank aborts)."""
from __future__ import annotations

import inspect
import io
import os
import subprocess
import sys
import textwrap
import time
from contextlib import redirect_stdout
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from conftest import evaluate
from sbtf import DDPG, logger
from sbtf.common import make_vec_env
from sbtf.ddpg import AdaptiveParamNoiseSpec, NormalActionNoise, OrnsteinUhlenbeckActionNoise
from test_dqn import SmallImageEnv

SMALL = dict(layers=[16, 16])
REPO_ROOT = Path(__file__).resolve().parents[1]
MPIRUN = Path(sys.executable).parent / "mpirun"


class DiscreteObsEnv(gym.Env):
    """Discrete observations, Box actions."""

    observation_space = gym.spaces.Discrete(5)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return int(self.np_random.integers(5)), float(action[0]), False, False, {}


def _fill(model, n: int = 64, seed: int = 0) -> None:
    """Store ``n`` random Pendulum-like transitions (through ``_store_transition``: obs statistics included)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        obs = rng.normal(size=3).astype(np.float32)
        action = np.tanh(rng.normal(size=1)).astype(np.float32)
        model._store_transition(obs, action, float(rng.normal()), rng.normal(size=3).astype(np.float32),
                                float(rng.random() < 0.1), {})


# ------------------------------------------------------------------------------------------ API and names
#: stable-baselines3's replay buffer arguments, after SB2's
SB3_REPLAY_ARGS = ["replay_buffer_class", "replay_buffer_kwargs", "optimize_memory_usage"]


def test_constructor_matches_sb2_signature_and_exports():
    params = inspect.signature(DDPG.__init__).parameters
    expected = dict(gamma=0.99, memory_policy=None, eval_env=None, nb_train_steps=50, nb_rollout_steps=100,
                    nb_eval_steps=100, param_noise=None, action_noise=None, normalize_observations=False, tau=0.001,
                    batch_size=128, param_noise_adaption_interval=50, normalize_returns=False, enable_popart=False,
                    observation_range=(-5., 5.), critic_l2_reg=0., return_range=(-np.inf, np.inf), actor_lr=1e-4,
                    critic_lr=1e-3, clip_norm=None, reward_scale=1., render=False, render_eval=False,
                    memory_limit=None, buffer_size=50000, random_exploration=0.0, verbose=0, tensorboard_log=None,
                    _init_setup_model=True, policy_kwargs=None, full_tensorboard_log=False, seed=None,
                    n_cpu_tf_sess=1)
    assert list(params)[1:3] == ["policy", "env"]
    assert list(params)[3:] == list(expected) + SB3_REPLAY_ARGS + ["use_sde"]  # use_sde=True raises
    assert all(params[name].default == default for name, default in expected.items())
    # the names stable-baselines exported from stable_baselines.ddpg (and ddpg.noise / ddpg.policies)
    from sbtf.ddpg import CnnPolicy, LnCnnPolicy, LnMlpPolicy, MlpPolicy  # noqa: F401
    from sbtf.ddpg.noise import NormalActionNoise as Noise2
    from sbtf.ddpg.policies import DDPGPolicy, FeedForwardPolicy  # noqa: F401
    assert Noise2 is NormalActionNoise
    with pytest.warns(DeprecationWarning, match="memory_limit"):
        model = DDPG("MlpPolicy", "Pendulum-v1", memory_limit=1234, _init_setup_model=False)
    assert model.buffer_size == 1234


def test_parameter_names_follow_sb2_order():
    model = DDPG("MlpPolicy", "Pendulum-v1", seed=0)
    shapes = {name: value.shape for name, value in model.get_parameters().items()}
    expected = []
    for scope in ("model", "target"):
        expected += [(f"{scope}/pi/fc0/kernel:0", (3, 64)), (f"{scope}/pi/fc0/bias:0", (64,)),
                     (f"{scope}/pi/fc1/kernel:0", (64, 64)), (f"{scope}/pi/fc1/bias:0", (64,)),
                     (f"{scope}/pi/pi/kernel:0", (64, 1)), (f"{scope}/pi/pi/bias:0", (1,)),
                     (f"{scope}/qf/fc0/kernel:0", (3, 64)), (f"{scope}/qf/fc0/bias:0", (64,)),
                     (f"{scope}/qf/fc1/kernel:0", (65, 64)), (f"{scope}/qf/fc1/bias:0", (64,)),
                     (f"{scope}/qf/qf_output/kernel:0", (64, 1)), (f"{scope}/qf/qf_output/bias:0", (1,))]
    assert list(shapes.items()) == expected
    params = model.get_parameters()
    assert np.abs(params["model/pi/pi/kernel:0"]).max() <= 3e-3  # SB2's uniform(-3e-3, 3e-3) output layers
    assert np.abs(params["model/qf/qf_output/kernel:0"]).max() <= 3e-3
    np.testing.assert_array_equal(params["target/qf/fc1/kernel:0"], params["model/qf/fc1/kernel:0"])

    full = DDPG("LnMlpPolicy", "Pendulum-v1", seed=0, param_noise=AdaptiveParamNoiseSpec(), normalize_returns=True,
                normalize_observations=True, policy_kwargs=dict(layers=[8]))
    params = full.get_parameters()
    names = list(params)
    assert names[:4] == ["model/pi/fc0/kernel:0", "model/pi/fc0/bias:0", "model/pi/LayerNorm/beta:0",
                         "model/pi/LayerNorm/gamma:0"]
    assert names.index("noise/pi/fc0/kernel:0") < names.index("noise_adapt/pi/fc0/kernel:0") \
        < names.index("target/pi/fc0/kernel:0")
    assert not any(n.startswith(("noise/qf", "noise_adapt/qf")) for n in names)
    assert names[-6:] == ["input/obs_rms/runningsum:0", "input/obs_rms/runningsumsq:0", "input/obs_rms/count:0",
                          "input/ret_rms/runningsum:0", "input/ret_rms/runningsumsq:0", "input/ret_rms/count:0"]
    assert params["input/obs_rms/runningsum:0"].dtype == np.float64 and params["input/obs_rms/count:0"] == 1e-2
    assert len(full.params) == len([n for n in names if n.split("/")[0] in ("model", "noise", "noise_adapt")])
    assert len(full.obs_rms_params) == 3 and len(full.ret_rms_params) == 3

    cnn = DDPG("CnnPolicy", SmallImageEnv(gym.spaces.Box(-1, 1, (2,), np.float32)), seed=0, buffer_size=100)
    names = list(cnn.get_parameters())
    assert names[:8] == [f"model/pi/{layer}/{v}:0" for layer in ("c1", "c2", "c3", "fc1") for v in ("w", "b")]
    assert "model/pi/fc1/kernel:0" in names and "model/qf/c1/w:0" in names
    action, _ = cnn.predict(cnn.observation_space.sample())
    assert action.shape == (2,) and np.all(np.abs(action) <= 1)


def test_numpy_acting_matches_keras():
    model = DDPG("LnMlpPolicy", "Pendulum-v1", seed=0, param_noise=AdaptiveParamNoiseSpec(0.3, 0.1),
                 normalize_observations=True, normalize_returns=True, return_range=(-50.0, 50.0),
                 observation_range=(-2.0, 2.0), policy_kwargs=SMALL)
    _fill(model, 200)
    model._reset()  # perturb the acting copy
    obs = np.random.default_rng(1).normal(size=(7, 3)).astype(np.float32) * 4
    action, q_value = model._policy(obs, apply_noise=False, compute_q=True)
    noisy, _ = model._policy(obs, apply_noise=True, compute_q=False)
    model._flush_stats()
    tf_action, tf_noisy, tf_q = [t.numpy() for t in model._tf_act(obs)]
    np.testing.assert_allclose(action, tf_action, atol=1e-5)
    np.testing.assert_allclose(noisy, tf_noisy, atol=1e-5)
    np.testing.assert_allclose(q_value, tf_q, rtol=1e-5, atol=1e-5)
    assert np.abs(noisy - action).max() > 1e-3  # the perturbed actor acts
    # the observation normalisation of SB2: clip((obs - mean) / std, observation_range)
    mean, std = model.obs_rms.mean_np(), model.obs_rms.std_np()
    np.testing.assert_allclose(model.policy_tf.normalize_obs_np(obs), np.clip((obs - mean) / std, -2, 2), atol=1e-6)
    np.testing.assert_allclose(model.policy_tf.normalize_obs_tf(obs).numpy(), np.clip((obs - mean) / std, -2, 2),
                               atol=1e-6)
    np.testing.assert_allclose(mean, model.obs_rms.mean.numpy(), atol=1e-7)
    # predict = unscaled actor action (Pendulum's bounds are +-2)
    np.testing.assert_allclose(model.predict(obs)[0], 2 * tf_action, atol=1e-5)


# ------------------------------------------------------------------------------------------ training maths
def test_fused_cycle_equals_per_step_mpi_path():
    """One process runs a cycle as one compiled call; MPI runs it step by step with MpiAdam.update: same maths."""
    def make():
        return DDPG("LnMlpPolicy", "Pendulum-v1", seed=1, batch_size=16, nb_train_steps=6,
                    param_noise_adaption_interval=2, param_noise=AdaptiveParamNoiseSpec(0.3, 0.1),
                    normalize_observations=True, normalize_returns=True, enable_popart=True, critic_l2_reg=0.01,
                    clip_norm=0.5, gamma=0.9, tau=0.05, policy_kwargs=SMALL)

    fused, per_step, mpi_graph = make(), make(), make()
    mpi_graph._mpi_graph = True  # the variant MPI runs: Allreduce inside the compiled call (identity here), no XLA
    before = fused.get_parameters()
    for model in (fused, per_step, mpi_graph):
        _fill(model)
    np.random.seed(5)
    fused_losses, fused_distances = fused._train_fused(6)
    np.random.seed(5)
    step_losses, step_distances = per_step._train_per_step(6)
    np.random.seed(5)
    mpi_losses, mpi_distances = mpi_graph._train_fused(6)
    # same TF kernels as the per-step path (random numbers included)
    np.testing.assert_allclose(mpi_distances, step_distances, rtol=1e-6)
    for name, value in mpi_graph.get_parameters().items():
        np.testing.assert_allclose(value, per_step.get_parameters()[name], rtol=1e-6, atol=1e-7, err_msg=name)
    assert mpi_graph.n_traces == 1
    np.testing.assert_allclose(fused_losses, step_losses, rtol=1e-4, atol=1e-6)
    assert len(fused_distances) == len(step_distances) == 3
    a, b = fused.get_parameters(), per_step.get_parameters()
    for name in a:
        if name.startswith("noise_adapt/"):
            continue  # perturbed with XLA's stateless RNG in the fused call: other random numbers
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert not np.allclose(a["model/qf/fc1/kernel:0"], before["model/qf/fc1/kernel:0"])
    assert not np.allclose(a["target/pi/pi/kernel:0"], before["target/pi/pi/kernel:0"])
    # Pop-Art: the return statistics moved, the critic output layers were rescaled with them
    assert a["input/ret_rms/count:0"] == pytest.approx(1e-2 + 6 * 16)
    # the distances are far above desired_action_stddev=0.1 in both: same three decreases of the noise
    assert fused.param_noise.current_stddev == pytest.approx(0.3 / 1.01 ** 3)
    assert per_step.param_noise.current_stddev == pytest.approx(0.3 / 1.01 ** 3)


def test_optimizers_follow_sb2_mpi_adam_arithmetic():
    """DDPG's optimisers are SB2's MpiAdam: step size in float64, moments b*m + (1-b)*g, in float32 (not TF1's fused
    Adam kernel, whose float32 bias correction differs by ~1e-5 relative in early steps; the parameter-noise learning
    run is sensitive to that rounding)."""
    model = DDPG("MlpPolicy", "Pendulum-v1", seed=3, policy_kwargs=SMALL)
    adam = model.actor_optimizer
    theta = adam.getflat().astype(np.float32)
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    rng = np.random.default_rng(0)
    lr = 2.0 ** -10  # exact in float32 (the compiled update takes the learning rate as float32)
    for t in range(1, 4):
        # gradients from tiny (where epsilon matters) to large
        grad = (rng.normal(size=theta.shape) * 10.0 ** rng.integers(-9, 2, size=theta.shape)).astype(np.float32)
        adam.update(grad, lr)
        step_size = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)  # float64, as SB2's MpiAdam.update
        m = np.float32(0.9) * m + np.float32(1 - 0.9) * grad
        v = np.float32(0.999) * v + np.float32(1 - 0.999) * (grad * grad)
        theta = theta + np.float32(-step_size) * m / (np.sqrt(v) + np.float32(1e-8))
        np.testing.assert_allclose(adam.getflat(), theta, rtol=2.5e-7, atol=1e-12)  # bit-exact here; 2 ulp slack
        np.testing.assert_allclose(adam.exp_avg_sq, v, rtol=2.5e-7)
    assert adam.step == 3


def test_train_step_matches_numpy_reference():
    """Critic and actor losses of one gradient step, recomputed in NumPy from SB2's formulas."""
    model = DDPG("MlpPolicy", "Pendulum-v1", seed=2, batch_size=32, gamma=0.95, critic_l2_reg=0.1,
                 return_range=(-3.0, 3.0), policy_kwargs=SMALL)
    _fill(model)
    batch = model.replay_buffer.sample(32)
    obs0, actions, rewards, obs1, dones = batch
    policy, target = model.policy_tf, model.target_policy
    n0, n1 = policy.normalize_obs_np(obs0), target.normalize_obs_np(obs1)
    target_q = rewards[:, None] + (1 - dones[:, None]) * 0.95 * target.critic_np(n1, target.actor_np(n1))
    critic_loss = np.mean((policy.critic_np(n0, actions) - np.clip(target_q, -3, 3)) ** 2)
    reg = [v.numpy() for name, v in model.policy_tf.named_parameters("model").items()
           if name.startswith("model/qf/") and "bias" not in name and "output" not in name and "b" not in name]
    assert len(reg) == 2  # qf/fc0/kernel and qf/fc1/kernel
    critic_loss += 0.1 * sum(np.sum(w ** 2) / 2 for w in reg)
    actor_loss = -np.mean(np.clip(policy.critic_np(n0, policy.actor_np(n0)), -3, 3))
    loss_critic, loss_actor = model._train_step(batch=batch)
    assert loss_critic == pytest.approx(critic_loss, rel=1e-4)
    assert loss_actor == pytest.approx(actor_loss, rel=1e-4, abs=1e-6)
    assert model.actor_optimizer.step == 1 and model.critic_optimizer.step == 1


def test_param_noise_adaptation():
    spec = AdaptiveParamNoiseSpec(initial_stddev=0.2, desired_action_stddev=0.1, adoption_coefficient=1.05)
    spec.adapt(0.5)
    assert spec.current_stddev == pytest.approx(0.2 / 1.05)
    spec.adapt(0.01)
    assert spec.current_stddev == pytest.approx(0.2)
    assert spec.get_stats() == {"param_noise_stddev": spec.current_stddev}

    model = DDPG("LnMlpPolicy", "Pendulum-v1", seed=0, batch_size=64, policy_kwargs=dict(layers=[64, 64]),
                 param_noise=AdaptiveParamNoiseSpec(initial_stddev=0.3, desired_action_stddev=0.1))
    _fill(model, 128)
    obs = model.replay_buffer.sample(64)[0]
    distance = model._adapt_param_noise(obs)
    # the perturbed copy: N(0, 0.3) on every trainable variable but the LayerNorm ones
    names = list(model.policy_tf.named_parameters("").keys())
    for name, var, noisy in zip(names, model.policy_tf.actor_variables(),
                                model.adaptive_param_noise_actor.actor_variables()):
        diff = noisy.numpy() - var.numpy()
        if "LayerNorm" in name:
            np.testing.assert_array_equal(diff, 0.0)
        elif diff.size >= 1000:
            assert np.std(diff) == pytest.approx(0.3, rel=0.1) and abs(np.mean(diff)) < 0.05
    # the distance: RMS of the action differences on the minibatch
    nobs = model.policy_tf.normalize_obs_np(obs)
    adaptive = model.adaptive_param_noise_actor  # written by a train step: its acting copies know
    expected = np.sqrt(np.mean((model.policy_tf.actor_np(nobs) - adaptive.actor_np(nobs)) ** 2))
    assert distance == pytest.approx(expected, rel=1e-4)
    assert distance > 0.1 and model.param_noise.current_stddev == pytest.approx(0.3 / 1.01)
    # a tiny perturbation moves the actions less than desired: the noise grows
    model.param_noise.current_stddev = 1e-4
    assert model._adapt_param_noise(obs) < 0.1
    assert model.param_noise.current_stddev == pytest.approx(1e-4 * 1.01)
    # the acting copy is re-perturbed by _reset (start of every episode) with the current stddev
    model.param_noise.current_stddev = 0.3
    model._reset()
    diff = model.param_noise_actor.actor_variables()[4].numpy() - model.policy_tf.actor_variables()[4].numpy()
    assert names[4] == "/pi/fc1/kernel:0" and np.std(diff) == pytest.approx(0.3, rel=0.1)
    # in learn() the adaptions run inside the fused call (4 per cycle of 20 gradient steps here); the compiled
    # call's own stddev agrees with the spec's, which moved by whole powers of 1.01
    model.nb_rollout_steps, model.nb_train_steps, model.param_noise_adaption_interval = 50, 20, 5
    start = model.param_noise.current_stddev
    model.learn(200)
    assert model.actor_optimizer.step == 4 * 20
    assert model._last_graph_stddev == pytest.approx(model.param_noise.current_stddev, rel=1e-5)
    exponent = np.log(model.param_noise.current_stddev / start) / np.log(1.01)
    assert abs(exponent - round(exponent)) < 1e-4 and abs(round(exponent)) <= 4 * 4


# ------------------------------------------------------------------------------------------ learning
def _pendulum_model(seed=0, **kwargs):
    params = dict(nb_rollout_steps=100, nb_train_steps=100, batch_size=128, actor_lr=1e-3, critic_lr=1e-3, tau=0.005,
                  action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)), policy_kwargs=dict(layers=[64, 64]))
    params.update(kwargs)
    return DDPG("MlpPolicy", "Pendulum-v1", seed=seed, **params)


def test_ddpg_improves_on_pendulum():
    model = _pendulum_model()
    before = evaluate(model, "Pendulum-v1", n_episodes=3)
    model.learn(6000)
    n_traces = model.n_traces
    after = evaluate(model, "Pendulum-v1", n_episodes=5)
    assert after > -800 and after > before + 300, (before, after)
    model.learn(200, reset_num_timesteps=False)
    assert model.n_traces == n_traces == 1  # one compiled train function, never retraced
    assert model.num_timesteps == 6200


@pytest.mark.slow
@pytest.mark.parametrize("kwargs", [dict(), dict(normalize_returns=True, enable_popart=True)])
def test_ddpg_learns_pendulum(kwargs):
    model = _pendulum_model(**kwargs)
    model.learn(15000)
    assert evaluate(model, "Pendulum-v1", n_episodes=10) > -300


@pytest.mark.slow
def test_ddpg_param_noise_layer_norm_learns_pendulum():
    model = DDPG("LnMlpPolicy", "Pendulum-v1", seed=0, nb_rollout_steps=100, nb_train_steps=100, batch_size=128,
                 actor_lr=1e-3, critic_lr=1e-3, tau=0.005, param_noise=AdaptiveParamNoiseSpec(0.2, 0.2))
    model.learn(10000)
    assert evaluate(model, "Pendulum-v1", n_episodes=10) > -400


def test_learn_with_eval_env_callback_logging_and_ou_noise():
    model = DDPG("MlpPolicy", "Pendulum-v1", seed=0, nb_rollout_steps=50, nb_train_steps=10, nb_eval_steps=30,
                 batch_size=32, eval_env=gym.make("Pendulum-v1"), normalize_observations=True, verbose=1,
                 action_noise=OrnsteinUhlenbeckActionNoise(np.zeros(1), 0.3 * np.ones(1)), policy_kwargs=SMALL)
    calls = []

    def callback(locals_, globals_):
        calls.append(locals_["self"].num_timesteps)
        return locals_["self"].num_timesteps < 250

    logger.configure(format_strs=["stdout"])
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            model.learn(1000, callback=callback, log_interval=2)
    finally:
        logger.reset()
    assert calls[-1] == 250 and model.num_timesteps == 250  # the callback stopped training
    text = out.getvalue()
    for key in ("reference_Q_mean", "obs_rms_std", "rollout/Q_mean", "eval/return", "train/loss_critic"):
        assert key in text, text
    # the 250th transition is not stored: the callback runs before the transition is stored (SB2 order)
    assert float(model.get_parameters()["input/obs_rms/count:0"]) == pytest.approx(249.01)


# ------------------------------------------------------------------------------------------ save / load
def test_save_load_identical_predictions(tmp_path):
    model = DDPG("LnMlpPolicy", "Pendulum-v1", seed=0, nb_rollout_steps=50, nb_train_steps=10, batch_size=32,
                 param_noise=AdaptiveParamNoiseSpec(0.1, 0.1), normalize_observations=True, normalize_returns=True,
                 enable_popart=True, return_range=(-100.0, np.inf), policy_kwargs=SMALL,
                 action_noise=OrnsteinUhlenbeckActionNoise(np.zeros(1), 0.2 * np.ones(1)))
    model.learn(300)
    obs = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    expected, _ = model.predict(obs)
    model.save(tmp_path / "ddpg")
    loaded = DDPG.load(tmp_path / "ddpg.zip")
    np.testing.assert_array_equal(loaded.predict(obs)[0], expected)
    original, restored = model.get_parameters(), loaded.get_parameters()
    assert list(original) == list(restored)
    for name in original:
        np.testing.assert_array_equal(original[name], restored[name], err_msg=name)
    assert loaded.param_noise.current_stddev == model.param_noise.current_stddev
    assert isinstance(loaded.action_noise, OrnsteinUhlenbeckActionNoise)
    assert loaded.return_range == (-100.0, np.inf) and loaded.observation_range == (-5.0, 5.0)
    assert loaded.enable_popart and loaded.normalize_returns and loaded.num_timesteps == 300
    # SB2's data keys are in the file
    from sbtf.common import save_util
    data, _, _ = save_util.load_from_zip_bytes(save_util.read_file_bytes(str(tmp_path / "ddpg.zip")))
    for key in ("nb_eval_steps", "param_noise_adaption_interval", "nb_train_steps", "nb_rollout_steps", "param_noise",
                "action_noise", "gamma", "tau", "normalize_returns", "enable_popart", "normalize_observations",
                "batch_size", "observation_range", "return_range", "critic_l2_reg", "actor_lr", "critic_lr",
                "clip_norm", "reward_scale", "memory_limit", "buffer_size", "random_exploration", "policy",
                "observation_space", "action_space", "policy_kwargs"):
        assert key in data, key
    # training goes on after loading with an env
    loaded.set_env(gym.make("Pendulum-v1"))
    loaded.learn(100)


# ------------------------------------------------------------------------------------------ errors
def test_clear_errors():
    with pytest.raises(NotImplementedError, match="DDPG.*action space"):
        DDPG("MlpPolicy", "CartPole-v1")
    with pytest.raises(ValueError, match="one environment per process.*mpirun -np 2"):
        DDPG("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2))
    with pytest.warns(UserWarning, match="enable_popart=True has no effect without normalize_returns=True"):
        DDPG("MlpPolicy", "Pendulum-v1", enable_popart=True, policy_kwargs=SMALL)
    with pytest.raises(ValueError, match="normalize_observations=True needs Box or MultiBinary"):
        DDPG("MlpPolicy", DiscreteObsEnv(), normalize_observations=True)
    discrete = DDPG("MlpPolicy", DiscreteObsEnv(), policy_kwargs=SMALL)  # one-hot observations are fine
    assert discrete.predict(3)[0].shape == (1,)
    model = DDPG("MlpPolicy", "Pendulum-v1", policy_kwargs=SMALL)
    with pytest.raises(ValueError, match="Unexpected observation shape"):
        model.predict(np.zeros(5))
    with pytest.raises(ValueError, match="does not have action probabilities"):
        model.action_probability(np.zeros(3), actions=np.zeros(1))
    with pytest.warns(UserWarning, match="meaningless"):
        assert model.action_probability(np.zeros(3)) is None


# ------------------------------------------------------------------------------------------ mpirun -np 2
def _mpi_missing() -> str:
    try:
        import mpi4py  # noqa: F401  pylint: disable=import-outside-toplevel
    except ImportError:
        return "mpi4py is not installed (install the `mpi` extra: pip install 'sbtf[mpi]')"
    if not MPIRUN.exists():
        return f"no mpirun next to {sys.executable} (install the `mpi` extra, whose mpich wheel provides it)"
    return ""


requires_mpirun = pytest.mark.skipif(bool(_mpi_missing()), reason=_mpi_missing() or "mpirun available")
CHILD_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "OMP_NUM_THREADS": "1",
             "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

SYNC_SCRIPT = """
import os, sys
import gymnasium as gym
import numpy as np
from sbtf import DDPG
from sbtf.ddpg import AdaptiveParamNoiseSpec, NormalActionNoise
from sbtf.common.mpi_util import get_comm

comm = get_comm()
rank = comm.Get_rank()
model = DDPG("MlpPolicy", gym.make("Pendulum-v1"), seed=3, nb_rollout_steps=50, nb_train_steps=20, batch_size=32,
             normalize_observations=True, normalize_returns=True, enable_popart=True,
             param_noise=AdaptiveParamNoiseSpec(0.1, 0.1), param_noise_adaption_interval=10,
             action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)), policy_kwargs=dict(layers=[16, 16]))
first_obs = model.env.reset()
model.learn(300)
params = model.get_parameters()
# the networks, their targets and the statistics must agree; the parameter-noise copies are per-rank exploration
flat = np.concatenate([value.ravel().astype(np.float64) for name, value in params.items()
                       if not name.startswith("noise")])
all_params = comm.allgather(flat)
all_obs = comm.allgather(first_obs)
all_std = comm.allgather(model.param_noise.current_stddev)
model.check_parameters_synced()
synced = all(np.array_equal(all_params[0], p) for p in all_params) and len(set(all_std)) == 1
different_data = not np.array_equal(all_obs[0], all_obs[1])
model.save(os.path.join(sys.argv[1], f"ddpg_rank{rank}"))
print(f"RESULT rank={rank} synced={synced} different_data={different_data} num_timesteps={model.num_timesteps} "
      f"obs_count={float(params['input/obs_rms/count:0']):.2f} trained={model.actor_optimizer.step}", flush=True)
"""

FAIL_SCRIPT = """
import gymnasium as gym
from sbtf import DDPG
from sbtf.common.mpi_util import get_rank


class Exploding(gym.Wrapper):
    def __init__(self, env):
        super().__init__(env)
        self.n_steps = 0

    def step(self, action):
        self.n_steps += 1
        if get_rank() == 1 and self.n_steps > 120:
            raise RuntimeError("simulated failure on rank 1")
        return self.env.step(action)


model = DDPG("MlpPolicy", Exploding(gym.make("Pendulum-v1")), seed=0, nb_rollout_steps=50, nb_train_steps=5,
             batch_size=32, policy_kwargs=dict(layers=[8]))
model.learn(10 ** 7)
print("UNREACHABLE", flush=True)
"""


def _mpirun(script: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(MPIRUN), "-np", "2", sys.executable, str(script), *args], capture_output=True,
                          text=True, timeout=timeout, env=CHILD_ENV, cwd=str(script.parent))


@pytest.mark.mpi
@requires_mpirun
def test_mpirun_ddpg_keeps_ranks_in_sync(tmp_path):
    script = tmp_path / "ddpg_sync.py"
    script.write_text(textwrap.dedent(SYNC_SCRIPT))
    result = _mpirun(script, str(tmp_path), timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    lines = sorted(line for line in result.stdout.splitlines() if line.startswith("RESULT"))
    # identical networks and statistics, different experience (seed + 10000 * rank), each rank ran its 300 steps
    # (SB2: total_timesteps per rank), the observation statistics count both ranks' 300 steps, and 5 cycles of
    # 20 gradient steps (the first cycle's buffer of 50 transitions already holds a batch of 32)
    assert lines == [f"RESULT rank={rank} synced=True different_data=True num_timesteps=300 obs_count=600.01 "
                     f"trained=120" for rank in (0, 1)], result.stdout + result.stderr[-3000:]
    assert (tmp_path / "ddpg_rank0.zip").exists()
    assert not (tmp_path / "ddpg_rank1.zip").exists()  # only rank 0 saves
    loaded = DDPG.load(tmp_path / "ddpg_rank0.zip")
    assert loaded.predict(np.zeros(3))[0].shape == (1,)


@pytest.mark.mpi
@requires_mpirun
def test_mpirun_failing_rank_aborts_the_job(tmp_path):
    script = tmp_path / "ddpg_fail.py"
    script.write_text(textwrap.dedent(FAIL_SCRIPT))
    start = time.time()
    result = _mpirun(script, timeout=240)  # a hang would raise subprocess.TimeoutExpired
    assert result.returncode != 0
    assert "UNREACHABLE" not in result.stdout
    assert "[sbtf] MPI rank 1 of 2 failed in DDPG.learn(): RuntimeError: simulated failure on rank 1" in result.stderr
    assert time.time() - start < 240
