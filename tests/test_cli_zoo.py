"""``sbtf enjoy --folder`` and ``sbtf convert --folder``: rl-baselines-zoo folders on the command line, and
``sbtf enjoy`` honouring the ``zoo.yml`` of a converted run.

The zoo-layout folder is written by the tests (untrained agents: these tests check what is played and how, not
scores); the real stable-baselines 2 zoo agents of ../shared/fixtures/sb2_zoo are played when that folder exists.
"""
import os
import shutil
import warnings

import gymnasium
import numpy as np
import pytest
import yaml

from conftest import shared_fixture
from sbtf.cli import CLIError, main, read_zoo_record

TIME_FEATURE_CONFIG = """\
!!python/object/apply:collections.OrderedDict
- - [env_wrapper, utils.wrappers.TimeFeatureWrapper]
  - [n_envs, 1]
  - [normalize, true]
  - [policy, MlpPolicy]
"""
PLAIN_CONFIG = """\
!!python/object/apply:collections.OrderedDict
- - [n_steps, 5]
  - [policy, MlpPolicy]
"""


def _write(path, text):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), "w", encoding="utf-8") as handle:
        handle.write(text)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """
    trained_agents/ written by the tests:

    * a2c/Pendulum-v0: an A2C agent over TimeFeatureWrapper (5 observations), config.yml naming the zoo's
      ``utils.wrappers.TimeFeatureWrapper`` and ``normalize: true``, obs_rms.pkl / ret_rms.pkl;
    * ppo2/CartPole-v1: a PPO2 agent, config.yml without normalize;
    * acktr/CartPole-v1: no config.yml.
    """
    from sbtf import A2C, ACKTR, PPO2
    from sbtf.common.cmd_util import make_vec_env
    from sbtf.common.vec_env import VecNormalize
    from sbtf.common.wrappers import TimeFeatureWrapper

    root = tmp_path_factory.mktemp("trained_agents")
    venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0, wrapper_class=TimeFeatureWrapper))
    A2C("MlpPolicy", venv, n_steps=5, seed=0).save(str(root / "a2c" / "Pendulum-v0.zip"))
    venv.reset()
    for _ in range(20):
        venv.step(np.zeros((1, 1), np.float32))
    os.makedirs(root / "a2c" / "Pendulum-v0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        venv.save_running_average(str(root / "a2c" / "Pendulum-v0"))
    venv.close()
    _write(root / "a2c" / "Pendulum-v0" / "config.yml", TIME_FEATURE_CONFIG)
    PPO2("MlpPolicy", "CartPole-v1", n_steps=16, seed=0).save(str(root / "ppo2" / "CartPole-v1.zip"))
    _write(root / "ppo2" / "CartPole-v1" / "config.yml", PLAIN_CONFIG)
    ACKTR("MlpPolicy", "CartPole-v1", seed=0).save(str(root / "acktr" / "CartPole-v1.zip"))
    return str(root)


def _run(capsys, args):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --------------------------------------------------------------------------------------------- enjoy --folder

def test_enjoy_folder_plays_as_the_zoo_did(zoo, capsys):
    code, out, err = _run(capsys, ["enjoy", "--folder", zoo, "--algo", "a2c", "--env", "Pendulum-v0", "-n", "400",
                                   "--episodes", "2"])
    assert code == 0, err
    # the zoo's decisions are printed: successor id, time feature, normalisation, stochastic actions for A2C
    assert "Pendulum-v0 is played as Pendulum-v1" in out
    assert "sbtf.common.wrappers.TimeFeatureWrapper" in out and "observations normalised with" in out
    assert "Playing {} (stochastic actions) on Pendulum-v1".format(
        os.path.join(zoo, "a2c", "Pendulum-v0.zip")) in out
    assert out.count("Episode ") == 2 and "length 200" in out and "Mean return over 2 episode(s)" in out
    assert "retired" not in err  # the loader's own note replaces gymnasium's warning


def test_enjoy_folder_deterministic_flags_override_the_zoo(zoo, capsys):
    code, out, _ = _run(capsys, ["enjoy", "--folder", zoo, "--algo", "ppo2", "--env", "CartPole-v1", "-n", "20",
                                 "--deterministic"])
    assert code == 0 and "(deterministic actions)" in out
    code, out, _ = _run(capsys, ["enjoy", "--folder", zoo, "--algo", "ppo2", "--env", "CartPole-v1", "-n", "20"])
    assert code == 0 and "(stochastic actions)" in out  # the zoo sampled PPO2's actions


def test_enjoy_folder_time_feature_flags(zoo, tmp_path, capsys):
    # --no-time-feature leaves out the config's wrapper: the model then expects 5 observations, the env gives 4
    code, _, err = _run(capsys, ["enjoy", "--folder", zoo, "--algo", "a2c", "--env", "Pendulum-v0", "-n", "5",
                                 "--no-time-feature"])
    assert code == 2 and err.startswith("sbtf enjoy: error: cannot load the a2c agent for Pendulum-v0")
    assert "time feature" in err and len(err.strip().splitlines()) == 1
    # a folder without config.yml: the missing time feature is named, --time-feature adds it
    folder = tmp_path / "agents"
    os.makedirs(folder / "a2c")
    shutil.copy(os.path.join(zoo, "a2c", "Pendulum-v0.zip"), folder / "a2c" / "Pendulum-v1.zip")
    code, _, err = _run(capsys, ["enjoy", "--folder", str(folder), "--algo", "a2c", "--env", "Pendulum-v1",
                                 "-n", "5"])
    assert code == 2 and "a time feature is missing" in err and "(on the command line: --time-feature)" in err
    code, out, _ = _run(capsys, ["enjoy", "--folder", str(folder), "--algo", "a2c", "--env", "Pendulum-v1",
                                 "-n", "5", "--time-feature"])
    assert code == 0 and "TimeFeatureWrapper" in out


def test_enjoy_folder_errors_are_one_line(zoo, tmp_path, capsys):
    cases = [
        (["--algo", "sac", "--env", "Pendulum-v0"], "no sac model for Pendulum-v0"),
        (["--algo", "ppo2", "--env", "CartPole-v1", "--model", "x.zip"], "--model cannot be used with --folder"),
        (["--algo", "ppo2", "--env", "CartPole-v1", "--load-best"], "--load-best cannot be used with --folder"),
    ]
    for extra, message in cases:
        code, _, err = _run(capsys, ["enjoy", "--folder", zoo] + extra)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    code, _, err = _run(capsys, ["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "-f", str(tmp_path),
                                 "--time-feature"])
    assert code == 2 and "--time-feature applies to a zoo folder" in err
    # a config naming a wrapper that is not sbtf's / gymnasium's: refused unless --allow-wrapper
    folder = tmp_path / "hostile"
    shutil.copytree(os.path.join(zoo, "ppo2"), folder / "ppo2")
    _write(folder / "ppo2" / "CartPole-v1" / "config.yml", "env_wrapper: os.system\n")
    code, _, err = _run(capsys, ["enjoy", "--folder", str(folder), "--algo", "ppo2", "--env", "CartPole-v1"])
    assert code == 2 and "allowed_wrappers" in err


def test_enjoy_folder_missing_env_package_is_exit_code_1(zoo, capsys, monkeypatch):
    import sbtf.zoo.agent as zoo_agent

    def missing(*args, **kwargs):
        raise gymnasium.error.DependencyNotInstalled("Box2D is not installed, run `pip install gymnasium[box2d]`")

    monkeypatch.setattr(zoo_agent, "_make_base_env", missing)
    code, _, err = _run(capsys, ["enjoy", "--folder", zoo, "--algo", "ppo2", "--env", "CartPole-v1"])
    assert code == 1 and "Box2D is not installed" in err


def test_enjoy_folder_of_real_sb2_zoo_agents(capsys):
    folder = str(shared_fixture("sb2_zoo"))
    code, out, err = _run(capsys, ["enjoy", "--folder", folder, "--algo", "sac", "--env", "Pendulum-v0",
                                   "--episodes", "2"])
    assert code == 0, err
    assert "(deterministic actions)" in out  # the zoo played SAC deterministically
    returns = [float(line.split("return ")[1].split(",")[0]) for line in out.splitlines()
               if line.startswith("Episode ")]
    assert len(returns) == 2 and np.mean(returns) > -600  # a random policy scores about -1200


# --------------------------------------------------------------------------------------------- convert --folder

def test_convert_folder_writes_a_run_that_enjoy_plays_the_zoo_way(zoo, tmp_path, capsys):
    logs = str(tmp_path / "logs")
    code, out, err = _run(capsys, ["convert", "--folder", zoo, "--algo", "a2c", "--env", "Pendulum-v0", "-f", logs])
    assert code == 0, err
    run_dir = os.path.join(logs, "a2c", "Pendulum-v1_1")
    assert "wrote {}".format(run_dir) in out and "sbtf enjoy --algo a2c --env Pendulum-v1" in out
    assert sorted(os.listdir(run_dir)) == ["Pendulum-v1.zip", "config.yml", "vecnormalize.pkl", "zoo.yml"]
    record = read_zoo_record(run_dir)
    assert record.deterministic is False and record.atari is False
    code, out, err = _run(capsys, ["enjoy", "--algo", "a2c", "--env", "Pendulum-v1", "-f", logs, "-n", "200"])
    assert code == 0, err
    assert "zoo.yml: stochastic actions" in out and "(stochastic actions)" in out
    assert "Normalizing observations with the statistics of" in out and "Episode 1:" in out
    code, out, _ = _run(capsys, ["enjoy", "--algo", "a2c", "--env", "Pendulum-v1", "-f", logs, "-n", "5",
                                 "--deterministic"])
    assert code == 0 and "(deterministic actions)" in out and "zoo.yml" not in out


def test_convert_folder_argument_errors(zoo, tmp_path, capsys):
    cases = [
        ([], "give OLD_PATH NEW_PATH"),
        (["--folder", zoo, "--algo", "a2c"], "--folder needs --env"),
        (["old.pkl", "new.zip", "--algo", "a2c"], "--algo can only be used with --folder"),
        (["old.pkl", "--folder", zoo, "--algo", "a2c", "--env", "Pendulum-v0"], "OLD_PATH NEW_PATH cannot be used"),
        (["--folder", zoo, "--algo", "ppo2", "--env", "Pendulum-v0", "-f", str(tmp_path)], "no ppo2 model"),
    ]
    for args, message in cases:
        code, _, err = _run(capsys, ["convert"] + args)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (args, err)


def test_convert_of_one_model_file_is_unchanged(zoo, tmp_path, capsys):
    # the single-file form (a stable-baselines 2 file) still takes OLD NEW; an sbtf file is refused in one line
    code, _, err = _run(capsys, ["convert", os.path.join(zoo, "ppo2", "CartPole-v1.zip"), str(tmp_path / "n.zip")])
    assert code == 2 and err.startswith("sbtf convert: error:")


def test_zoo_record_is_validated(tmp_path):
    assert read_zoo_record(str(tmp_path)).deterministic is None
    _write(tmp_path / "zoo.yml", "deterministic: maybe\n")
    with pytest.raises(CLIError, match="deterministic must be true or false"):
        read_zoo_record(str(tmp_path))
    _write(tmp_path / "zoo.yml", yaml.safe_dump({"deterministic": True, "atari": True}))
    record = read_zoo_record(str(tmp_path))
    assert record.deterministic is True and record.atari is True


def test_enjoy_an_atari_run_uses_the_deepmind_env_and_counts_games(zoo, tmp_path, capsys, monkeypatch):
    """zoo.yml atari: true -> make_atari_env + 4 frames; a done without the Monitor's record is a lost life."""
    from sbtf import A2C
    from sbtf.bench import Monitor
    from sbtf.common import cmd_util
    from sbtf.common.vec_env import DummyVecEnv, VecFrameStack

    class LivesEnv(gymnasium.Env):
        """84x84 frames; a life is lost every 3 steps, the game ends after 9."""
        observation_space = gymnasium.spaces.Box(0, 255, (84, 84, 1), np.uint8)
        action_space = gymnasium.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros((84, 84, 1), np.uint8), {}

        def step(self, action):
            self.t += 1
            return np.zeros((84, 84, 1), np.uint8), 1.0, self.t >= 9, False, {}

    class LifeLoss(gymnasium.Wrapper):
        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            return obs, reward, terminated or self.env.unwrapped.t % 3 == 0, truncated, info

        def reset(self, **kwargs):
            if getattr(self.env.unwrapped, "t", 0) in (0, 9):
                return self.env.reset(**kwargs)
            return np.zeros((84, 84, 1), np.uint8), {}

    calls = []

    def fake_make_atari_env(env_id, num_env, seed, **kwargs):
        calls.append((env_id, num_env, seed))
        return DummyVecEnv([lambda: LifeLoss(Monitor(LivesEnv(), None))] * num_env)

    monkeypatch.setattr(cmd_util, "make_atari_env", fake_make_atari_env)
    env_id = "SbtfCliZooFakeNoFrameskip-v4"
    if env_id not in gymnasium.registry:
        gymnasium.register(env_id, entry_point=LivesEnv)
    run_dir = tmp_path / "logs" / "a2c" / "{}_1".format(env_id)
    os.makedirs(run_dir)
    venv = VecFrameStack(DummyVecEnv([LivesEnv]), 4)
    A2C("CnnPolicy", venv, n_steps=5, seed=0).save(str(run_dir / "{}.zip".format(env_id)))
    venv.close()
    _write(run_dir / "zoo.yml", yaml.safe_dump({"deterministic": False, "atari": True}))
    code, out, err = _run(capsys, ["enjoy", "--algo", "a2c", "--env", env_id, "-f", str(tmp_path / "logs"),
                                   "-n", "30", "--episodes", "2", "--seed", "4"])
    assert code == 0, err
    assert calls == [(env_id, 1, 4)]
    assert out.count("Episode ") == 2 and "return 9.00, length 9" in out
    code, _, err = _run(capsys, ["enjoy", "--algo", "a2c", "--env", env_id, "-f", str(tmp_path / "logs"),
                                 "--gif", str(tmp_path / "x.gif")])
    assert code == 2 and "not available for Atari agents" in err
