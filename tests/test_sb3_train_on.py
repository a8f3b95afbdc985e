"""Loaded stable-baselines3 / sb3-contrib agents train on in sbtf, save in sbtf's own format and load back exactly.

For each of the six RL-Zoo3 agents of ../shared/fixtures/sb3_zoo (skipped with a reason when absent): the agent is
loaded from its SB3 zip with an env (the A2C run's VecNormalize statistics loaded from the run's SB3 pickle and
frozen, as the zoo plays it), ``learn()`` continues from the stored step count for a few hundred steps, the weights
change and stay finite, ``save()`` writes an sbtf zip (no PyTorch member), and ``load`` of that file gives the
trained weights and deterministic actions exactly.
"""
from __future__ import annotations

import json
import warnings
import zipfile

import gymnasium as gym
import numpy as np
import pytest

from conftest import shared_fixture

from sbtf.common.save_util import inspect_model_bytes
from sbtf.common.vec_env import DummyVecEnv, VecNormalize
from sbtf.contrib import QRDQN, TQC
from sbtf.sb3 import A2C, DQN, PPO, SAC

#: run -> (class, env id, steps to train on): at least one update of each algorithm with its stored hyperparameters
#: (DQN / QR-DQN train every 256 steps, TQC every 64, SAC at the end of each 200-step Pendulum episode)
#: the A2C file stores learning_rate 0.0 (the zoo's linear schedule's value at the end of training), with which
#: SB3 would not move either: it trains on with a learning rate given as SB3's load takes it, custom_objects
CUSTOM_OBJECTS = {"a2c/Pendulum-v1_1": {"learning_rate": 7e-4}}
AGENTS = {
    "ppo/CartPole-v1_1": (PPO, "CartPole-v1", 256),
    "a2c/Pendulum-v1_1": (A2C, "Pendulum-v1", 256),
    "sac/Pendulum-v1_1": (SAC, "Pendulum-v1", 300),
    "dqn/CartPole-v1_1": (DQN, "CartPole-v1", 300),
    "qrdqn/CartPole-v1_1": (QRDQN, "CartPole-v1", 300),
    "tqc/Pendulum-v1_1": (TQC, "Pendulum-v1", 300),
}


def _env(run: str, env_id: str):
    env = DummyVecEnv([lambda: gym.make(env_id)])
    stats = shared_fixture("sb3_zoo").joinpath(run, env_id, "vecnormalize.pkl")
    if stats.is_file():
        env = VecNormalize.load(str(stats), env)
        env.training = False
        env.norm_reward = False
    return env


def _weights(model) -> list:
    return [variable.numpy().copy() for variable in model.get_parameter_list()]


def test_stored_learning_rate_of_the_a2c_file_is_zero():
    """Why the A2C run needs custom_objects above: its file's learning rate is 0.0, and sbtf reads it as stored."""
    path = shared_fixture("sb3_zoo", "a2c", "Pendulum-v1_1", "Pendulum-v1.zip")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert A2C.load(str(path)).learning_rate == 0.0


@pytest.mark.parametrize("run", sorted(AGENTS))
def test_loaded_agent_trains_on_saves_and_loads_exactly(run, tmp_path):
    cls, env_id, steps = AGENTS[run]
    path = shared_fixture("sb3_zoo", run, f"{env_id}.zip")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # old files' schedules that are code: sbtf's defaults, with a warning
        model = cls.load(str(path), env=_env(run, env_id), seed=0, custom_objects=CUSTOM_OBJECTS.get(run))
    stored_steps = model.num_timesteps
    assert stored_steps > 0
    before = _weights(model)

    model.learn(steps, reset_num_timesteps=False)

    assert model.num_timesteps >= stored_steps + steps
    after = _weights(model)
    assert all(np.all(np.isfinite(value)) for value in after)
    changed = [not np.array_equal(old, new) for old, new in zip(before, after)]
    assert any(changed), f"{run}: learn() left every weight unchanged"

    target = tmp_path / "trained_on.zip"
    model.save(str(target))
    assert inspect_model_bytes(target.read_bytes()) == "sbtf"
    with zipfile.ZipFile(target) as archive:
        assert not any(name.endswith(".pth") for name in archive.namelist())

    again = cls.load(str(target))
    assert again.num_timesteps == model.num_timesteps
    for mine, theirs in zip(_weights(again), after):
        np.testing.assert_array_equal(mine, theirs)
    expected = json.loads(shared_fixture("sb3_zoo", "expected_outputs.json").read_text())["agents"][run]
    obs = np.asarray(expected["obs"], dtype=np.float32)
    np.testing.assert_array_equal(again.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
