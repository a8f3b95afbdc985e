"""The last SB2 / SB3 behaviours of issues #14 and #17: progress_bar and episode_start everywhere, action_probability
through proba_step, GAIL's saved dataset, HER's error type, LSTM net_arch after the LSTM, the time-feature hint and the
model file's data form."""
import inspect
import json
import zipfile

import gymnasium as gym
import numpy as np
import pytest

from sbtf import A2C, ACER, ACKTR, DDPG, DQN, GAIL, HER, PPO1, PPO2, SAC, TD3, TRPO
from sbtf.common.base_class import time_feature_hint
from sbtf.common.bit_flipping_env import BitFlippingEnv
from sbtf.common.file_errors import UnsafeFileError
from sbtf.common.identity_env import IdentityEnv, IdentityEnvBox
from sbtf.common.policies import FeedForwardPolicy, LstmPolicy, MlpPolicy
from sbtf.common.vec_env import DummyVecEnv, VecNormalize
from sbtf.gail import ExpertDataset
from sbtf.her import UnsupportedHEREnvError

ALGORITHMS = [A2C, ACER, ACKTR, DDPG, DQN, GAIL, PPO1, PPO2, SAC, TD3, TRPO]
SMALL = {A2C: dict(n_steps=8), ACER: dict(n_steps=8, replay_start=8, buffer_size=64), ACKTR: dict(n_steps=8),
         PPO2: dict(n_steps=16, nminibatches=1), PPO1: dict(timesteps_per_actorbatch=16, optim_batchsize=16),
         TRPO: dict(timesteps_per_batch=16), GAIL: dict(timesteps_per_batch=16, g_step=1), DQN: dict(learning_starts=8),
         SAC: dict(learning_starts=8), TD3: dict(learning_starts=8), DDPG: dict(nb_rollout_steps=8)}


def _expert_dataset(n=40):
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 2, (n, 2)).astype(np.float32)
    return ExpertDataset(traj_data=dict(obs=obs, actions=obs[:, :1].astype(np.int64),
                                        episode_starts=(np.arange(n) % 10 == 0), episode_returns=np.full(4, 10.0),
                                        rewards=np.ones(n)), batch_size=8, verbose=0)


class TwoBitEnv(gym.Env):
    """Box(2) observation of bits; Discrete(2) action; reward 1 when the action equals the first bit."""

    observation_space = gym.spaces.Box(0, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.obs = self.np_random.integers(0, 2, 2).astype(np.float32)
        return self.obs, {}

    def step(self, action):
        reward = float(int(action) == int(self.obs[0]))
        self.t += 1
        self.obs = self.np_random.integers(0, 2, 2).astype(np.float32)
        return self.obs, reward, False, self.t >= 10, {}


def _make(algo):
    kwargs = dict(SMALL[algo], seed=0)
    if algo in (DDPG, SAC, TD3):
        return algo("MlpPolicy", IdentityEnvBox(eps=0.5), **kwargs)
    if algo is GAIL:
        return algo("MlpPolicy", TwoBitEnv(), _expert_dataset(), **kwargs)
    return algo("MlpPolicy", TwoBitEnv(), **kwargs)


# ---------------------------------------------------------------------------------------------------- issue 14 item 5
@pytest.mark.parametrize("algo", ALGORITHMS, ids=lambda a: a.__name__)
def test_every_learn_takes_progress_bar_and_every_predict_episode_start(algo, capsys):
    model = _make(algo)
    assert "progress_bar" in inspect.signature(algo.learn).parameters
    model.learn(32, progress_bar=True)
    assert "/32[" in capsys.readouterr().err.replace(" ", "")  # tqdm drew a bar of 32 steps
    assert model.num_timesteps >= 32
    obs = model.env.reset()
    for method in (algo.predict, algo.action_probability):
        assert inspect.signature(method).parameters["episode_start"].kind is inspect.Parameter.KEYWORD_ONLY
    action, _ = model.predict(obs, episode_start=np.ones(1, bool), deterministic=True)
    np.testing.assert_array_equal(action, model.predict(obs, mask=np.ones(1, bool), deterministic=True)[0])
    with pytest.raises(ValueError, match="same flags under two names"):
        model.predict(obs, mask=np.zeros(1, bool), episode_start=np.ones(1, bool))


def test_her_learn_takes_progress_bar_and_predict_episode_start(capsys):
    model = HER("MlpPolicy", BitFlippingEnv(4, max_steps=4), DQN, learning_starts=8, seed=0)
    model.learn(24, progress_bar=True)
    assert "/24[" in capsys.readouterr().err.replace(" ", "")
    obs, _ = BitFlippingEnv(4, max_steps=4).reset(seed=0)
    assert model.predict(obs, episode_start=np.ones(1, bool))[0].shape == ()


def test_episode_start_resets_a_recurrent_state_like_mask():
    model = PPO2("MlpLstmPolicy", DummyVecEnv([TwoBitEnv] * 2), n_steps=8, nminibatches=2, seed=0,
                 policy_kwargs=dict(n_lstm=8))
    obs = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    _, state = model.predict(obs)
    _, kept = model.predict(obs, state=state, episode_start=np.array([False, False]))
    _, reset = model.predict(obs, state=state, episode_start=np.array([True, False]))
    _, fresh = model.predict(obs)
    np.testing.assert_allclose(reset[0], fresh[0], atol=1e-6)  # env 0 started a new episode
    np.testing.assert_allclose(reset[1], kept[1], atol=1e-6)
    assert not np.allclose(kept[0], fresh[0])


# ---------------------------------------------------------------------------------------------------- issue 17 item 5
@pytest.mark.parametrize("algo", [A2C, ACKTR, PPO1, PPO2, TRPO], ids=lambda a: a.__name__)
def test_action_probability_goes_through_proba_step_and_broadcasts_one_box_action(algo):
    model = algo("MlpPolicy", IdentityEnvBox())
    model.proba_step = lambda obs, state, mask: (np.array([-0.4]), np.array([[0.1]]))  # SB2's test: mean, std
    logprob = model.action_probability(observation=np.array([[0.5], [0.5]]), actions=0.2, logp=True)
    expected = -0.6 ** 2 / (2 * 0.1 ** 2) - 0.5 * np.log(2 * np.pi) - np.log(0.1)
    np.testing.assert_allclose(logprob, [[expected]])


def test_action_probability_box_batches_and_policy_proba_step():
    model = PPO2("MlpPolicy", IdentityEnvBox(), seed=0)
    obs = np.array([[0.1], [0.5], [0.9]], np.float32)
    mean, std = model.policy_tf.proba_step(obs)  # SB2's policy_proba: [mean, std]
    one = model.action_probability(obs, actions=np.array([0.3]))
    each = model.action_probability(obs, actions=np.array([[0.3], [0.3], [0.3]]))
    np.testing.assert_allclose(one, each)
    density = np.exp(-(0.3 - mean) ** 2 / (2 * std ** 2)) / (std * np.sqrt(2 * np.pi))
    np.testing.assert_allclose(one, density, rtol=1e-5)
    with pytest.raises(ValueError, match="one action for all of them"):
        model.action_probability(obs, actions=np.zeros((2, 1)))


def test_her_refuses_a_vec_normalize_over_a_dict_space_with_sb2s_assertion_error():
    venv = VecNormalize(DummyVecEnv([lambda: BitFlippingEnv(4, max_steps=4)]))
    assert isinstance(venv.observation_space, gym.spaces.Dict)
    with pytest.raises(AssertionError, match="VecEnvWrapper"):
        HER("MlpPolicy", venv, DQN)
    with pytest.raises(ValueError, match="VecEnvWrapper"):
        HER("MlpPolicy", venv, DQN)
    assert issubclass(UnsupportedHEREnvError, AssertionError) and issubclass(UnsupportedHEREnvError, ValueError)


def test_gail_saves_its_expert_dataset_as_data_and_learns_after_load(tmp_path):
    dataset = _expert_dataset()
    model = GAIL("MlpPolicy", TwoBitEnv(), dataset, timesteps_per_batch=16, g_step=1, seed=0)
    model.learn(32)
    model.save(tmp_path / "gail.zip")
    with zipfile.ZipFile(tmp_path / "gail.zip") as archive:
        stored = json.loads(archive.read("data"))["expert_dataset"]
    assert stored["obs"]["__ndarray__"] == dataset.observations.tolist()  # plain data, no pickle
    assert "__pickle__" not in json.dumps(stored)
    loaded = GAIL.load(tmp_path / "gail.zip", env=TwoBitEnv())
    np.testing.assert_array_equal(loaded.expert_dataset.observations, dataset.observations)
    np.testing.assert_array_equal(loaded.expert_dataset.actions, dataset.actions)
    assert loaded.expert_dataset.batch_size == 8
    loaded.learn(32)
    assert loaded.num_timesteps == 32


class SharedAfterLstmPolicy(LstmPolicy):
    def __init__(self, sess, ob_space, ac_space, n_env, n_steps, n_batch, n_lstm=4, reuse=False, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, n_lstm, reuse,
                         net_arch=[8, "lstm", 6, dict(vf=[5, 3], pi=[7])], feature_extraction="mlp", **_kwargs)


def test_lstm_net_arch_with_shared_layers_after_the_lstm_builds_as_sb2(tmp_path):
    model = PPO2(SharedAfterLstmPolicy, DummyVecEnv([TwoBitEnv] * 2), n_steps=8, nminibatches=2, seed=0)
    shapes = [(name, tuple(v.shape)) for name, v in model.get_parameters().items()]
    assert shapes == [
        ("model/shared_fc0/w:0", (2, 8)), ("model/shared_fc0/b:0", (8,)),
        ("model/lstm1/wx:0", (8, 16)), ("model/lstm1/wh:0", (4, 16)), ("model/lstm1/b:0", (16,)),
        ("model/shared_fc2/w:0", (4, 6)), ("model/shared_fc2/b:0", (6,)),
        ("model/pi_fc0/w:0", (6, 7)), ("model/pi_fc0/b:0", (7,)),
        ("model/vf_fc0/w:0", (6, 5)), ("model/vf_fc0/b:0", (5,)), ("model/vf_fc1/w:0", (5, 3)),
        ("model/vf_fc1/b:0", (3,)), ("model/vf/w:0", (3, 1)), ("model/vf/b:0", (1,)),
        ("model/pi/w:0", (7, 2)), ("model/pi/b:0", (2,)), ("model/q/w:0", (3, 2)), ("model/q/b:0", (2,))]
    # the maths: tanh(shared_fc0) -> LSTM (from a zero state) -> tanh(shared_fc2) -> tanh(pi_fc0) -> pi
    p = model.get_parameters()
    obs = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    x = np.tanh(obs @ p["model/shared_fc0/w:0"] + p["model/shared_fc0/b:0"])
    z = x @ p["model/lstm1/wx:0"] + p["model/lstm1/b:0"]
    i, f, o, u = np.split(z, 4, axis=1)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    h = sig(o) * np.tanh(sig(i) * np.tanh(u))
    latent = np.tanh(h @ p["model/shared_fc2/w:0"] + p["model/shared_fc2/b:0"])
    logits = np.tanh(latent @ p["model/pi_fc0/w:0"] + p["model/pi_fc0/b:0"]) @ p["model/pi/w:0"] + p["model/pi/b:0"]
    probabilities = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(model.action_probability(obs), probabilities, atol=1e-5)
    model.learn(32)
    model.save(tmp_path / "lstm.zip")
    loaded = PPO2.load(tmp_path / "lstm.zip")
    np.testing.assert_allclose(loaded.action_probability(obs), model.action_probability(obs), atol=1e-6)


@pytest.mark.parametrize("net_arch, error", [
    ([8, "lstm", dict(vf=[5], pi=["lstm", 10])], NotImplementedError),
    ([8, dict(vf=[5], pi=[10])], ValueError),
    (["lstm", "lstm"], ValueError),
])
def test_lstm_net_arch_errors_as_sb2(net_arch, error):
    with pytest.raises(error, match="(?i)lstm"):
        PPO2("MlpLstmPolicy", DummyVecEnv([TwoBitEnv] * 2), nminibatches=2, policy_kwargs=dict(net_arch=net_arch))


def test_an_observation_one_entry_short_names_the_time_feature(tmp_path):
    model = PPO2("MlpPolicy", DummyVecEnv([lambda: gym.make("Pendulum-v1")]), seed=0)
    model.observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)  # as if trained with a time feature
    with pytest.raises(ValueError, match="TimeFeatureWrapper") as info:
        model.predict(np.zeros((1, 3), np.float32))
    assert "sbtf.common.wrappers.TimeFeatureWrapper" in str(info.value)
    with pytest.raises(ValueError, match="a time feature is probably missing"):
        model.set_env(DummyVecEnv([lambda: gym.make("Pendulum-v1")]))
    assert time_feature_hint((4,), (2,)) == "" and time_feature_hint((8, 8, 3), (8, 8, 2)) == ""


# ---------------------------------------------------------------------------------------------------- data form
class CustomMlpPolicy(FeedForwardPolicy):
    """SB2's test_save_custom_objects policy."""

    def __init__(self, sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=False, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="mlp", **_kwargs)


def test_classes_are_stored_by_name_and_a_broken_entry_is_replaced_with_custom_objects(tmp_path):
    """sbtf's form of SB2's test_save_custom_objects: the data names classes (no cloudpickle to corrupt); a name the
    file cannot resolve is refused without running anything, and custom_objects replaces it."""
    path = tmp_path / "a2c.zip"
    A2C(MlpPolicy, DummyVecEnv([lambda: IdentityEnv(10)])).save(path)
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data"])
    assert data["policy"] == {"__class__": "sbtf.common.policies:MlpPolicy"}
    assert ":serialized:" not in members["data"].decode()
    data["policy"]["__class__"] = "evil_module:Payload"
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    with pytest.raises(UnsafeFileError, match="custom_objects"):
        A2C.load(path)
    model = A2C.load(path, custom_objects={"policy": CustomMlpPolicy})
    assert model.policy is CustomMlpPolicy
