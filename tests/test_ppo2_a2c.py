"""PPO2 and A2C: learning, action spaces, recurrent policies, save/load, retracing, errors."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from sbtf import A2C, PPO2
from sbtf.common.identity_env import IdentityEnv, IdentityEnvBox, IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.vec_env import DummyVecEnv

from conftest import evaluate

PPO_ZOO = dict(n_steps=32, nminibatches=1, noptepochs=20, lam=0.8, gamma=0.98, learning_rate=1e-3, ent_coef=0.0)


def cartpole_vec(n_envs: int = 8) -> DummyVecEnv:
    return DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(n_envs)])


def test_ppo2_learns_cartpole_fast():
    model = PPO2("MlpPolicy", cartpole_vec(), seed=1, **PPO_ZOO)
    model.learn(30000)
    assert evaluate(model, "CartPole-v1", n_episodes=5) >= 150


def test_a2c_learns_cartpole_fast():
    model = A2C("MlpPolicy", cartpole_vec(), seed=1, ent_coef=0.0, vf_coef=0.5)
    model.learn(60000)
    assert evaluate(model, "CartPole-v1", n_episodes=5) >= 150


@pytest.mark.slow
def test_ppo2_reaches_zoo_level_on_cartpole():
    model = PPO2("MlpPolicy", cartpole_vec(), seed=0, **PPO_ZOO)
    model.learn(100000)
    assert evaluate(model, "CartPole-v1", n_episodes=10) >= 475


@pytest.mark.slow
def test_a2c_reaches_zoo_level_on_cartpole():
    # rl-baselines-zoo: A2C on CartPole-v1 with 8 envs, ent_coef 0, 5e5 steps; seed 0 reaches 500 after 2e5 (1e5: 272)
    model = A2C("MlpPolicy", cartpole_vec(), seed=0, ent_coef=0.0, vf_coef=0.5)
    model.learn(200000)
    assert evaluate(model, "CartPole-v1", n_episodes=10) >= 475


@pytest.mark.parametrize("seed", [0, 1])
def test_ppo2_gaussian_policy_learns_a_continuous_task(seed):
    """A Box action space: PPO2's diagonal Gaussian learns to copy a continuous observation (reward 1 per step within
    0.1 of it; random play scores about 10 of 100). Measured seeds 0-3: 100 of 100 after 20k steps.
    (Plain-Gaussian PPO2 on Pendulum-v1 does not learn reliably in a test's budget: at 30k steps seeds 0-5 moved the
    return by -187 to +49. Pendulum is learned with gSDE in tests/test_sde.py, as rl-zoo does.)"""
    env = DummyVecEnv([lambda: IdentityEnvBox(eps=0.1) for _ in range(4)])
    model = PPO2("MlpPolicy", env, n_steps=128, nminibatches=4, noptepochs=10, learning_rate=1e-3, gamma=0.0,
                 lam=0.95, ent_coef=0.0, seed=seed)
    before = evaluate_policy(model, IdentityEnvBox(eps=0.1), n_eval_episodes=5)[0]
    model.learn(20000)
    after = evaluate_policy(model, IdentityEnvBox(eps=0.1), n_eval_episodes=5)[0]
    assert before < 50 and after >= 95, (before, after)


@pytest.mark.slow
def test_a2c_improves_on_pendulum():
    """A2C needs normalisation and many samples on Pendulum (the zoo trains it for 2M steps)."""
    from sbtf.common.vec_env import VecNormalize

    def normalized_eval(model, venv):
        venv.training = False
        env = gym.make("Pendulum-v1")
        returns = []
        for episode in range(4):
            obs, _ = env.reset(seed=episode)
            done, total = False, 0.0
            while not done:
                action, _ = model.predict(venv.normalize_obs(obs), deterministic=True)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += reward
                done = terminated or truncated
            returns.append(total)
        venv.training = True
        return float(np.mean(returns))

    venv = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1") for _ in range(8)]), gamma=0.9)
    model = A2C("MlpPolicy", venv, n_steps=8, gamma=0.9, ent_coef=0.0, vf_coef=0.5, seed=0)
    before = normalized_eval(model, venv)
    model.learn(400000)
    after = normalized_eval(model, venv)
    assert after > before + 200, (before, after)


@pytest.mark.parametrize("algo", [PPO2, A2C])
@pytest.mark.parametrize("env_cls", [IdentityEnv, IdentityEnvBox, IdentityEnvMultiDiscrete, IdentityEnvMultiBinary])
def test_action_spaces_learn_and_roundtrip(tmp_path, algo, env_cls):
    kwargs = {"dim": 3} if env_cls in (IdentityEnv, IdentityEnvMultiDiscrete, IdentityEnvMultiBinary) else {}
    env = DummyVecEnv([lambda: env_cls(**kwargs) for _ in range(2)])
    model = algo("MlpPolicy", env, seed=0, n_steps=16) if algo is A2C else \
        algo("MlpPolicy", env, seed=0, n_steps=32, nminibatches=2, noptepochs=2)
    model.learn(256)
    obs = np.stack([env.observation_space.sample() for _ in range(6)])
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape[0] == 6
    assert all(env.action_space.contains(np.asarray(a).astype(env.action_space.dtype)) for a in action)
    model.save(tmp_path / "model")
    loaded = algo.load(tmp_path / "model.zip")
    loaded_action, _ = loaded.predict(obs, deterministic=True)
    np.testing.assert_array_equal(action, loaded_action)
    np.testing.assert_allclose(model.action_probability(obs)[0] if isinstance(model.action_probability(obs), list)
                               else model.action_probability(obs),
                               loaded.action_probability(obs)[0] if isinstance(loaded.action_probability(obs), list)
                               else loaded.action_probability(obs), rtol=1e-6)
    # the probability of the given actions
    probs = model.action_probability(obs, actions=action)
    assert probs.shape == (6, 1) and np.all(probs >= 0)


@pytest.mark.parametrize("policy", ["MlpLstmPolicy", "MlpLnLstmPolicy"])
def test_recurrent_ppo2_state_and_mask(tmp_path, policy):
    env = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    model = PPO2(policy, env, n_steps=16, nminibatches=2, noptepochs=2, seed=0, policy_kwargs={"n_lstm": 16})
    model.learn(256)
    obs = env.reset()
    state = None
    done = np.zeros(4, dtype=bool)
    actions = []
    for _ in range(5):
        action, state = model.predict(obs, state=state, mask=done, deterministic=True)
        assert state.shape == (4, 32)
        actions.append(action)
        obs, _, done, _ = env.step(action)
    # the state matters: a zero state gives different values than the carried one (for some obs)
    flat_carried = model.policy_tf.flat_params(obs, state, np.zeros(4))
    flat_zero = model.policy_tf.flat_params(obs, np.zeros_like(state), np.zeros(4))
    assert not np.allclose(flat_carried, flat_zero)
    # a mask of 1 resets the state before the step
    flat_masked = model.policy_tf.flat_params(obs, state, np.ones(4))
    np.testing.assert_allclose(flat_masked, flat_zero, atol=1e-6)
    model.save(tmp_path / "lstm.zip")
    loaded = PPO2.load(tmp_path / "lstm.zip", env=env)
    a1, s1 = model.predict(obs, state=state, mask=done, deterministic=True)
    a2, s2 = loaded.predict(obs, state=state, mask=done, deterministic=True)
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_allclose(s1, s2, atol=1e-6)


def test_recurrent_a2c_runs():
    env = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    model = A2C("MlpLstmPolicy", env, n_steps=5, seed=0, policy_kwargs={"n_lstm": 8})
    model.learn(200)
    action, state = model.predict(env.reset())
    assert action.shape == (2,) and state.shape == (2, 16)


def test_recurrent_ppo2_requires_envs_multiple_of_minibatches():
    env = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(3)])
    with pytest.raises(ValueError, match="multiple of nminibatches"):
        PPO2("MlpLstmPolicy", env, nminibatches=2)


def test_custom_net_arch_and_activation(tmp_path):
    import tensorflow as tf
    env = cartpole_vec(2)
    model = PPO2("MlpPolicy", env, n_steps=16, nminibatches=1, noptepochs=1,
                 policy_kwargs=dict(net_arch=[32, dict(pi=[16], vf=[8])], act_fun=tf.nn.relu))
    names = list(model.get_parameters())
    assert names[:4] == ["model/shared_fc0/w:0", "model/shared_fc0/b:0", "model/pi_fc0/w:0", "model/pi_fc0/b:0"]
    assert model.get_parameters()["model/vf_fc0/w:0"].shape == (32, 8)
    model.learn(64)
    model.save(tmp_path / "m.zip")
    loaded = PPO2.load(tmp_path / "m.zip")
    assert loaded.policy_kwargs["act_fun"] is tf.nn.relu
    obs = np.random.RandomState(0).randn(5, 4).astype(np.float32)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])


def test_numpy_fast_path_matches_keras_model():
    import tensorflow as tf
    for space in [gym.spaces.Discrete(3), gym.spaces.Box(-2, 2, (2,)), gym.spaces.MultiDiscrete([2, 4]),
                  gym.spaces.MultiBinary(3)]:
        from sbtf.common.policies import MlpPolicy
        policy = MlpPolicy(None, gym.spaces.Box(-1, 1, (5,)), space, n_env=4)
        obs = np.random.RandomState(1).randn(7, 5).astype(np.float32)
        assert policy.acts_in_numpy
        flat_tf, value_tf, _, _ = policy.forward(tf.constant(obs))
        flat_np, value_np = policy.flat_params(obs), policy.value(obs)
        np.testing.assert_allclose(flat_np, flat_tf.numpy(), atol=1e-5)
        np.testing.assert_allclose(value_np, value_tf.numpy(), atol=1e-5)
        # after a weight change the acting copies are refreshed
        var = next(iter(policy.named_parameters().values()))
        var.assign(var.numpy() + 0.5)
        policy.weights_changed()
        flat_tf2, _, _, _ = policy.forward(tf.constant(obs))
        np.testing.assert_allclose(policy.flat_params(obs), flat_tf2.numpy(), atol=1e-5)


def test_numpy_cache_follows_training():
    """The train step returns the updated weights; the NumPy acting path must equal the Keras model after it."""
    import tensorflow as tf
    obs = np.random.RandomState(3).randn(6, 4).astype(np.float32)
    for model in (A2C("MlpPolicy", cartpole_vec(2), seed=0),
                  PPO2("MlpPolicy", cartpole_vec(2), n_steps=16, nminibatches=2, noptepochs=2, seed=0)):
        policy = model.policy_tf
        before = policy.flat_params(obs).copy()
        model.learn(256)
        flat_np, value_np = policy.flat_params(obs), policy.value(obs)
        flat_tf, value_tf, _, _ = policy.forward(tf.constant(obs))
        assert not np.allclose(flat_np, before), "training did not change the acting weights"
        np.testing.assert_allclose(flat_np, flat_tf.numpy(), atol=1e-5)
        np.testing.assert_allclose(value_np, value_tf.numpy(), atol=1e-5)


def test_a2c_rms_prop_style(tmp_path):
    model = A2C("MlpPolicy", cartpole_vec(2), rms_prop_style="torch", seed=0)
    assert type(model.optimizer).__name__ == "TorchStyleRMSProp"
    model.learn(100)
    model.save(tmp_path / "a2c_torch")
    loaded = A2C.load(tmp_path / "a2c_torch", env=cartpole_vec(2))
    assert loaded.rms_prop_style == "torch" and type(loaded.optimizer).__name__ == "TorchStyleRMSProp"
    assert A2C("MlpPolicy", cartpole_vec(2)).rms_prop_style == "tf"
    with pytest.raises(ValueError, match="rms_prop_style"):
        A2C("MlpPolicy", cartpole_vec(2), rms_prop_style="adam")


def test_no_retracing_after_warmup():
    model = PPO2("MlpPolicy", cartpole_vec(2), n_steps=16, nminibatches=2, noptepochs=2, seed=0)
    model.learn(64)
    traces = model._train_step.n_traces
    model.learn(320, reset_num_timesteps=False)
    assert model._train_step.n_traces == traces
    a2c = A2C("MlpPolicy", cartpole_vec(2), seed=0)
    a2c.learn(50)
    traces = a2c._train_step.n_traces
    a2c.learn(200, reset_num_timesteps=False)
    assert a2c._train_step.n_traces == traces


def test_seed_makes_training_reproducible():
    params = []
    for _ in range(2):
        model = PPO2("MlpPolicy", cartpole_vec(2), n_steps=16, nminibatches=2, noptepochs=2, seed=42)
        model.learn(128)
        params.append(model.get_parameters())
    for name in params[0]:
        np.testing.assert_allclose(params[0][name], params[1][name], atol=1e-6, err_msg=name)


def test_learning_rate_and_cliprange_schedules():
    seen = []

    def lr(frac):
        seen.append(frac)
        return 1e-3 * frac

    model = PPO2("MlpPolicy", cartpole_vec(2), n_steps=16, nminibatches=1, noptepochs=1, learning_rate=lr,
                 cliprange=lambda f: 0.1 + 0.1 * f)
    model.learn(32 * 4)
    assert seen == [1.0, 0.75, 0.5, 0.25]


def test_env_id_string_and_old_gym_env():
    model = PPO2("MlpPolicy", "CartPole-v1", n_steps=16, nminibatches=1, noptepochs=1)
    assert model.n_envs == 1
    model.learn(32)

    class OldGymEnv:
        """An environment written for the old gym API (reset -> obs, 4-tuple step, seed())."""

        def __init__(self):
            self.observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
            self.action_space = gym.spaces.Discrete(2)
            self.t = 0

        def seed(self, seed=None):
            return [seed]

        def reset(self):
            self.t = 0
            return np.zeros(2, np.float32)

        def step(self, action):
            self.t += 1
            return np.full(2, 0.1 * self.t, np.float32), float(action), self.t >= 5, {}

    model = A2C("MlpPolicy", OldGymEnv(), n_steps=5)
    model.learn(50)
    assert model.num_timesteps == 50


def test_predict_wrong_observation_shape_names_expected_shape():
    model = PPO2("MlpPolicy", cartpole_vec(1), n_steps=16, nminibatches=1)
    with pytest.raises(ValueError, match=r"\(4,\) or \(n_env, 4\)"):
        model.predict(np.zeros(5))


def test_unsupported_spaces_have_clear_errors():
    env = DummyVecEnv([lambda: gym.make("CartPole-v1")])

    class TupleActionEnv(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        action_space = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(2)])

        def reset(self, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            return np.zeros(2, np.float32), 0.0, True, False, {}

    with pytest.raises(NotImplementedError, match="PPO2 does not support action space"):
        PPO2("MlpPolicy", TupleActionEnv())

    class DictObsEnv(gym.Env):
        observation_space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,), np.float32)})
        action_space = gym.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            return {"a": np.zeros(2, np.float32)}, {}

        def step(self, action):
            return {"a": np.zeros(2, np.float32)}, 0.0, True, False, {}

    with pytest.raises(NotImplementedError, match="MlpPolicy does not take Dict observations.*MultiInputPolicy"):
        A2C("MlpPolicy", DictObsEnv())
    with pytest.raises(ValueError, match="CnnPolicy needs image observations"):
        PPO2("CnnPolicy", env)
    with pytest.raises(ValueError, match="unknown policy type 'NoSuchPolicy'"):
        PPO2("NoSuchPolicy", env)


def test_cnn_policy_on_small_images(tmp_path):
    class ImageEnv(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)
        action_space = gym.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return self.np_random.integers(0, 255, (36, 36, 1), dtype=np.uint8), {}

        def step(self, action):
            self.t += 1
            return (self.np_random.integers(0, 255, (36, 36, 1), dtype=np.uint8), float(action), self.t >= 10,
                    False, {})

    env = DummyVecEnv([ImageEnv, ImageEnv])
    model = PPO2("CnnPolicy", env, n_steps=8, nminibatches=2, noptepochs=1, seed=0)
    model.learn(32)
    obs = env.reset()
    model.save(tmp_path / "cnn")
    loaded = PPO2.load(tmp_path / "cnn")
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0],
                                  loaded.predict(obs, deterministic=True)[0])
    assert "model/c1/w:0" in model.get_parameters()


@pytest.mark.parametrize("nminibatches", [1, 2])
def test_ppo2_update_on_the_whole_batch_does_not_depend_on_sample_order(nminibatches):
    """With one minibatch PPO2 skips the per-epoch shuffle (the loss is a mean over the whole batch); its update must
    equal the update on the same samples in another order. With two minibatches the shuffle is drawn per epoch from
    the model's own generator, so two models with one seed agree on the same rollout."""
    env = DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2)
    rng = np.random.default_rng(0)
    n = 2 * 16
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    batch = dict(obs=obs, returns=rng.normal(size=n).astype(np.float32),
                 actions=rng.integers(0, 2, n).astype(np.float32),
                 values=rng.normal(size=n).astype(np.float32), neglogpacs=np.full(n, 0.69, np.float32),
                 lr=3e-4, cliprange=0.2, cliprange_vf=0.2)
    order = rng.permutation(n) if nminibatches == 1 else np.arange(n)
    initial = PPO2("MlpPolicy", env, n_steps=16, nminibatches=nminibatches, noptepochs=3, seed=3).get_parameters()
    params = []
    for rows in (np.arange(n), order):
        model = PPO2("MlpPolicy", env, n_steps=16, nminibatches=nminibatches, noptepochs=3, seed=3)
        model._train_step(**{k: (v[rows] if isinstance(v, np.ndarray) else v) for k, v in batch.items()})
        params.append(model.get_parameters())
    assert params[0].keys() == params[1].keys() == initial.keys()
    for name in params[0]:
        np.testing.assert_allclose(params[0][name], params[1][name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert any(not np.allclose(params[0][name], initial[name]) for name in initial)  # the step did update
