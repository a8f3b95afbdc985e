"""Dict observations and Keras feature extractors on the on-policy algorithms (MultiInputPolicy, SB3 policy_kwargs)."""
import warnings

import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

from sbtf import A2C, ACER, ACKTR, GAIL, PPO1, PPO2, TRPO
from sbtf.common.env_checker import check_env
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.extractors import BaseFeaturesExtractor
from sbtf.common.file_errors import UnsafeFileError
from sbtf.common.misc_util import set_global_seeds
from sbtf.common.multi_input_envs import SimpleMultiObsEnv
from sbtf.common.vec_env import DummyVecEnv, VecNormalize
from sbtf.common.vec_env.vec_pack_dict_obs import VecPackDictObs


class CueEnv(gym.Env):
    """A Dict env (vector, Discrete and MultiBinary keys): the reward is 1 when the action equals the Discrete cue."""

    observation_space = gym.spaces.Dict({"vec": gym.spaces.Box(-1, 1, (3,), np.float32),
                                         "cue": gym.spaces.Discrete(3),
                                         "bits": gym.spaces.MultiBinary(2)})
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        self.cue = int(self.np_random.integers(3))
        return {"vec": self.np_random.uniform(-1, 1, 3).astype(np.float32), "cue": self.cue,
                "bits": self.np_random.integers(0, 2, 2).astype(np.int8)}

    def step(self, action):
        reward = float(int(action) == self.cue)
        self.t += 1
        return self._obs(), reward, False, self.t >= 20, {}


class GeluExtractor(BaseFeaturesExtractor):
    """A user's extractor: a Keras Dense layer with gelu (no NumPy form), on a Dict observation."""

    def __init__(self, observation_space, features_dim=16, activation="gelu"):
        super().__init__(observation_space, features_dim)
        self.dense = keras.layers.Dense(features_dim, activation=activation)

    def call(self, observations):
        return self.dense(tf.concat([observations["vec"], observations["cue"], observations["bits"]], axis=-1))


def _grid_env():
    np.random.seed(123)  # the same random images and vectors in every copy
    return SimpleMultiObsEnv(random_start=False)


def _batch(env, n=6, seed=0):
    env.observation_space.seed(seed)
    samples = [env.observation_space.sample() for _ in range(n)]
    return {key: np.stack([s[key] for s in samples]) for key in env.observation_space.spaces}


def test_check_env_passes_on_dict_envs():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(SimpleMultiObsEnv())
        check_env(CueEnv())


def test_model_env_is_the_users_and_the_algorithm_sees_flat_rows():
    env = DummyVecEnv([CueEnv])
    model = A2C("MultiInputPolicy", env, n_steps=4)
    assert model.get_env() is env
    assert isinstance(model.env, VecPackDictObs) and model.env.observation_space.shape == (6,)
    assert model.observation_space == CueEnv.observation_space
    assert model.policy_tf.acts_in_numpy  # no image key: CombinedExtractor flattens, the MLP acts in NumPy
    single = CueEnv().reset(seed=1)[0]
    action, _ = model.predict(single)
    assert np.ndim(action) == 0
    actions, _ = model.predict(_batch(CueEnv()))
    assert actions.shape == (6,)
    with pytest.raises(ValueError, match="Dict observations with keys"):
        model.predict(np.zeros(6))


def test_mlp_policy_with_dict_points_to_multi_input_policy_and_gail_refuses():
    with pytest.raises(NotImplementedError, match="MultiInputPolicy"):
        PPO2("MlpPolicy", CueEnv())
    with pytest.raises(NotImplementedError, match="GAIL.*Dict"):
        GAIL("MultiInputPolicy", CueEnv(), expert_dataset=None)


@pytest.mark.parametrize("algo, kwargs", [
    (PPO2, dict(n_steps=32, nminibatches=4, learning_rate=1e-3)),
    (A2C, dict(n_steps=8, learning_rate=2e-3)),
])
def test_learns_the_cue_env_beyond_random(algo, kwargs):
    set_global_seeds(0)
    model = algo("MultiInputPolicy", DummyVecEnv([CueEnv] * 4), seed=0, **kwargs)
    model.learn(6000)
    mean, _ = evaluate_policy(model, DummyVecEnv([CueEnv]), n_eval_episodes=5)
    assert mean > 15  # random: 20 / 3 ~ 6.7 of 20


@pytest.mark.parametrize("algo, kwargs", [
    (ACKTR, dict(n_steps=8)),
    (ACER, dict(n_steps=8, replay_start=16, buffer_size=200)),
    (PPO1, dict(timesteps_per_actorbatch=32, optim_batchsize=16)),
    (TRPO, dict(timesteps_per_batch=32)),
])
def test_other_on_policy_algorithms_take_dict_observations(algo, kwargs, tmp_path):
    env = CueEnv() if algo in (PPO1, TRPO) else DummyVecEnv([CueEnv, CueEnv])
    model = algo("MultiInputPolicy", env, seed=0, **kwargs)
    model.learn(96)
    obs = _batch(CueEnv())
    actions, _ = model.predict(obs, deterministic=True)
    assert actions.shape == (6,)
    model.save(tmp_path / "model.zip")
    loaded = algo.load(tmp_path / "model.zip")
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], actions)


def test_ppo2_learns_the_image_and_vector_grid_env():
    """SimpleMultiObsEnv: the image says the row, the vector the column; the shortest path takes 6 steps."""
    set_global_seeds(0)
    model = PPO2("MultiInputPolicy", DummyVecEnv([_grid_env] * 4), seed=0, n_steps=32, learning_rate=1e-3,
                 policy_kwargs=dict(features_extractor_kwargs=dict(cnn_output_dim=32)))
    assert not model.policy_tf.acts_in_numpy  # a CNN key: acting is one compiled TF call
    names = list(model.policy_tf.named_parameters())
    assert names[:2] == ["model/features_extractor/img/c1/w:0", "model/features_extractor/img/c1/b:0"]
    # 6,000 steps left the deterministic policy stuck on 2 of 6 seeds (and on seed 0 after other tests had built
    # layers in the same process); at 12,000 every seed tried reaches the goal
    model.learn(12000)
    mean, _ = evaluate_policy(model, DummyVecEnv([_grid_env]), n_eval_episodes=2)
    assert mean > 0.0  # a random policy: about -6 (mostly no goal within 100 steps); the optimum is 0.5


def test_user_extractor_without_numpy_form_trains_saves_loads_exports(tmp_path):
    model = PPO2("MultiInputPolicy", DummyVecEnv([CueEnv] * 2), n_steps=16, nminibatches=2, seed=0,
                 policy_kwargs=dict(features_extractor_class=GeluExtractor,
                                    features_extractor_kwargs=dict(features_dim=8)))
    policy = model.policy_tf
    assert not policy.acts_in_numpy  # gelu Dense: the compiled TF acting path
    assert list(policy.named_parameters())[:2] == ["model/features_extractor/0_kernel:0",
                                                   "model/features_extractor/1_bias:0"]
    before = policy.named_parameters()["model/features_extractor/0_kernel:0"].numpy().copy()
    model.learn(128)
    assert not np.allclose(before, policy.named_parameters()["model/features_extractor/0_kernel:0"].numpy())
    obs = _batch(CueEnv(), n=7, seed=3)
    proba = model.action_probability(obs)
    model.save(tmp_path / "model.zip")
    loaded = PPO2.load(tmp_path / "model.zip")
    assert type(loaded.policy_tf.features_extractor) is GeluExtractor
    np.testing.assert_array_equal(loaded.action_probability(obs), proba)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])

    path = loaded.export(str(tmp_path / "saved"))
    serve = tf.saved_model.load(path).signatures["serving_default"]
    inputs = serve.structured_input_signature[1]
    assert list(inputs) == ["bits", "cue", "vec"] or set(inputs) == {"bits", "cue", "vec"}
    out = serve(bits=tf.constant(obs["bits"], tf.int32), cue=tf.constant(obs["cue"], tf.int32),
                vec=tf.constant(obs["vec"]))
    np.testing.assert_allclose(out["probabilities"].numpy(), proba, atol=1e-5)
    np.testing.assert_array_equal(out["action"].numpy(), model.predict(obs, deterministic=True)[0])


def test_image_dict_model_save_load_and_export(tmp_path):
    model = A2C("MultiInputPolicy", DummyVecEnv([_grid_env]), n_steps=4, seed=0,
                policy_kwargs=dict(features_extractor_kwargs=dict(cnn_output_dim=16), net_arch=[32]))
    model.learn(16)
    env = _grid_env()
    obs = {key: np.stack([env.state_mapping[s][key] for s in range(16)]) for key in ("img", "vec")}
    proba = model.action_probability(obs)
    model.save(tmp_path / "grid.zip")
    loaded = A2C.load(tmp_path / "grid.zip")
    assert loaded.observation_space == env.observation_space
    np.testing.assert_array_equal(loaded.action_probability(obs), proba)
    serve = tf.saved_model.load(loaded.export(str(tmp_path / "saved"))).signatures["serving_default"]
    out = serve(img=tf.constant(obs["img"]), vec=tf.constant(obs["vec"], tf.float32))
    np.testing.assert_allclose(out["probabilities"].numpy(), proba, atol=1e-5)


def test_loading_a_model_whose_extractor_is_not_defined_says_what_to_do(tmp_path):
    class LocalExtractor(keras.layers.Layer):
        features_dim = 4

        def __init__(self, observation_space, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(4)

        def call(self, obs):
            return self.dense(tf.concat([obs["vec"], obs["cue"], obs["bits"]], axis=-1))

    model = A2C("MultiInputPolicy", CueEnv(), policy_kwargs=dict(features_extractor_class=LocalExtractor))
    model.save(tmp_path / "m.zip")
    assert type(A2C.load(tmp_path / "m.zip").policy_tf.features_extractor) is LocalExtractor  # registered on use
    from sbtf.common import registry

    with registry._LOCK:  # a fresh process would not know the class: forget it
        registry._AUTO["extractor"] = [c for c in registry._AUTO["extractor"] if c is not LocalExtractor]
    with pytest.raises(UnsafeFileError, match="LocalExtractor.*import the module that defines it"):
        A2C.load(tmp_path / "m.zip")


def test_vecnormalize_on_dict_observations():
    env = VecNormalize(DummyVecEnv([CueEnv] * 2), norm_obs_keys=["vec"])
    model = PPO2("MultiInputPolicy", env, n_steps=16, nminibatches=2)
    model.learn(64)
    assert model.get_vec_normalize_env() is env


# --------------------------------------------------------------------------------------------- policy_kwargs
def _names(model):
    return [name for name in model.policy_tf.named_parameters() if name.endswith("/w:0")]


def test_sb2_policy_kwargs_keep_their_meaning_and_names():
    env = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    shared = A2C("MlpPolicy", env, policy_kwargs=dict(net_arch=[32, 32]))
    assert _names(shared) == ["model/shared_fc0/w:0", "model/shared_fc1/w:0", "model/vf/w:0", "model/pi/w:0",
                              "model/q/w:0"]
    assert shared.policy_tf.acts_in_numpy and not shared.policy_tf.sb3_mode
    mixed = A2C("MlpPolicy", env, policy_kwargs=dict(net_arch=[16, dict(pi=[8], vf=[4])], act_fun=tf.nn.relu))
    assert _names(mixed)[:3] == ["model/shared_fc0/w:0", "model/pi_fc0/w:0", "model/vf_fc0/w:0"]
    default = A2C("MlpPolicy", env)
    assert _names(default)[:4] == ["model/pi_fc0/w:0", "model/vf_fc0/w:0", "model/pi_fc1/w:0", "model/vf_fc1/w:0"]
    bare_dict = A2C("MlpPolicy", env, policy_kwargs=dict(net_arch=dict(pi=[8], vf=[4, 4])))
    assert _names(bare_dict)[:3] == ["model/pi_fc0/w:0", "model/vf_fc0/w:0", "model/vf_fc1/w:0"]


def test_sb3_policy_kwargs():
    env = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    model = PPO2("MlpPolicy", env, policy_kwargs=dict(net_arch=[32, 32], activation_fn=tf.nn.relu))
    policy = model.policy_tf
    assert policy.sb3_mode and policy.acts_in_numpy  # FlattenExtractor and relu have NumPy forms
    assert _names(model)[:4] == ["model/pi_fc0/w:0", "model/vf_fc0/w:0", "model/pi_fc1/w:0", "model/vf_fc1/w:0"]
    assert not policy.shared_layers  # SB3 >= 1.8: a list means separate pi and vf layers
    separate = PPO2("MlpPolicy", env, policy_kwargs=dict(share_features_extractor=False,
                                                         features_extractor_class=GeluLikeVector,
                                                         net_arch=dict(pi=[8], vf=[8])))
    names = list(separate.policy_tf.named_parameters())
    assert names[0].startswith("model/pi_features_extractor/") and any(
        n.startswith("model/vf_features_extractor/") for n in names)
    with pytest.raises(ValueError, match="shared layers.*share_features_extractor"):
        PPO2("MlpPolicy", env, policy_kwargs=dict(share_features_extractor=False, net_arch=[8, dict(pi=[4])]))
    with pytest.raises(ValueError, match="cannot be combined"):
        PPO2("MlpPolicy", env, policy_kwargs=dict(layers=[8], ortho_init=False))
    with pytest.raises(ValueError, match="same setting"):
        PPO2("MlpPolicy", env, policy_kwargs=dict(act_fun=tf.tanh, activation_fn=tf.nn.relu))
    with pytest.raises(ValueError, match="'qf'"):
        PPO2("MlpPolicy", env, policy_kwargs=dict(net_arch=dict(pi=[8], qf=[8])))
    with pytest.raises(TypeError, match="features_dim"):
        PPO2("MlpPolicy", env, policy_kwargs=dict(features_extractor_class=NoFeaturesDim))
    # ortho_init=False: PyTorch's default uniform(+-1/sqrt(fan_in)) initialisation instead of orthogonal
    set_global_seeds(0)
    plain = PPO2("MlpPolicy", env, policy_kwargs=dict(ortho_init=False, net_arch=[64]))
    w = plain.policy_tf.named_parameters()["model/pi_fc0/w:0"].numpy()
    assert np.abs(w).max() <= 1 / np.sqrt(4) + 1e-6 and not np.allclose(w @ w.T, np.eye(4) * 2, atol=1e-2)


class GeluLikeVector(BaseFeaturesExtractor):
    """An extractor of Box observations (used twice when the extractor is not shared)."""

    def __init__(self, observation_space, features_dim=6):
        super().__init__(observation_space, features_dim)
        self.dense = keras.layers.Dense(features_dim, activation="gelu")

    def call(self, observations):
        return self.dense(observations)


class NoFeaturesDim(keras.layers.Layer):
    def __init__(self, observation_space, **kwargs):
        super().__init__(**kwargs)

    def call(self, observations):
        return observations


def test_cnn_policy_in_sb3_mode_uses_the_sb3_nature_cnn():
    class ImageEnv(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (40, 40, 1), np.uint8)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return np.zeros((40, 40, 1), np.uint8), {}

        def step(self, action):
            return np.zeros((40, 40, 1), np.uint8), 0.0, True, False, {}

    sb2 = A2C("CnnPolicy", ImageEnv())
    assert _names(sb2)[0] == "model/c1/w:0"
    sb3 = A2C("CnnPolicy", ImageEnv(), policy_kwargs=dict(features_extractor_kwargs=dict(features_dim=64)))
    assert _names(sb3)[0] == "model/features_extractor/c1/w:0"
    assert sb3.policy_tf.scale and sb3.policy_tf.features_extractor.features_dim == 64
    assert not sb3.policy_tf.xla_friendly and sb2.policy_tf.xla_friendly is False


def test_dict_export_to_onnx_equals_predict(tmp_path):
    pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx: pip install 'sbtf[export]'")
    pytest.importorskip("onnx", reason="the ONNX export needs onnx: pip install 'sbtf[export]'")
    ort = pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime: pip install 'sbtf[export]'")
    model = PPO2("MultiInputPolicy", DummyVecEnv([CueEnv]), n_steps=16, nminibatches=2, seed=0,
                 policy_kwargs=dict(features_extractor_class=GeluExtractor,
                                    features_extractor_kwargs=dict(activation="swish")))  # tf2onnx has no Erfc
    assert not model.policy_tf.acts_in_numpy
    obs = _batch(CueEnv(), n=5, seed=4)
    path = model.export(str(tmp_path / "policy.onnx"), format="onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert {i.name for i in session.get_inputs()} == {"bits", "cue", "vec"}
    feed = {"bits": obs["bits"].astype(np.int32), "cue": obs["cue"].astype(np.int32),
            "vec": obs["vec"].astype(np.float32)}
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    np.testing.assert_allclose(got["probabilities"], model.action_probability(obs), atol=1e-5)
