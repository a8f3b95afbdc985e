"""Shared test helpers: quiet TensorFlow, locate ../shared fixtures, small evaluation loop."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# OpenBLAS's worker threads spin-wait: on a busy 2-core machine they make the SVDs of SB2's orthogonal initialiser
# (and small NumPy products) 100x slower. The tests' matrices are small: one BLAS thread is faster in any case.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

SHARED_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


def shared_fixture(*parts: str) -> Path:
    """Path to a file under ../shared/fixtures, skipping the test when it is absent."""
    path = SHARED_FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared fixture {path} is absent (fresh clone without ../shared)")
    return path


def evaluate(model, env_id: str, n_episodes: int = 5, deterministic: bool = True, seed: int = 0) -> float:
    """Mean episode return of ``model`` on a fresh gymnasium env."""
    env = gym.make(env_id)
    returns = []
    for episode in range(n_episodes):
        obs, _ = env.reset(seed=seed + episode)
        done, total = False, 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=deterministic)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))
