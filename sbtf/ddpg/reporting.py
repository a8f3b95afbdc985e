"""What DDPG reports: the epoch statistics of SB2's DDPG (``rollout/*``, ``train/*``, ``eval/*``, ``total/*``,
averaged over the MPI ranks), the reference statistics of the networks on a fixed sample, and the evaluation episodes
on ``eval_env`` that follow each cycle's training."""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import List

import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.math_util import safe_mean, unscale_action
from sbtf.common.mpi_util import allreduce_sum
from sbtf.common.algo.off_policy_algorithm import LearnState
from sbtf.common.vec_env import VecEnv
from sbtf.ddpg.running_stats import denormalize, reduce_std


@dataclass
class EpochStats:
    """The statistics SB2's DDPG logs per epoch (``log_interval`` cycles). As in SB2, the rollout lists grow over the
    whole ``learn()`` call, and the training and evaluation lists hold the last cycle's values."""

    epoch: int = 0
    episodes: int = 0
    episode_rewards: List[float] = field(default_factory=list)
    episode_steps: List[int] = field(default_factory=list)
    actions: list = field(default_factory=list)
    qs: List[float] = field(default_factory=list)
    actor_losses: List[float] = field(default_factory=list)
    critic_losses: List[float] = field(default_factory=list)
    adaptive_distances: List[float] = field(default_factory=list)
    eval_episode_rewards: List[float] = field(default_factory=list)
    eval_episode_rewards_history: deque = field(default_factory=lambda: deque(maxlen=100))
    eval_qs: List[float] = field(default_factory=list)


class DDPGReporting:
    """Mixin of ``DDPG``: evaluation after each cycle and the epoch log."""

    # ------------------------------------------------------------------ evaluation
    def _make_eval_env(self):
        if self.eval_env is None:
            return None
        if isinstance(self.eval_env, VecEnv):
            return self.eval_env
        return self._make_vec_env(self.eval_env)

    def _evaluate(self) -> None:
        """``nb_eval_steps`` deterministic steps on the evaluation env (as SB2: the env is not reset between cycles,
        the episode return is counted from the cycle's first evaluation step)."""
        eval_env = self._learn_eval_env
        epoch = self._epoch
        epoch.eval_episode_rewards = []
        epoch.eval_qs = []
        if eval_env is None:
            return
        if self._eval_obs is None:
            self._eval_obs = eval_env.reset()
        eval_episode_reward = 0.
        for _ in range(self.nb_eval_steps):
            eval_action, eval_q = self._policy(self._eval_obs, apply_noise=False, compute_q=True)
            self._eval_obs, eval_r, eval_done, _ = eval_env.step(unscale_action(self.action_space, eval_action))
            if self.render_eval:
                eval_env.render()
            eval_episode_reward += float(eval_r[0])
            epoch.eval_qs.append(float(np.ravel(eval_q)[0]))
            if eval_done[0]:
                epoch.eval_episode_rewards.append(eval_episode_reward)
                epoch.eval_episode_rewards_history.append(eval_episode_reward)
                eval_episode_reward = 0.

    # ------------------------------------------------------------------ reference statistics
    def _tf_stats(self, obs0, actions):
        policy = self.policy_tf
        low, high = float(self.return_range[0]), float(self.return_range[1])
        nobs = policy.normalize_obs_tf(obs0)
        critic_tf = denormalize(tf.clip_by_value(policy.critic(nobs, actions), low, high), self.ret_rms)
        actor_tf = policy.actor(nobs)
        critic_with_actor = denormalize(tf.clip_by_value(policy.critic(nobs, actor_tf), low, high), self.ret_rms)
        ops = []
        if self.normalize_returns:
            ops += [self.ret_rms.mean, self.ret_rms.std]
        if self.normalize_observations:
            ops += [tf.reduce_mean(self.obs_rms.mean), tf.reduce_mean(self.obs_rms.std)]
        ops += [tf.reduce_mean(critic_tf), reduce_std(critic_tf), tf.reduce_mean(critic_with_actor),
                reduce_std(critic_with_actor), tf.reduce_mean(actor_tf), reduce_std(actor_tf)]
        if self.param_noise is not None:
            perturbed = self.param_noise_actor.actor(nobs)
            ops += [tf.reduce_mean(perturbed), reduce_std(perturbed)]
        return tf.stack([tf.cast(op, tf.float32) for op in ops])

    def _stats_names_list(self) -> List[str]:
        names = []
        if self.normalize_returns:
            names += ['ret_rms_mean', 'ret_rms_std']
        if self.normalize_observations:
            names += ['obs_rms_mean', 'obs_rms_std']
        names += ['reference_Q_mean', 'reference_Q_std', 'reference_actor_Q_mean', 'reference_actor_Q_std',
                  'reference_action_mean', 'reference_action_std']
        if self.param_noise is not None:
            names += ['reference_perturbed_action_mean', 'reference_perturbed_action_std']
        return names

    def _get_stats(self) -> dict:
        """The mean and standard deviation of the model's inputs and outputs on a fixed sample (SB2)."""
        if self.stats_sample is None:
            batch = self.replay_buffer.sample_batch(self.batch_size, env=self._vec_normalize_env)
            self.stats_sample = {'obs0': batch.observations, 'actions': batch.actions,
                                 'rewards': batch.rewards.reshape(-1, 1), 'obs1': batch.next_observations,
                                 'terminals1': batch.dones.reshape(-1, 1)}
        self._flush_stats()
        values = self._compiled("stats")(obs=self.policy_tf._prepare_obs(self.stats_sample['obs0']),
                                         actions=np.asarray(self.stats_sample['actions'], np.float32))["stats"]
        stats = dict(zip(self.stats_names, [float(v) for v in values]))
        if self.param_noise is not None:
            stats = {**stats, **self.param_noise.get_stats()}
        return stats

    # ------------------------------------------------------------------ the epoch log
    def _log_epoch(self, state: LearnState) -> None:
        """SB2's epoch statistics, averaged over the MPI ranks (collective; verbose >= 1)."""
        epoch = self._epoch
        duration = time.time() - state.start_time
        stats = self._get_stats()
        combined_stats = stats.copy()
        combined_stats['rollout/return'] = safe_mean(epoch.episode_rewards)
        combined_stats['rollout/return_history'] = safe_mean(list(state.episode_rewards))
        combined_stats['rollout/episode_steps'] = safe_mean(epoch.episode_steps)
        combined_stats['rollout/actions_mean'] = safe_mean(epoch.actions)
        combined_stats['rollout/Q_mean'] = safe_mean(epoch.qs)
        combined_stats['train/loss_actor'] = safe_mean(epoch.actor_losses)
        combined_stats['train/loss_critic'] = safe_mean(epoch.critic_losses)
        if len(epoch.adaptive_distances) != 0:
            combined_stats['train/param_noise_distance'] = safe_mean(epoch.adaptive_distances)
        combined_stats['total/duration'] = duration
        combined_stats['total/steps_per_second'] = float(state.steps) / float(max(duration, 1e-9))
        combined_stats['total/episodes'] = state.num_episodes
        combined_stats['rollout/episodes'] = epoch.episodes
        combined_stats['rollout/actions_std'] = float(np.std(epoch.actions)) if epoch.actions else 0.
        # Evaluation statistics.
        if self.eval_env is not None:
            combined_stats['eval/return'] = safe_mean(epoch.eval_episode_rewards)
            combined_stats['eval/return_history'] = safe_mean(list(epoch.eval_episode_rewards_history))
            combined_stats['eval/Q'] = safe_mean(epoch.eval_qs)
            combined_stats['eval/episodes'] = len(epoch.eval_episode_rewards)
        values = np.array([float(v) for v in combined_stats.values()], dtype=np.float64)
        sums = allreduce_sum(values, self.comm)
        combined_stats = {k: v / self.nworkers for (k, v) in zip(combined_stats.keys(), sums)}
        # Total statistics.
        combined_stats['total/epochs'] = epoch.epoch
        combined_stats['total/steps'] = state.steps
        if len(state.episode_successes) > 0:
            combined_stats['success rate'] = float(np.mean(state.episode_successes))
        for key in sorted(combined_stats.keys()):
            logger.record_tabular(key, combined_stats[key])
        logger.dump_tabular()
        logger.info('')


__all__ = ["EpochStats", "DDPGReporting"]
