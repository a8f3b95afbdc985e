"""The ``sbtf`` command line tool: train / enjoy, hyperparameter files and overrides, errors, subcommand registry."""
from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import subprocess
import sys

import gymnasium
import numpy as np
import pytest
import yaml
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

import sbtf
from sbtf import algorithms, cli
from sbtf.cli import CLIError, main

RGB_ENV_ID = "SbtfCliTestCartPoleRGB-v0"


class RGBCartPole(CartPoleEnv):
    """CartPole that draws itself with NumPy (no pygame), so that ``enjoy --gif`` can be tested on any machine."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}

    def render(self):
        frame = np.full((32, 48, 3), 255, dtype=np.uint8)
        x = int(np.clip((self.state[0] + 2.4) / 4.8 * 47, 0, 47))
        frame[22:27, max(x - 3, 0):x + 4] = (0, 0, 0)
        tip_row = int(np.clip(22 - 14 * np.cos(self.state[2]), 0, 31))
        tip_col = int(np.clip(x + 14 * np.sin(self.state[2]), 0, 47))
        frame[tip_row, tip_col] = (200, 0, 0)
        return frame


if RGB_ENV_ID not in gymnasium.registry:
    gymnasium.register(RGB_ENV_ID, entry_point=RGBCartPole, max_episode_steps=50)

QUIET = ["--no-progress", "--verbose", "0"]


def _sbtf_command() -> list:
    """The installed console script (proves the pyproject entry point), else ``python -m sbtf``."""
    script = os.path.join(os.path.dirname(sys.executable), "sbtf")
    return [script] if os.path.isfile(script) else [sys.executable, "-m", "sbtf"]


def _read_yaml(path) -> dict:
    with open(path, "r", encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _cartpole_obs() -> np.ndarray:
    return gymnasium.make("CartPole-v1").reset(seed=0)[0]


# ------------------------------------------------------------------------------------------------ train

def test_train_through_the_console_script_saves_a_model_that_loads_and_predicts(tmp_path):
    result = subprocess.run(_sbtf_command() + ["train", "--algo", "ppo2", "--env", "CartPole-v1", "-n", "2000",
                                               "-f", str(tmp_path), "--eval-freq", "0"],
                            capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "ppo2" / "CartPole-v1_1"
    assert "Saved the model to {}".format(run / "CartPole-v1.zip") in result.stdout
    assert "/2000" in result.stderr  # the tqdm progress bar
    model = sbtf.PPO2.load(str(run / "CartPole-v1.zip"))
    assert 0 < model.num_timesteps <= 2000
    action, _ = model.predict(_cartpole_obs(), deterministic=True)
    assert int(action) in (0, 1)
    # config.yml: the shipped tuned hyperparameters, with the -n given on the command line
    shipped = cli.load_default_hyperparams("ppo2")["CartPole-v1"]
    assert _read_yaml(run / "config.yml") == dict(shipped, n_timesteps=2000)
    assert model.n_envs == shipped["n_envs"] == 8 and model.n_steps == shipped["n_steps"]
    assert model.learning_rate(1.0) == pytest.approx(0.001) and model.learning_rate(0.5) == pytest.approx(0.0005)
    assert _read_yaml(run / "args.yml")["seed"] == 0
    assert sorted(p.name for p in run.glob("*.monitor.csv")) == ["{}.monitor.csv".format(i) for i in range(8)]
    assert not (run / "vecnormalize.pkl").exists() and not (run / "best_model.zip").exists()


def test_python_dash_m_sbtf_runs_the_cli():
    result = subprocess.run([sys.executable, "-m", "sbtf", "--version"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert result.stdout.strip() == "sbtf {}".format(sbtf.__version__)


def test_train_a2c_with_evaluation_and_checkpoints(tmp_path, capsys):
    code = main(["train", "--algo", "a2c", "--env", "CartPole-v1", "-n", "2000", "-f", str(tmp_path), "--seed", "3",
                 "--eval-freq", "800", "--eval-episodes", "2", "--save-freq", "800"] + QUIET)
    out = capsys.readouterr().out
    assert code == 0
    run = tmp_path / "a2c" / "CartPole-v1_1"
    assert "Saved the model to {}".format(run / "CartPole-v1.zip") in out
    model = sbtf.A2C.load(str(run / "CartPole-v1.zip"))
    assert model.num_timesteps == 2000 and model.n_envs == 8 and model.ent_coef == 0.0
    action, _ = model.predict(_cartpole_obs())
    assert int(action) in (0, 1)
    best = sbtf.A2C.load(str(run / "best_model.zip"))
    assert int(best.predict(_cartpole_obs())[0]) in (0, 1)
    evaluations = np.load(run / "evaluations.npz")
    assert evaluations["timesteps"].tolist() == [800, 1600]  # --eval-freq counts timesteps over the 8 envs
    assert evaluations["results"].shape == (2, 2)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["rl_model_1600_steps.zip",
                                                                       "rl_model_800_steps.zip"]
    assert _read_yaml(run / "args.yml")["seed"] == 3
    # models trained on 8 envs play on one: the best model, and a checkpoint given by path
    capsys.readouterr()
    assert main(["enjoy", "--algo", "a2c", "--env", "CartPole-v1", "-f", str(tmp_path), "--load-best",
                 "--episodes", "1"]) == 0
    assert "Playing {} (deterministic actions)".format(run / "best_model.zip") in capsys.readouterr().out
    checkpoint = run / "checkpoints" / "rl_model_800_steps.zip"
    assert main(["enjoy", "--algo", "a2c", "--env", "CartPole-v1", "--model", str(checkpoint), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "Playing {}".format(checkpoint) in out and "Mean return over 2 episode(s)" in out
    # a second run of the same algo / env gets the next run id
    assert cli.runs.new_run_dir(str(tmp_path / "a2c"), "CartPole-v1")[1] == 2


def test_hyperparameter_overrides_reach_the_saved_model(tmp_path, capsys):
    user_file = tmp_path / "mine.yml"  # zoo format: keyed by env id (the retired id Pendulum-v0 style works too)
    user_file.write_text(yaml.safe_dump({"CartPole-v1": {
        "n_steps": 16, "gamma": 0.95, "policy_kwargs": "dict(net_arch=[dict(pi=[32], vf=[16])])"}}))
    code = main(["train", "--algo", "ppo2", "--env", "CartPole-v1", "-n", "1024", "-f", str(tmp_path / "logs"),
                 "--hyperparams", str(user_file), "learning_rate:0.0007", "noptepochs:2", "cliprange:lin_0.3",
                 "--n-envs", "4", "--eval-freq", "0"] + QUIET)
    assert code == 0, capsys.readouterr().err
    run = tmp_path / "logs" / "ppo2" / "CartPole-v1_1"
    config = _read_yaml(run / "config.yml")
    assert config["n_steps"] == 16 and config["gamma"] == 0.95 and config["learning_rate"] == 0.0007
    assert config["noptepochs"] == 2 and config["cliprange"] == "lin_0.3" and config["n_envs"] == 4
    assert config["n_timesteps"] == 1024
    assert config["lam"] == 0.8 and config["nminibatches"] == 1  # shipped defaults that were not overridden
    model = sbtf.PPO2.load(str(run / "CartPole-v1.zip"))
    assert model.n_steps == 16 and model.gamma == pytest.approx(0.95) and model.noptepochs == 2
    assert model.n_envs == 4 and model.num_timesteps == 1024
    assert model.learning_rate == pytest.approx(0.0007)
    assert model.cliprange(1.0) == pytest.approx(0.3) and model.cliprange(0.5) == pytest.approx(0.15)
    assert model.policy_kwargs == {"net_arch": [{"pi": [32], "vf": [16]}]}
    shapes = {name: value.shape for name, value in model.get_parameters().items()}
    assert shapes["model/pi_fc0/w:0"] == (4, 32) and shapes["model/vf_fc0/w:0"] == (4, 16)


@pytest.fixture(scope="module")
def normalized_run(tmp_path_factory):
    """A ppo2 run with normalize on, on the NumPy-drawn CartPole: (log folder, run folder, train stdout)."""
    logs = tmp_path_factory.mktemp("normalized") / "logs"
    argv = ["train", "--algo", "ppo2", "--env", RGB_ENV_ID, "-n", "512", "-f", str(logs), "--hyperparams",
            "normalize:True", "n_steps:64", "--eval-freq", "0"] + QUIET
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    assert code == 0
    return logs, logs / "ppo2" / "{}_1".format(RGB_ENV_ID), out.getvalue()


def test_normalize_writes_vecnormalize_and_enjoy_uses_it_and_writes_a_gif(normalized_run, tmp_path, capsys):
    from PIL import Image
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize

    logs, run, out = normalized_run
    stats_path = run / "vecnormalize.pkl"
    assert "Saved the VecNormalize statistics to {}".format(stats_path) in out
    assert _read_yaml(run / "config.yml")["normalize"] is True
    saved = VecNormalize.load(str(stats_path), DummyVecEnv([lambda: gymnasium.make(RGB_ENV_ID)]))
    assert saved.obs_rms.count > 500 and np.all(saved.obs_rms.var > 0)

    # the env enjoy plays in: the run's statistics, frozen, raw rewards
    play_env = cli.make_play_env(RGB_ENV_ID, str(run), cli.env_settings(_read_yaml(run / "config.yml")), seed=0)
    assert isinstance(play_env, VecNormalize)
    assert play_env.training is False and play_env.norm_reward is False
    np.testing.assert_allclose(play_env.obs_rms.mean, saved.obs_rms.mean)
    play_env.close()
    capsys.readouterr()

    gif = tmp_path / "out" / "play.gif"
    code = main(["enjoy", "--algo", "ppo2", "--env", RGB_ENV_ID, "-f", str(logs), "-n", "50", "--episodes", "1",
                 "--gif", str(gif)])
    out = capsys.readouterr().out
    assert code == 0
    assert "Normalizing observations with the statistics of {}".format(stats_path) in out
    episodes = re.findall(r"^Episode (\d+): return ([\d.]+), length (\d+)$", out, flags=re.M)
    assert len(episodes) == 1
    ep_return, ep_length = float(episodes[0][1]), int(episodes[0][2])
    assert ep_return == ep_length <= 50  # CartPole pays 1 per step: the raw (not normalised) return is printed
    assert re.search(r"^Mean return over 1 episode\(s\): {:.2f} \+/- 0\.00".format(ep_return), out, flags=re.M)
    with Image.open(gif) as image:
        assert image.format == "GIF" and image.size == (48, 32)
        # the reset frame and one frame per step, 1/25 s each (Pillow merges identical neighbours, adding up
        # their durations)
        total_ms = 0
        for index in range(image.n_frames):
            image.seek(index)
            total_ms += image.info["duration"]
        assert total_ms == 40 * (ep_length + 1)
    assert "Saved a GIF of {} frames to {}".format(ep_length + 1, gif) in out


def test_enjoy_prints_every_episode_and_the_mean(normalized_run, capsys):
    logs = normalized_run[0]
    assert main(["enjoy", "--algo", "ppo2", "--env", RGB_ENV_ID, "-f", str(logs), "-n", "400", "--episodes", "3",
                 "--stochastic", "--exp-id", "1", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    returns = [float(r) for r in re.findall(r"^Episode \d+: return ([\d.]+), length \d+$", out, flags=re.M)]
    assert len(returns) == 3
    mean = re.search(r"^Mean return over 3 episode\(s\): ([\d.]+) \+/- ([\d.]+)", out, flags=re.M)
    assert float(mean.group(1)) == pytest.approx(np.mean(returns), abs=0.01)
    assert float(mean.group(2)) == pytest.approx(np.std(returns), abs=0.01)
    assert "stochastic actions" in out


# ------------------------------------------------------------------------------------------------ errors

def _error(capsys, argv, code=2) -> str:
    assert main(argv) == code
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "Traceback" not in captured.err and "\n" not in err, err
    return err


def test_unknown_algorithm_names_the_valid_choices(tmp_path, capsys):
    err = _error(capsys, ["train", "--algo", "ppo3", "--env", "CartPole-v1", "-f", str(tmp_path)])
    assert err.startswith("sbtf train: error: unknown algorithm 'ppo3'")
    assert "did you mean ppo?" in err and "valid choices: " + ", ".join(sorted(cli.ALGOS)) in err
    assert {"a2c", "a2c_sb3", "ppo", "ppo2", "ppo_mask", "trpo_contrib"} <= set(cli.ALGOS)
    assert not any(tmp_path.iterdir())


def test_unknown_env_names_close_matches_and_tuned_envs(tmp_path, capsys):
    err = _error(capsys, ["train", "--algo", "ppo2", "--env", "CartPole-v9", "-f", str(tmp_path)])
    assert err.startswith("sbtf train: error: unknown env id 'CartPole-v9'")
    assert "did you mean CartPole-v1" in err and "MountainCarContinuous-v0" in err
    err = _error(capsys, ["enjoy", "--algo", "ppo2", "--env", "NoSuchEnv-v0", "-f", str(tmp_path)])
    assert err.startswith("sbtf enjoy: error: unknown env id 'NoSuchEnv-v0'")


def test_unknown_hyperparameter_names_the_valid_ones(tmp_path, capsys):
    err = _error(capsys, ["train", "--algo", "ppo2", "--env", "CartPole-v1", "-f", str(tmp_path),
                          "--hyperparams", "n_stepz:64"])
    assert "unknown hyperparameter 'n_stepz' for ppo2 (did you mean n_steps?)" in err
    assert "valid choices:" in err and "noptepochs" in err and "normalize" in err
    bad_file = tmp_path / "bad.yml"
    bad_file.write_text("CartPole-v1:\n  learning_rat: 0.1\n")
    err = _error(capsys, ["train", "--algo", "a2c", "--env", "CartPole-v1", "-f", str(tmp_path),
                          "--hyperparams", str(bad_file)])
    assert "unknown hyperparameter 'learning_rat' for a2c (did you mean learning_rate?)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yml"]  # nothing was created


@pytest.mark.parametrize("override, fragment", [
    ("learning_rate:lin_0.001", "not by a2c (a2c anneals with lr_schedule"),
    ("normalize:maybe", "normalize must be true, false or a dict"),
    ("seed:3", "'seed' cannot be set as a hyperparameter: it is set by the command line flag --seed"),
    ("policy_kwargs:__import__('os')", "is not allowed"),
    ("nonsense", "'nonsense' is neither a YAML file nor a KEY:VALUE pair"),
])
def test_bad_hyperparameter_values_are_one_line_errors(tmp_path, capsys, override, fragment):
    err = _error(capsys, ["train", "--algo", "a2c", "--env", "CartPole-v1", "-f", str(tmp_path / "logs"),
                          "-n", "100", "--hyperparams", override] + QUIET)
    assert fragment in err
    assert not (tmp_path / "logs" / "a2c").exists() or not any((tmp_path / "logs" / "a2c").iterdir())


def test_algorithm_missing_from_this_version(tmp_path, capsys, monkeypatch):
    acer = sbtf.algorithms.ALGORITHMS["ACER"]
    monkeypatch.setitem(sbtf.algorithms.ALGORITHMS, "ACER",
                        dataclasses.replace(acer, target="sbtf._cli_test_missing_acer:ACER"))
    err = _error(capsys, ["train", "--algo", "acer", "--env", "CartPole-v1", "-f", str(tmp_path)])
    assert err == ("sbtf train: error: algorithm acer is not available in this version of sbtf "
                   "(sbtf._cli_test_missing_acer is missing)")


def _env_needing_a_package(**_kwargs):
    raise gymnasium.error.DependencyNotInstalled("the package foo is not installed: pip install foo")


def test_env_that_cannot_be_made_is_a_one_line_error_and_leaves_no_run(tmp_path, capsys):
    env_id = "SbtfCliTestNeedsFoo-v0"
    if env_id not in gymnasium.registry:
        gymnasium.register(env_id, entry_point=_env_needing_a_package)
    err = _error(capsys, ["train", "--algo", "ppo2", "--env", env_id, "-n", "100", "-f", str(tmp_path / "logs")],
                 code=1)
    assert err == "sbtf train: error: cannot make {}: the package foo is not installed: pip install foo".format(env_id)
    assert not (tmp_path / "logs").exists()


def test_enjoy_without_a_trained_run(tmp_path, capsys):
    err = _error(capsys, ["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "-f", str(tmp_path)])
    assert "no trained ppo2 agent for CartPole-v1 in {}".format(tmp_path / "ppo2") in err
    err = _error(capsys, ["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "--model", str(tmp_path / "x.zip")])
    assert "--model: file {} not found".format(tmp_path / "x.zip") in err


def test_untuned_env_needs_the_number_of_timesteps(tmp_path, capsys):
    err = _error(capsys, ["train", "--algo", "ppo2", "--env", RGB_ENV_ID, "-f", str(tmp_path)])
    assert "no tuned ppo2 hyperparameters for {}".format(RGB_ENV_ID) in err and "-n" in err


# ------------------------------------------------------------------------------------------------ pieces

def test_shipped_hyperparameter_files():
    from sbtf.common.envs.gym_compat import RETIRED_ENV_IDS

    for algo in cli.ALGOS:
        table = cli.load_default_hyperparams(algo)
        assert table, algo
        for env_id, hyperparams in table.items():
            # 'atari': the zoo's entry for every NoFrameskip game
            assert env_id in gymnasium.registry or env_id in cli.SBTF_ENVS or env_id == "atari", (algo, env_id)
            assert env_id not in RETIRED_ENV_IDS, (algo, env_id)
            assert hyperparams["n_timesteps"] >= 1000 and isinstance(hyperparams["policy"], str), (algo, env_id)
            cli.env_settings(hyperparams)  # normalize / frame_stack / env_kwargs are well-formed
            if "policy_kwargs" in hyperparams:
                assert isinstance(cli.safe_eval(hyperparams["policy_kwargs"], "policy_kwargs"), dict)
            if algo not in cli.MULTI_ENV_ALGOS:
                assert hyperparams.get("n_envs", 1) == 1, (algo, env_id)
    classic = {"CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1"}
    for algo in ("a2c", "acktr", "ppo1", "ppo2", "trpo", "gail", "ppo", "a2c_sb3"):
        assert classic <= set(cli.load_default_hyperparams(algo)), algo
    assert set(cli.load_default_hyperparams("her")) == {"BitFlippingEnv-v0"}
    atari = {algo for algo in cli.ALGOS if "atari" in cli.load_default_hyperparams(algo)}
    zoo_atari = {"a2c", "acer", "acktr", "dqn", "ppo2", "ppo", "a2c_sb3"}  # the zoos' Atari entries
    assert zoo_atari <= atari and atari - zoo_atari <= set(algorithms.SB3_ALGORITHMS)
    # every name in the files is a valid hyperparameter of the algorithms this version has
    checked = []
    for algo in cli.ALGOS:
        try:
            cls = cli.load_algorithm(algo)
        except CLIError:  # not in this version yet
            continue
        for _env_id, hyperparams in cli.load_default_hyperparams(algo).items():
            delegate, model_class = None, None
            if algo == "her":
                model_class, delegate = cli.her_model_class(hyperparams)
            elif algo == "gail":
                delegate = cli.load_algorithm("trpo")
            valid = cli.valid_hyperparameters(algo, cls, delegate, model_class)
            cli.check_hyperparameter_names(algo, hyperparams, valid)
        checked.append(algo)
    assert {"a2c", "ppo2", "ppo", "a2c_sb3"} <= set(checked)


def test_retired_env_ids_resolve_and_find_zoo_entries(capsys):
    assert cli.resolve_env("Pendulum-v0", "ppo2") == "Pendulum-v1"
    assert "Pendulum-v0 was retired by gymnasium; using its successor Pendulum-v1" in capsys.readouterr().err
    zoo_file = {"Pendulum-v0": {"n_envs": 8}, "CartPole-v1": {"n_envs": 2}}
    assert cli.find_env_entry(zoo_file, "Pendulum-v1") == {"n_envs": 8}
    assert cli.find_env_entry(zoo_file, "Acrobot-v1") is None


def test_values_and_policy_kwargs_are_parsed_without_running_code():
    assert cli.parse_value("0.001") == 0.001 and cli.parse_value("1e5") == 1e5 and cli.parse_value("true") is True
    assert cli.parse_value("[64, 64]") == [64, 64] and cli.parse_value("lin_0.001") == "lin_0.001"
    assert cli.safe_eval("dict(net_arch=[dict(pi=[64], vf=[64])], layer_norm=True)", "policy_kwargs") == {
        "net_arch": [{"pi": [64], "vf": [64]}], "layer_norm": True}
    import tensorflow as tf
    assert cli.safe_eval("dict(act_fun=tf.nn.tanh)", "policy_kwargs")["act_fun"] is tf.nn.tanh
    for text in ("__import__('os').system('true')", "open('x')", "dict(**{'a': 1})", "tf.io.gfile"):
        with pytest.raises(CLIError):
            cli.safe_eval(text, "policy_kwargs")
    # the zoo's custom policies become sbtf policies with their policy_kwargs
    kwargs = cli.model_kwargs("dqn", {"policy": "CustomDQNPolicy"}, gymnasium.spaces.Discrete(2))
    assert kwargs["policy"] == "LnMlpPolicy" and kwargs["policy_kwargs"] == {"layers": [64]}


def test_action_noise_from_hyperparameters():
    from sbtf.common.noise import AdaptiveParamNoiseSpec, NormalActionNoise, OrnsteinUhlenbeckActionNoise

    box = gymnasium.spaces.Box(-1, 1, (3,))
    kwargs = cli.model_kwargs("td3", {"policy": "MlpPolicy", "noise_type": "normal", "noise_std": 0.2}, box)
    assert isinstance(kwargs["action_noise"], NormalActionNoise) and "noise_type" not in kwargs
    np.testing.assert_allclose(kwargs["action_noise"]._sigma, [0.2, 0.2, 0.2])
    kwargs = cli.model_kwargs("sac", {"noise_type": "ornstein-uhlenbeck", "noise_std": 0.5}, box)
    assert isinstance(kwargs["action_noise"], OrnsteinUhlenbeckActionNoise)
    kwargs = cli.model_kwargs("ddpg", {"noise_type": "adaptive-param", "noise_std": 0.1}, box)
    assert isinstance(kwargs["param_noise"], AdaptiveParamNoiseSpec)
    with pytest.raises(CLIError, match="only supported by ddpg"):
        cli.model_kwargs("td3", {"noise_type": "adaptive-param", "noise_std": 0.1}, box)
    with pytest.raises(CLIError, match="unknown noise_type 'pink'"):
        cli.model_kwargs("sac", {"noise_type": "pink", "noise_std": 0.1}, box)


def test_a_module_can_register_a_subcommand(monkeypatch, capsys):
    cli.registered_subcommands()  # plugins register into the real table first, not into this test's copy
    monkeypatch.setattr(cli.plugins, "_SUBCOMMANDS", dict(cli.plugins._SUBCOMMANDS))
    seen = {}

    def add_arguments(parser):
        parser.add_argument("--times", type=int, default=1)

    def run(args):
        if args.times < 0:
            raise CLIError("--times must be >= 0", exit_code=2)
        seen["times"] = args.times
        print("hello " * args.times)
        return 0

    cli.register_subcommand("hello", run, add_arguments, help="say hello")
    assert main(["hello", "--times", "2"]) == 0 and seen == {"times": 2}
    assert capsys.readouterr().out.strip() == "hello hello"
    assert main(["hello", "--times", "-1"]) == 2
    assert capsys.readouterr().err.strip() == "sbtf hello: error: --times must be >= 0"
    assert main(["--help"]) == 0 and "say hello" in capsys.readouterr().out
    with pytest.raises(ValueError, match="already registered"):
        cli.register_subcommand("hello", run)
    assert main([]) == 2  # no subcommand: the usage, exit code 2


def test_atari_ids_take_the_zoo_atari_entry():
    table = {"atari": {"policy": "CnnPolicy"}, "CartPole-v1": {"n_envs": 2}}
    assert cli.find_env_entry(table, "BreakoutNoFrameskip-v4") == {"policy": "CnnPolicy"}
    assert cli.find_env_entry(table, "Acrobot-v1") is None
    assert cli.find_env_entry({"PongNoFrameskip-v4": {"n_envs": 1}, "atari": {}}, "PongNoFrameskip-v4") == {"n_envs": 1}


def test_train_and_enjoy_an_atari_game_as_the_zoo_did(tmp_path, capsys):
    """``sbtf train --env PongNoFrameskip-v4``: ale-py's envs are registered, the zoo's ``atari`` entry applies, the
    env is the DeepMind-wrapped one with 4 stacked frames, and ``enjoy`` plays the run in the same env."""
    pytest.importorskip("ale_py", reason="needs ale-py (pip install 'sbtf[atari]')")
    code = main(["train", "--algo", "a2c", "--env", "PongNoFrameskip-v4", "-n", "200", "--n-envs", "2", "-f",
                 str(tmp_path), "--eval-freq", "0"] + QUIET)
    assert code == 0
    run = tmp_path / "a2c" / "PongNoFrameskip-v4_1"
    config = _read_yaml(run / "config.yml")
    assert config["policy"] == "CnnPolicy" and config["frame_stack"] == 4 and config["lr_schedule"] == "constant"
    model = sbtf.A2C.load(str(run / "PongNoFrameskip-v4.zip"))
    assert model.observation_space.shape == (84, 84, 4) and model.num_timesteps == 200
    assert sorted(p.name for p in run.glob("*.monitor.csv")) == ["0.monitor.csv", "1.monitor.csv"]
    capsys.readouterr()
    assert main(["enjoy", "--algo", "a2c", "--env", "PongNoFrameskip-v4", "-f", str(tmp_path), "-n", "40"]) == 0
    assert "on PongNoFrameskip-v4 for at most 40 steps" in capsys.readouterr().out
    # the Atari env takes the DeepMind wrappers: an env_wrapper for it is refused, not silently dropped
    code = main(["train", "--algo", "ppo2", "--env", "PongNoFrameskip-v4", "-n", "200", "-f", str(tmp_path),
                 "--hyperparams", "env_wrapper:gymnasium.wrappers.TimeLimit"] + QUIET)
    assert code != 0
    assert "is an Atari env" in capsys.readouterr().err


def test_atari_id_without_ale_py_says_what_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ale_py", None)  # import ale_py raises ImportError
    code = main(["train", "--algo", "ppo2", "--env", "NotInstalledGameNoFrameskip-v4", "-n", "100", "-f",
                 str(tmp_path)] + QUIET)
    assert code != 0
    assert "is an Atari env: it needs ale-py (pip install 'sbtf[atari]')" in capsys.readouterr().err
    assert not (tmp_path / "ppo2").exists()
