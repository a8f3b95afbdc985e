"""``sbtf optimize`` on a tiny budget: trials, a resumable SQLite study, pruning through the evaluation callback, the
best hyperparameters as a YAML that ``sbtf train --hyperparams`` takes, and the search spaces of every algorithm."""
from __future__ import annotations

import contextlib
import csv
import io
import re

import numpy as np
import pytest
import yaml

optuna = pytest.importorskip("optuna", reason="the optimize extra (pip install 'sbtf[optimize]')")

from sbtf.cli import main  # noqa: E402
from sbtf.cli.hyperparams import load_algorithm, valid_hyperparameters  # noqa: E402
from sbtf.cli.optimize import _TrialEvalCallbackFactory, make_pruner, sample_hyperparams  # noqa: E402
from sbtf.cli.search_spaces import HYPERPARAMS_SAMPLER, SEARCHABLE_ALGOS  # noqa: E402

TINY = ["-n", "600", "--n-envs", "1", "--n-evaluations", "2", "--eval-episodes", "2", "--verbose", "1"]


def _run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_search_spaces_name_real_constructor_arguments():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for algo in SEARCHABLE_ALGOS:
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        base = {"model_class": "sac"} if algo == "her" else {}
        model_class = ("sac", load_algorithm("sac")) if algo == "her" else None
        valid = valid_hyperparameters(algo, load_algorithm(algo), model_class[1] if model_class else None,
                                      model_class[0] if model_class else None)
        for _ in range(5):
            sampled = sample_hyperparams(study.ask(), algo, base)
            unknown = set(sampled) - set(valid) - {"noise_type", "noise_std"}
            assert not unknown, (algo, unknown)
    assert {"ppo2", "a2c", "acktr", "trpo", "sac", "td3", "ddpg", "dqn", "her"} == set(SEARCHABLE_ALGOS)
    trial = optuna.trial.FixedTrial({"batch_size": 64, "n_steps": 256, "gamma": 0.99, "lr": 1e-3, "ent_coef": 1e-3,
                                     "cliprange": 0.2, "noptepochs": 10, "lambda": 0.95})
    assert HYPERPARAMS_SAMPLER["ppo2"](trial)["nminibatches"] == 4  # the zoo's n_steps // batch_size


def test_trial_eval_callback_reports_and_prunes():
    from sbtf import A2C
    from sbtf.common.cmd_util import make_vec_env

    class PruneAtSecondReport:
        def __init__(self):
            self.reports = []

        def report(self, value, step):
            self.reports.append((step, value))

        def should_prune(self):
            return len(self.reports) >= 2

    trial = PruneAtSecondReport()
    callback = _TrialEvalCallbackFactory.build(trial, make_vec_env("CartPole-v1", n_envs=1, seed=1),
                                               n_eval_episodes=1, eval_freq=50)
    model = A2C("MlpPolicy", make_vec_env("CartPole-v1", n_envs=1, seed=0), n_steps=10, seed=0)
    model.learn(2000, callback=callback)
    assert [step for step, _ in trial.reports] == [1, 2]
    assert callback.is_pruned and model.num_timesteps <= 110  # stopped at the second evaluation (step 100)
    assert all(np.isfinite(value) and value >= 8 for _, value in trial.reports)  # CartPole returns are >= 8
    median = make_pruner(optuna, "median", n_startup_trials=5, n_evaluations=20)
    assert isinstance(median, optuna.pruners.MedianPruner)


def test_optimize_writes_best_yaml_resumes_the_study_and_train_takes_it(tmp_path, capsys):
    storage = "sqlite:///{}".format(tmp_path / "study.db")
    out_dir = tmp_path / "opt"
    argv = ["optimize", "--algo", "a2c", "--env", "CartPole-v1", "--n-trials", "3", "--sampler", "random",
            "--pruner", "none", "--storage", storage, "--study-name", "cartpole", "-o", str(out_dir)] + TINY
    code, out, _ = _run(argv, capsys)
    assert code == 0, out
    assert len(re.findall(r"^Trial \d+: mean return [\d.]+ with ", out, flags=re.M)) == 3
    assert "Trials in the study: 3 (3 complete, 0 pruned)" in out
    best_path = out_dir / "best_hyperparams.yml"
    best = yaml.safe_load(best_path.read_text())
    assert {"gamma", "n_steps", "lr_schedule", "learning_rate", "ent_coef", "vf_coef"} <= set(best)
    assert best["n_envs"] == 1 and "n_timesteps" not in best
    best_value = float(re.search(r"^Best trial: \d+ \(mean return ([\d.]+)\)", out, flags=re.M).group(1))
    with open(out_dir / "trials.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3 and max(float(row["value"]) for row in rows) == pytest.approx(best_value)

    # the same study goes on: 1 more trial, 4 in all
    code, out, _ = _run(argv[:argv.index("--n-trials") + 1] + ["1"] + argv[argv.index("--n-trials") + 2:], capsys)
    assert code == 0
    assert "(3 earlier trial(s) in {})".format(storage) in out
    assert "Trials in the study: 4 (4 complete, 0 pruned)" in out

    # sbtf train takes the YAML as it is
    logs = tmp_path / "logs"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["train", "--algo", "a2c", "--env", "CartPole-v1", "-n", "200", "-f", str(logs), "--hyperparams",
                     str(best_path), "--eval-freq", "0", "--no-progress", "--verbose", "0"]) == 0
    config = yaml.safe_load((logs / "a2c" / "CartPole-v1_1" / "config.yml").read_text())
    for key in ("gamma", "n_steps", "lr_schedule", "learning_rate", "vf_coef"):
        assert config[key] == best[key], key


def test_optimize_errors_are_one_line(tmp_path, capsys):
    code, _, err = _run(["optimize", "--algo", "acer", "--env", "CartPole-v1", "-f", str(tmp_path)], capsys)
    assert code == 2 and "no search space for acer" in err and "Traceback" not in err
    code, _, err = _run(["optimize", "--algo", "a2c", "--env", "CartPole-v1", "-n", "5", "-f", str(tmp_path)],
                        capsys)
    assert code == 2 and "must be at least --n-evaluations (20)" in err
