"""MultiInputLstmPolicy: Dict observations (CombinedExtractor or a user's extractor) with SB2's recurrent
actor-critic policies, on A2C, PPO2, ACER and ACKTR."""
import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

from sbtf import A2C, ACER, ACKTR, PPO2
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.extractors import BaseFeaturesExtractor
from sbtf.common.compile.fast_call import has_convolution
from sbtf.common.input import check_obs_space
from sbtf.common.misc_util import set_global_seeds
from sbtf.common.multi_input_envs import SimpleMultiObsEnv
from sbtf.common.policies import (ActorCriticPolicy, MultiInputLnLstmPolicy, MultiInputLstmPolicy,
                                  get_policy_from_name)
from sbtf.common.vec_env import DummyVecEnv
from test_multi_input import CueEnv, GeluLikeVector  # a Dict env without images; a user's Box extractor

N_LSTM = 16
TINY = dict(n_lstm=N_LSTM, features_extractor_kwargs=dict(cnn_output_dim=8))
ALGOS = [
    (A2C, dict(n_steps=4)),
    (PPO2, dict(n_steps=8, nminibatches=2, noptepochs=2)),
    (ACER, dict(n_steps=4, replay_start=16, buffer_size=200)),
    (ACKTR, dict(n_steps=4)),
]


def _grid_env():
    np.random.seed(123)  # the same random images and vectors in every copy
    return SimpleMultiObsEnv(random_start=False)


class SwishExtractor(BaseFeaturesExtractor):
    """A user's Dict extractor: a Keras Dense layer (no NumPy form)."""

    def __init__(self, observation_space, features_dim=6):
        super().__init__(observation_space, features_dim)
        self.dense = keras.layers.Dense(features_dim, activation="swish")

    def call(self, observations):
        return self.dense(tf.concat([observations["vec"], observations["cue"]], axis=-1))


def _obs_sequence(n_envs: int, n_steps: int, seed: int = 0):
    """(observations, done flags) of ``n_steps`` random-action steps of ``n_envs`` grid envs (random starts), so that
    the sequence crosses states and some episode ends."""
    env = DummyVecEnv([lambda: SimpleMultiObsEnv(random_start=True)] * n_envs)
    env.seed(seed)
    rng = np.random.default_rng(seed)
    obs, dones = env.reset(), np.zeros(n_envs, bool)
    sequence = []
    for _ in range(n_steps):
        sequence.append((obs, dones))
        obs, _, dones, _ = env.step(rng.integers(0, 4, n_envs))
    return sequence


def _run(model, sequence):
    """Actions and states of ``model`` over a sequence, the state carried and reset by the done flags."""
    state, actions, states = None, [], []
    for obs, dones in sequence:
        action, state = model.predict(obs, state=state, mask=dones, deterministic=True)
        actions.append(action)
        states.append(state)
    return np.array(actions), np.array(states)


@pytest.mark.parametrize("algo, kwargs", ALGOS, ids=[algo.__name__ for algo, _ in ALGOS])
def test_learns_predicts_and_reloads(algo, kwargs, tmp_path):
    env = DummyVecEnv([_grid_env] * 2)
    model = algo("MultiInputLstmPolicy", env, seed=0, policy_kwargs=TINY, **kwargs)
    policy = model.policy_tf
    assert isinstance(policy, MultiInputLstmPolicy) and policy.recurrent and policy.state_size == 2 * N_LSTM
    names = list(policy.named_parameters())
    assert names[:2] == ["model/features_extractor/img/c1/w:0", "model/features_extractor/img/c1/b:0"]
    assert names[8:14] == ["model/pi_fc0/w:0", "model/pi_fc0/b:0", "model/pi_fc1/w:0", "model/pi_fc1/b:0",
                            "model/lstm1/wx:0", "model/lstm1/wh:0"]
    assert policy.named_parameters()["model/lstm1/wx:0"].shape == (64, 4 * N_LSTM)
    assert not policy.acts_in_numpy  # a CNN key: acting is one compiled TF call
    assert has_convolution([policy]) and not policy.xla_friendly

    conv = policy.named_parameters()["model/features_extractor/img/c1/w:0"]
    before = conv.numpy().copy()
    model.learn(200)
    assert not np.allclose(before, conv.numpy())  # the extractor is trained through the LSTM

    single, _ = _grid_env().reset()
    action, state = model.predict(single)
    assert np.shape(action) == () and state.shape == (1, 2 * N_LSTM)
    batch = {key: np.stack([single[key]] * 3) for key in single}
    actions, states = model.predict(batch, state=np.zeros((3, 2 * N_LSTM)), episode_start=np.ones(3))
    assert actions.shape == (3,) and states.shape == (3, 2 * N_LSTM)

    sequence = _obs_sequence(2, 12)
    actions, states = _run(model, sequence)
    assert actions.shape == (12, 2) and states.shape == (12, 2, 2 * N_LSTM)
    model.save(tmp_path / "model.zip")
    loaded = algo.load(tmp_path / "model.zip", env=env)
    assert type(loaded.policy_tf) is MultiInputLstmPolicy
    loaded_actions, loaded_states = _run(loaded, sequence)
    np.testing.assert_array_equal(loaded_actions, actions)
    np.testing.assert_allclose(loaded_states, states, atol=1e-6)


def test_state_and_mask_semantics():
    model = PPO2("MultiInputLstmPolicy", DummyVecEnv([_grid_env] * 2), nminibatches=2, seed=1, policy_kwargs=TINY)
    policy = model.policy_tf
    sequence = _obs_sequence(2, 6, seed=3)
    _, states = _run(model, sequence)
    obs = sequence[-1][0]
    carried = policy.flat_params(obs, states[-2], np.zeros(2))
    zero = policy.flat_params(obs, np.zeros_like(states[-2]), np.zeros(2))
    assert not np.allclose(carried, zero)  # the state matters
    np.testing.assert_allclose(policy.flat_params(obs, states[-2], np.ones(2)), zero, atol=1e-6)  # mask 1 resets
    # SB3's episode_start is SB2's mask
    a_mask, s_mask = model.predict(obs, state=states[-2], mask=np.array([1.0, 0.0]), deterministic=True)
    a_start, s_start = model.predict(obs, state=states[-2], episode_start=np.array([1.0, 0.0]), deterministic=True)
    np.testing.assert_array_equal(a_mask, a_start)
    np.testing.assert_array_equal(s_mask, s_start)
    assert policy.value(obs, states[-2], np.zeros(2)).shape == (2,)


def test_recurrent_policies_on_a_dict_env_point_to_multi_input_lstm_policy():
    env = DummyVecEnv([_grid_env] * 2)
    for name in ("MlpLstmPolicy", "CnnLstmPolicy", "MlpLnLstmPolicy", "CnnLnLstmPolicy"):
        with pytest.raises(NotImplementedError, match=f"{name} does not take Dict.*'MultiInputLstmPolicy'"):
            PPO2(name, env, nminibatches=2)
    with pytest.raises(NotImplementedError, match="'MultiInputLstmPolicy'"):
        A2C("MlpLstmPolicy", CueEnv())
    with pytest.raises(NotImplementedError) as feed_forward:
        A2C("MlpPolicy", CueEnv())
    assert "'MultiInputPolicy'" in str(feed_forward.value) and "Lstm" not in str(feed_forward.value)
    with pytest.raises(NotImplementedError, match="MultiInputLstmPolicy"):
        check_obs_space(CueEnv.observation_space, "SomeAlgo")
    with pytest.raises(ValueError, match="takes Dict observations.*MlpLstmPolicy"):
        A2C("MultiInputLstmPolicy", "CartPole-v1")
    with pytest.raises(ValueError, match="cannot be combined with a features extractor"):
        A2C("MultiInputLstmPolicy", CueEnv(), policy_kwargs=dict(cnn_extractor=lambda x: x))


def test_registered_names_layers_net_arch_and_layer_norm():
    assert get_policy_from_name(ActorCriticPolicy, "MultiInputLstmPolicy") is MultiInputLstmPolicy
    assert get_policy_from_name(ActorCriticPolicy, "MultiInputLnLstmPolicy") is MultiInputLnLstmPolicy
    env = CueEnv()  # no image key: CombinedExtractor flattens (8 features: vec 3, one-hot cue 3, bits 2)
    direct = A2C("MultiInputLstmPolicy", env, policy_kwargs=dict(n_lstm=8, layers=[]))
    params = direct.policy_tf.named_parameters()
    assert list(params)[:3] == ["model/lstm1/wx:0", "model/lstm1/wh:0", "model/lstm1/b:0"]
    assert params["model/lstm1/wx:0"].shape == (8, 32)
    assert direct.policy_tf.xla_friendly and not has_convolution([direct.policy_tf])

    arch = A2C("MultiInputLstmPolicy", env, policy_kwargs=dict(n_lstm=8, net_arch=[12, "lstm", 10,
                                                                                   dict(pi=[7], vf=[5])]))
    names = [n for n in arch.policy_tf.named_parameters() if n.endswith("/w:0") or n.endswith("/wx:0")]
    assert names == ["model/shared_fc0/w:0", "model/lstm1/wx:0", "model/shared_fc2/w:0", "model/pi_fc0/w:0",
                     "model/vf_fc0/w:0", "model/vf/w:0", "model/pi/w:0", "model/q/w:0"]
    assert arch.policy_tf.named_parameters()["model/shared_fc0/w:0"].shape == (8, 12)

    layer_norm = A2C("MultiInputLnLstmPolicy", env, policy_kwargs=dict(n_lstm=8))
    assert layer_norm.policy_tf.layer_norm and "model/lstm1/gx:0" in layer_norm.policy_tf.named_parameters()
    action, state = layer_norm.predict(env.reset(seed=0)[0])
    assert state.shape == (1, 16)


def test_user_extractors_save_and_load(tmp_path):
    env = DummyVecEnv([CueEnv] * 2)
    model = A2C("MultiInputLstmPolicy", env, n_steps=4, seed=0,
                policy_kwargs=dict(n_lstm=8, features_extractor_class=SwishExtractor,
                                   features_extractor_kwargs=dict(features_dim=4)))
    policy = model.policy_tf
    assert type(policy.features_extractor) is SwishExtractor and not policy.acts_in_numpy
    assert not policy.xla_friendly
    assert list(policy.named_parameters())[:3] == ["model/features_extractor/0_kernel:0",
                                                   "model/features_extractor/1_bias:0", "model/pi_fc0/w:0"]
    kernel = policy.named_parameters()["model/features_extractor/0_kernel:0"]
    before = kernel.numpy().copy()
    model.learn(64)
    assert not np.allclose(before, kernel.numpy())
    env.seed(5)
    obs = env.reset()
    state = np.random.default_rng(0).normal(size=(2, 16)).astype(np.float32)
    proba = model.action_probability(obs, state=state, mask=np.zeros(2))
    model.save(tmp_path / "user.zip")
    loaded = A2C.load(tmp_path / "user.zip")
    assert type(loaded.policy_tf.features_extractor) is SwishExtractor
    np.testing.assert_array_equal(loaded.action_probability(obs, state=state, mask=np.zeros(2)), proba)

    # the recurrent policies take an extractor on Box observations too (SB3's policy_kwargs)
    box = PPO2("MlpLstmPolicy", DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2), nminibatches=2, n_steps=8,
               policy_kwargs=dict(n_lstm=8, features_extractor_class=GeluLikeVector))
    assert list(box.policy_tf.named_parameters())[:3] == ["model/features_extractor/0_kernel:0",
                                                          "model/features_extractor/1_bias:0", "model/pi_fc0/w:0"]
    box.learn(32)
    action, state = box.predict(np.zeros(4, np.float32))
    assert np.shape(action) == () and state.shape == (1, 16)


class BrightnessEnv(gym.Env):
    """40x40 grey images (a Box image space): the CNN LSTM policies' input."""

    observation_space = gym.spaces.Box(0, 255, (40, 40, 1), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def _obs(self):
        return np.full((40, 40, 1), self.np_random.integers(0, 256), np.uint8)

    def step(self, action):
        return self._obs(), 0.0, False, False, {}


def test_cnn_lstm_policy_with_sb3_nature_cnn():
    model = PPO2("CnnLstmPolicy", DummyVecEnv([BrightnessEnv] * 2), nminibatches=2, n_steps=4,
                 policy_kwargs=dict(n_lstm=8, features_extractor_kwargs=dict(features_dim=16)))
    policy = model.policy_tf
    names = list(policy.named_parameters())
    assert names[0] == "model/features_extractor/c1/w:0" and names[8] == "model/lstm1/wx:0"  # no layers between
    assert policy.named_parameters()["model/lstm1/wx:0"].shape == (16, 32)
    assert policy.scale and has_convolution([policy])  # SB3's normalize_images: the images / 255
    model.learn(16)
    action, state = model.predict(BrightnessEnv().reset(seed=0)[0])
    assert np.shape(action) == () and state.shape == (1, 16)


def test_savedmodel_export_follows_predict(tmp_path):
    pytest.importorskip("sbtf_converters", reason="export needs the converters package")
    model = PPO2("MultiInputLstmPolicy", DummyVecEnv([_grid_env] * 2), nminibatches=2, seed=2, policy_kwargs=TINY)
    serve = tf.saved_model.load(model.export(str(tmp_path / "saved"))).signatures["serving_default"]
    assert set(serve.structured_input_signature[1]) == {"img", "vec", "state", "mask"}
    state_py, state_ex = None, np.zeros((2, 2 * N_LSTM), np.float32)
    for obs, dones in _obs_sequence(2, 8, seed=1):
        mask = dones.astype(np.float32)
        proba = model.action_probability(obs, state=state_ex, mask=mask)
        action, state_py = model.predict(obs, state=state_py, mask=mask, deterministic=True)
        out = serve(img=tf.constant(obs["img"]), vec=tf.constant(obs["vec"], tf.float32),
                    state=tf.constant(state_ex), mask=tf.constant(mask))
        state_ex = out["state"].numpy()
        np.testing.assert_array_equal(out["action"].numpy(), action)
        np.testing.assert_allclose(out["probabilities"].numpy(), proba, atol=1e-5)
        np.testing.assert_allclose(state_ex, state_py, atol=1e-5)
    assert np.abs(state_ex).max() > 1e-3


def test_onnx_export_follows_predict(tmp_path):
    pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx: pip install 'sbtf[export]'")
    pytest.importorskip("onnx", reason="the ONNX export needs onnx: pip install 'sbtf[export]'")
    ort = pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime: pip install 'sbtf[export]'")
    model = PPO2("MultiInputLstmPolicy", DummyVecEnv([_grid_env] * 2), nminibatches=2, seed=4, policy_kwargs=TINY)
    session = ort.InferenceSession(str(model.export(str(tmp_path / "policy.onnx"), format="onnx")),
                                   providers=["CPUExecutionProvider"])
    assert {i.name for i in session.get_inputs()} == {"img", "vec", "state", "mask"}
    obs, _ = _obs_sequence(2, 1, seed=2)[0]
    state = np.random.default_rng(0).normal(size=(2, 2 * N_LSTM)).astype(np.float32)
    mask = np.array([0.0, 1.0], np.float32)
    got = dict(zip([o.name for o in session.get_outputs()],
                   session.run(None, {"img": obs["img"], "vec": obs["vec"].astype(np.float32), "state": state,
                                      "mask": mask})))
    action, next_state = model.predict(obs, state=state, mask=mask, deterministic=True)
    np.testing.assert_array_equal(got["action"], action)
    np.testing.assert_allclose(got["next_state"], next_state, atol=1e-5)


@pytest.mark.slow
def test_ppo2_learns_the_grid_env():
    """SimpleMultiObsEnv(random_start=False): the shortest path (6 steps) scores 0.5; a policy that does not reach
    the goal within 100 steps -10.1. Random actions score about -5.0 on average (reaching the goal in ~77% of the
    episodes); the untrained deterministic policy -10.1. 3,000 steps reached 0.5 on each of 6 seeds tried."""
    set_global_seeds(0)
    model = PPO2("MultiInputLstmPolicy", DummyVecEnv([_grid_env] * 4), seed=0, n_steps=32, nminibatches=2,
                 learning_rate=1e-3, policy_kwargs=dict(n_lstm=32, features_extractor_kwargs=dict(cnn_output_dim=16)))
    model.learn(5000)
    mean, _ = evaluate_policy(model, DummyVecEnv([_grid_env] * 4), n_eval_episodes=4)
    assert mean > 0.0
