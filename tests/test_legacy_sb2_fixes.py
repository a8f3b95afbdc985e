"""What stable-baselines 2's own test suite needs from the ``stable_baselines`` compatibility package, each checked
here with tests of our own:

* SB2's bundled envs (``BitFlippingEnv``, the identity envs) and ``Monitor`` speak the old gym API to old code,
  while ``sbtf.common...`` keeps gymnasium's; sbtf's algorithms still train on them;
* the import hook marks only packages as packages and its loader has ``get_code``, so ``python -m
  stable_baselines.common.mpi_adam`` runs (a self-test of MpiAdam), also under ``mpirun``;
* SB2's scripts (``ddpg.main``, ``<algo>.run_atari``, ``deepq.experiments.*``, ``ppo1.experiments.train_cartpole``)
  exist as sbtf scripts with SB2's flags; the modules sbtf deliberately lacks say what to use instead;
* ``logger._demo`` and ``common.mpi_moments._helper_runningmeanstd`` exist.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
LEGACY = str(REPO / "legacy")


@pytest.fixture(scope="module")
def sb():
    """The stable_baselines package (from legacy/), removed again after the module's tests."""
    added = LEGACY not in sys.path
    if added:
        sys.path.insert(0, LEGACY)
    shim = importlib.import_module("stable_baselines")
    yield shim
    if added:
        shim._compat.uninstall()
        sys.path.remove(LEGACY)
        for name in [n for n in sys.modules if n == "stable_baselines" or n.startswith("stable_baselines.")]:
            del sys.modules[name]


def _subprocess_env():
    paths = [str(REPO), str(REPO / "converters"), LEGACY, os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p), TF_CPP_MIN_LOG_LEVEL="3")


# ----------------------------------------------------------------------------------------- old gym API envs

def test_bit_flipping_env_speaks_the_old_api_through_stable_baselines(sb):
    from stable_baselines.common.bit_flipping_env import BitFlippingEnv
    import sbtf.common.bit_flipping_env as sbtf_module

    env = BitFlippingEnv(n_bits=3, max_steps=2)
    obs = env.reset()
    assert set(obs) == {"observation", "achieved_goal", "desired_goal"}  # a dict, not (obs, info)
    env.state[:] = [1, 1, 0]
    obs, reward, done, info = env.step(2)
    assert reward == 0.0 and done and info["is_success"] and "TimeLimit.truncated" not in info
    env.reset()
    env.state[:] = [0, 0, 0]
    env.step(0)
    _, reward, done, info = env.step(0)  # max_steps reached without success: done, marked as a truncation
    assert done and reward == -1.0 and not info["is_success"] and info["TimeLimit.truncated"]
    assert env.seed(5) == [5]
    first = env.reset()["observation"].copy()
    env.seed(5)
    np.testing.assert_array_equal(env.reset()["observation"], first)
    assert isinstance(env, sbtf_module.BitFlippingEnv)
    assert BitFlippingEnv.__module__ == "stable_baselines.common.bit_flipping_env"
    result = sbtf_module.BitFlippingEnv(3).reset()  # sbtf's own class keeps gymnasium's API
    assert isinstance(result, tuple) and len(result) == 2


def test_sb2_her_example_runs_unchanged(sb):
    """The SB2 docs' HER example (``obs = env.reset()``, 4-tuple ``step``) on sbtf."""
    from stable_baselines import DQN, HER
    from stable_baselines.common.bit_flipping_env import BitFlippingEnv

    env = BitFlippingEnv(4, continuous=False, max_steps=4)
    model = HER("MlpPolicy", env, DQN, n_sampled_goal=4, goal_selection_strategy="future", learning_starts=10,
                verbose=0)
    model.learn(120)
    obs = env.reset()
    steps = 0
    for _ in range(12):
        action, _ = model.predict(obs)
        obs, reward, done, _ = env.step(action)
        steps += 1
        if done:
            obs = env.reset()
    assert steps == 12 and isinstance(obs, dict)


def test_identity_envs_speak_the_old_api_and_train(sb):
    from stable_baselines import A2C
    from stable_baselines.common.identity_env import IdentityEnv, IdentityEnvBox, IdentityEnvMultiBinary
    from stable_baselines.common.evaluation import evaluate_policy

    env = IdentityEnv(3, ep_length=2)
    obs = env.reset()
    assert env.action_space.contains(obs)
    _, reward, done, info = env.step(obs)
    assert reward == 1.0 and not done and info == {}
    _, _, done, info = env.step(0)
    assert done and info == {"TimeLimit.truncated": True}
    assert IdentityEnvMultiBinary(4).reset().shape == (4,)
    model = A2C("MlpPolicy", IdentityEnvBox(ep_length=10), n_steps=5, seed=0)
    model.learn(50)
    mean, _ = evaluate_policy(model, IdentityEnvBox(ep_length=10), n_eval_episodes=2)
    assert 0.0 <= mean <= 10.0


def test_monitor_speaks_the_old_api_and_keeps_sbtf_files(sb, tmp_path):
    from stable_baselines import PPO2
    from stable_baselines.bench import Monitor, load_results
    from stable_baselines.bench.monitor import Monitor as MonitorFromModule
    import sbtf.bench

    assert Monitor is MonitorFromModule and issubclass(Monitor, sbtf.bench.Monitor)
    env = Monitor(gymnasium.make("CartPole-v1"), str(tmp_path / "run"), reset_keywords=("tag",))
    with pytest.raises(ValueError, match="tag"):
        env.reset()
    env.seed(0)
    obs = env.reset(tag=7)
    assert np.shape(obs) == (4,)
    done, steps = False, 0
    while not done:
        obs, reward, done, info = env.step(env.action_space.sample())
        steps += 1
    assert info["episode"]["l"] == steps and info["episode"]["tag"] == 7
    env.close()
    results = load_results(str(tmp_path))
    assert list(results["l"]) == [steps] and list(results["tag"]) == [7]
    # sbtf's models adapt the old-API Monitor and fill it
    train_env = Monitor(gymnasium.make("CartPole-v1"), None)
    PPO2("MlpPolicy", train_env, n_steps=64, seed=0).learn(128)
    assert train_env.get_total_steps() >= 128 and train_env.get_episode_rewards()


# ----------------------------------------------------------------------------------------- the import hook

def test_hook_marks_packages_and_gives_code(sb):
    spec = importlib.util.find_spec("stable_baselines.common.mpi_adam")
    assert spec.submodule_search_locations is None and spec.origin.endswith(os.path.join("common", "mpi_adam.py"))
    code = spec.loader.get_code("stable_baselines.common.mpi_adam")
    assert "run_check" in code.co_names  # python -m runs the self-test of sbtf.scripts.common.mpi_adam
    assert importlib.util.find_spec("stable_baselines.common").submodule_search_locations is not None
    assert importlib.util.find_spec("stable_baselines.deepq.experiments").submodule_search_locations is not None
    import sbtf.common.mpi_adam
    assert importlib.import_module("stable_baselines.common.mpi_adam") is sbtf.common.mpi_adam
    import sbtf.scripts.ddpg.main
    assert importlib.import_module("stable_baselines.ddpg.main") is sbtf.scripts.ddpg.main


def test_missing_modules_say_what_to_use(sb):
    with pytest.raises(ModuleNotFoundError, match="not provided by sbtf: it builds DQN's TensorFlow 1 graph"):
        importlib.import_module("stable_baselines.deepq.experiments.custom_cartpole")
    with pytest.raises(ModuleNotFoundError, match="sbtf train"):
        importlib.import_module("stable_baselines.ppo2.run_mujoco")
    with pytest.raises(ModuleNotFoundError, match="not a stable-baselines 2.10 module either"):
        importlib.import_module("stable_baselines.common.no_such_thing")
    for name in sb._compat.SCRIPT_MODULES:  # every SB2 script the package names exists
        assert importlib.import_module("stable_baselines." + name).__name__ == "sbtf.scripts." + name


def test_python_m_runs_the_mpi_adam_self_test(tmp_path):
    result = subprocess.run([sys.executable, "-m", "stable_baselines.common.mpi_adam"], cwd=tmp_path,
                            env=_subprocess_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "MpiAdam follows the reference Adam" in result.stdout and result.stdout.startswith("0 ")


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs mpirun (pip install 'sbtf[mpi]')")
def test_mpi_self_tests_under_mpirun(tmp_path):
    pytest.importorskip("mpi4py")
    env = _subprocess_env()
    for cmd in (["-np", "2", sys.executable, "-m", "stable_baselines.common.mpi_running_mean_std"],
                ["-np", "3", sys.executable, "-c",
                 "from stable_baselines.common.mpi_moments import _helper_runningmeanstd; _helper_runningmeanstd()"]):
        result = subprocess.run(["mpirun"] + cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=400)
        assert result.returncode == 0, (cmd, result.stdout[-1000:], result.stderr[-2000:])


# ----------------------------------------------------------------------------------------- SB2's scripts

def test_deepq_experiments_train_and_enjoy(sb, tmp_path, monkeypatch, capsys):
    from stable_baselines.deepq.experiments.enjoy_cartpole import main as enjoy_cartpole
    from stable_baselines.deepq.experiments.train_cartpole import main as train_cartpole
    from stable_baselines.deepq.experiments.train_cartpole import parse_args
    from stable_baselines.deepq.experiments import _enjoy

    monkeypatch.chdir(tmp_path)
    args = parse_args(["--max-timesteps", "200"])
    args.no_render = True
    assert args.max_timesteps == 200 and _enjoy.parse_args("x", ["--no-render"]).no_render
    train_cartpole(args)
    assert (tmp_path / "cartpole_model.zip").exists()
    enjoy_cartpole(args)
    out = capsys.readouterr().out
    assert "Saving model to cartpole_model.zip" in out and out.count("Episode reward") == 1


def test_ddpg_main_with_sb2_flags(sb, tmp_path, monkeypatch):
    from stable_baselines.ddpg import main as ddpg_main

    monkeypatch.setenv("OPENAI_LOGDIR", str(tmp_path / "log"))
    monkeypatch.setenv("OPENAI_LOG_FORMAT", "csv")
    args = ddpg_main.parse_args(["--env-id", "Pendulum-v0", "--nb-rollout-steps", "20", "--nb-train-steps", "2",
                                 "--num-timesteps", "60", "--noise-type", "ou_0.2,adaptive-param_0.1",
                                 "--no-layer-norm", "--evaluation"])
    assert args["layer_norm"] is False and args["normalize_observations"] is True and args["batch_size"] == 64
    with pytest.warns(UserWarning, match="retired"):
        ddpg_main.main(["--env-id", "Pendulum-v0", "--nb-rollout-steps", "20", "--nb-train-steps", "2",
                        "--num-timesteps", "60", "--noise-type", "normal_0.1"])
    assert (tmp_path / "log" / "0.monitor.csv").exists()
    action_noise, param_noise = ddpg_main.parse_noise_types("ou_0.2,adaptive-param_0.1", 2)
    assert type(action_noise).__name__ == "OrnsteinUhlenbeckActionNoise" and param_noise is not None
    with pytest.raises(ValueError, match='unknown noise type "gaussian_0.1"'):
        ddpg_main.parse_noise_types("gaussian_0.1", 1)


class _FakeAtari(gymnasium.Env):
    """84x84x1 frames, 8-step episodes: stands in for a DeepMind-wrapped Atari env (no ale-py needed)."""

    observation_space = gymnasium.spaces.Box(0, 255, (84, 84, 1), np.uint8)
    action_space = gymnasium.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros((84, 84, 1), np.uint8), {}

    def step(self, action):
        self.t += 1
        return np.full((84, 84, 1), self.t, np.uint8), 1.0, self.t >= 8, False, {}


def test_run_atari_scripts_train_with_sb2_signatures(sb, monkeypatch):
    from sbtf.common import atari_wrappers
    from sbtf.common.vec_env import DummyVecEnv
    from stable_baselines.a2c import run_atari as a2c_atari
    from stable_baselines.ppo2 import run_atari as ppo2_atari
    from stable_baselines.trpo_mpi import run_atari as trpo_atari

    made = []

    def fake_make_atari_env(env_id, num_env, seed, **kwargs):
        made.append((env_id, num_env, seed))
        return DummyVecEnv([_FakeAtari] * num_env)

    for module in (a2c_atari, ppo2_atari):
        monkeypatch.setattr(module, "make_atari_env", fake_make_atari_env)
    monkeypatch.setattr(atari_wrappers, "make_atari", lambda env_id: _FakeAtari())
    monkeypatch.setattr(atari_wrappers, "wrap_deepmind", lambda env, **kwargs: env)
    a2c_atari.train(env_id="BreakoutNoFrameskip-v4", num_timesteps=20, seed=3, policy="cnn",
                    lr_schedule="constant", num_env=2)
    ppo2_atari.train(env_id="BreakoutNoFrameskip-v4", num_timesteps=32, seed=3, policy="mlp", n_envs=2,
                     nminibatches=2, n_steps=16)
    assert made == [("BreakoutNoFrameskip-v4", 2, 3)] * 2
    trpo_atari.train(env_id="BreakoutNoFrameskip-v4", num_timesteps=20, seed=3)
    with pytest.raises(ValueError, match="policy gru not implemented"):
        a2c_atari.train(env_id="X", num_timesteps=1, seed=0, policy="gru", lr_schedule="constant", num_env=1)


def test_script_flags_are_sb2s(sb):
    from stable_baselines.common.cmd_util import atari_arg_parser
    from stable_baselines.deepq.experiments import run_atari as deepq_atari

    args = deepq_atari.parse_args([])
    assert (args.env, args.prioritized, args.dueling, args.prioritized_replay_alpha, args.num_timesteps) == \
        ("BreakoutNoFrameskip-v4", 1, 1, 0.6, int(10e6))
    for name in ("a2c", "acer", "acktr", "ppo1", "ppo2", "trpo_mpi"):
        module = importlib.import_module("stable_baselines.{}.run_atari".format(name))
        assert callable(module.train) and callable(module.main)
    assert atari_arg_parser().parse_args([]).env == "BreakoutNoFrameskip-v4"
    train_cartpole = importlib.import_module("stable_baselines.ppo1.experiments.train_cartpole")
    assert callable(train_cartpole.main)


# ----------------------------------------------------------------------------------------- helpers SB2 tests call

def test_logger_demo_writes_and_restores(sb, capsys):
    from stable_baselines import logger

    before = logger.Logger.CURRENT
    folder = logger._demo()
    assert logger.Logger.CURRENT is before
    out = capsys.readouterr().out
    assert "should appear" in out and "shouldn't appear" not in out
    progress = logger.read_csv(os.path.join(folder, "progress.csv"))
    assert list(progress["a"]) == [3, 5.5, 5.5]
    assert progress["b"].iloc[2] == pytest.approx(-33.45)
    assert len(logger.read_json(os.path.join(folder, "scoped", "progress.json"))) == 1


def test_mpi_moments_helper_in_one_process(sb, capsys):
    from stable_baselines.common.mpi_moments import _helper_runningmeanstd

    _helper_runningmeanstd()
    assert capsys.readouterr().out.count("ok!") == 9


def test_from_package_import_script_works_as_the_first_import(tmp_path):
    """``from stable_baselines.a2c import run_atari`` (a script beside an algorithm's package) in a fresh process."""
    code = ("from stable_baselines.a2c import run_atari, A2C\n"
            "from stable_baselines.trpo_mpi import run_atari as trpo_run_atari\n"
            "from stable_baselines.ppo1.experiments import train_cartpole\n"
            "import sbtf\n"
            "assert A2C is sbtf.A2C\n"
            "print(run_atari.__name__, trpo_run_atari.__name__, train_cartpole.__name__)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_subprocess_env(), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["sbtf.scripts.a2c.run_atari", "sbtf.scripts.trpo_mpi.run_atari",
                                     "sbtf.scripts.ppo1.experiments.train_cartpole"]
