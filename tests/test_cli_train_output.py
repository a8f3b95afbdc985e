"""``sbtf train``'s output: one summary line per log interval at the default verbosity, tables at --verbose 2."""
import io

import pytest

from sbtf import logger as sbtf_logger
from sbtf.cli import main
from sbtf.cli.train_output import SummaryLineFormat, one_line_logs, summary_line

TRAIN = ["train", "--algo", "ppo2", "--env", "CartPole-v1", "-n", "512", "--eval-freq", "0", "--no-progress",
         "--hyperparams", "n_envs:2", "n_steps:64", "nminibatches:1", "noptepochs:1"]


def test_summary_line_of_each_family():
    assert summary_line({"total_timesteps": 2048, "ep_reward_mean": 23.14, "ep_len_mean": 23.14, "fps": 812,
                         "policy_loss": 0.1}) == "steps 2048 | ep_rew_mean 23.1 | ep_len_mean 23.1 | fps 812"
    assert summary_line({"time/total_timesteps": 100, "rollout/ep_rew_mean": -150.5, "time/fps": 55.0}) == \
        "steps 100 | ep_rew_mean -150.5 | fps 55"
    assert summary_line({"TimestepsSoFar": 1024, "EpRewMean": 9.0}) == "steps 1024 | ep_rew_mean 9"
    assert summary_line({"steps": 500, "mean 100 episode reward": 12.5}) == "steps 500 | ep_rew_mean 12.5"
    assert summary_line({"policy_loss": 0.1}) is None


def test_one_line_logs_replaces_only_the_stdout_table():
    file_out = io.StringIO()
    kept = sbtf_logger.HumanOutputFormat(file_out)
    logger = sbtf_logger.Logger(folder=None, output_formats=[sbtf_logger.HumanOutputFormat(__import__("sys").stdout),
                                                             kept])
    previous, sbtf_logger.Logger.CURRENT = sbtf_logger.Logger.CURRENT, logger
    try:
        with one_line_logs():
            assert isinstance(logger.output_formats[0], SummaryLineFormat) and logger.output_formats[1] is kept
        assert isinstance(logger.output_formats[0], sbtf_logger.HumanOutputFormat)
    finally:
        sbtf_logger.Logger.CURRENT = previous


def _table_lines(text: str) -> list:
    return [line for line in text.splitlines() if line.startswith("| ")]


def test_default_verbosity_prints_one_line_per_log_interval(tmp_path, capsys):
    assert main(TRAIN + ["-f", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("steps ")]
    # 512 steps in rollouts of 2 x 64: four updates, one line each, with the step count of each
    assert [line.split(" | ")[0] for line in lines] == ["steps 128", "steps 256", "steps 384", "steps 512"]
    assert all("ep_rew_mean" in line and "fps" in line for line in lines[1:])
    assert _table_lines(out) == []


def test_verbose_2_prints_the_tables(tmp_path, capsys):
    assert main(TRAIN + ["-f", str(tmp_path), "--verbose", "2"]) == 0
    out = capsys.readouterr().out
    assert len([line for line in _table_lines(out) if line.startswith("| total_timesteps")]) == 4
    assert not any(line.startswith("steps ") for line in out.splitlines())


@pytest.mark.parametrize("verbose", ["0"])
def test_verbose_0_prints_no_log(tmp_path, capsys, verbose):
    assert main(TRAIN + ["-f", str(tmp_path), "--verbose", verbose]) == 0
    out = capsys.readouterr().out
    assert _table_lines(out) == [] and not any(line.startswith("steps ") for line in out.splitlines())
