"""ACER: Retrace, trust region, replay buffer, learning (feed-forward and LSTM), save/load, errors, retracing."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf import ACER
from sbtf.acer.acer_simple import policy_objective_grad, q_retrace, strip
from sbtf.acer.buffer import Buffer
from sbtf.common.identity_env import IdentityEnv, IdentityEnvBox, IdentityEnvMultiDiscrete
from sbtf.common.vec_env import DummyVecEnv

from conftest import evaluate

#: the train step's named inputs, in the order the tests build them
TRAIN_INPUTS = ("obs", "actions", "rewards", "dones", "mus", "states", "masks", "lr")

SB2_CARTPOLE_PARAMS = ["model/pi_fc0/w:0", "model/pi_fc0/b:0", "model/vf_fc0/w:0", "model/vf_fc0/b:0",
                       "model/pi_fc1/w:0", "model/pi_fc1/b:0", "model/vf_fc1/w:0", "model/vf_fc1/b:0",
                       "model/vf/w:0", "model/vf/b:0", "model/pi/w:0", "model/pi/b:0", "model/q/w:0", "model/q/b:0"]


def cartpole_vec(n_envs: int = 8) -> DummyVecEnv:
    return DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(n_envs)])


def quick_acer(*args, **kwargs) -> ACER:
    """ACER without XLA compilation of the train step: the same maths, seconds less to build in short tests
    (the XLA path is exercised by the learning tests)."""
    model = ACER(*args, _init_setup_model=False, **kwargs)
    model._jit_compile = False
    model.setup_model()
    return model


@pytest.fixture(scope="module")
def small_model():
    """A briefly trained feed-forward ACER (shared by the tests that only need a working model)."""
    model = quick_acer("MlpPolicy", cartpole_vec(2), n_steps=5, replay_start=20, buffer_size=200, seed=0)
    model.learn(400)
    return model


# ---------------------------------------------------------------------------------------------- maths
def test_retrace_targets_match_hand_computation():
    gamma = 0.9
    # env 0: three steps, no done; env 1: done after the second step
    rewards = np.array([1.0, 0.0, 2.0, 1.0, 1.0, 5.0], np.float32)
    dones = np.array([0, 0, 0, 0, 1, 0], np.float32)
    q_i = np.array([0.5, 0.2, 1.0, 0.3, 0.4, 2.0], np.float32)
    values = np.array([0.4, 0.1, 0.8, 3.0,   # env 0: V(x0..x2), V(x3) bootstraps
                       0.2, 0.6, 1.5, 4.0], np.float32)  # env 1
    rho_i = np.array([2.0, 0.5, 1.0, 0.25, 3.0, 0.8], np.float32)
    out = q_retrace(rewards, dones, q_i, values, rho_i, n_envs=2, n_steps=3, gamma=gamma).numpy()
    # env 0, backwards from Q_ret = V(x3) = 3.0
    t2 = 2.0 + 0.9 * 3.0                          # 4.7
    c2 = min(1, 1.0) * (t2 - 1.0) + 0.8          # 4.5
    t1 = 0.0 + 0.9 * c2                           # 4.05
    c1 = min(1, 0.5) * (t1 - 0.2) + 0.1          # 2.025
    t0 = 1.0 + 0.9 * c1                           # 2.8225
    # env 1, backwards from Q_ret = V(x3) = 4.0
    u2 = 5.0 + 0.9 * 4.0                          # 8.6
    d2 = min(1, 0.8) * (u2 - 2.0) + 1.5          # 6.78
    u1 = 1.0 + 0.9 * d2 * (1 - 1)                 # done: 1.0
    d1 = min(1, 3.0) * (u1 - 0.4) + 0.6          # 1.2
    u0 = 1.0 + 0.9 * d1                           # 2.08
    np.testing.assert_allclose(out, [t0, t1, t2, u0, u1, u2], rtol=1e-6)


def test_strip_removes_the_last_step_of_each_env():
    x = tf.reshape(tf.range(2 * 4 * 3, dtype=tf.float32), (8, 3))
    out = strip(x, n_envs=2, n_steps=3).numpy()
    np.testing.assert_array_equal(out, np.delete(x.numpy(), [3, 7], axis=0))
    np.testing.assert_array_equal(strip(tf.range(8), 2, 3, flat=True).numpy(), [0, 1, 2, 4, 5, 6])


def test_closed_form_policy_gradient_matches_autodiff():
    rng = np.random.RandomState(0)
    f = tf.constant(tf.nn.softmax(rng.randn(6, 3).astype(np.float32)))
    actions = tf.constant(rng.randint(0, 3, 6))
    coef_f = tf.constant(rng.randn(6).astype(np.float32))
    coef_bc = tf.constant(rng.rand(6, 3).astype(np.float32))
    ent_coef, eps = 0.3, 1e-6
    with tf.GradientTape() as tape:
        tape.watch(f)
        log_f_i = tf.math.log(tf.gather(f, actions, axis=1, batch_dims=1) + eps)
        entropy = -tf.reduce_sum(f * tf.math.log(f + eps), axis=1)
        objective = tf.reduce_sum(log_f_i * coef_f) + tf.reduce_sum(tf.math.log(f + eps) * coef_bc) \
            + ent_coef * tf.reduce_sum(entropy)
    np.testing.assert_allclose(policy_objective_grad(f, actions, coef_f, coef_bc, ent_coef, eps).numpy(),
                               tape.gradient(objective, f).numpy(), rtol=1e-5, atol=1e-5)


def test_fast_and_diagnostic_train_steps_make_the_same_update(small_model):
    model = small_model
    rng = np.random.RandomState(1)
    n_train, n_batch = model.n_envs * (model.n_steps + 1), model.n_batch
    args = [rng.randn(n_train, 4).astype(np.float32), rng.randint(0, 2, n_batch).astype(np.int64),
            rng.rand(n_batch).astype(np.float32), np.zeros(n_batch, np.float32),
            np.full((n_batch, 2), 0.5, np.float32), np.zeros((1, 1), np.float32), np.zeros(n_train, np.float32),
            np.float32(1e-3)]
    params = model.get_parameters()
    slots = [m.numpy() for m in model.optimizer.ms]
    shadows = [s.numpy() for _, s in model._polyak_pairs]

    def restore():
        model.load_parameters(params)
        for m, v in zip(model.optimizer.ms, slots):
            m.assign(v)
        for (_, s), v in zip(model._polyak_pairs, shadows):
            s.assign(v)

    fast = list(model._train_step(**dict(zip(TRAIN_INPUTS, args))).values())
    after_fast = model.get_parameters()
    restore()
    diag = list(model._make_train_step(diagnostics=True)(**dict(zip(TRAIN_INPUTS, args))).values())
    after_diag = model.get_parameters()
    restore()
    assert len(diag) == len(fast) + 2
    names = model._stat_names(True)
    fast_names = model._stat_names(False)
    for name, value in zip(fast_names, fast):
        np.testing.assert_allclose(value, diag[names.index(name)], rtol=1e-5, atol=1e-6, err_msg=name)
    changed = False
    for name in params:
        np.testing.assert_allclose(after_fast[name], after_diag[name], rtol=1e-5, atol=1e-7, err_msg=name)
        changed |= not np.allclose(after_fast[name], params[name])
    assert changed


# ---------------------------------------------------------------------------------------------- buffer
def test_buffer_is_frame_based_and_samples_one_slot_per_env():
    env = DummyVecEnv([lambda: IdentityEnv(3) for _ in range(3)])
    buffer = Buffer(env, n_steps=4, size=12)  # 12 frames per env = 3 slots
    assert buffer.size == 3 and not buffer.can_sample()
    for k in range(4):
        obs = np.full((3, 5), k, np.int64) + 10 * np.arange(3)[:, None]
        buffer.put(obs, np.full((3, 4), k), np.full((3, 4), float(k)), np.full((3, 4, 3), k / 10.0),
                   np.zeros((3, 4), bool), np.zeros((3, 5), bool), np.full((3, 2), float(k)))
    assert buffer.num_in_buffer == 3 and buffer.next_idx == 1  # slot 0 overwritten by rollout 3
    assert buffer.has_atleast(12) and not buffer.has_atleast(16)
    np.random.seed(0)
    for _ in range(5):
        obs, actions, rewards, mus, dones, masks, states = buffer.get()
        assert obs.shape == (3, 5) and actions.shape == (3, 4) and mus.shape == (3, 4, 3) and masks.shape == (3, 5)
        slot = actions[:, 0]
        assert set(slot) <= {1, 2, 3}
        # env i's row comes from env i of the sampled slot
        np.testing.assert_array_equal(obs[:, 0], slot + 10 * np.arange(3))
        np.testing.assert_array_equal(states[:, 0], slot.astype(np.float32))


# ---------------------------------------------------------------------------------------------- learning
def test_acer_learns_cartpole_fast():
    model = ACER("MlpPolicy", cartpole_vec(), seed=1, ent_coef=0.0)
    model.learn(60000)
    assert evaluate(model, "CartPole-v1", n_episodes=5) >= 100


@pytest.mark.slow
def test_acer_reaches_zoo_level_on_cartpole():
    model = ACER("MlpPolicy", cartpole_vec(), seed=0, ent_coef=0.0)
    model.learn(200000)
    assert evaluate(model, "CartPole-v1", n_episodes=10) >= 475


def _identity_score(model, n_envs: int, n_steps: int = 150) -> float:
    env = DummyVecEnv([lambda: IdentityEnv(4, ep_length=50) for _ in range(n_envs)])
    env.seed(123)
    obs = env.reset()
    state, done, total = None, np.zeros(n_envs, bool), 0.0
    for _ in range(n_steps):
        action, state = model.predict(obs, state=state, mask=done, deterministic=True)
        obs, reward, done, _ = env.step(action)
        total += float(np.mean(reward))
    return total / n_steps


def test_acer_lstm_runs_and_learns_a_little(tmp_path):
    env = DummyVecEnv([lambda: IdentityEnv(4, ep_length=50) for _ in range(4)])
    # the LSTM policy shares all its layers between pi and Q: a short horizon keeps the Q targets small
    model = ACER("MlpLstmPolicy", env, n_steps=10, gamma=0.5, ent_coef=0.0, learning_rate=3e-3,
                 lr_schedule="constant", replay_start=100, buffer_size=2000, seed=0, policy_kwargs={"n_lstm": 32})
    before = _identity_score(model, 4)
    model.learn(6000)
    after = _identity_score(model, 4)
    assert after > 0.5 and after > before + 0.15, (before, after)  # chance level is 1/4
    assert model._buffer.states is not None and model._buffer.states.shape[-2:] == (4, 64)
    # recurrent save/load: identical actions and states
    model.save(tmp_path / "acer_lstm.zip")
    loaded = ACER.load(tmp_path / "acer_lstm.zip", env=env)
    obs = env.reset()
    state = np.random.RandomState(0).randn(4, 64).astype(np.float32)
    a1, s1 = model.predict(obs, state=state, mask=np.zeros(4), deterministic=True)
    a2, s2 = loaded.predict(obs, state=state, mask=np.zeros(4), deterministic=True)
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_allclose(s1, s2, atol=1e-6)


def test_trust_region_off_and_no_replay_run():
    env = DummyVecEnv([lambda: IdentityEnv(3, ep_length=20) for _ in range(2)])
    model = quick_acer("MlpPolicy", env, n_steps=5, trust_region=False, replay_ratio=0, seed=0)
    model.learn(100)
    assert model._buffer is None
    assert model._stat_names(False) == list(model.names_ops) and "avg_norm_adj" not in model.names_ops


# ---------------------------------------------------------------------------------------------- save / load
def test_save_load_identical_predictions_and_no_polyak_saved(tmp_path, small_model):
    model = small_model
    assert list(model.get_parameters()) == SB2_CARTPOLE_PARAMS
    model.save(tmp_path / "acer.zip")
    loaded = ACER.load(tmp_path / "acer.zip", _jit_compile=False)
    assert list(loaded.get_parameters()) == SB2_CARTPOLE_PARAMS
    obs = np.random.RandomState(0).randn(10, 4).astype(np.float32)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    np.testing.assert_allclose(model.action_probability(obs), loaded.action_probability(obs), rtol=1e-6)
    # the averaged policy is rebuilt from the loaded parameters
    for var, shadow in loaded._polyak_pairs:
        np.testing.assert_array_equal(var.numpy(), shadow.numpy())
    for name in ("q_coef", "replay_ratio", "replay_start", "rprop_alpha", "rprop_epsilon", "buffer_size",
                 "correction_term", "trust_region", "alpha", "delta"):
        assert getattr(loaded, name) == getattr(model, name)
    # a loaded model keeps training with the same number of envs
    loaded.set_env(cartpole_vec(2))
    loaded.learn(100)
    with pytest.raises(ValueError, match="same number of environments"):
        loaded.set_env(cartpole_vec(3))


def test_polyak_average_follows_the_parameters(small_model):
    model = small_model
    rng = np.random.RandomState(2)
    n_train, n_batch = model.n_envs * (model.n_steps + 1), model.n_batch
    args = [rng.randn(n_train, 4).astype(np.float32), rng.randint(0, 2, n_batch).astype(np.int64),
            rng.rand(n_batch).astype(np.float32), np.zeros(n_batch, np.float32),
            np.full((n_batch, 2), 0.5, np.float32), np.zeros((1, 1), np.float32), np.zeros(n_train, np.float32),
            np.float32(1e-3)]
    before = [s.numpy() for _, s in model._polyak_pairs]
    model._train_step(**dict(zip(TRAIN_INPUTS, args)))
    for (var, shadow), s_old in zip(model._polyak_pairs, before):
        # tf.train.ExponentialMovingAverage(alpha) applied after the gradient step
        np.testing.assert_allclose(shadow.numpy(), model.alpha * s_old + (1 - model.alpha) * var.numpy(),
                                   rtol=1e-5, atol=1e-7)
    assert any(not np.allclose(v.numpy(), s.numpy()) for v, s in model._polyak_pairs)


# ---------------------------------------------------------------------------------------------- errors / misc
@pytest.mark.parametrize("env_cls", [IdentityEnvBox, IdentityEnvMultiDiscrete])
def test_rejects_non_discrete_action_spaces(env_cls):
    env = DummyVecEnv([lambda: env_cls()])
    with pytest.raises(NotImplementedError, match=r"ACER.*(Box|MultiDiscrete)"):
        ACER("MlpPolicy", env)


def test_num_procs_is_deprecated():
    env = DummyVecEnv([lambda: IdentityEnv(2)])
    with pytest.warns(DeprecationWarning, match="num_procs"):
        model = ACER("MlpPolicy", env, num_procs=1, _init_setup_model=False)
    assert model.n_cpu_tf_sess == 1


def test_no_retracing_after_warmup(small_model):
    model = small_model
    model.learn(200, reset_num_timesteps=False)  # on-policy and replay steps
    traces = model._train_step.n_traces
    model.learn(600, reset_num_timesteps=False)
    assert model._train_step.n_traces == traces == 1


def test_time_limit_truncation_bootstraps_with_acer_value():
    env = DummyVecEnv([lambda: IdentityEnv(2, ep_length=3) for _ in range(2)])
    model = quick_acer("MlpPolicy", env, n_steps=4, gamma=0.9, seed=0)
    captured = []
    original = model.acer_value

    def spy(obs, state=None, mask=None):
        values = original(obs, state, mask)
        captured.append((np.array(obs), values))
        return values

    model.acer_value = spy
    runner = model.runner
    rollout = runner.run()
    rewards, dones, true_rewards = rollout.rewards, rollout.dones, rollout.true_rewards
    # both envs are cut after 3 steps (step index 2): the reward there is r + gamma * V(terminal obs)
    assert dones[:, 2].all() and not dones[:, :2].any()
    assert len(captured) == 1
    np.testing.assert_allclose(rewards[:, 2], true_rewards[:, 2] + 0.9 * captured[0][1], rtol=1e-6)
    np.testing.assert_array_equal(rewards[:, [0, 1, 3]], true_rewards[:, [0, 1, 3]])


def test_pretrain_clones_an_expert_and_resets_the_average(tmp_path):
    from sbtf.gail import ExpertDataset, generate_expert_traj

    path = str(tmp_path / "expert_cartpole")
    generate_expert_traj(lambda obs: int(obs[2] + 0.5 * obs[3] > 0), path, env=gym.make("CartPole-v1"),
                         n_episodes=6)
    dataset = ExpertDataset(expert_path=path + ".npz", batch_size=128, verbose=0)
    model = quick_acer("MlpPolicy", "CartPole-v1", seed=0)
    model.pretrain(dataset, n_epochs=60, learning_rate=1e-3)
    assert evaluate(model, "CartPole-v1", n_episodes=3) >= 300
    for var, shadow in model._polyak_pairs:
        np.testing.assert_array_equal(var.numpy(), shadow.numpy())


def test_callback_can_stop_training(small_model):
    model = small_model
    start = model.num_timesteps
    calls = []

    def stop_after_three(_locals, _globals):
        calls.append(1)
        return len(calls) < 3

    model.learn(1000, callback=stop_after_three, reset_num_timesteps=False)
    assert len(calls) == 3 and model.num_timesteps - start == 3 * model.n_envs
