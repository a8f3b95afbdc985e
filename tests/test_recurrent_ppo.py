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
    assert "ppo_lstm" in CONTRIB_ALGORITHMS and "RecurrentPPO" not in ALGORITHMS and "RecurrentPPO" not in SB2_ALGORITHMS
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
