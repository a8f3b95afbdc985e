"""The sb3-contrib on-policy conventions on sbtf's on-policy loop (MaskablePPO, TRPO with sb3-contrib's arguments).

:class:`Sb3OnPolicyAlgorithm` is an :class:`~sbtf.common.on_policy.NStepActorCriticRLModel` (sbtf's one on-policy
``learn`` loop, runners, callbacks, TensorBoard, save format) with what sb3 does differently:

* ``learn(total_timesteps)`` collects rollouts until ``total_timesteps`` steps were taken (the last rollout may go
  beyond), and the schedules read ``progress_remaining = 1 - steps_done / total_timesteps`` after each rollout;
* the policy is looked up among the algorithm's own policy names (``policy_base``), and sb3's ``policy_kwargs``;
* the log block has sb3's keys (``rollout/ep_rew_mean``, ``time/fps``, ``train/...``); ``stats_window_size``.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Dict, Optional

import numpy as np

from sbtf import logger
from sbtf.common.math_util import explained_variance, safe_mean
from sbtf.common.on_policy import NStepActorCriticRLModel
from sbtf.common.policies import get_policy_from_name

__all__ = ["Sb3OnPolicyAlgorithm"]


class Sb3OnPolicyAlgorithm(NStepActorCriticRLModel):
    """
    Base of the sb3-contrib on-policy algorithms (see the module docstring).

    :param policy: (str or class) a policy name of ``policy_base`` (``"MlpPolicy"``) or a policy class
    :param env: the environment (VecEnv, gymnasium env or id)
    :param n_steps: (int) steps per environment per rollout
    :param gamma: (float) discount factor
    :param gae_lambda: (float) GAE's lambda
    :param stats_window_size: (int) the number of episodes the ``rollout/`` means are taken over
    :param tensorboard_log: (str) TensorBoard folder (None: none)
    :param policy_kwargs: (dict) arguments of the policy
    :param verbose: (int) 0 none, 1 training information
    :param seed: (int) seed of the random generators
    :param _init_setup_model: (bool) build the networks now
    """

    #: the base class whose registered names ``policy`` may be
    policy_base: type = None

    def __init__(self, policy, env, n_steps: int, gamma: float, gae_lambda: float, stats_window_size: int = 100,
                 tensorboard_log: Optional[str] = None, policy_kwargs: Optional[dict] = None, verbose: int = 0,
                 seed: Optional[int] = None, _init_setup_model: bool = True):
        if isinstance(policy, str):
            policy = get_policy_from_name(self.policy_base, policy)
        self.gamma = gamma
        self.gae_lambda = gae_lambda
        self.stats_window_size = stats_window_size
        self._n_train_updates = 0
        super().__init__(policy, env, n_steps=n_steps, verbose=verbose, tensorboard_log=tensorboard_log,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs, seed=seed)

    # ------------------------------------------------------------------ sb3's pace and schedules
    def _setup_learn(self) -> None:
        if self.ep_info_buf is None or self.ep_info_buf.maxlen != self.stats_window_size:
            self.ep_info_buf = deque(self.ep_info_buf or (), maxlen=int(self.stats_window_size))
        super()._setup_learn()

    def _n_updates(self, total_timesteps: int) -> Optional[int]:
        return None  # until total_timesteps steps were taken, as sb3

    def _gradient_steps_per_update(self) -> int:
        n_batch = (self.n_envs or 1) * self.n_steps
        batch_size = int(getattr(self, "batch_size", None) or n_batch)
        return int(getattr(self, "n_epochs", 1)) * -(-n_batch // batch_size)

    def _sb3_progress_remaining(self) -> float:
        """sb3's ``1 - steps_done / total_timesteps``, read after a rollout (the train step's schedules)."""
        progress = self._learn_progress
        done = self.num_timesteps - progress.start_timesteps
        return 1.0 - float(done) / max(float(progress.total_timesteps), 1.0)

    # ------------------------------------------------------------------ sb3's log block
    def _train_log_keys(self, stats: Dict[str, float]) -> Dict[str, float]:
        """The ``train/`` entries of the log block (the algorithm's statistics)."""
        return {f"train/{name}": value for name, value in stats.items()}

    def _log_update(self, batch, stats: Dict[str, float]) -> None:
        progress = self._learn_progress
        elapsed = max(time.time() - progress.t_start, 1e-9)
        if len(self.ep_info_buf) > 0 and len(self.ep_info_buf[0]) > 0:
            logger.logkv("rollout/ep_rew_mean", safe_mean([info["r"] for info in self.ep_info_buf]))
            logger.logkv("rollout/ep_len_mean", safe_mean([info["l"] for info in self.ep_info_buf]))
        logger.logkv("time/fps", int((self.num_timesteps - progress.start_timesteps) / elapsed))
        logger.logkv("time/iterations", progress.update)
        logger.logkv("time/time_elapsed", int(elapsed))
        logger.logkv("time/total_timesteps", self.num_timesteps)
        logger.logkv("train/explained_variance", float(explained_variance(batch.values, batch.returns)))
        logger.logkv("train/n_updates", self._n_train_updates)
        for key, value in self._train_log_keys(stats).items():
            logger.logkv(key, value)
        logger.dumpkvs()

    def _tensorboard_scalars(self, batch, stats: Dict[str, float]) -> Dict[str, float]:
        return {**self._train_log_keys(stats),
                "train/explained_variance": float(explained_variance(batch.values, batch.returns))}

    @staticmethod
    def _mean_or_nan(values) -> float:
        return float(np.mean(values)) if len(values) else float("nan")
