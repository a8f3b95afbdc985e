"""``sbtf train --vec-env {dummy,subproc,envpool}`` (issue #33) and its one-line errors."""
import sys

import pytest
import yaml

from sbtf.cli import main

QUIET = ["--no-progress", "--verbose", "0", "--eval-freq", "0"]
SMALL_PPO2 = ["--algo", "ppo2", "--env", "CartPole-v1", "-n", "256", "--hyperparams", "n_envs:2", "n_steps:64",
              "nminibatches:1", "noptepochs:1"]


def _run_dir(log_folder):
    (run,) = (log_folder / "ppo2").iterdir()
    return run


def _args(run) -> dict:
    return yaml.safe_load((run / "args.yml").read_text())


def test_train_subproc_runs_each_env_in_its_process(tmp_path, capsys):
    assert main(["train"] + SMALL_PPO2 + ["-f", str(tmp_path), "--vec-env", "subproc"] + QUIET) == 0
    run = _run_dir(tmp_path)
    assert _args(run)["vec_env"] == "subproc"
    assert sorted(p.name for p in run.glob("*.monitor.csv")) == ["0.monitor.csv", "1.monitor.csv"]
    assert (run / "CartPole-v1.zip").is_file()


def test_train_envpool(tmp_path, capsys):
    pytest.importorskip("envpool", reason="EnvPool is not installed (pip install 'sbtf[envpool]')")
    assert main(["train"] + SMALL_PPO2 + ["-f", str(tmp_path), "--vec-env", "envpool"] + QUIET) == 0
    run = _run_dir(tmp_path)
    assert _args(run)["vec_env"] == "envpool"
    # EnvPoolVecEnv writes one episode file for the whole pool (a DummyVecEnv writes one per env)
    assert sorted(p.name for p in run.glob("*.monitor.csv")) == ["0.monitor.csv"]
    assert len((run / "0.monitor.csv").read_text().splitlines()) > 2  # header lines, then episodes


def test_envpool_not_installed_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool -> ImportError
    code = main(["train"] + SMALL_PPO2 + ["-f", str(tmp_path), "--vec-env", "envpool"] + QUIET)
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1
    assert err == ("sbtf train: error: --vec-env envpool needs EnvPool, which is not installed: pip install "
                   "'sbtf[envpool]' (or use --vec-env subproc)")
    assert not (tmp_path / "ppo2").exists()


def test_env_without_an_envpool_version_is_one_line(tmp_path, capsys):
    pytest.importorskip("envpool", reason="EnvPool is not installed (pip install 'sbtf[envpool]')")
    code = main(["train", "--algo", "ppo_mask", "--env", "InvalidActionEnvDiscrete-v0", "-n", "64", "-f",
                 str(tmp_path), "--vec-env", "envpool"] + QUIET)
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith("sbtf train: error: --vec-env envpool: EnvPool has no environment "
                          "'InvalidActionEnvDiscrete-v0'") and err.endswith("(use --vec-env dummy or subproc for "
                                                                            "this env)")


def test_her_refuses_other_vec_envs(tmp_path, capsys):
    code = main(["train", "--algo", "her", "--env", "BitFlippingEnv-v0", "-n", "64", "-f", str(tmp_path),
                 "--vec-env", "subproc"] + QUIET)
    assert code == 2
    assert "her wraps one goal env itself: --vec-env subproc is not available for it" in capsys.readouterr().err


def test_optimize_has_the_same_option(tmp_path, capsys):
    code = main(["optimize", "--algo", "ppo2", "--env", "CartPole-v1", "-n", "256", "--n-trials", "1", "-f",
                 str(tmp_path), "--vec-env", "nope"])
    assert code == 2 and "--vec-env: invalid choice: 'nope'" in capsys.readouterr().err


def test_envpool_vec_env_warns_nothing_a_user_cannot_act_on():
    pytest.importorskip("envpool", reason="EnvPool is not installed (pip install 'sbtf[envpool]')")
    import warnings

    import numpy as np

    from sbtf.common.vec_env import EnvPoolVecEnv

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # gymnasium's cast warning on EnvPool's float64 bounds would raise here
        env = EnvPoolVecEnv("CartPole-v1", n_envs=2, seed=0)
        env.reset()
        for _ in range(20):
            env.step(np.array([0, 1]))
        env.seed(3)  # the next reset() makes a new pool
        env.reset()
        env.close()


def test_optimize_checks_envpool_before_the_study(tmp_path, capsys, monkeypatch):
    pytest.importorskip("optuna", reason="Optuna is not installed (pip install 'sbtf[optimize]')")
    monkeypatch.setitem(sys.modules, "envpool", None)
    code = main(["optimize", "--algo", "ppo2", "--env", "CartPole-v1", "-n", "256", "--n-trials", "1", "-f",
                 str(tmp_path), "--vec-env", "envpool"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.startswith("sbtf optimize: error: --vec-env envpool needs EnvPool, which is not installed")
    assert not (tmp_path / "ppo2").exists()  # no study, no trial
