"""Run folders and hyperparameter files are data: the CLI never imports and calls a name they hold."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from sbtf.cli import CLIError, EnvSettings, env_settings, main, wrapper_class

CANARY = "/tmp/sbtf_cli_canary"

HOSTILE = [
    {"pydoc.pipepager": {"text": "x", "cmd": f"touch {CANARY}"}},
    {"os.system": {}},
    "builtins.exec",
    {"subprocess.Popen": {"args": ["touch", CANARY]}},
    "sbtf.cli.main",  # an sbtf name that is not a wrapper class
]


@pytest.fixture(autouse=True)
def _no_canary():
    if os.path.exists(CANARY):
        os.remove(CANARY)
    yield
    assert not os.path.exists(CANARY), "a settings file ran a command"


@pytest.mark.parametrize("spec", HOSTILE)
def test_hostile_env_wrapper_is_refused(spec):
    settings = env_settings({"env_wrapper": spec}, source="logs/x/config.yml")
    with pytest.raises(CLIError, match="not an sbtf or gymnasium wrapper.*--allow-wrapper"):
        wrapper_class(settings.env_wrapper, settings)


def test_gymnasium_wrapper_with_plain_kwargs_works():
    import gymnasium

    settings = env_settings({"env_wrapper": {"gymnasium.wrappers.TimeLimit": {"max_episode_steps": 7}}})
    env = wrapper_class(settings.env_wrapper, settings)(gymnasium.make("CartPole-v1"))
    assert isinstance(env, gymnasium.wrappers.TimeLimit) and env._max_episode_steps == 7


def test_non_plain_kwargs_are_refused():
    settings = EnvSettings(env_wrapper={"gymnasium.wrappers.TimeLimit": {"max_episode_steps": object()}})
    with pytest.raises(CLIError, match="plain values"):
        wrapper_class(settings.env_wrapper, settings)


def test_zoo_wrapper_names_the_way_out():
    settings = env_settings({"env_wrapper": "utils.wrappers.TimeFeatureWrapper"}, source="config.yml")
    with pytest.raises(CLIError, match="rl-baselines-zoo wrapper.*--allow-wrapper utils.wrappers.TimeFeatureWrapper"):
        wrapper_class(settings.env_wrapper, settings)


def test_user_allowed_wrapper_is_used(tmp_path, monkeypatch):
    (tmp_path / "my_wrappers.py").write_text(
        "import gymnasium\nclass Tag(gymnasium.Wrapper):\n    tagged = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = env_settings({"env_wrapper": "my_wrappers.Tag"}, allowed_wrappers=["my_wrappers.Tag"])
    import gymnasium

    env = wrapper_class(settings.env_wrapper, settings)(gymnasium.make("CartPole-v1"))
    assert getattr(env, "tagged", False)


def _train_run(folder):
    code = main(["train", "--algo", "ppo2", "--env", "CartPole-v1", "-n", "256", "-f", str(folder),
                 "--eval-freq", "0", "--no-progress", "--hyperparams", "n_steps:64"])
    assert code == 0
    run_dir = folder / "ppo2" / "CartPole-v1_1"
    assert run_dir.is_dir()
    return run_dir


def test_enjoy_refuses_a_hostile_config_and_accepts_an_allowed_one(tmp_path, capsys):
    run_dir = _train_run(tmp_path)
    config_path = run_dir / "config.yml"
    config = yaml.safe_load(config_path.read_text()) or {}
    config["env_wrapper"] = {"pydoc.pipepager": {"text": "x", "cmd": f"touch {CANARY}"}}
    config_path.write_text(yaml.safe_dump(config))
    code = main(["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "-f", str(tmp_path), "-n", "5"])
    err = capsys.readouterr().err
    assert code != 0 and "pydoc.pipepager" in err and "Traceback" not in err
    config["env_wrapper"] = {"gymnasium.wrappers.TimeLimit": {"max_episode_steps": 3}}
    config_path.write_text(yaml.safe_dump(config))
    assert main(["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "-f", str(tmp_path), "-n", "5"]) == 0


def test_enjoy_and_export_report_a_broken_model_file_in_one_line(tmp_path):
    bad = tmp_path / "broken.zip"
    bad.write_bytes(b"PK\x03\x04 this is not a zip")
    for args in (["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "--model", str(bad), "-n", "3"],
                 ["export", str(bad), "--format", "savedmodel", "-o", str(tmp_path / "out")]):
        result = subprocess.run([sys.executable, "-m", "sbtf"] + args, capture_output=True, text=True, timeout=300)
        assert result.returncode != 0, result.stdout
        assert "error" in result.stderr.lower() and "Traceback" not in result.stderr, result.stderr


def test_wrapper_arguments_naming_files_are_refused_before_a_run_is_made(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "elsewhere" / "log"
    for spec in ({"sbtf.common.monitor.Monitor": {"filename": str(target)}},
                 {"gymnasium.wrappers.RecordVideo": {"video_folder": str(target)}}):
        code = main(["train", "--algo", "ppo2", "--env", "CartPole-v1", "-n", "64", "-f", str(tmp_path / "logs"),
                     "--eval-freq", "0", "--no-progress", "--hyperparams", "env_wrapper:{!r}".format(spec)])
        err = capsys.readouterr().err
        assert code == 2 and "names a file or folder" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no run folder, no Monitor file, no video folder
