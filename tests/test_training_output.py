"""What learn() reports: logger tables, TensorBoard event files, the progress bar, callbacks."""
from __future__ import annotations

import glob

import gymnasium as gym
import pytest

from sbtf import A2C, PPO2
from sbtf import logger
from sbtf.bench import Monitor
from sbtf.common.callbacks import CheckpointCallback
from sbtf.common.vec_env import DummyVecEnv


def _env(n=2):
    return DummyVecEnv([lambda: Monitor(gym.make("CartPole-v1"), None) for _ in range(n)])


@pytest.mark.parametrize("algo", [PPO2, A2C])
def test_tensorboard_and_logger_output(tmp_path, capsys, algo):
    logger.configure(str(tmp_path / "log"), ["stdout", "csv"])
    kwargs = dict(n_steps=32, nminibatches=1, noptepochs=1) if algo is PPO2 else dict(n_steps=32)
    model = algo("MlpPolicy", _env(), verbose=1, tensorboard_log=str(tmp_path / "tb"), **kwargs)
    model.learn(640, log_interval=1, tb_log_name="run")
    model.learn(640, log_interval=1, tb_log_name="run")
    logger.reset()
    out = capsys.readouterr().out
    assert "ep_reward_mean" in out and "total_timesteps" in out
    runs = sorted(glob.glob(str(tmp_path / "tb" / "run_*")))
    assert [p.rsplit("_", 1)[1] for p in runs] == ["1", "2"]
    tags = set()
    for _event_file in glob.glob(runs[0] + "/events*"):
        tags |= set(logger.read_tb(runs[0]).columns) if hasattr(logger.read_tb(runs[0]), "columns") else set()
    assert "episode_reward" in tags
    assert any(tag.startswith("loss/") for tag in tags)


def test_progress_bar_and_function_callback(capsys):
    calls = []

    def old_style_callback(locals_, globals_):
        calls.append(locals_["self"].num_timesteps)
        return len(calls) < 10  # returning False stops training

    model = PPO2("MlpPolicy", _env(), n_steps=16, nminibatches=1, noptepochs=1)
    model.learn(3200, callback=old_style_callback, progress_bar=True)
    assert len(calls) == 10
    assert model.num_timesteps == 20
    err = capsys.readouterr().err
    assert "%" in err or "it/s" in err  # tqdm wrote a bar


def test_checkpoint_callback_saves_loadable_models(tmp_path):
    model = A2C("MlpPolicy", _env(), n_steps=5)
    model.learn(200, callback=CheckpointCallback(save_freq=50, save_path=str(tmp_path), name_prefix="ck"))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["ck_100_steps.zip", "ck_200_steps.zip", "ck_300_steps.zip", "ck_400_steps.zip"][:len(files)]
    assert len(files) >= 2
    A2C.load(tmp_path / files[-1])
