"""Augmented Random Search (sb3-contrib ``ARS``) on sbtf's core.

One update draws ``n_delta`` Gaussian directions ``d``, evaluates the ``2 n_delta`` candidate weight vectors
``w +- delta_std d`` for ``n_eval_episodes`` episodes each, keeps the ``n_top`` directions whose better candidate
returned most and moves ``w += lr / (n_top * std(returns)) * sum (R+ - R-) d`` (sb3-contrib's maths).

Candidates are evaluated side by side on the model's VecEnv: each environment of it runs one candidate's episode at
a time (the policy outputs of all of them are one batched NumPy product), and takes the next candidate when its
episode ends. With a ``SubprocVecEnv`` the episodes run in its worker processes. sb3-contrib's ``AsyncEval``
(:class:`sbtf.contrib.common.vec_env.async_eval.AsyncEval`, ``learn(..., async_eval=...)``) runs them in worker
processes with environments of their own: candidate ``i`` on worker ``i % n_workers``, its return, the episode
statistics and ``num_timesteps`` counted as the side-by-side evaluation counts them. Observations are normalised
online by a ``VecNormalize`` around the env (as rl-zoo does for ARS): its statistics keep updating during the
evaluations.
"""
from __future__ import annotations

import copy
import time
import warnings
from collections import deque
from typing import Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

from sbtf import logger
from sbtf.common.fileio import model_schema as ms
from sbtf.common.base_class import BaseRLModel, SetVerbosity
from sbtf.common.algo.sb3_api import Sb3ModelApi
from sbtf.common.math_util import safe_mean
from sbtf.common.schedules import get_schedule_fn
from sbtf.contrib.ars.policies import ARSPolicy
from sbtf.common.arg_checks import check_hyperparameters

__all__ = ["ARS"]


class ARS(Sb3ModelApi, BaseRLModel):
    """
    Augmented Random Search: https://arxiv.org/abs/1803.07055 (sb3-contrib's arguments and defaults).

    :param policy: (str or class) ``"LinearPolicy"``, ``"MlpPolicy"`` or an ``ARSPolicy`` subclass
    :param env: (gymnasium.Env, VecEnv or str) the environment; its ``n_envs`` environments evaluate candidates side
        by side (a ``SubprocVecEnv``: in parallel processes)
    :param n_delta: (int) how many random perturbations of the policy to try at each update step
    :param n_top: (int) how many of the top deltas to use in each update step (default ``n_delta``)
    :param learning_rate: (float or callable) the step size, or a function of the remaining progress
    :param delta_std: (float or callable) the exploration noise, or a function of the remaining progress
    :param zero_policy: (bool) start from all-zero weights
    :param alive_bonus_offset: (float) constant added to the reward at each step (cancels alive bonuses)
    :param n_eval_episodes: (int) the number of episodes each candidate is evaluated on
    :param policy_kwargs: (dict) arguments of the policy (``net_arch``, ``activation_fn``, ``with_bias``,
        ``squash_output``)
    :param stats_window_size: (int) the number of episodes the ``rollout/`` means are taken over
    :param tensorboard_log: (str) TensorBoard folder (None: none)
    :param seed: (int) seed of the random generators
    :param verbose: (int) 0 none, 1 training information
    :param _init_setup_model: (bool) build the network now
    """

    _supported_action_spaces = (gym.spaces.Box, gym.spaces.Discrete)
    _save_schema = dict(
        n_delta=ms.Integer(1), n_top=ms.Integer(1), learning_rate=ms.Schedule(), delta_std=ms.Schedule(),
        zero_policy=ms.Flag(), alive_bonus_offset=ms.Real(), n_eval_episodes=ms.Integer(1),
        stats_window_size=ms.Integer(1))

    def __init__(self, policy, env, n_delta: int = 8, n_top: Optional[int] = None, learning_rate=0.02,
                 delta_std=0.05, zero_policy: bool = True, alive_bonus_offset: float = 0, n_eval_episodes: int = 1,
                 policy_kwargs: Optional[dict] = None, stats_window_size: int = 100,
                 tensorboard_log: Optional[str] = None, seed: Optional[int] = None, verbose: int = 0,
                 _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        super().__init__(policy, env, verbose=verbose, requires_vec_env=True, policy_base=ARSPolicy,
                         policy_kwargs=policy_kwargs, seed=seed)
        self.n_delta = n_delta
        if n_top is None:
            n_top = n_delta
        if n_top > n_delta:
            warnings.warn(f"n_top = {n_top} > n_delta = {n_delta}, setting n_top = n_delta")
            n_top = n_delta
        self.n_top = n_top
        self.learning_rate = learning_rate
        self.delta_std = delta_std
        self.zero_policy = zero_policy
        self.alive_bonus_offset = alive_bonus_offset
        self.n_eval_episodes = n_eval_episodes
        self.stats_window_size = stats_window_size
        self.tensorboard_log = tensorboard_log
        self.weights: Optional[np.ndarray] = None
        self._n_updates = 0
        if _init_setup_model:
            self.setup_model()

    @property
    def pop_size(self) -> int:
        """The number of candidates of an update (``2 n_delta``)."""
        return 2 * self.n_delta

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        with SetVerbosity(self.verbose):
            if not (isinstance(self.policy_class, type) and issubclass(self.policy_class, ARSPolicy)):
                raise ValueError(f"Error: the policy of ARS must be an ARSPolicy subclass (or 'LinearPolicy', "
                                 f"'MlpPolicy'), got {self.policy_class!r}")
            extractor_keys = sorted({"features_extractor_class", "features_extractor_kwargs"} & set(self.policy_kwargs))
            if extractor_keys:
                raise ValueError(f"Error: ARS takes no {extractor_keys}: its policies (sb3-contrib's ARSPolicy and "
                                 "ARSLinearPolicy) always flatten the observations (FlattenExtractor) and act with a "
                                 "linear map or an MLP (net_arch); use another algorithm for a feature extractor.")
            self.set_random_seed(self.seed)
            self.policy_tf = self.policy_class(self.observation_space, self.action_space, **self.policy_kwargs)
            self._rng = np.random.default_rng(np.random.randint(0, 2 ** 31 - 1))
            if self.zero_policy:
                self.policy_tf.set_flat_weights(np.zeros_like(self.policy_tf.get_flat_weights()))
            self.weights = self.policy_tf.get_flat_weights()
            self.n_params = int(self.weights.size)

    def _reseed_policy(self, seed: int) -> None:
        super()._reseed_policy(seed)
        self._rng = np.random.default_rng(seed)

    def _on_parameters_loaded(self) -> None:
        super()._on_parameters_loaded()
        self.weights = self.policy_tf.get_flat_weights()

    # ------------------------------------------------------------------ evaluation of the candidates
    def _evaluate_candidates_async(self, candidates: np.ndarray, callback, async_eval) -> Tuple[np.ndarray, bool]:
        """
        :meth:`_evaluate_candidates` in ``async_eval``'s worker processes: the same returns (plus
        ``alive_bonus_offset`` per step), episode statistics and step count; the callback's ``on_step`` runs once per
        ``n_workers`` steps taken (sb3-contrib's), after the evaluations. The workers' VecNormalize statistics are
        merged into the model's and sent back.
        """
        returns = np.zeros(len(candidates), np.float64)
        self.ep_info_buf = deque(maxlen=int(self.stats_window_size))
        callback.on_rollout_start()
        async_eval.send_jobs(candidates, len(candidates), self.n_eval_episodes)
        batch_steps = 0
        for index, (episode_rewards, episode_lengths) in async_eval.get_results():
            returns[index] = float(np.sum(episode_rewards)) + self.alive_bonus_offset * float(np.sum(episode_lengths))
            batch_steps += int(np.sum(episode_lengths))
            for reward, length in zip(episode_rewards, episode_lengths):
                self.ep_info_buf.append({"r": float(reward), "l": int(length)})
        vec_normalize = self.get_vec_normalize_env()
        if vec_normalize is not None:
            rms = vec_normalize.obs_rms
            for worker_rms in async_eval.get_obs_rms():
                if worker_rms is not None:  # what the worker saw since the last sync (sb3-contrib's combine)
                    rms.update_from_moments(worker_rms.mean, worker_rms.var, worker_rms.count)
                    rms.count -= self._synced_obs_count
            async_eval.sync_obs_rms(copy.deepcopy(rms))
            self._synced_obs_count = rms.count
        continue_training = True
        n_workers = async_eval.n_workers
        for _ in range(batch_steps // n_workers):
            self.num_timesteps += n_workers
            if callback.on_step() is False:
                continue_training = False
        self.num_timesteps += batch_steps % n_workers
        callback.on_rollout_end()
        return returns, continue_training

    def _evaluate_candidates(self, candidates: np.ndarray, callback) -> Tuple[np.ndarray, bool]:
        """
        Every candidate's return over ``n_eval_episodes`` episodes (plus ``alive_bonus_offset`` per step), the
        candidates spread over the VecEnv's environments.

        :return: (returns (pop_size,), whether the callback asked to stop)
        """
        env, policy = self.env, self.policy_tf
        n_envs = env.num_envs
        jobs = deque(np.repeat(np.arange(len(candidates)), self.n_eval_episodes).tolist())
        returns = np.zeros(len(candidates), np.float64)
        slot = np.full(n_envs, -1, np.int64)
        for i in range(n_envs):
            if jobs:
                slot[i] = jobs.popleft()
        ep_reward = np.zeros(n_envs, np.float64)
        ep_length = np.zeros(n_envs, np.int64)
        self.ep_info_buf = deque(maxlen=int(self.stats_window_size))
        callback.on_rollout_start()
        obs = env.reset()
        continue_training = True
        while (slot >= 0).any():
            active = slot >= 0
            weights = candidates[np.where(active, slot, slot[active][0])]
            actions = policy.actions_from_outputs(policy.batched_outputs(weights, obs))
            obs, rewards, dones, infos = env.step(actions)
            n_active = int(active.sum())
            ep_reward[active] += np.asarray(rewards, np.float64)[active]
            ep_length[active] += 1
            self.num_timesteps += n_active
            callback.update_locals(locals())
            if callback.on_step() is False:
                continue_training = False
            for i in np.flatnonzero(active & np.asarray(dones, bool)):
                info = infos[i].get("episode")
                episode_return = float(info["r"]) if info is not None else ep_reward[i]
                episode_length = int(info["l"]) if info is not None else int(ep_length[i])
                returns[slot[i]] += episode_return + self.alive_bonus_offset * episode_length
                self.ep_info_buf.append({"r": episode_return, "l": episode_length})
                self._record_episode_end(infos[i])
                ep_reward[i], ep_length[i] = 0.0, 0
                slot[i] = jobs.popleft() if jobs else -1
        callback.on_rollout_end()
        return returns, continue_training

    # ------------------------------------------------------------------ one update
    def _do_one_update(self, callback, progress_remaining: float,
                       async_eval=None) -> Tuple[Dict[str, float], bool]:
        delta_std = float(self._delta_std_fn(progress_remaining))
        learning_rate = float(self._lr_fn(progress_remaining))
        deltas = self._rng.standard_normal((self.n_delta, self.n_params)).astype(np.float32)
        policy_deltas = deltas * delta_std
        candidates = np.concatenate([self.weights + policy_deltas, self.weights - policy_deltas])
        if async_eval is None:
            candidate_returns, continue_training = self._evaluate_candidates(candidates, callback)
        else:
            candidate_returns, continue_training = self._evaluate_candidates_async(candidates, callback, async_eval)
        plus_returns, minus_returns = candidate_returns[:self.n_delta], candidate_returns[self.n_delta:]
        top_returns = np.maximum(plus_returns, minus_returns)
        top_idx = np.argsort(-top_returns, kind="stable")[:self.n_top]
        plus_returns, minus_returns, deltas = plus_returns[top_idx], minus_returns[top_idx], deltas[top_idx]
        return_std = float(np.concatenate([plus_returns, minus_returns]).std(ddof=1))
        step_size = learning_rate / (self.n_top * return_std + 1e-6)
        self.weights = (self.weights + step_size * ((plus_returns - minus_returns) @ deltas)).astype(np.float32)
        self.policy_tf.set_flat_weights(self.weights)
        self._n_updates += 1
        return {"train/iterations": self._n_updates, "train/delta_std": delta_std,
                "train/learning_rate": learning_rate, "train/step_size": step_size,
                "rollout/return_std": return_std}, continue_training

    def learn(self, total_timesteps, callback=None, log_interval: int = 1, tb_log_name: str = "ARS",
              reset_num_timesteps: bool = True, progress_bar: bool = False, async_eval=None):
        """
        Train for ``total_timesteps`` environment steps (sb3-contrib's signature).

        :param total_timesteps: (int) the number of environment steps to train for
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every VecEnv step
        :param log_interval: (int) the number of updates between log blocks (verbose >= 1)
        :param tb_log_name: (str) the name of the run for TensorBoard
        :param reset_num_timesteps: (bool) whether to reset ``num_timesteps``
        :param progress_bar: (bool) show a progress bar (tqdm)
        :param async_eval: (AsyncEval) evaluate the candidates in its worker processes instead of on the model's env
            (:class:`sbtf.contrib.common.vec_env.async_eval.AsyncEval`); closed when ``learn`` returns
        :return: the trained model (``self``)
        """
        try:
            return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps,
                               progress_bar, async_eval)
        finally:
            if async_eval is not None:
                async_eval.close()

    def _learn(self, total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar,
               async_eval):
        if async_eval is not None and async_eval.actor.n_params != self.n_params:
            raise ValueError(f"Error: the AsyncEval's policy has {async_eval.actor.n_params} weights, this model's "
                             f"{self.n_params}: create it with this model's policy (model.policy).")
        with self._learning(callback, total_timesteps, tb_log_name, reset_num_timesteps,
                            progress_bar) as (callback, writer):
            self._lr_fn = get_schedule_fn(self.learning_rate)
            self._delta_std_fn = get_schedule_fn(self.delta_std)
            start, t_start = self.num_timesteps, time.time()
            vec_normalize = self.get_vec_normalize_env()
            if async_eval is not None and vec_normalize is not None:  # the workers start from the model's statistics
                async_eval.sync_obs_rms(copy.deepcopy(vec_normalize.obs_rms))
                self._synced_obs_count = vec_normalize.obs_rms.count
            callback.on_training_start(locals(), globals())
            while self.num_timesteps - start < total_timesteps:
                progress_remaining = 1.0 - (self.num_timesteps - start) / float(total_timesteps)
                stats, continue_training = self._do_one_update(callback, progress_remaining, async_eval)
                if writer is not None:
                    writer.add_scalars({k: v for k, v in stats.items() if k != "train/iterations"},
                                       self.num_timesteps)
                if self.verbose >= 1 and log_interval is not None and self._n_updates % log_interval == 0:
                    self._dump_logs(stats, start, t_start)
                if not continue_training:
                    break
            callback.on_training_end()
        return self

    def _dump_logs(self, stats: Dict[str, float], start: int, t_start: float) -> None:
        elapsed = max(time.time() - t_start, 1e-9)
        if len(self.ep_info_buf) > 0:
            logger.logkv("rollout/ep_rew_mean", safe_mean([info["r"] for info in self.ep_info_buf]))
            logger.logkv("rollout/ep_len_mean", safe_mean([info["l"] for info in self.ep_info_buf]))
        logger.logkv("time/fps", int((self.num_timesteps - start) / elapsed))
        logger.logkv("time/time_elapsed", int(elapsed))
        logger.logkv("time/total_timesteps", self.num_timesteps)
        for key, value in stats.items():
            logger.logkv(key, value)
        logger.dumpkvs()

    # ------------------------------------------------------------------ acting
    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True, mask=None):
        """
        The policy's action(s) for an observation or a batch (the policy is deterministic).

        :return: (np.ndarray, None) the action(s) and the (absent) next state
        """
        observation, vectorized = self._check_obs(observation)
        actions = self.policy_tf.predict_actions(observation)
        return (actions if vectorized else np.asarray(actions[0])), None

    def action_probability(self, observation, state=None, mask=None, actions=None, logp=False):
        """ARS policies are deterministic: no action distribution (returns None, as SB2 does for DDPG)."""
        warnings.warn("action_probability is not implemented for ARS: its policy is deterministic")
        return None

    def _export_outputs(self, observation):
        """The exported graph: the action (as ``predict``)."""
        return {"action": self.policy_tf.actions_tf(observation)}
