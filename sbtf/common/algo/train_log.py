"""The stable-baselines 2 training log of the n-step actor-critic algorithms (A2C, ACER, ACKTR, PPO2): the Monitor
episode means and the block A2C and ACKTR write after an update (logger keys exactly as SB2), and the TensorBoard
``episode_reward`` of a rollout."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from sbtf import logger
from sbtf.common.math_util import explained_variance, safe_mean, total_episode_reward_logger


def record_episode_means(ep_info_buf: Sequence[dict]) -> None:
    """
    Record ``ep_reward_mean`` and ``ep_len_mean`` over the buffered Monitor episode infos (nothing while there are
    none).

    :param ep_info_buf: the model's ``ep_info_buf`` (``{"r": return, "l": length, ...}`` per episode)
    """
    if len(ep_info_buf) > 0 and len(ep_info_buf[0]) > 0:
        logger.logkv("ep_reward_mean", safe_mean([ep_info["r"] for ep_info in ep_info_buf]))
        logger.logkv("ep_len_mean", safe_mean([ep_info["l"] for ep_info in ep_info_buf]))


def log_rollout_episode_rewards(model, writer, true_reward: np.ndarray, masks: np.ndarray) -> None:
    """
    Write the TensorBoard ``episode_reward`` of the episodes that ended in a rollout of ``n_steps`` per env.

    :param model: the model (its ``episode_reward`` accumulator, ``n_envs``, ``n_steps`` and ``num_timesteps``)
    :param writer: (TensorboardLogger) where to write
    :param true_reward: (np.ndarray) the environment's rewards, ``(n_envs * n_steps,)`` env-major
    :param masks: (np.ndarray) the done flags, laid out as ``true_reward``
    """
    shape = (model.n_envs, model.n_steps)
    total_episode_reward_logger(model.episode_reward, true_reward.reshape(shape), masks.reshape(shape), writer,
                                model.num_timesteps)


def dump_update_log(update: int, model, fps: int, losses: Mapping[str, float], values: np.ndarray,
                    returns: np.ndarray) -> None:
    """
    A2C's and ACKTR's log after an update: ``nupdates``, ``total_timesteps``, ``fps``, the losses (in order),
    ``explained_variance`` of the values, the episode means; then dump.

    :param update: (int) the number of the update (from 1)
    :param model: the model (its ``num_timesteps`` and ``ep_info_buf``)
    :param fps: (int) the steps per second since ``learn()`` started
    :param losses: {logger key: value}
    :param values: (np.ndarray) the value estimates of the rollout
    :param returns: (np.ndarray) the returns they estimate
    """
    explained_var = explained_variance(values, returns)
    logger.record_tabular("nupdates", update)
    logger.record_tabular("total_timesteps", model.num_timesteps)
    logger.record_tabular("fps", fps)
    for name, value in losses.items():
        logger.record_tabular(name, float(value))
    logger.record_tabular("explained_variance", float(explained_var))
    record_episode_means(model.ep_info_buf)
    logger.dump_tabular()
