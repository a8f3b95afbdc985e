"""sbtf.zoo: playing and converting rl-baselines-zoo agent folders (trained_agents/ALGO/ENV.pkl + ENV/config.yml).

The zoo-layout folders are written by the tests (agents trained briefly by sbtf, config.yml with the zoo's
OrderedDict tag, legacy obs_rms.pkl / ret_rms.pkl statistics); the real stable-baselines 2 zoo agents of
../shared/fixtures/sb2_zoo are played too when that folder exists.
"""
import os
import subprocess
import sys
import warnings

import gymnasium
import numpy as np
import pytest
import yaml

from conftest import shared_fixture
from sbtf.common.file_errors import UnsafeFileError
from sbtf.zoo.errors import ConfigLimitError
from sbtf.zoo import (MissingTimeFeatureError, ObservationMismatchError, UnsafeConfigError, ZooConfigError,
                      ZooFolderError, convert_zoo_folder, load_zoo_agent, locate_zoo_agent, read_zoo_yaml,
                      zoo_deterministic)
import sbtf.zoo.agent as zoo_agent

TIME_FEATURE_CONFIG = """\
!!python/object/apply:collections.OrderedDict
- - [env_wrapper, utils.wrappers.TimeFeatureWrapper]
  - [gamma, 0.9]
  - [n_envs, 1]
  - [n_steps, 64]
  - [n_timesteps, 256]
  - [normalize, true]
  - [policy, MlpPolicy]
"""

NO_NORMALIZE_CONFIG = """\
!!python/object/apply:collections.OrderedDict
- - [n_steps, 5]
  - [n_timesteps, 100]
  - [policy, MlpPolicy]
"""


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _stale_statistics(folder, size):
    """obs_rms.pkl / ret_rms.pkl that would ruin any agent if they were applied (mean 1000)."""
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize

    venv = VecNormalize(DummyVecEnv([lambda: gymnasium.make("CartPole-v1")]))
    venv.obs_rms.mean = np.full(size, 1000.0)
    venv.obs_rms.var = np.full(size, 1e-4)
    os.makedirs(folder, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        venv.save_running_average(folder)
    venv.close()


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """
    A zoo folder written by the tests:

    * ppo2/Pendulum-v1: PPO2 trained briefly under TimeFeatureWrapper + VecNormalize; config.yml names the zoo's
      ``utils.wrappers.TimeFeatureWrapper`` and ``normalize: true``; legacy obs_rms.pkl / ret_rms.pkl;
    * a2c/CartPole-v1: A2C (untrained); config.yml without normalize next to a stale obs_rms.pkl.
    """
    from sbtf import A2C, PPO2
    from sbtf.common.cmd_util import make_vec_env
    from sbtf.common.vec_env import VecNormalize
    from sbtf.common.wrappers import TimeFeatureWrapper

    root = tmp_path_factory.mktemp("trained_agents")
    train_env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0, wrapper_class=TimeFeatureWrapper),
                             gamma=0.9)
    model = PPO2("MlpPolicy", train_env, n_steps=64, nminibatches=1, gamma=0.9, seed=0)
    model.learn(total_timesteps=256)
    model.save(str(root / "ppo2" / "Pendulum-v1.zip"))
    stats_dir = root / "ppo2" / "Pendulum-v1"
    os.makedirs(stats_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        train_env.save_running_average(str(stats_dir))
    _write(str(stats_dir / "config.yml"), TIME_FEATURE_CONFIG)
    obs_mean = train_env.obs_rms.mean.copy()
    obs_var = train_env.obs_rms.var.copy()
    train_env.close()

    a2c = A2C("MlpPolicy", "CartPole-v1", n_steps=5, seed=0)  # untrained: only its observations matter here
    a2c.save(str(root / "a2c" / "CartPole-v1.zip"))
    _write(str(root / "a2c" / "CartPole-v1" / "config.yml"), NO_NORMALIZE_CONFIG)
    _stale_statistics(str(root / "a2c" / "CartPole-v1"), 4)
    return {"root": str(root), "obs_mean": obs_mean, "obs_var": obs_var}


def _copy_agent(zoo, tmp_path, algo, env_id, config=None, with_stats=True, as_env_id=None):
    """A copy of one fixture agent in a new folder, with another config.yml (None: no config.yml)."""
    import shutil

    src = os.path.join(zoo["root"], algo)
    name = as_env_id or env_id
    dst = tmp_path / "agents" / algo
    os.makedirs(dst / name)
    shutil.copy(os.path.join(src, env_id + ".zip"), dst / (name + ".zip"))
    if with_stats:
        for stats in ("obs_rms.pkl", "ret_rms.pkl"):
            shutil.copy(os.path.join(src, env_id, stats), dst / name / stats)
    if config is not None:
        _write(str(dst / name / "config.yml"), config)
    return str(tmp_path / "agents")


# --------------------------------------------------------------------------------------------------- config.yml

def test_read_zoo_yaml_reads_the_ordered_dict_tag(tmp_path):
    path = tmp_path / "config.yml"
    _write(str(path), TIME_FEATURE_CONFIG)
    config = read_zoo_yaml(str(path))
    assert type(config) is dict
    assert list(config) == ["env_wrapper", "gamma", "n_envs", "n_steps", "n_timesteps", "normalize", "policy"]
    assert config["env_wrapper"] == "utils.wrappers.TimeFeatureWrapper" and config["normalize"] is True
    # what yaml.dump writes for an OrderedDict, read back
    from collections import OrderedDict
    dumped = yaml.dump(OrderedDict([("b", 1), ("a", {"x": [1, 2]}), ("normalize", "{'norm_obs': True}")]))
    assert dumped.startswith("!!python/object/apply:collections.OrderedDict")
    _write(str(path), dumped)
    assert list(read_zoo_yaml(str(path)).items()) == [("b", 1), ("a", {"x": [1, 2]}),
                                                      ("normalize", "{'norm_obs': True}")]
    # the long form and plain YAML
    _write(str(path), "!!python/object/apply:collections.OrderedDict\nargs: [[[a, 1]]]\ndictitems: {b: 2}\n")
    assert read_zoo_yaml(str(path)) == {"a": 1, "b": 2}
    _write(str(path), "policy: MlpPolicy\nnormalize: false\n")
    assert read_zoo_yaml(str(path)) == {"policy": "MlpPolicy", "normalize": False}
    _write(str(path), "")
    assert read_zoo_yaml(str(path)) == {}


@pytest.mark.parametrize("text", [
    "!!python/object/apply:os.system ['echo pwned > {marker}']\n",
    "!!python/object/apply:collections.OrderedDict\n- - [policy, !!python/object/apply:os.system ['echo pwned > "
    "{marker}']]\n",
    "policy: !!python/name:os.system\n",
    "policy: !!python/object/new:subprocess.Popen [['touch', '{marker}']]\n",
    "a: !!python/object:argparse.Namespace {{x: 1}}\n",
    "a: !!python/tuple [1, 2]\n",
    "a: !!python/module:os\n",
    "!!python/object/apply:builtins.exec ['open(\"{marker}\", \"w\")']\n",
])
def test_hostile_config_gives_a_typed_error_and_runs_nothing(tmp_path, text):
    marker = tmp_path / "pwned"
    path = tmp_path / "config.yml"
    _write(str(path), text.format(marker=marker))
    with pytest.raises(UnsafeConfigError, match=r"config.yml: The YAML tag !!python/.* Nothing was run") as info:
        read_zoo_yaml(str(path))
    assert isinstance(info.value, UnsafeFileError) and isinstance(info.value, ZooConfigError)
    assert isinstance(info.value, ValueError)
    assert not marker.exists()


@pytest.mark.parametrize("text, match", [
    ("- a\n- b\n", "must hold a mapping"),
    ("a: !custom 1\n", "not a valid YAML file"),
    ("a: [1, 2\n", "not a valid YAML file"),
    ("{1: a}\n", "names must be strings"),
    ("a: 2001-01-01\n", "date value"),
    ("a: &x [*x]\n", "refers to the value that contains it"),
    ("!!python/object/apply:collections.OrderedDict\n- - [a]\n", r"\[key, value\] pairs"),
    ("!!python/object/apply:collections.OrderedDict\n- [[a, 1]]\n- [[b, 2]]\n", "2 arguments"),
    ("!!python/object/apply:collections.OrderedDict\nstate: {a: 1}\n", "unsupported entries"),
])
def test_malformed_config_gives_a_typed_error(tmp_path, text, match):
    path = tmp_path / "config.yml"
    _write(str(path), text)
    with pytest.raises(ZooConfigError, match=match):
        read_zoo_yaml(str(path))


def test_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += ["a{}: &a{} [{}]".format(i, i, ", ".join(["*a{}".format(i - 1)] * 10)) for i in range(1, 9)]
    path = tmp_path / "config.yml"
    _write(str(path), "\n".join(lines) + "\n")
    with pytest.raises(ConfigLimitError, match="expands to more than .* values through its aliases"):
        read_zoo_yaml(str(path))


def test_hostile_config_in_a_zoo_folder(zoo, tmp_path):
    marker = tmp_path / "pwned"
    folder = _copy_agent(zoo, tmp_path, "ppo2", "Pendulum-v1",
                         config="!!python/object/apply:collections.OrderedDict\n- - [normalize, "
                                "!!python/object/apply:os.system ['touch {}']]\n".format(marker))
    with pytest.raises(UnsafeConfigError):
        load_zoo_agent(folder, "ppo2", "Pendulum-v1")
    assert not marker.exists()


# --------------------------------------------------------------------------------------------------- playing

def test_time_feature_and_normalize_from_config(zoo, capsys):
    agent = load_zoo_agent(zoo["root"], "ppo2", "Pendulum-v1", verbose=1)
    from sbtf.common.vec_env import VecNormalize
    from sbtf.common.wrappers import TimeFeatureWrapper

    try:
        assert agent.algo == "ppo2" and agent.env_id == "Pendulum-v1"
        assert agent.deterministic is False  # the zoo samples PPO2's actions
        assert agent.config["env_wrapper"] == "utils.wrappers.TimeFeatureWrapper"
        assert agent.env_wrappers == [("sbtf.common.wrappers.TimeFeatureWrapper", {})]
        assert agent.settings.normalize and agent.settings.normalize_source == "config.yml"
        env = agent.env
        assert isinstance(env, VecNormalize) and not env.training and not env.norm_reward
        np.testing.assert_allclose(env.obs_rms.mean, zoo["obs_mean"])
        np.testing.assert_allclose(env.obs_rms.var, zoo["obs_var"])
        inner = env.venv.envs[0]
        assert isinstance(inner.env, TimeFeatureWrapper) and inner.env.max_steps == 200
        obs = env.reset()
        assert obs.shape == (1, 4)
        raw = env.get_original_obs()
        assert raw[0, -1] == 1.0
        expected = np.clip((raw - zoo["obs_mean"]) / np.sqrt(zoo["obs_var"] + 1e-8), -10, 10)
        np.testing.assert_allclose(obs, expected, rtol=1e-5, atol=1e-6)
        for _ in range(3):
            obs, *_ = env.step(agent.model.predict(obs, deterministic=agent.deterministic)[0])
        assert env.get_original_obs()[0, -1] == pytest.approx(1 - 3 / 200)
        returns, lengths = agent.evaluate(n_episodes=2)
        assert lengths == [200, 200] and all(-2000 < value <= 0 for value in returns)
    finally:
        agent.close()
    out = capsys.readouterr().out
    assert "observations normalised with" in out and "TimeFeatureWrapper" in out


def test_stale_obs_rms_next_to_a_config_without_normalize_is_ignored(zoo, capsys):
    from sbtf import A2C
    from sbtf.common.vec_env import VecNormalize, unwrap_vec_normalize

    agent = load_zoo_agent(zoo["root"], "a2c", "CartPole-v1", verbose=1)
    try:
        assert unwrap_vec_normalize(agent.env) is None and not agent.settings.normalize
        assert agent.stats_path is None
        assert any("obs_rms.pkl" in note and "ignored" in note for note in agent.notes)
        obs = agent.env.reset()
        assert np.all(np.abs(obs) < 1)  # raw CartPole observations, not (obs - 1000) / 0.01
        model = A2C.load(os.path.join(zoo["root"], "a2c", "CartPole-v1.zip"))
        np.testing.assert_array_equal(agent.model.predict(obs, deterministic=True)[0],
                                      model.predict(obs, deterministic=True)[0])
    finally:
        agent.close()
    assert "is ignored" in capsys.readouterr().out
    # quiet at verbose=0 (the note is still in agent.notes)
    agent = load_zoo_agent(zoo["root"], "a2c", "CartPole-v1")
    agent.close()
    assert capsys.readouterr().out == ""
    assert not isinstance(agent.env, VecNormalize)


def test_without_config_the_obs_rms_file_decides(zoo, tmp_path):
    folder = _copy_agent(zoo, tmp_path, "ppo2", "Pendulum-v1", config=None)
    agent = load_zoo_agent(folder, "ppo2", "Pendulum-v1", time_feature=True)
    try:
        assert agent.settings.normalize and agent.settings.normalize_source == "obs_rms.pkl (no config.yml)"
        np.testing.assert_allclose(agent.env.obs_rms.mean, zoo["obs_mean"])
    finally:
        agent.close()


def test_normalize_as_a_string_of_vecnormalize_arguments(zoo, tmp_path):
    config = TIME_FEATURE_CONFIG.replace("[normalize, true]",
                                         "[normalize, \"{'norm_obs': True, 'norm_reward': True, 'clip_obs': 5.0}\"]")
    folder = _copy_agent(zoo, tmp_path, "ppo2", "Pendulum-v1", config=config)
    agent = load_zoo_agent(folder, "ppo2", "Pendulum-v1")
    try:
        assert agent.env.clip_obs == 5.0 and agent.env.norm_obs
        assert not agent.env.norm_reward and not agent.env.training  # the zoo's test mode
    finally:
        agent.close()
    bad = TIME_FEATURE_CONFIG.replace("[normalize, true]", "[normalize, \"{'norm_obs': __import__('os')}\"]")
    folder = _copy_agent(zoo, tmp_path / "bad", "ppo2", "Pendulum-v1", config=bad)
    with pytest.raises(ZooConfigError, match="not a literal"):
        load_zoo_agent(folder, "ppo2", "Pendulum-v1")


def test_normalize_without_statistics_is_an_error(zoo, tmp_path):
    folder = _copy_agent(zoo, tmp_path, "ppo2", "Pendulum-v1", config=TIME_FEATURE_CONFIG, with_stats=False)
    with pytest.raises(ZooFolderError, match="obs_rms.pkl and .*ret_rms.pkl is missing"):
        load_zoo_agent(folder, "ppo2", "Pendulum-v1")


def test_missing_time_feature_says_so_and_how_to_add_it(zoo, tmp_path, monkeypatch):
    config = TIME_FEATURE_CONFIG.replace("- - [env_wrapper, utils.wrappers.TimeFeatureWrapper]\n  - [gamma",
                                         "- - [gamma")
    assert "env_wrapper" not in config
    folder = _copy_agent(zoo, tmp_path, "ppo2", "Pendulum-v1", config=config)
    with pytest.raises(MissingTimeFeatureError) as info:
        load_zoo_agent(folder, "ppo2", "Pendulum-v1")
    message = str(info.value)
    assert "expects observations of shape (4,) but Pendulum-v1 gives (3,)" in message
    assert "a time feature is missing" in message
    assert "time_feature=True" in message and "env_wrapper: sbtf.common.wrappers.TimeFeatureWrapper" in message
    assert info.value.model_shape == (4,) and info.value.env_shape == (3,)
    assert isinstance(info.value, ObservationMismatchError) and isinstance(info.value, ValueError)
    # an env the zoo trained with TimeFeatureWrapper: the message says so
    monkeypatch.setattr(zoo_agent, "ZOO_TIME_FEATURE_ENVS", frozenset({"Pendulum-v1"}))
    with pytest.raises(MissingTimeFeatureError, match="rl-baselines-zoo trained Pendulum-v1 agents with "
                                                      "utils.wrappers.TimeFeatureWrapper"):
        load_zoo_agent(folder, "ppo2", "Pendulum-v1")
    # adding it as the message says
    agent = load_zoo_agent(folder, "ppo2", "Pendulum-v1", time_feature=True)
    assert agent.env.observation_space.shape == (4,)
    agent.close()


def test_time_feature_named_for_a_model_trained_without_it(zoo, tmp_path):
    config = NO_NORMALIZE_CONFIG + "  - [env_wrapper, utils.wrappers.TimeFeatureWrapper]\n"
    folder = _copy_agent(zoo, tmp_path, "a2c", "CartPole-v1", config=config, with_stats=False)
    with pytest.raises(ObservationMismatchError, match="config names TimeFeatureWrapper but the model was trained "
                                                       "without a time feature; pass time_feature=False"):
        load_zoo_agent(folder, "a2c", "CartPole-v1")
    agent = load_zoo_agent(folder, "a2c", "CartPole-v1", time_feature=False)
    assert agent.env.observation_space.shape == (4,)
    agent.close()


def test_other_observation_mismatch(zoo, tmp_path):
    folder = _copy_agent(zoo, tmp_path, "a2c", "CartPole-v1", config=NO_NORMALIZE_CONFIG, with_stats=False,
                         as_env_id="Acrobot-v1")
    with pytest.raises(ObservationMismatchError, match=r"expects observations of shape \(4,\) but Acrobot-v1 gives "
                                                       r"\(6,\): was the model trained on another env"):
        load_zoo_agent(folder, "a2c", "Acrobot-v1")


def test_retired_env_ids_are_played_on_their_successor(zoo, tmp_path):
    folder = _copy_agent(zoo, tmp_path, "ppo2", "Pendulum-v1", config=TIME_FEATURE_CONFIG, as_env_id="Pendulum-v0")
    with pytest.warns(UserWarning, match="'Pendulum-v0' was retired by gymnasium; using its successor 'Pendulum-v1'"):
        agent = load_zoo_agent(folder, "ppo2", "Pendulum-v0")
    assert agent.env_id == "Pendulum-v1" and agent.paths.file_env_id == "Pendulum-v0"
    assert agent.paths.model_path.endswith(os.path.join("ppo2", "Pendulum-v0.zip"))
    agent.close()
    # the successor's id finds the files named with the old one
    agent = load_zoo_agent(folder, "ppo2", "Pendulum-v1")
    assert agent.paths.file_env_id == "Pendulum-v0" and agent.settings.normalize
    agent.close()


def test_env_kwargs_frame_stack_and_gymnasium_wrappers(zoo, tmp_path):
    from sbtf import A2C
    from sbtf.common.vec_env import DummyVecEnv, VecFrameStack

    stacked = VecFrameStack(DummyVecEnv([lambda: gymnasium.make("CartPole-v1")]), 3)
    folder = tmp_path / "agents"
    A2C("MlpPolicy", stacked, n_steps=5, seed=0).save(str(folder / "a2c" / "CartPole-v1.zip"))
    stacked.close()
    _write(str(folder / "a2c" / "CartPole-v1" / "config.yml"),
           "!!python/object/apply:collections.OrderedDict\n- - [frame_stack, 3]\n"
           "  - [env_kwargs, {sutton_barto_reward: true}]\n  - [env_wrapper, gym.wrappers.RecordEpisodeStatistics]\n")
    agent = load_zoo_agent(str(folder), "a2c", "CartPole-v1")
    try:
        assert isinstance(agent.env, VecFrameStack) and agent.env.observation_space.shape == (12,)
        assert agent.env_wrappers == [("gymnasium.wrappers.RecordEpisodeStatistics", {})]
        inner = agent.env.venv.envs[0]
        assert isinstance(inner.env, gymnasium.wrappers.RecordEpisodeStatistics)
        assert inner.unwrapped._sutton_barto_reward is True
        assert agent.env.reset().shape == (1, 12)
    finally:
        agent.close()
    # env_kwargs given by the caller take precedence
    agent = load_zoo_agent(str(folder), "a2c", "CartPole-v1", env_kwargs={"sutton_barto_reward": False})
    assert agent.env.venv.envs[0].unwrapped._sutton_barto_reward is False
    agent.close()


def test_unknown_wrappers_are_not_imported(zoo, tmp_path):
    config = NO_NORMALIZE_CONFIG + "  - [env_wrapper, utils.wrappers.DoneOnSuccessWrapper]\n"
    folder = _copy_agent(zoo, tmp_path, "a2c", "CartPole-v1", config=config, with_stats=False)
    with pytest.raises(ZooConfigError, match=r"names utils.wrappers.DoneOnSuccessWrapper.*allowed_wrappers="
                                             r"\['utils.wrappers.DoneOnSuccessWrapper'\]"):
        load_zoo_agent(folder, "a2c", "CartPole-v1")
    config = NO_NORMALIZE_CONFIG + "  - [env_wrapper, {utils.wrappers.TimeFeatureWrapper: {max_step: 5}}]\n"
    folder = _copy_agent(zoo, tmp_path / "b", "a2c", "CartPole-v1", config=config, with_stats=False)
    with pytest.raises(ZooConfigError, match="TimeFeatureWrapper takes max_steps, test_mode, not max_step"):
        load_zoo_agent(folder, "a2c", "CartPole-v1")


def test_atari_ids_get_the_deepmind_wrappers_and_four_frames(zoo, tmp_path, monkeypatch):
    from sbtf import A2C
    from sbtf.common import cmd_util
    from sbtf.common.vec_env import DummyVecEnv, VecFrameStack

    class FakeAtari(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(0, 255, (84, 84, 1), np.uint8)
        action_space = gymnasium.spaces.Discrete(4)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros((84, 84, 1), np.uint8), {}

        def step(self, action):
            return np.zeros((84, 84, 1), np.uint8), 0.0, False, False, {}

    calls = []

    def fake_make_atari_env(env_id, num_env, seed, **kwargs):
        calls.append((env_id, num_env, seed))
        return DummyVecEnv([FakeAtari] * num_env)

    monkeypatch.setattr(cmd_util, "make_atari_env", fake_make_atari_env)
    folder = tmp_path / "agents"
    venv = VecFrameStack(DummyVecEnv([FakeAtari]), 4)
    A2C("CnnPolicy", venv, n_steps=5, seed=0).save(str(folder / "a2c" / "PongNoFrameskip-v4.zip"))
    venv.close()
    agent = load_zoo_agent(str(folder), "a2c", "PongNoFrameskip-v4", seed=3)
    try:
        assert calls == [("PongNoFrameskip-v4", 1, 3)] and agent.atari
        assert isinstance(agent.env, VecFrameStack) and agent.env.observation_space.shape == (84, 84, 4)
        action, _ = agent.model.predict(agent.env.reset(), deterministic=agent.deterministic)
        assert action.shape == (1,)
    finally:
        agent.close()


def test_deterministic_choice_follows_the_zoo():
    assert [algo for algo in sorted(zoo_agent.ZOO_ALGOS) if zoo_deterministic(algo)] == \
        ["ddpg", "dqn", "her", "sac", "td3"]
    assert not zoo_deterministic("ppo2") and not zoo_deterministic("a2c") and not zoo_deterministic("trpo")


def test_folder_errors(zoo, tmp_path):
    with pytest.raises(ZooFolderError, match="no sac model for Pendulum-v1 in "):
        load_zoo_agent(zoo["root"], "sac", "Pendulum-v1")
    with pytest.raises(ZooFolderError, match="ppo2 agents there: Pendulum-v1"):
        load_zoo_agent(zoo["root"], "ppo2", "CartPole-v1")
    with pytest.raises(ZooFolderError, match="does not exist"):
        load_zoo_agent(str(tmp_path / "nowhere"), "ppo2", "CartPole-v1")
    with pytest.raises(ValueError, match="unknown algorithm 'ppo3'"):
        load_zoo_agent(zoo["root"], "ppo3", "CartPole-v1")


def test_zoo_log_folder_with_exp_id(zoo, tmp_path):
    import shutil

    for run in (1, 2):
        run_dir = tmp_path / "logs" / "a2c" / "CartPole-v1_{}".format(run)
        os.makedirs(run_dir / "CartPole-v1")
        shutil.copy(os.path.join(zoo["root"], "a2c", "CartPole-v1.zip"), run_dir / "CartPole-v1.zip")
    assert locate_zoo_agent(str(tmp_path / "logs"), "a2c", "CartPole-v1", exp_id=0).model_path.endswith(
        os.path.join("CartPole-v1_2", "CartPole-v1.zip"))
    paths = locate_zoo_agent(str(tmp_path / "logs"), "a2c", "CartPole-v1", exp_id=1)
    assert paths.stats_dir == str(tmp_path / "logs" / "a2c" / "CartPole-v1_1" / "CartPole-v1")


# --------------------------------------------------------------------------------------------------- converting

def test_convert_writes_a_self_contained_run_folder(zoo, tmp_path):
    from sbtf import PPO2
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize
    from sbtf.common.wrappers import TimeFeatureWrapper

    log = str(tmp_path / "logs")
    run_dir = convert_zoo_folder(zoo["root"], "ppo2", "Pendulum-v1", log)
    assert run_dir == os.path.join(log, "ppo2", "Pendulum-v1_1")
    assert sorted(os.listdir(run_dir)) == ["Pendulum-v1.zip", "config.yml", "vecnormalize.pkl", "zoo.yml"]
    with open(os.path.join(run_dir, "config.yml"), encoding="utf-8") as handle:
        config = yaml.safe_load(handle)  # plain YAML, no python tags
    assert config["env_wrapper"] == "sbtf.common.wrappers.TimeFeatureWrapper"
    assert config["normalize"] is True and config["n_steps"] == 64
    with open(os.path.join(run_dir, "zoo.yml"), encoding="utf-8") as handle:
        provenance = yaml.safe_load(handle)
    assert provenance["deterministic"] is False and provenance["atari"] is False
    assert provenance["algo"] == "ppo2" and provenance["env"] == "Pendulum-v1"
    assert provenance["source_model"].endswith(os.path.join("ppo2", "Pendulum-v1.zip"))
    venv = DummyVecEnv([lambda: TimeFeatureWrapper(gymnasium.make("Pendulum-v1"))])
    stats = VecNormalize.load(os.path.join(run_dir, "vecnormalize.pkl"), venv)
    np.testing.assert_allclose(stats.obs_rms.mean, zoo["obs_mean"])
    stats.close()
    converted = PPO2.load(os.path.join(run_dir, "Pendulum-v1.zip"))
    original = PPO2.load(os.path.join(zoo["root"], "ppo2", "Pendulum-v1.zip"))
    obs = np.random.RandomState(0).normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_allclose(converted.predict(obs, deterministic=True)[0],
                               original.predict(obs, deterministic=True)[0], rtol=1e-6)
    # a second conversion gets the next run number
    assert convert_zoo_folder(zoo["root"], "ppo2", "Pendulum-v1", log).endswith("Pendulum-v1_2")


def test_convert_drops_stale_statistics(zoo, tmp_path):
    run_dir = convert_zoo_folder(zoo["root"], "a2c", "CartPole-v1", str(tmp_path / "logs"))
    assert sorted(os.listdir(run_dir)) == ["CartPole-v1.zip", "config.yml", "zoo.yml"]
    with open(os.path.join(run_dir, "config.yml"), encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    assert "normalize" not in config and config["n_steps"] == 5


def test_sbtf_enjoy_plays_a_converted_folder(zoo, tmp_path, capsys):
    from sbtf.cli import main

    log = str(tmp_path / "logs")
    convert_zoo_folder(zoo["root"], "ppo2", "Pendulum-v1", log)
    code = main(["enjoy", "--algo", "ppo2", "--env", "Pendulum-v1", "-f", log, "-n", "400", "--episodes", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Normalizing observations with the statistics of" in out and "Episode 1:" in out


def test_import_is_light():
    code = "import sys, sbtf.zoo; print('tensorflow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env=dict(os.environ))
    assert result.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------------- real SB2 zoo

REAL_AGENTS = [
    # (algo, zoo env id, reference mean, reference std) from ../shared/fixtures/sb2_zoo/README.md (the zoo's
    # benchmark: stochastic A2C/ACKTR/PPO2/TRPO, deterministic DQN/DDPG/SAC/TD3)
    ("ppo2", "MountainCar-v0", -143.501, 22.928),   # obs_rms.pkl / ret_rms.pkl without config.yml
    ("acktr", "Pendulum-v0", -213.831, 137.857),    # .zip, config.yml without normalize
    ("sac", "Pendulum-v0", -159.669, 86.665),       # config.yml without normalize
    ("td3", "Pendulum-v0", -148.985, 84.155),
    ("ddpg", "Pendulum-v0", -169.829, 93.303),
    ("trpo", "CartPole-v1", 485.392, 70.505),
    ("a2c", "CartPole-v1", 499.903, 1.672),
]
N_EPISODES = 5


@pytest.mark.parametrize("algo, env_id, ref_mean, ref_std", REAL_AGENTS)
def test_real_sb2_zoo_agents_score_their_reference(algo, env_id, ref_mean, ref_std):
    folder = shared_fixture("sb2_zoo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # retired env id notes
        agent = load_zoo_agent(str(folder), algo, env_id)
    try:
        assert agent.deterministic == (algo in ("sac", "td3", "ddpg"))
        returns, _ = agent.evaluate(n_episodes=N_EPISODES)
    finally:
        agent.close()
    # the mean of N episodes lies within 3 standard errors of the reference (plus 5 points for std 0 envs)
    tolerance = 3 * ref_std / np.sqrt(N_EPISODES) + 5
    assert abs(np.mean(returns) - ref_mean) <= tolerance, (returns, ref_mean, tolerance)


def test_real_sb2_zoo_normalisation_matters():
    """The MountainCar agent needs its obs_rms.pkl (no config.yml: the file decides): without it, it fails."""
    folder = shared_fixture("sb2_zoo")
    agent = load_zoo_agent(str(folder), "ppo2", "MountainCar-v0")
    try:
        assert agent.settings.normalize_source == "obs_rms.pkl (no config.yml)"
        model = agent.model
        from sbtf.common.cmd_util import make_vec_env
        from sbtf.common.evaluation import evaluate_policy

        raw_env = make_vec_env("MountainCar-v0", n_envs=1, seed=0)
        raw_returns, _ = evaluate_policy(model, raw_env, n_eval_episodes=2, deterministic=False,
                                         return_episode_rewards=True)
        raw_env.close()
    finally:
        agent.close()
    assert np.mean(raw_returns) == -200.0  # never reaches the flag without its statistics
