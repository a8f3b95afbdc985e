"""Numerical helpers of stable-baselines 2.x (``stable_baselines.common.math_util``)."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def safe_mean(arr) -> float:
    """Mean of ``arr``, or NaN for an empty sequence (no warning)."""
    return np.nan if len(arr) == 0 else float(np.mean(arr))


def discount(vector: np.ndarray, gamma: float) -> np.ndarray:
    """``y[i] = x[i] + gamma * x[i+1] + gamma^2 * x[i+2] + ...`` computed right to left."""
    vector = np.asarray(vector, dtype=np.float64)
    out = np.zeros_like(vector)
    running = 0.0
    for i in range(len(vector) - 1, -1, -1):
        running = vector[i] + gamma * running
        out[i] = running
    return out


def discount_with_boundaries(rewards: np.ndarray, episode_starts: np.ndarray, gamma: float) -> np.ndarray:
    """Discounted sums that restart where ``episode_starts[t+1]`` is set."""
    rewards = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(rewards)
    n = len(rewards)
    out[n - 1] = rewards[n - 1]
    for i in range(n - 2, -1, -1):
        out[i] = rewards[i] + gamma * out[i + 1] * (1 - episode_starts[i + 1])
    return out


def discount_with_dones(rewards: Sequence[float], dones: Sequence[float], gamma: float) -> list:
    """A2C's discounted returns, where a done resets the running return (SB2 ``discount_with_dones``)."""
    discounted = []
    ret = 0.0
    for reward, done in zip(rewards[::-1], dones[::-1]):
        ret = reward + gamma * ret * (1.0 - done)
        discounted.append(ret)
    return discounted[::-1]


def explained_variance(y_pred: np.ndarray, y_true: np.ndarray) -> float:
    """``1 - Var[y - ypred] / Var[y]``: 1 is a perfect prediction, 0 no better than a constant."""
    assert y_true.ndim == 1 and y_pred.ndim == 1
    var_y = np.var(y_true)
    return np.nan if var_y == 0 else float(1 - np.var(y_true - y_pred) / var_y)


def explained_variance_2d(y_pred: np.ndarray, y_true: np.ndarray) -> np.ndarray:
    """Explained variance per column of 2-D arrays."""
    assert y_true.ndim == 2 and y_pred.ndim == 2
    var_y = np.var(y_true, axis=0)
    explained = 1 - np.var(y_true - y_pred, axis=0) / np.where(var_y == 0, 1, var_y)
    explained[var_y < 1e-10] = 0
    return explained


def flatten_arrays(arrs: Sequence[np.ndarray]) -> np.ndarray:
    """Concatenate flattened arrays."""
    return np.concatenate([arr.flat for arr in arrs])


def unflatten_vector(vec: np.ndarray, shapes: Sequence[tuple]) -> list:
    """Split a flat vector into arrays of the given shapes."""
    i = 0
    arrs = []
    for shape in shapes:
        size = int(np.prod(shape))
        arrs.append(vec[i:i + size].reshape(shape))
        i += size
    return arrs


def scale_action(action_space, action: np.ndarray) -> np.ndarray:
    """Rescale an action from [low, high] to [-1, 1]."""
    low, high = action_space.low, action_space.high
    return 2.0 * ((action - low) / (high - low)) - 1.0


def unscale_action(action_space, scaled_action: np.ndarray) -> np.ndarray:
    """Rescale an action from [-1, 1] to [low, high]."""
    low, high = action_space.low, action_space.high
    return low + (0.5 * (scaled_action + 1.0) * (high - low))


def total_episode_reward_logger(rew_acc: np.ndarray, rewards: np.ndarray, masks: np.ndarray, writer, steps: int):
    """
    Log the finished episodes' total rewards to TensorBoard (SB2 ``total_episode_reward_logger``).

    :param rew_acc: (np.ndarray) running reward per env (updated in place and returned)
    :param rewards: (np.ndarray) rewards, shape (n_envs, n_steps)
    :param masks: (np.ndarray) dones, shape (n_envs, n_steps)
    :param writer: (TensorboardLogger) where to write
    :param steps: (int) the timestep of the first reward
    """
    for env_idx in range(rewards.shape[0]):
        dones_idx = np.sort(np.argwhere(masks[env_idx]))
        if len(dones_idx) == 0:
            rew_acc[env_idx] += sum(rewards[env_idx])
        else:
            rew_acc[env_idx] += sum(rewards[env_idx, :dones_idx[0, 0]])
            writer.add_scalar("episode_reward", rew_acc[env_idx], steps + dones_idx[0, 0])
            for k in range(1, len(dones_idx[:, 0])):
                rew_acc[env_idx] = sum(rewards[env_idx, dones_idx[k - 1, 0]:dones_idx[k, 0]])
                writer.add_scalar("episode_reward", rew_acc[env_idx], steps + dones_idx[k, 0])
            rew_acc[env_idx] = sum(rewards[env_idx, dones_idx[-1, 0]:])
    return rew_acc
