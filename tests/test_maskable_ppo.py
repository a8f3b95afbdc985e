"""MaskablePPO (sbtf.contrib): masked distributions against a NumPy statement of sb3-contrib's maths, learning with
masks versus PPO2 without, the maskable helpers (ActionMasker, get_action_masks, MaskableEvalCallback), save/load,
export with the mask as an input and no retracing after warm-up."""
from __future__ import annotations

import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

from sbtf import PPO2
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.vec_env import DummyVecEnv
from sbtf.contrib import MaskablePPO
from sbtf.contrib.common.maskable import (ActionMasker, InvalidActionEnvDiscrete, InvalidActionEnvMultiBinary,
                                          InvalidActionEnvMultiDiscrete, MaskableEvalCallback, get_action_masks,
                                          is_masking_supported, make_masked_proba_distribution)
from sbtf.contrib.common.maskable import evaluate_policy as masked_evaluate
from user_extractors import GeluFeatures

HUGE_NEG = -1e8


# ------------------------------------------------------------------------------------------------ the maths
def _reference(logits, masks, actions, dims):
    """sb3-contrib's MaskableCategorical per component, stated in NumPy (float64): masked logits -> -1e8, normalised
    with logsumexp; log_prob sums over components; entropy leaves masked choices out."""
    logits = np.asarray(logits, np.float64)
    log_prob = np.zeros(len(logits))
    entropy = np.zeros(len(logits))
    start = 0
    for i, n in enumerate(dims):
        part = np.where(masks[:, start:start + n], logits[:, start:start + n], HUGE_NEG)
        top = part.max(axis=1, keepdims=True)
        norm = part - (top + np.log(np.exp(part - top).sum(axis=1, keepdims=True)))
        probs = np.exp(norm)
        log_prob += norm[np.arange(len(logits)), actions[:, i]]
        entropy -= np.where(masks[:, start:start + n], probs * norm, 0.0).sum(axis=1)
        start += n
    return log_prob, entropy


@pytest.mark.parametrize("space", [gym.spaces.Discrete(5), gym.spaces.MultiDiscrete([3, 4, 2]),
                                   gym.spaces.MultiBinary(4)])
def test_masked_log_prob_and_entropy_match_sb3_contrib_maths(space):
    rng = np.random.default_rng(0)
    dist = make_masked_proba_distribution(space)
    dims = dist.action_dims
    n = 64
    logits = rng.normal(0, 2, (n, dist.n_logits)).astype(np.float32)
    masks = rng.random((n, dist.n_logits)) < 0.6
    start = 0
    for size in dims:  # at least one valid choice per component
        masks[np.arange(n), start + rng.integers(0, size, n)] = True
        start += size
    actions = dist.sample_np(logits, masks, rng).reshape(n, len(dims))
    ref_log_prob, ref_entropy = _reference(logits, masks, actions, dims)
    flat_actions = actions[:, 0] if dist.discrete else actions
    np.testing.assert_allclose(dist.log_prob_tf(tf.constant(logits), tf.constant(flat_actions), tf.constant(masks)),
                               ref_log_prob, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dist.entropy_tf(tf.constant(logits), tf.constant(masks)), ref_entropy, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(dist.log_prob_np(logits, flat_actions, masks), ref_log_prob, rtol=1e-5, atol=1e-5)
    for deterministic in (False, True):  # the acting path's one-pass actions and log-probabilities
        acted, acted_log_prob = dist.act_np(logits, masks, rng, deterministic)
        np.testing.assert_allclose(acted_log_prob, dist.log_prob_np(logits, acted, masks), rtol=1e-5, atol=1e-5)
    # a masked choice has probability zero
    probs = dist.probabilities_np(logits, masks)
    assert np.all(probs[~masks] == 0.0)
    np.testing.assert_allclose(dist.probabilities_tf(tf.constant(logits), tf.constant(masks)), probs, atol=1e-6)
    # the mode is the most likely valid choice, in TF and NumPy
    np.testing.assert_array_equal(dist.mode_tf(tf.constant(logits), tf.constant(masks)).numpy(),
                                  dist.mode_np(logits, masks))


def test_sampling_never_draws_a_masked_choice():
    dist = make_masked_proba_distribution(gym.spaces.MultiDiscrete([4, 3]))
    rng = np.random.default_rng(1)
    logits = np.zeros((5000, 7), np.float32)
    logits[:, 3] = 20.0  # the masked choice would win almost always without the mask
    masks = np.ones((5000, 7), bool)
    masks[:, 3] = False
    masks[:, 4] = False
    actions = dist.sample_np(logits, masks, rng)
    assert not np.any(actions[:, 0] == 3) and not np.any(actions[:, 1] == 0)
    assert set(np.unique(actions[:, 0])) == {0, 1, 2}


# ------------------------------------------------------------------------------------------------ the helpers
def test_masking_support_and_action_masker():
    env = InvalidActionEnvDiscrete(dim=5, n_invalid_actions=2)
    assert is_masking_supported(env) and is_masking_supported(DummyVecEnv([lambda: env]))
    plain = gym.make("CartPole-v1")
    assert not is_masking_supported(plain) and not is_masking_supported(DummyVecEnv([lambda: plain]))
    masked = ActionMasker(plain, lambda e: np.array([True, False]))
    assert is_masking_supported(masked)
    np.testing.assert_array_equal(get_action_masks(DummyVecEnv([lambda: masked])), [[True, False]])
    assert get_action_masks(env).sum() == 3
    with pytest.raises(ValueError, match="does not support action masking"):
        MaskablePPO("MlpPolicy", plain, n_steps=8, batch_size=8).learn(8)


def test_sb3_contrib_defaults_and_policy_names():
    model = MaskablePPO("MlpPolicy", InvalidActionEnvDiscrete(dim=4, n_invalid_actions=1), _init_setup_model=False)
    assert (model.learning_rate, model.n_steps, model.batch_size, model.n_epochs, model.gamma, model.gae_lambda,
            model.clip_range, model.clip_range_vf, model.normalize_advantage, model.ent_coef, model.vf_coef,
            model.max_grad_norm, model.target_kl) == (3e-4, 2048, 64, 10, 0.99, 0.95, 0.2, None, True, 0.0, 0.5,
                                                      0.5, None)
    with pytest.raises(Exception, match="Box"):
        MaskablePPO("MlpPolicy", "Pendulum-v1")


# ------------------------------------------------------------------------------------------------ learning
def test_masking_beats_unmasked_ppo2():
    def make():
        return InvalidActionEnvDiscrete(dim=20, n_invalid_actions=15)

    masked = MaskablePPO("MlpPolicy", make(), n_steps=256, batch_size=64, gamma=0.4, seed=0).learn(1024)
    masked_reward = masked_evaluate(masked, make(), n_eval_episodes=5, warn=False)[0]
    ppo2 = PPO2("MlpPolicy", make(), n_steps=256, nminibatches=4, noptepochs=10, learning_rate=3e-4, gamma=0.4,
                ent_coef=0.0, seed=0).learn(1024)
    ppo2_reward = evaluate_policy(ppo2, DummyVecEnv([make]), n_eval_episodes=5)[0]
    assert masked_reward >= 90.0 and masked_reward > ppo2_reward + 10.0, (masked_reward, ppo2_reward)


@pytest.mark.parametrize("make_env", [lambda: InvalidActionEnvMultiDiscrete(dims=[4, 4], n_invalid_actions=4),
                                      lambda: InvalidActionEnvMultiBinary(dims=3, n_invalid_actions=2)],
                         ids=["multidiscrete", "multibinary"])
def test_multi_spaces_train_and_respect_masks(make_env):
    env = make_env()
    model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, seed=0).learn(128)
    dist = model.policy_tf.dist
    obs, _ = env.reset(seed=3)
    for _ in range(50):
        masks = np.asarray(env.action_masks())
        action, _ = model.predict(obs, action_masks=masks)
        offsets = np.concatenate([[0], np.cumsum(dist.action_dims)[:-1]])
        assert masks[offsets + np.asarray(action)].all()
        obs, *_ = env.step(action)


def test_maskable_eval_callback_and_target_kl(tmp_path):
    env = InvalidActionEnvDiscrete(dim=6, n_invalid_actions=3)
    callback = MaskableEvalCallback(InvalidActionEnvDiscrete(dim=6, n_invalid_actions=3), n_eval_episodes=1,
                                    eval_freq=64, best_model_save_path=str(tmp_path), verbose=0)
    model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=16, n_epochs=20, target_kl=1e-6, seed=0)
    model.learn(128, callback=callback)
    assert callback.last_mean_reward > -np.inf and (tmp_path / "best_model.zip").is_file()
    assert model._n_train_updates < 2 * 20  # the tiny target_kl stopped the epochs early


# ---------------------------------------------------------------------------------- files, export, tracing
@pytest.fixture(scope="module")
def trained():
    env = InvalidActionEnvDiscrete(dim=8, n_invalid_actions=4)
    model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, seed=0,
                        policy_kwargs=dict(net_arch=dict(pi=[32], vf=[16]), activation_fn="relu"))
    return model.learn(128)


def _obs_and_masks(n=16, seed=0):
    rng = np.random.default_rng(seed)
    obs = rng.integers(0, 8, n)
    masks = rng.random((n, 8)) < 0.5
    masks[np.arange(n), obs] = True
    return obs, masks


def test_save_load_gives_identical_predictions(trained, tmp_path):
    obs, masks = _obs_and_masks()
    trained.save(tmp_path / "maskable")
    loaded = MaskablePPO.load(tmp_path / "maskable")
    assert loaded.policy_kwargs == trained.policy_kwargs and loaded.batch_size == 32
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True, action_masks=masks)[0],
                                  trained.predict(obs, deterministic=True, action_masks=masks)[0])
    for name, value in trained.get_parameters()["policy"].items():
        np.testing.assert_array_equal(loaded.get_parameters()["policy"][name], value)


def test_export_takes_the_mask_and_equals_predict(trained, tmp_path):
    obs, masks = _obs_and_masks(32, seed=1)
    path = trained.export(str(tmp_path / "saved"))
    serve = tf.saved_model.load(path).signatures["serving_default"]
    out = serve(observation=tf.constant(obs.astype(np.int32)), action_masks=tf.constant(masks))
    np.testing.assert_array_equal(out["action"].numpy(), trained.predict(obs, deterministic=True,
                                                                         action_masks=masks)[0])
    logits = trained.policy_tf.flat_params(obs)
    np.testing.assert_allclose(out["probabilities"].numpy(),
                               trained.policy_tf.dist.probabilities_np(logits, masks), atol=1e-5)
    np.testing.assert_allclose(out["value"].numpy(), trained.policy_tf.value(obs), atol=1e-5)
    assert np.all(out["probabilities"].numpy()[~masks] == 0.0)


def test_onnx_export_takes_the_mask(trained, tmp_path):
    pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx: pip install 'sbtf[export]'")
    ort = pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime: pip install 'sbtf[export]'")
    obs, masks = _obs_and_masks(16, seed=2)
    session = ort.InferenceSession(trained.export(str(tmp_path / "maskable.onnx"), format="onnx"))
    assert [i.name for i in session.get_inputs()] == ["observation", "action_masks"]
    action = session.run(["action"], {"observation": obs.astype(np.int32), "action_masks": masks})[0]
    np.testing.assert_array_equal(action, trained.predict(obs, deterministic=True, action_masks=masks)[0])


def test_no_retracing_after_warm_up(trained):
    step = trained._train_step
    before = step.n_traces
    assert before == 1
    trained.learn(128, reset_num_timesteps=False)
    assert step.n_traces == before


@pytest.mark.slow
def test_multidiscrete_learns_to_the_top_with_masks():
    def make():
        return InvalidActionEnvMultiDiscrete(dims=[10, 10], n_invalid_actions=10)

    model = MaskablePPO("MlpPolicy", make(), n_steps=512, gamma=0.4, seed=0).learn(30_000)
    mean_reward, _ = masked_evaluate(model, make(), n_eval_episodes=10, warn=False)
    assert mean_reward >= 95, mean_reward


# ------------------------------------------------------------------------------------------------ feature extractors
def test_user_extractor_trains_saves_loads_and_exports(tmp_path):
    env = InvalidActionEnvDiscrete(dim=8, n_invalid_actions=4)
    model = MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=16, n_epochs=2, seed=0,
                        policy_kwargs=dict(features_extractor_class=GeluFeatures,
                                           features_extractor_kwargs=dict(features_dim=6), net_arch=[16]))
    policy = model.policy_tf
    assert type(policy.features_extractor.layer) is GeluFeatures and not policy.acts_in_numpy
    names = list(model.get_parameters()["policy"])
    assert names[:2] == ["model/features_extractor/0_kernel:0", "model/features_extractor/1_bias:0"]
    before = model.get_parameters()["policy"]["model/features_extractor/0_kernel:0"].copy()
    model.learn(64)
    assert not np.array_equal(model.get_parameters()["policy"]["model/features_extractor/0_kernel:0"], before)  # trains
    obs, masks = _obs_and_masks()
    expected = model.predict(obs, deterministic=True, action_masks=masks)[0]
    model.save(tmp_path / "user")
    loaded = MaskablePPO.load(tmp_path / "user")
    assert loaded.policy_kwargs["features_extractor_class"] is GeluFeatures
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True, action_masks=masks)[0], expected)
    np.testing.assert_array_equal(loaded.policy_tf.flat_params(obs), model.policy_tf.flat_params(obs))
    serve = tf.saved_model.load(loaded.export(str(tmp_path / "saved"))).signatures["serving_default"]
    out = serve(observation=tf.constant(obs.astype(np.int32)), action_masks=tf.constant(masks))
    np.testing.assert_array_equal(out["action"].numpy(), expected)


class TinyImageMaskEnv(gym.Env):
    """Small uint8 images (36x36x1) whose pixel value says which of 3 actions pays; action 2 is always masked."""

    observation_space = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        self.good = int(self.np_random.integers(2))
        return np.full((36, 36, 1), 255 * self.good, np.uint8)

    def step(self, action):
        reward = float(int(action) == self.good)
        self.t += 1
        return self._obs(), reward, False, self.t >= 8, {}

    def action_masks(self):
        return np.array([True, True, False])


def test_builtin_extractors_by_name_and_class_keep_their_names():
    from sbtf.common.extractors import FlattenExtractor, NatureCNN

    env = InvalidActionEnvDiscrete(dim=4, n_invalid_actions=1)
    by_name = MaskablePPO("MlpPolicy", env, n_steps=16, batch_size=8,
                          policy_kwargs=dict(features_extractor_class="FlattenExtractor"))
    by_class = MaskablePPO("MlpPolicy", env, n_steps=16, batch_size=8,
                           policy_kwargs=dict(features_extractor_class=FlattenExtractor))
    default = MaskablePPO("MlpPolicy", env, n_steps=16, batch_size=8)
    assert (list(by_name.get_parameters()["policy"]) == list(by_class.get_parameters()["policy"])
            == list(default.get_parameters()["policy"]))
    assert default.policy_tf.acts_in_numpy
    cnn = MaskablePPO("CnnPolicy", TinyImageMaskEnv(), n_steps=16, batch_size=8)
    assert list(cnn.get_parameters()["policy"])[:2] == ["model/c1/w:0", "model/c1/b:0"]  # CnnPolicy's names
    assert cnn.get_parameters()["policy"]["model/fc1/w:0"].shape[-1] == 512 and cnn.policy_tf.scale
    small = MaskablePPO("CnnPolicy", TinyImageMaskEnv(), n_steps=16, batch_size=8,
                        policy_kwargs=dict(features_extractor_kwargs=dict(features_dim=32)))
    assert small.get_parameters()["policy"]["model/fc1/w:0"].shape[-1] == 32
    assert small.get_parameters()["policy"]["model/pi/w:0"].shape == (32, 3)  # net_arch [] behind the CNN, as sb3
    assert type(small.policy_tf.features_extractor.layer) is NatureCNN
    small.learn(32)
    with pytest.raises(ValueError, match="MultiInputPolicy"):
        MaskablePPO("MlpPolicy", MaskedDictEnv())
    with pytest.raises(TypeError, match="keras.layers.Layer"):
        MaskablePPO("MlpPolicy", env, policy_kwargs=dict(features_extractor_class=dict))


# ------------------------------------------------------------------------------------------------ Dict observations
class MaskedDictEnv(gym.Env):
    """Dict observations (a Discrete cue, a vector, bits): the reward is 1 when the action equals the cue; two of
    the three wrong actions are masked at each step (random valid choice: 1/2)."""

    observation_space = gym.spaces.Dict({"cue": gym.spaces.Discrete(4),
                                         "vec": gym.spaces.Box(-1, 1, (3,), np.float32),
                                         "bits": gym.spaces.MultiBinary(2)})
    action_space = gym.spaces.Discrete(4)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        self.cue = int(self.np_random.integers(4))
        wrong = [a for a in range(4) if a != self.cue]
        self.masks = np.zeros(4, bool)
        self.masks[[self.cue, int(self.np_random.choice(wrong))]] = True
        return {"cue": self.cue, "vec": self.np_random.uniform(-1, 1, 3).astype(np.float32),
                "bits": self.np_random.integers(0, 2, 2).astype(np.int8)}

    def step(self, action):
        reward = float(int(action) == self.cue)
        self.t += 1
        return self._obs(), reward, False, self.t >= 20, {}

    def action_masks(self):
        return self.masks.copy()


def _dict_batch(n=12, seed=0):
    space = MaskedDictEnv.observation_space
    space.seed(seed)
    samples = [space.sample() for _ in range(n)]
    obs = {key: np.stack([s[key] for s in samples]) for key in space.spaces}
    rng = np.random.default_rng(seed)
    masks = rng.random((n, 4)) < 0.5
    masks[np.arange(n), obs["cue"]] = True
    return obs, masks


def test_multi_input_policy_learns_with_masks_saves_and_exports(tmp_path):
    from sbtf.common.vec_env.vec_pack_dict_obs import VecPackDictObs

    env = DummyVecEnv([MaskedDictEnv] * 2)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=4, learning_rate=3e-3,
                        seed=0, policy_kwargs=dict(net_arch=[32]))
    assert isinstance(model.env, VecPackDictObs) and model.get_env() is env
    assert model.policy_tf.acts_in_numpy  # no image key: the combined features have a NumPy form
    model.learn(2048)
    mean, _ = masked_evaluate(model, MaskedDictEnv(), n_eval_episodes=4, warn=False)
    assert mean > 17  # of 20; a random valid action: 10
    obs, masks = _dict_batch()
    actions = model.predict(obs, deterministic=True, action_masks=masks)[0]
    assert actions.shape == (12,) and masks[np.arange(12), actions].all()
    model.save(tmp_path / "dict")
    loaded = MaskablePPO.load(tmp_path / "dict")
    assert loaded.observation_space == MaskedDictEnv.observation_space
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True, action_masks=masks)[0], actions)
    np.testing.assert_array_equal(loaded.policy_tf.flat_params(obs), model.policy_tf.flat_params(obs))
    serve = tf.saved_model.load(loaded.export(str(tmp_path / "saved"))).signatures["serving_default"]
    out = serve(cue=tf.constant(obs["cue"].astype(np.int32)), vec=tf.constant(obs["vec"]),
                bits=tf.constant(obs["bits"].astype(np.int32)), action_masks=tf.constant(masks))
    np.testing.assert_array_equal(out["action"].numpy(), actions)
    assert np.all(out["probabilities"].numpy()[~masks] == 0.0)


def test_multi_input_policy_with_an_image_key_and_a_user_dict_extractor():
    from sbtf.common.multi_input_envs import SimpleMultiObsEnv

    class MaskedGrid(SimpleMultiObsEnv):
        def action_masks(self):
            return np.array([True, True, True, False])  # one direction never allowed

    cnn = MaskablePPO("MultiInputPolicy", MaskedGrid(random_start=False), n_steps=16, batch_size=8, n_epochs=1,
                      policy_kwargs=dict(features_extractor_kwargs=dict(cnn_output_dim=8)))
    names = list(cnn.get_parameters()["policy"])
    assert names[0] == "model/features_extractor/img/c1/w:0" and not cnn.policy_tf.acts_in_numpy
    cnn.learn(16)
    user = MaskablePPO("MultiInputPolicy", MaskedDictEnv(), n_steps=16, batch_size=8, n_epochs=1,
                       policy_kwargs=dict(features_extractor_class=DictGelu))
    user.learn(16)
    obs, masks = _dict_batch(4)
    assert masks[np.arange(4), user.predict(obs, action_masks=masks)[0]].all()


class DictGelu(keras.layers.Layer):
    """A user's Dict extractor: the keys concatenated, one gelu Dense layer."""

    features_dim = 8

    def __init__(self, observation_space, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(8, activation="gelu")

    def call(self, observations):
        return self.dense(tf.concat([observations["cue"], observations["vec"], observations["bits"]], axis=-1))
