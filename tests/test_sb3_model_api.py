"""stable-baselines3's model API on sbtf's SB3-dialect classes (issue #30, item 2: sb3-contrib's classes get the surface
that sb3-contrib's own test suite calls): ``model.policy`` the policy object, ``ep_info_buffer`` /
``ep_success_buffer``, ``get_parameters`` / ``set_parameters``, ``save(exclude=, include=)``, SB3's ``load``, the
logger, ``evaluate_policy(warn=)``, ``EvalCallback(callback_after_eval=)`` with ``StopTrainingOnNoModelImprovement``,
``Monitor(env)``, ``is_vecenv_wrapped``, sb3-contrib's module paths, channel-first images and ``check_env``'s text.
"""
from __future__ import annotations

import io
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from sbtf.common.callbacks import EvalCallback, StopTrainingOnNoModelImprovement
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.monitor import Monitor
from sbtf.common.vec_env import DummyVecEnv, VecNormalize, VecTransposeImage, is_vecenv_wrapped, unwrap_vec_wrapper
from sbtf.contrib import ARS, QRDQN, TQC, MaskablePPO, RecurrentPPO
from sbtf.contrib.trpo import TRPO

SMALL_QRDQN = dict(learning_starts=20, policy_kwargs=dict(n_quantiles=5, net_arch=[16]))
SMALL_TQC = dict(learning_starts=20, batch_size=16, policy_kwargs=dict(n_quantiles=5, net_arch=[16]))


class SuccessEnv(gym.Env):
    """Episodes of 3 steps; ``info["is_success"]`` at the end, True on every other episode."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self):
        self.episodes = 0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        done = self.t >= 3
        info = {}
        if done:
            info["is_success"] = self.episodes % 2 == 0
            self.episodes += 1
        return np.full(2, 0.1 * self.t, np.float32), 1.0, done, False, info


class ImageEnv(gym.Env):
    """Channel-last uint8 images (36x36x3); reward 1 for action 1."""

    observation_space = spaces.Box(0, 255, (36, 36, 3), np.uint8)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(action), self.t >= 8, False, {}


# ------------------------------------------------------------------ model.policy is the policy object
def test_policy_is_the_object_with_sb3s_attributes():
    tqc = TQC("MlpPolicy", "Pendulum-v1", **SMALL_TQC)
    policy = tqc.policy
    assert policy is tqc.policy_tf and tqc.policy_class.__name__ == "MlpPolicy"
    assert policy.actor is not None and policy.critic is not None and policy.critic_target is not None
    assert policy.observation_space == tqc.observation_space and policy.action_space == tqc.action_space
    qrdqn = QRDQN("MlpPolicy", "CartPole-v1", **SMALL_QRDQN)
    assert qrdqn.policy.quantile_net is not None and qrdqn.policy.quantile_net_target is not None
    for model in (tqc, qrdqn, TRPO("MlpPolicy", "CartPole-v1", n_steps=32), ARS("LinearPolicy", "CartPole-v1"),
                  RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=16)):
        assert not isinstance(model.policy, type), type(model).__name__
        model.policy.set_training_mode(True)
        assert model.policy.training_mode
        model.policy.set_training_mode(False)
        assert not model.policy.training_mode


def test_policy_predict_is_the_models_predict():
    model = TQC("MlpPolicy", "Pendulum-v1", **SMALL_TQC)
    obs = np.random.default_rng(0).uniform(-1, 1, size=(5, 3)).astype(np.float32)
    np.testing.assert_array_equal(model.policy.predict(obs, deterministic=True)[0],
                                  model.predict(obs, deterministic=True)[0])
    single, state = model.policy.predict(obs[0], deterministic=True)
    assert single.shape == (1,) and state is None and np.all(np.abs(single) <= 2.0)  # Pendulum's bounds
    lstm = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=16)
    obs = np.zeros((1, 4), np.float32)
    actions, states = lstm.policy.predict(obs, episode_start=np.ones(1, bool), deterministic=True)
    np.testing.assert_array_equal(actions, lstm.predict(obs, episode_start=np.ones(1, bool), deterministic=True)[0])
    assert states is not None


def test_reset_noise_where_gsde():
    model = TQC("MlpPolicy", "Pendulum-v1", use_sde=True, **SMALL_TQC)
    model.policy.reset_noise()
    first, resets = model.policy.sde_noise.matrix.copy(), model.policy.sde_noise.n_resets
    model.policy.reset_noise()
    assert model.policy.sde_noise.n_resets == resets + 1
    assert not np.array_equal(first, model.policy.sde_noise.matrix)


def test_a_policy_without_its_model_says_how_to_predict():
    model = QRDQN("MlpPolicy", "CartPole-v1", **SMALL_QRDQN)
    policy = model.policy
    del model
    import gc

    gc.collect()
    with pytest.raises(RuntimeError, match="model.policy"):
        policy.predict(np.zeros(4, np.float32))


def test_sb2_classes_keep_the_policy_class():
    from sbtf import PPO2

    model = PPO2("MlpPolicy", "CartPole-v1", n_steps=16)
    assert isinstance(model.policy, type) and model.policy is model.policy_class
    assert isinstance(model.get_parameters(), dict) and "policy" not in model.get_parameters()


# ------------------------------------------------------------------ episode buffers
def test_ep_info_and_success_buffers():
    model = QRDQN("MlpPolicy", SuccessEnv(), **SMALL_QRDQN)  # a single env is wrapped in a Monitor, as SB3 does
    assert model.ep_info_buffer is None and model.ep_success_buffer is None
    model.learn(30)
    assert model.ep_info_buffer is model.ep_info_buf  # one deque under both names
    assert len(model.ep_info_buffer) == 10 and set(model.ep_info_buffer[0]) >= {"r", "l", "t"}
    assert model.ep_info_buffer[0]["r"] == 3.0 and model.ep_info_buffer[0]["l"] == 3
    assert list(model.ep_success_buffer) == [True, False] * 5
    assert model.ep_success_buffer.maxlen == model.ep_info_buffer.maxlen == 100
    on_policy = TRPO("MlpPolicy", SuccessEnv(), n_steps=12, stats_window_size=4)
    on_policy.learn(24)
    assert len(on_policy.ep_info_buffer) == 4 and on_policy.ep_success_buffer.maxlen == 4
    assert list(on_policy.ep_success_buffer) == [True, False, True, False]
    on_policy.set_env(SuccessEnv())
    assert on_policy.ep_info_buffer is None and on_policy.ep_success_buffer is None


# ------------------------------------------------------------------ parameters
def test_get_and_set_parameters_in_sb3s_form(tmp_path):
    model = QRDQN("MlpPolicy", "CartPole-v1", **SMALL_QRDQN)
    params = model.get_parameters()
    assert list(params) == ["policy"] and "model/quantile_net/out/kernel:0" in params["policy"]
    obs = np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32)
    before = model.policy.quantiles_np(obs)
    shifted = {"policy": {name: value + 0.5 for name, value in params["policy"].items()}}
    model.set_parameters(shifted)
    assert not np.allclose(model.policy.quantiles_np(obs), before)  # acting sees the new weights
    model.set_parameters(params, exact_match=True)
    np.testing.assert_allclose(model.policy.quantiles_np(obs), before)

    with pytest.raises(ValueError, match="objects .*'not_a_part'"):
        model.set_parameters({**params, "not_a_part": {}})
    with pytest.raises(ValueError, match="do not match"):
        model.set_parameters({}, exact_match=True)
    model.set_parameters({}, exact_match=False)  # nothing to load
    with pytest.raises(ValueError, match="load_parameters"):
        model.set_parameters(params["policy"])  # the flat form is load_parameters'
    partial = {"policy": dict(list(params["policy"].items())[:2])}
    with pytest.raises(ValueError, match="exact_match=False"):
        model.set_parameters(partial)
    model.set_parameters(partial, exact_match=False)
    with pytest.raises(ValueError, match="does not have"):
        model.set_parameters({"policy": {**params["policy"], "model/extra:0": np.zeros(1)}})

    model.save(tmp_path / "qrdqn")
    other = QRDQN("MlpPolicy", "CartPole-v1", **SMALL_QRDQN)
    other.set_parameters(str(tmp_path / "qrdqn.zip"))
    np.testing.assert_allclose(other.policy.quantiles_np(obs), before)


# ------------------------------------------------------------------ save / load
def test_save_exclude_include(tmp_path):
    model = TRPO("MlpPolicy", "CartPole-v1", n_steps=32, verbose=1, gamma=0.9)
    model.save(tmp_path / "m", exclude=["verbose", "gamma"])
    loaded = TRPO.load(tmp_path / "m")
    assert loaded.verbose == 0 and loaded.gamma == 0.99  # left out: the constructor's defaults
    model.verbose = 2
    model.save(tmp_path / "m", exclude=["verbose"], include=["verbose"])
    assert TRPO.load(tmp_path / "m").verbose == 2
    with pytest.raises(ValueError, match="cannot be loaded without"):
        model.save(tmp_path / "m", exclude=["observation_space"])
    with pytest.raises(ValueError, match="never arbitrary objects"):
        model.save(tmp_path / "m", include=["env"])
    buffer = io.BytesIO()
    model.save(buffer)
    assert TRPO.load(io.BytesIO(buffer.getvalue())).n_steps == 32


def test_load_takes_sb3s_arguments(tmp_path, capsys):
    model = QRDQN("MlpPolicy", "CartPole-v1", **SMALL_QRDQN)
    model.save(tmp_path / "q")
    loaded = QRDQN.load(tmp_path / "q", None, "cpu", None, True, True)  # SB3's positional order
    out = capsys.readouterr().out
    assert "== CURRENT SYSTEM INFO ==" in out and "TensorFlow" in out and "sbtf" in out
    loaded = QRDQN.load(tmp_path / "q", env=gym.make("CartPole-v1"), device="auto", force_reset=False,
                        learning_starts=5)
    assert loaded.learning_starts == 5 and loaded.get_env() is not None
    loaded.set_env(gym.make("CartPole-v1"), force_reset=True)
    assert loaded.get_vec_normalize_env() is None
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    loaded.set_env(venv)
    assert loaded.get_vec_normalize_env() is venv and loaded.get_env() is venv


# ------------------------------------------------------------------ logger
def test_set_logger_receives_the_training_log(tmp_path):
    from sbtf import logger as sbtf_logger
    from sbtf.common.logger import configure

    new_logger = configure(str(tmp_path), ["csv"])
    model = TRPO("MlpPolicy", "CartPole-v1", n_steps=32, verbose=1)
    assert model.logger is sbtf_logger.Logger.CURRENT
    model.set_logger(new_logger)
    assert model.logger is new_logger
    previous = sbtf_logger.Logger.CURRENT
    model.learn(64)
    assert sbtf_logger.Logger.CURRENT is previous  # restored after learn()
    header = (tmp_path / "progress.csv").read_text().splitlines()[0].split(",")
    assert "time/total_timesteps" in header and "rollout/ep_rew_mean" in header
    with pytest.raises(TypeError, match="configure"):
        model.set_logger("stdout")


def test_logger_record_exclude_and_dump_step(tmp_path):
    from sbtf.common.logger import configure

    logger = configure(str(tmp_path), ["csv", "json"])
    logger.record("a", 1.0)
    logger.record("b", 2.0, exclude="csv")
    assert logger.name_to_value["b"] == 2.0
    logger.dump(step=5)
    assert (tmp_path / "progress.csv").read_text().splitlines()[0] == "a"
    assert '"b": 2.0' in (tmp_path / "progress.json").read_text()


# ------------------------------------------------------------------ evaluation and callbacks
def test_evaluate_policy_warn():
    model = QRDQN("MlpPolicy", "CartPole-v1", **SMALL_QRDQN)
    with pytest.warns(UserWarning, match="not wrapped with a ``Monitor``"):
        evaluate_policy(model, gym.make("CartPole-v1"), n_eval_episodes=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        evaluate_policy(model, gym.make("CartPole-v1"), n_eval_episodes=1, warn=False)
        evaluate_policy(model, DummyVecEnv([lambda: gym.make("CartPole-v1")]), n_eval_episodes=1, warn=False)
        evaluate_policy(model, Monitor(gym.make("CartPole-v1")), n_eval_episodes=1)  # Monitor without a file


def test_maskable_evaluation_and_callback_take_warn():
    from sbtf.contrib.common.envs import InvalidActionEnvDiscrete
    from sbtf.contrib.common.maskable.callbacks import MaskableEvalCallback
    from sbtf.contrib.common.maskable.evaluation import evaluate_policy as maskable_evaluate

    model = MaskablePPO("MlpPolicy", InvalidActionEnvDiscrete(dim=5, n_invalid_actions=2), n_steps=32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        maskable_evaluate(model, InvalidActionEnvDiscrete(dim=5, n_invalid_actions=2), n_eval_episodes=1, warn=False)
        callback = MaskableEvalCallback(InvalidActionEnvDiscrete(dim=5, n_invalid_actions=2), eval_freq=16,
                                        n_eval_episodes=1, warn=False, verbose=0)
        model.learn(64, callback=callback)
    assert callback.warn is False and len(callback.evaluations_results) == 0  # no log_path: nothing recorded
    assert callback.best_mean_reward > -np.inf


def test_stop_training_on_no_model_improvement(tmp_path, capsys):
    model = TRPO("MlpPolicy", "CartPole-v1", n_steps=16)
    model.learn(16)  # the eval env below sees a fixed policy: no new best after the first evaluation
    stop = StopTrainingOnNoModelImprovement(max_no_improvement_evals=2, min_evals=1, verbose=1)
    callback = EvalCallback(Monitor(gym.make("CartPole-v1")), eval_freq=16, n_eval_episodes=1, verbose=0,
                            callback_after_eval=stop, deterministic=True, log_path=str(tmp_path))
    assert stop.parent is callback and callback.callback_after_eval is stop
    model.policy_tf.np_random = np.random.default_rng(0)
    model.learn(16 * 50, callback=callback)
    assert stop.n_calls == len(callback.evaluations_results) < 50  # stopped early
    assert stop.no_improvement_evals == 3  # more than max_no_improvement_evals in a row
    assert "no new best model in the last 3 evaluations" in capsys.readouterr().out


def test_stop_training_on_no_model_improvement_needs_an_eval_callback():
    model = TRPO("MlpPolicy", "CartPole-v1", n_steps=16)
    with pytest.raises(AssertionError, match="EvalCallback"):
        model.learn(32, callback=StopTrainingOnNoModelImprovement(2))


def test_eval_callback_records_successes_and_sb3s_keys(tmp_path):
    from sbtf import logger as sbtf_logger

    model = QRDQN("MlpPolicy", SuccessEnv(), **SMALL_QRDQN)
    callback = EvalCallback(Monitor(SuccessEnv()), eval_freq=10, n_eval_episodes=2, log_path=str(tmp_path),
                            verbose=0)
    recorded = {}
    original = sbtf_logger.Logger.record

    def spy(self, key, value, exclude=None):
        recorded[key] = value
        return original(self, key, value, exclude)

    sbtf_logger.Logger.record = spy
    try:
        model.learn(20, callback=callback)
    finally:
        sbtf_logger.Logger.record = original
    with np.load(tmp_path / "evaluations.npz") as data:
        assert data["successes"].tolist() == [[True, False], [True, False]]
    assert recorded["eval/success_rate"] == 0.5 and recorded["eval/mean_reward"] == 3.0
    assert recorded["eval/mean_ep_length"] == 3.0


def test_eval_callback_refuses_sb3s_positional_callback_after_eval():
    with pytest.raises(TypeError, match="callback_after_eval=..."):
        EvalCallback(gym.make("CartPole-v1"), None, StopTrainingOnNoModelImprovement(1))


# ------------------------------------------------------------------ Monitor, wrappers, module paths
def test_monitor_without_a_filename_and_override_existing(tmp_path):
    env = Monitor(gym.make("CartPole-v1"))
    env.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        done = terminated or truncated
    assert info["episode"]["l"] == env.get_episode_lengths()[0]
    path = str(tmp_path / "run")
    for _ in range(2):
        env = Monitor(gym.make("CartPole-v1"), path, override_existing=False)
        env.reset(seed=0)
        env.step(0)
        env.close()
    text = (tmp_path / "run.monitor.csv").read_text()
    assert text.count("#{") == 1 and text.count("r,l,t") == 1  # appended, one header


def test_is_vecenv_wrapped_and_env_is_wrapped():
    from sbtf.common.env_util import is_wrapped, unwrap_wrapper
    from sbtf.common.vec_env import SubprocVecEnv, VecFrameStack

    venv = VecNormalize(DummyVecEnv([lambda: Monitor(gym.make("CartPole-v1")), lambda: gym.make("CartPole-v1")]))
    assert is_vecenv_wrapped(venv, VecNormalize) and not is_vecenv_wrapped(venv, VecFrameStack)
    assert unwrap_vec_wrapper(venv, VecNormalize) is venv
    assert venv.env_is_wrapped(Monitor) == [True, False]
    assert venv.env_is_wrapped(Monitor, indices=[1]) == [False]
    env = Monitor(gym.make("CartPole-v1"))
    assert is_wrapped(env, Monitor) and not is_wrapped(gym.make("CartPole-v1"), Monitor)
    assert unwrap_wrapper(env, Monitor) is env
    subproc = SubprocVecEnv([lambda: Monitor(gym.make("CartPole-v1")), lambda: gym.make("CartPole-v1")])
    try:
        assert subproc.env_is_wrapped(Monitor) == [True, False]
    finally:
        subproc.close()


def test_sb3_contrib_module_paths():
    from sbtf.common.wrappers import TimeFeatureWrapper as CoreTimeFeature
    from sbtf.contrib.common.envs import (InvalidActionEnvDiscrete, InvalidActionEnvMultiBinary,
                                          InvalidActionEnvMultiDiscrete)
    from sbtf.contrib.common.envs.invalid_actions_env import InvalidActionEnvDiscrete as ByModule
    from sbtf.contrib.common.maskable.envs import InvalidActionEnvDiscrete as Maskable
    from sbtf.contrib.common.maskable.wrappers import ActionMasker as MaskableActionMasker
    from sbtf.contrib.common.wrappers import ActionMasker, TimeFeatureWrapper
    from sbtf.contrib.common.wrappers.action_masker import ActionMasker as ByModuleMasker
    from sbtf.contrib.common.wrappers.time_feature import TimeFeatureWrapper as ByModuleTime

    assert InvalidActionEnvDiscrete is Maskable is ByModule
    assert ActionMasker is MaskableActionMasker is ByModuleMasker
    assert TimeFeatureWrapper is CoreTimeFeature is ByModuleTime
    env = InvalidActionEnvMultiDiscrete(dims=[2, 3], n_invalid_actions=1)
    assert len(env.action_masks()) == 5
    assert len(InvalidActionEnvMultiBinary(dims=3, n_invalid_actions=1).action_masks()) == 6


# ------------------------------------------------------------------ channel-first images
def _channel_first_env():
    venv = VecTransposeImage(DummyVecEnv([ImageEnv]))
    assert venv.observation_space.shape == (3, 36, 36)
    return venv


@pytest.mark.parametrize("make", [
    lambda env: QRDQN("CnnPolicy", env, learning_starts=8, batch_size=8, buffer_size=64,
                      policy_kwargs=dict(n_quantiles=3)),
    lambda env: TRPO("CnnPolicy", env, n_steps=16, batch_size=16),
], ids=["qrdqn", "trpo"])
def test_channel_first_images_are_handled(make, tmp_path):
    venv = _channel_first_env()
    model = make(venv)
    assert model.observation_space.shape == (36, 36, 3)  # sbtf's policies are channel-last
    assert model.get_env() is venv  # the model's own wrapper is hidden
    model.learn(24)
    obs = venv.reset()
    first = model.predict(obs, deterministic=True)[0]
    np.testing.assert_array_equal(model.predict(np.transpose(obs, (0, 2, 3, 1)), deterministic=True)[0], first)
    np.testing.assert_array_equal(np.reshape(model.predict(obs[0], deterministic=True)[0], -1), first)
    model.save(tmp_path / "m")
    loaded = type(model).load(tmp_path / "m", env=_channel_first_env())
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], first)
    loaded.learn(8)


def test_channel_first_dict_images_are_handled():
    class DictImageEnv(ImageEnv):
        observation_space = spaces.Dict({"img": spaces.Box(0, 255, (36, 36, 3), np.uint8),
                                         "vec": spaces.Box(-1, 1, (2,), np.float32)})

    venv = VecTransposeImage(DummyVecEnv([DictImageEnv]))
    assert venv.observation_space["img"].shape == (3, 36, 36)
    model = QRDQN("MultiInputPolicy", venv, learning_starts=8, batch_size=8, buffer_size=64,
                  policy_kwargs=dict(n_quantiles=3))
    assert model.observation_space["img"].shape == (36, 36, 3)
    model.learn(16)
    obs = venv.reset()
    channel_last = dict(obs, img=np.transpose(obs["img"], (0, 2, 3, 1)))
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0],
                                  model.predict(channel_last, deterministic=True)[0])


# ------------------------------------------------------------------ check_env
def test_check_env_nested_dict_warning_is_sb3s():
    from sbtf.common.env_checker import check_env

    class Nested(gym.Env):
        observation_space = spaces.Dict({"a": spaces.Box(-1, 1, (2,), np.float32),
                                         "n": spaces.Dict({"x": spaces.Box(-1, 1, (1,), np.float32)})})
        action_space = spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 0.0, True, False, {}

    with pytest.warns(UserWarning, match="Nested observation spaces are not supported") as record:
        check_env(Nested())
    text = " ".join(str(w.message) for w in record)
    assert "You should flatten it to have only one level of keys" in text


def test_device_of_model_and_policy_and_sb3_helper_modules(tmp_path):
    """SB3's ``model.device`` / ``model.policy.device`` / ``get_device`` and the SB3 helper module names."""
    import pickle

    from sbtf.contrib import QRDQN
    from sbtf.sb3 import PPO, TD3
    from sbtf.sb3.common.base_class import BaseAlgorithm
    from sbtf.sb3.common.envs import FakeImageEnv
    from sbtf.sb3.common.preprocessing import get_action_dim, get_flattened_obs_dim, get_obs_shape, is_image_space
    from sbtf.sb3.common.save_util import load_from_pkl, save_to_pkl
    from sbtf.sb3.common.utils import get_device, get_latest_run_id, get_linear_fn

    for model in (PPO("MlpPolicy", "CartPole-v1", n_steps=8, batch_size=8, device="cpu"),
                  TD3("MlpPolicy", "Pendulum-v1", device="cpu"), QRDQN("MlpPolicy", "CartPole-v1", device="cpu")):
        assert isinstance(model, BaseAlgorithm)
        assert model.device.type == get_device("cpu").type == "cpu"
        assert model.policy.device.type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda'"):
        get_device("tpu")
    env = FakeImageEnv(screen_height=12, screen_width=10, n_channels=3, channel_first=True)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3, 12, 10) and obs.dtype == np.uint8
    assert is_image_space(env.observation_space, check_channels=True)
    assert not is_image_space(gym.spaces.Box(0, 255, (12, 10, 5), np.uint8), check_channels=True)
    truncations = [env.step(0)[3] for _ in range(10)]
    assert truncations == [False] * 9 + [True]
    assert get_obs_shape(gym.spaces.Discrete(4)) == (1,) and get_flattened_obs_dim(gym.spaces.Discrete(4)) == 4
    assert get_action_dim(gym.spaces.MultiDiscrete([2, 3])) == 2
    (tmp_path / "PPO_3").mkdir()
    (tmp_path / "PPO_12").mkdir()
    (tmp_path / "PPOX_40").mkdir()
    assert get_latest_run_id(str(tmp_path), "PPO") == 12
    schedule = get_linear_fn(1.0, 0.0, 0.5)
    assert schedule(1.0) == 1.0 and schedule(0.75) == 0.5 and schedule(0.2) == 0.0
    save_to_pkl(tmp_path / "buffer", {"a": [1, 2]})
    assert load_from_pkl(tmp_path / "buffer") == {"a": [1, 2]}
    assert pickle.loads((tmp_path / "buffer.pkl").read_bytes()) == {"a": [1, 2]}


def test_sb3_callbacks_log_every_n_timesteps_and_stop_on_max_episodes(tmp_path):
    from sbtf.common.logger import configure
    from sbtf.sb3 import A2C
    from sbtf.sb3.common.callbacks import LogEveryNTimesteps, StopTrainingOnMaxEpisodes

    class FixedLength(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.zeros(2, np.float32), 1.0, self.t >= 10, False, {}

    model = A2C("MlpPolicy", FixedLength(), n_steps=5)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    stop = StopTrainingOnMaxEpisodes(max_episodes=3)
    model.learn(1000, callback=[stop, LogEveryNTimesteps(n_steps=10)])
    assert stop.n_episodes == 3 and model.num_timesteps == 30  # three 10-step episodes, then it stops
    assert (tmp_path / "progress.csv").read_text().count("\n") >= 3  # dumped every 10 steps


@pytest.mark.parametrize("algo", ["sb3.PPO", "sb3.A2C", "sb3.DQN", "contrib.QRDQN", "contrib.MaskablePPO",
                                  "contrib.RecurrentPPO", "contrib.ARS", "contrib.TRPO"])
def test_predict_on_one_discrete_observation_returns_a_0d_array(algo):
    """SB3's ``predict`` squeezes the batch axis of an ndarray: one Discrete observation's action is a 0-d
    ``ndarray`` (``action_space.contains`` holds), not a NumPy scalar; a batch keeps its axis."""
    import importlib

    package, name = algo.split(".")
    model_class = getattr(importlib.import_module(f"sbtf.{package}"), name)
    policy = "MlpLstmPolicy" if name == "RecurrentPPO" else "MlpPolicy"
    model = model_class(policy, "CartPole-v1")
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, deterministic=True)
    assert isinstance(action, np.ndarray) and action.shape == () and env.action_space.contains(action)
    batch, _ = model.predict(np.stack([obs, obs]), deterministic=True)
    assert batch.shape == (2,) and batch[0] == action


def test_open_path_and_pickle_helpers_follow_sb3(tmp_path):
    """``sbtf.sb3.common.save_util.open_path``: type and mode checks, the suffix tried on reading and added on
    writing, a folder in the way and a missing parent folder."""
    import io

    from sbtf.sb3.common.save_util import load_from_pkl, open_path, save_to_pkl

    with pytest.raises(TypeError, match="pathlib.Path"):
        open_path(123, "w")
    handle = (tmp_path / "raw").open("wb")
    with pytest.raises(ValueError, match="cannot be used in mode 'r'"):
        open_path(handle, "r")
    with pytest.raises(ValueError, match="not 'r'"):
        open_path(handle, "randomstuff")
    assert open_path(handle, "w") is handle
    handle.close()
    with pytest.raises(ValueError, match="closed"):
        open_path(handle, "w")
    buffer = io.BytesIO()
    assert open_path(buffer, "w") is buffer
    with open_path(tmp_path / "t1", "w") as handle:  # no suffix asked for: the path as given
        save_to_pkl(handle, "foo")
    assert load_from_pkl(tmp_path / "t1") == "foo"  # read as given before trying .pkl
    save_to_pkl(str(tmp_path / "t2"), [1])
    assert (tmp_path / "t2.pkl").exists() and load_from_pkl(tmp_path / "t2") == [1]  # .pkl tried on reading
    (tmp_path / "folder.pkl").mkdir()
    with pytest.warns(UserWarning, match="is a folder"):
        open_path(tmp_path / "folder.pkl", "w", suffix="pkl").close()
    assert (tmp_path / "folder.pkl_2").is_file()
    with pytest.warns(UserWarning, match="does not exist"):
        open_path(tmp_path / "missing" / "sub" / "file", "w", suffix="pkl").close()
    assert (tmp_path / "missing" / "sub" / "file.pkl").is_file()


def test_on_policy_lr_schedule_returns_python_floats(tmp_path):
    from sbtf.sb3 import PPO

    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=16, batch_size=16, learning_rate=lambda t: t * np.sin(1.0))
    assert type(model.lr_schedule(1.0)) is float and np.isclose(model.lr_schedule(0.5), 0.5 * np.sin(1.0))
    model.save(tmp_path / "ppo.zip")
    loaded = PPO.load(tmp_path / "ppo.zip")
    assert type(loaded.lr_schedule(1.0)) is float and np.isclose(loaded.lr_schedule(0.5), 0.5 * np.sin(1.0))
