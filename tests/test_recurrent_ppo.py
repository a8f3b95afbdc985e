"""RecurrentPPO (sbtf.contrib, sb3-contrib's API): state handling, sequence training, save/load, learning."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf import PPO2, RecurrentPPO
from sbtf.common.callbacks import BaseCallback
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.vec_env import DummyVecEnv

TINY = dict(lstm_hidden_size=8, net_arch=dict(pi=[16], vf=[16]))


class NoVelocityCartPole(gym.ObservationWrapper):
    """CartPole-v1 with the velocities hidden: only the cart position and the pole angle are observed."""

    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        low, high = self.env.observation_space.low, self.env.observation_space.high
        self.observation_space = gym.spaces.Box(low[[0, 2]], high[[0, 2]], dtype=np.float32)

    def observation(self, obs):
        return obs[[0, 2]].astype(np.float32)


class _Continue(BaseCallback):
    def _on_step(self) -> bool:
        return True


def _model(env_id="CartPole-v1", n_envs=2, **kwargs):
    env = DummyVecEnv([lambda: gym.make(env_id)] * n_envs)
    kwargs.setdefault("policy_kwargs", TINY)
    return RecurrentPPO("MlpLstmPolicy", env, n_steps=16, batch_size=16, n_epochs=2, seed=0, **kwargs)


def test_defaults_and_names():
    import inspect

    from sbtf.algorithms import ALGORITHMS, CONTRIB_ALGORITHMS, SB2_ALGORITHMS
    from sbtf.contrib import RecurrentPPO as ContribRecurrentPPO

    assert ContribRecurrentPPO is RecurrentPPO
    assert "ppo_lstm" in CONTRIB_ALGORITHMS
    assert "RecurrentPPO" not in ALGORITHMS and "RecurrentPPO" not in SB2_ALGORITHMS
    defaults = {k: v.default for k, v in inspect.signature(RecurrentPPO).parameters.items()}
    assert (defaults["n_steps"], defaults["batch_size"], defaults["n_epochs"], defaults["learning_rate"]) == \
        (128, 128, 10, 3e-4)
    assert (defaults["gae_lambda"], defaults["clip_range"], defaults["ent_coef"], defaults["max_grad_norm"]) == \
        (0.95, 0.2, 0.0, 0.5)
    model = RecurrentPPO("MlpLstmPolicy", "CartPole-v1")
    policy = model.policy_tf
    assert (policy.lstm_hidden_size, policy.n_lstm_layers, policy.shared_lstm, policy.enable_critic_lstm) == \
        (256, 1, False, True)
    names = list(model.get_parameters()["policy"])
    assert "model/lstm_actor/l0/weight_ih:0" in names and "model/lstm_critic/l0/bias_hh:0" in names
    assert policy.acts_in_numpy


def test_lstm_options():
    with pytest.raises(ValueError, match="shared LSTM"):
        _model(policy_kwargs=dict(TINY, shared_lstm=True))
    shared = _model(policy_kwargs=dict(TINY, shared_lstm=True, enable_critic_lstm=False, n_lstm_layers=2))
    assert not any("lstm_critic" in name for name in shared.get_parameters()["policy"])
    linear = _model(policy_kwargs=dict(TINY, enable_critic_lstm=False))
    assert "model/critic/kernel:0" in linear.get_parameters()["policy"]
    shared.learn(32)  # the critic reads the actor's LSTM output with the gradient stopped
    for model in (shared, linear):
        _, state = model.predict(np.zeros((3, 4), np.float32))
        layers = model.policy_tf.n_lstm_layers
        assert state[0].shape == state[1].shape == (layers, 3, 8)


def test_sequence_training_recomputes_the_rollout():
    """The train step's sequence unrolling (from the stored states, reset at episode starts) equals acting."""
    model = _model(n_envs=3)
    callback = _Continue()
    callback.init_callback(model)
    batch = model.runner.run(callback)
    assert batch.masks.sum() >= 3  # episode starts inside the rollout
    seq_len = 8
    n_seq = 3 * 16 // seq_len
    flat, values = model.policy_tf.evaluate_sequences(
        tf.constant(batch.observations.reshape(n_seq, seq_len, -1)), tf.constant(batch.states[::seq_len]),
        tf.constant(batch.masks.reshape(n_seq, seq_len).astype(np.float32)))
    neglogp = model.policy_tf.pdtype.np_neglogp(flat.numpy(), batch.actions)
    np.testing.assert_allclose(neglogp, batch.neg_log_probs, atol=1e-5)
    np.testing.assert_allclose(values.numpy(), batch.values, atol=1e-5)


def test_episode_start_resets_the_state():
    model = _model()
    obs = np.random.RandomState(0).randn(2, 4).astype(np.float32)
    _, state = model.predict(obs, deterministic=True)
    for _ in range(3):
        _, state = model.predict(obs, state=state, deterministic=True)
    assert np.abs(state[0]).max() > 0
    _, from_zero = model.predict(obs, state=None, episode_start=np.array([1, 1]), deterministic=True)
    _, reset = model.predict(obs, state=state, episode_start=np.array([1, 0]), deterministic=True)
    _, kept = model.predict(obs, state=state, episode_start=np.array([0, 0]), deterministic=True)
    np.testing.assert_array_equal(reset[0][:, 0], from_zero[0][:, 0])  # env 0 started over
    np.testing.assert_array_equal(reset[1][:, 1], kept[1][:, 1])  # env 1 kept its memory
    assert np.abs(kept[0][:, 0] - from_zero[0][:, 0]).max() > 1e-6
    with pytest.raises(ValueError, match="n_lstm_layers, n_envs"):
        model.predict(obs, state=(state[0][:, :1], state[1][:, :1]))


def test_save_load_identical_predictions_with_state(tmp_path):
    model = _model()
    model.learn(64)
    assert model._train_step.n_traces == 1
    model.learn(64, reset_num_timesteps=False)
    assert model._train_step.n_traces == 1  # no retracing after warm-up
    path = tmp_path / "rppo.zip"
    model.save(path)
    loaded = RecurrentPPO.load(path)
    obs = np.random.RandomState(1).randn(20, 2, 4).astype(np.float32)
    state_a = state_b = None
    for t in range(20):
        start = np.array([t % 7 == 0, t % 5 == 0])
        action_a, state_a = model.predict(obs[t], state=state_a, episode_start=start, deterministic=True)
        action_b, state_b = loaded.predict(obs[t], state=state_b, episode_start=start, deterministic=True)
        np.testing.assert_array_equal(action_a, action_b)
        np.testing.assert_array_equal(state_a[0], state_b[0])
        np.testing.assert_array_equal(state_a[1], state_b[1])
    for name, value in model.get_parameters()["policy"].items():
        np.testing.assert_array_equal(value, loaded.get_parameters()["policy"][name])


def test_box_actions_and_dict_observations():
    from sbtf.common.multi_input_envs import SimpleMultiObsEnv

    box = _model("Pendulum-v1")
    assert "model/action_dist/log_std:0" in box.get_parameters()["policy"]
    box.learn(64)
    action, _ = box.predict(np.zeros(3, np.float32))
    assert action.shape == (1,) and -2 <= action[0] <= 2
    multi = RecurrentPPO("MultiInputLstmPolicy", SimpleMultiObsEnv(random_start=False), n_steps=4, batch_size=4,
                         n_epochs=1, seed=0, policy_kwargs=dict(TINY, features_extractor_kwargs=dict(cnn_output_dim=8)))
    multi.learn(8)
    obs, _ = SimpleMultiObsEnv().reset()
    action, state = multi.predict(obs)
    assert np.shape(action) == () and state[0].shape == (1, 1, 8)


def _partially_observed(budget: int, learning_rate: float, seed: int = 0):
    """RecurrentPPO (rl-zoo's CartPoleNoVel-v1 hyperparameters, smaller LSTM) and its mean evaluation reward."""
    env = DummyVecEnv([NoVelocityCartPole] * 8)
    model = RecurrentPPO("MlpLstmPolicy", env, n_steps=32, batch_size=256, n_epochs=10, learning_rate=learning_rate,
                         gae_lambda=0.98, gamma=0.999, seed=seed,
                         policy_kwargs=dict(lstm_hidden_size=32, net_arch=dict(pi=[64], vf=[64]), ortho_init=False,
                                            activation_fn=tf.nn.relu))
    model.learn(budget)
    reward, _ = evaluate_policy(model, NoVelocityCartPole(), n_eval_episodes=10, deterministic=True)
    return reward


def test_learns_partially_observed_cartpole():
    # random play scores about 22; a feed-forward policy cannot infer the velocities
    assert _partially_observed(20_000, learning_rate=3e-3) > 60


@pytest.mark.slow
def test_beats_feed_forward_ppo2_on_partially_observed_cartpole():
    budget = 40_000
    recurrent = _partially_observed(budget, learning_rate=1e-3)
    feed_forward = PPO2("MlpPolicy", DummyVecEnv([NoVelocityCartPole] * 8), n_steps=32, nminibatches=1,
                        noptepochs=10, learning_rate=1e-3, lam=0.98, gamma=0.999, ent_coef=0.0, seed=0,
                        policy_kwargs=dict(net_arch=[64, 64]))
    feed_forward.learn(budget)
    ff_reward, _ = evaluate_policy(feed_forward, NoVelocityCartPole(), n_eval_episodes=10, deterministic=True)
    assert recurrent > 150 and recurrent > ff_reward + 30, (recurrent, ff_reward)


def test_export_takes_and_returns_the_state(tmp_path):
    pytest.importorskip("sbtf_converters")
    model = _model()
    model.learn(32)
    path = model.export(str(tmp_path / "saved"), format="savedmodel")
    serve = tf.saved_model.load(path).signatures["serving_default"]
    policy = model.policy_tf
    rng = np.random.RandomState(2)
    rows = np.zeros((2, policy.state_size), np.float32)
    sb3_state = None
    for t in range(6):
        obs = rng.randn(2, 4).astype(np.float32)
        start = np.array([t == 0, t in (0, 3)], np.float32)
        out = serve(observation=tf.constant(obs), state=tf.constant(rows), mask=tf.constant(start))
        action, sb3_state = model.predict(obs, state=sb3_state, episode_start=start, deterministic=True)
        _, _, rows, _ = policy.step(obs, rows, start, deterministic=True)
        np.testing.assert_array_equal(out["action"].numpy(), action)
        np.testing.assert_allclose(out["state"].numpy(), rows, atol=1e-5)
        np.testing.assert_allclose(policy.to_sb3_state(out["state"].numpy())[0], sb3_state[0], atol=1e-5)


# ------------------------------------------------------------------------------------------------ sb3-contrib's options
def test_lstm_kwargs_map_to_the_lstm_or_are_refused():
    no_bias = _model(policy_kwargs=dict(TINY, lstm_kwargs=dict(bias=False, dropout=0.0, batch_first=False,
                                                               device="cpu", dtype=tf.float32)))
    names = list(no_bias.get_parameters()["policy"])
    assert "model/lstm_actor/l0/weight_ih:0" in names and not any("bias_ih" in n or "bias_hh" in n for n in names)
    no_bias.learn(32)
    _, state = no_bias.predict(np.zeros((2, 4), np.float32))
    assert state[0].shape == (1, 2, 8)
    with pytest.raises(ValueError, match="dropout=0.2 is not supported"):
        _model(policy_kwargs=dict(TINY, lstm_kwargs=dict(dropout=0.2)))
    with pytest.raises(ValueError, match="bidirectional=True is not supported"):
        _model(policy_kwargs=dict(TINY, lstm_kwargs=dict(bidirectional=True)))
    with pytest.raises(ValueError, match="proj_size=4 is not supported"):
        _model(policy_kwargs=dict(TINY, lstm_kwargs=dict(proj_size=4)))
    with pytest.raises(ValueError, match="dtype.*float32"):
        _model(policy_kwargs=dict(TINY, lstm_kwargs=dict(dtype="float64")))
    with pytest.raises(ValueError, match="unknown lstm_kwargs 'hidden'"):
        _model(policy_kwargs=dict(TINY, lstm_kwargs=dict(hidden=3)))


def test_no_bias_lstm_recomputes_the_rollout():
    """Acting (NumPy) and the train step's unrolling (TF) agree for a bias-free LSTM too."""
    model = _model(policy_kwargs=dict(TINY, lstm_kwargs=dict(bias=False)))
    policy = model.policy_tf
    obs = np.random.default_rng(0).normal(size=(2, 5, 4)).astype(np.float32)
    starts = np.zeros((2, 5), np.float32)
    starts[:, 0] = 1
    starts[1, 3] = 1
    state = np.zeros((2, policy.state_size), np.float32)
    flats = []
    for t in range(5):
        flat, _, state = policy._acting("step", obs[:, t], state, starts[:, t])
        flats.append(np.asarray(flat))
    flat_tf, _ = policy.evaluate_sequences(tf.constant(obs), tf.zeros((2, policy.state_size)), tf.constant(starts))
    np.testing.assert_allclose(np.asarray(flat_tf).reshape(2, 5, -1), np.stack(flats, axis=1), atol=1e-5)


@pytest.mark.parametrize("critic", ["lstm", "linear"])
def test_separate_features_extractors(critic, tmp_path):
    kwargs = dict(TINY, share_features_extractor=False, enable_critic_lstm=critic == "lstm")
    model = _model(policy_kwargs=kwargs)
    params = model.get_parameters()["policy"]
    policy = model.policy_tf
    assert policy.pi_features_extractor is not policy.vf_features_extractor
    before = {n: v.copy() for n, v in params.items()}
    model.learn(32)
    assert any(not np.array_equal(before[n], v) for n, v in model.get_parameters()["policy"].items())
    obs = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    actions, state = model.predict(obs, deterministic=True)
    model.save(tmp_path / "sep")
    loaded = RecurrentPPO.load(tmp_path / "sep")
    assert loaded.policy_tf.share_features_extractor is False
    loaded_actions, loaded_state = loaded.predict(obs, deterministic=True)
    np.testing.assert_array_equal(loaded_actions, actions)
    np.testing.assert_array_equal(loaded_state[0], state[0])
    with pytest.raises(ValueError, match="features extractor is not shared, the LSTM cannot be shared"):
        _model(policy_kwargs=dict(TINY, share_features_extractor=False, shared_lstm=True, enable_critic_lstm=False))


def test_separate_cnn_extractors_have_their_own_weights():
    images = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)

    class ImageEnv(gym.Env):
        observation_space = images
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return np.zeros((36, 36, 1), np.uint8), {}

        def step(self, action):
            return np.full((36, 36, 1), 7, np.uint8), 1.0, False, False, {}

    model = RecurrentPPO("CnnLstmPolicy", ImageEnv(), n_steps=4, batch_size=4, n_epochs=1, seed=0,
                         policy_kwargs=dict(TINY, share_features_extractor=False,
                                            features_extractor_kwargs=dict(features_dim=8)))
    names = list(model.get_parameters()["policy"])
    pi = [n for n in names if n.startswith("model/pi_features_extractor/")]
    vf = [n for n in names if n.startswith("model/vf_features_extractor/")]
    assert pi and len(pi) == len(vf)
    model.learn(8)


def test_gsde_trains_resamples_and_reloads(tmp_path):
    with pytest.raises(ValueError, match=r"pass use_sde to RecurrentPPO\(\.\.\., use_sde=True\)"):
        _model("Pendulum-v1", policy_kwargs=dict(TINY, use_sde=True))
    with pytest.raises(ValueError, match="gSDE.*Box action space"):
        _model("CartPole-v1", use_sde=True)
    model = _model("Pendulum-v1", use_sde=True, sde_sample_freq=4,
                   policy_kwargs=dict(TINY, log_std_init=-1.0, full_std=False))
    policy = model.policy_tf
    assert "model/action_net/log_std:0" in model.get_parameters()["policy"]
    assert tuple(policy.action_net.log_std.shape) == (16, 1)  # (pi latent, 1): full_std=False
    before = policy.action_net.log_std.numpy().copy()
    model.learn(32)  # one rollout of 16 steps per env (2 envs), new matrices every 4 steps
    assert policy.sde_noise.n_resets == 16 // 4
    assert not np.array_equal(policy.action_net.log_std.numpy(), before)
    # the exploration noise is latent @ E: fixed E gives the same action for the same latent (no per-step noise)
    obs = np.random.default_rng(2).normal(size=(2, 3)).astype(np.float32)
    policy.reset_noise(2)
    a1 = policy.step(obs, None, None)[0]
    a2 = policy.step(obs, None, None)[0]
    np.testing.assert_array_equal(a1, a2)
    model.save(tmp_path / "sde")
    loaded = RecurrentPPO.load(tmp_path / "sde")
    assert loaded.use_sde and loaded.sde_sample_freq == 4
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


def test_gsde_log_probs_of_the_rollout_equal_the_train_steps():
    """The rollout's negative log-likelihoods (NumPy, gSDE's state-dependent std) are what the train step
    recomputes from the stored sequences: the first ratio is 1."""
    model = _model("Pendulum-v1", use_sde=True, policy_kwargs=dict(TINY))
    policy = model.policy_tf
    obs = np.random.default_rng(3).normal(size=(2, 4, 3)).astype(np.float32)
    starts = np.zeros((2, 4), np.float32)
    starts[:, 0] = 1
    state = np.zeros((2, policy.state_size), np.float32)
    policy.reset_noise(2)
    actions, neglogps = [], []
    for t in range(4):
        action, _, state, neglogp = policy.step(obs[:, t], state, starts[:, t])
        actions.append(action)
        neglogps.append(neglogp)
    flat, _ = policy.evaluate_sequences(tf.constant(obs), tf.zeros((2, policy.state_size)), tf.constant(starts))
    dist = policy.proba_distribution_from_flat(flat)
    recomputed = dist.neglogp(tf.constant(np.stack(actions, axis=1).reshape(8, 1))).numpy()
    np.testing.assert_allclose(recomputed, np.stack(neglogps, axis=1).reshape(8), rtol=1e-4, atol=1e-4)


class _MatrixActionEnv(gym.Env):
    """Observations (4,), actions a Box of shape (2, 2): the reward is minus the distance of the action to the
    observation reshaped (2, 2)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._obs = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        self._t = 0
        return self._obs, {}

    def step(self, action):
        assert np.shape(action) == (2, 2) and self.action_space.contains(np.asarray(action, np.float32))
        reward = -float(np.abs(np.asarray(action).reshape(4) - self._obs).sum())
        self._t += 1
        self._obs = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        return self._obs, reward, False, self._t >= 8, {}


@pytest.mark.parametrize("use_sde", [False, True], ids=["gaussian", "gsde"])
def test_multi_dimensional_box_actions(use_sde, tmp_path):
    env = DummyVecEnv([_MatrixActionEnv] * 2)
    model = RecurrentPPO("MlpLstmPolicy", env, n_steps=8, batch_size=16, n_epochs=1, seed=0, use_sde=use_sde,
                         policy_kwargs=TINY)
    model.learn(32)  # the env asserts every action it gets has the space's shape and bounds
    obs = np.random.default_rng(4).uniform(-1, 1, (3, 4)).astype(np.float32)
    actions, _ = model.predict(obs, deterministic=True)
    assert actions.shape == (3, 2, 2) and np.all(np.abs(actions) <= 1.0)
    single, _ = model.predict(obs[0], deterministic=True)
    assert single.shape == (2, 2)
    np.testing.assert_array_equal(single, actions[0])
    model.save(tmp_path / "box")
    np.testing.assert_array_equal(RecurrentPPO.load(tmp_path / "box").predict(obs, deterministic=True)[0], actions)
    reward, _ = evaluate_policy(model, _MatrixActionEnv(), n_eval_episodes=1)
    assert np.isfinite(reward)
    if not use_sde:  # the exported action has the space's shape too
        serve = tf.saved_model.load(model.export(str(tmp_path / "saved"))).signatures["serving_default"]
        out = serve(observation=tf.constant(obs), state=tf.zeros((3, model.policy_tf.state_size)), mask=tf.zeros((3,)))
        np.testing.assert_allclose(out["action"].numpy(), actions, atol=1e-5)
