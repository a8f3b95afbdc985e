"""Behaviour cloning (``pretrain``) from SB2 expert datasets and self-recorded ones."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from sbtf import A2C, PPO2
from sbtf.gail import ExpertDataset, generate_expert_traj

from conftest import evaluate, shared_fixture


def _cartpole_expert(obs):
    """A hand-written CartPole controller (returns ~500)."""
    return int(obs[2] + 0.5 * obs[3] > 0)


@pytest.fixture(scope="module")
def recorded_cartpole(tmp_path_factory):
    path = tmp_path_factory.mktemp("expert") / "expert_cartpole"
    generate_expert_traj(_cartpole_expert, str(path), env=gym.make("CartPole-v1"), n_episodes=8)
    return str(path) + ".npz"


@pytest.mark.parametrize("algo", [PPO2, A2C])
def test_pretrain_clones_recorded_expert(recorded_cartpole, algo):
    dataset = ExpertDataset(expert_path=recorded_cartpole, batch_size=128, verbose=0)
    model = algo("MlpPolicy", "CartPole-v1", seed=0)
    before = evaluate(model, "CartPole-v1", n_episodes=3)
    model.pretrain(dataset, n_epochs=60, learning_rate=1e-3)
    after = evaluate(model, "CartPole-v1", n_episodes=3)
    assert after >= 300 and after > before


def test_pretrain_on_sb2_expert_cartpole():
    dataset = ExpertDataset(expert_path=str(shared_fixture("sb2_expert", "expert_cartpole.npz")),
                            traj_limitation=10, batch_size=128, verbose=0)
    model = PPO2("MlpPolicy", "CartPole-v1", seed=0)
    model.pretrain(dataset, n_epochs=30, learning_rate=1e-3)
    assert evaluate(model, "CartPole-v1", n_episodes=3) >= 300


def test_pretrain_continuous_on_sb2_expert_pendulum(capsys):
    dataset = ExpertDataset(expert_path=str(shared_fixture("sb2_expert", "expert_pendulum.npz")),
                            traj_limitation=20, batch_size=128, verbose=0)
    model = PPO2("MlpPolicy", "Pendulum-v1", seed=0, verbose=1)
    obs, actions = dataset.get_next_batch("val")
    obs = np.asarray(obs, np.float32)
    mse_before = float(np.mean((model.predict(obs, deterministic=True)[0] - actions) ** 2))
    model.pretrain(dataset, n_epochs=20, learning_rate=1e-3, val_interval=10)
    mse_after = float(np.mean((model.predict(obs, deterministic=True)[0] - actions) ** 2))
    assert mse_after < 0.5 * mse_before
    out = capsys.readouterr().out
    assert "Pretraining with Behavior Cloning" in out and "Validation loss" in out and "Pretraining done." in out


def test_pretrain_rejects_unsupported_action_space():
    from sbtf.common.identity_env import IdentityEnvMultiBinary
    model = A2C("MlpPolicy", IdentityEnvMultiBinary(3))
    with pytest.raises(NotImplementedError, match="Box and Discrete"):
        model.pretrain(None, n_epochs=1)
