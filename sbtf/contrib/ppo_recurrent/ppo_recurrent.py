"""Recurrent PPO (sb3-contrib ``RecurrentPPO``) on sbtf's on-policy core.

One update: a rollout of ``n_steps`` per env (the runner keeps the LSTM state row of every step), GAE(lambda), then
``n_epochs`` epochs of minibatch steps in ONE compiled call (a ``TrainStep`` that also returns the acting weights).

Sequence minibatching: each env's rollout is cut into sequences of ``seq_len = gcd(n_steps, batch_size)`` steps;
a minibatch is ``batch_size // seq_len`` sequences drawn without replacement (the sequences are shuffled every
epoch). Each sequence is unrolled from the state row stored at its first step, and the state is reset before every
step whose ``episode_start`` is 1 -- what acting did, so the recomputed log-probabilities match the rollout's.
(sb3-contrib splits contiguous minibatches at episode starts and pads the pieces; this cut needs no padding and
gives the same gradients when ``batch_size`` is a multiple of ``n_steps``, e.g. its defaults 128 / 128.)
"""
from __future__ import annotations

import math
import time
import warnings
from collections import deque
from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.fileio import model_schema as ms
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.math_util import explained_variance
from sbtf.common.algo.on_policy import OnPolicyAlgorithm
from sbtf.common.storage.rollout import RolloutBuffer, swap_and_flatten
from sbtf.common.runners import AbstractEnvRunner
from sbtf.common.algo.sb3_api import Sb3ModelApi
from sbtf.common.schedules import get_schedule_fn
from sbtf.common.tf_util import xla_pays_off
from sbtf.common.algo.train_log import record_episode_means
from sbtf.contrib.common.optim import make_optimizer
from sbtf.contrib.ppo_recurrent.policies import RecurrentActorCriticPolicy
from sbtf.common.arg_checks import check_hyperparameters

#: the statistics of an update (sb3-contrib's ``train/...`` keys)
STAT_NAMES = ("policy_gradient_loss", "value_loss", "entropy_loss", "approx_kl", "clip_fraction", "loss")


class RecurrentRolloutRunner(AbstractEnvRunner):
    """Collects ``n_steps`` per env with the LSTM state row of every step (sb3-contrib's ``RecurrentRolloutBuffer``)."""

    def __init__(self, *, env, model: "RecurrentPPO", n_steps: int):
        super().__init__(env=env, model=model, n_steps=n_steps)
        policy = model.policy_tf
        is_box = isinstance(policy.ac_space, gym.spaces.Box)
        self.buffer = RolloutBuffer(n_steps, self.n_envs, self.obs.shape[1:], self.obs.dtype,
                                    tuple(policy.pdtype.sample_shape()), np.float32 if is_box else np.int64)
        self.states = np.zeros((self.n_envs, policy.state_size), np.float32)
        self.dones = np.ones(self.n_envs, dtype=bool)  # sb3: episode starts at the first step
        self.step_states = np.zeros((n_steps, self.n_envs, policy.state_size), np.float32)

    def _run(self):
        model, policy, buffer = self.model, self.model.policy_tf, self.buffer
        buffer.reset(None)
        ep_infos: list = []
        for step in range(self.n_steps):
            self.step_states[step] = self.states
            actions, values, states, neglogpacs = policy.step(self.obs, self.states, self.dones)
            buffer.add(self.obs, actions, values, self.dones, neglogpacs)
            obs, rewards, dones, infos = self.env.step(policy.env_actions(actions))
            rewards = np.asarray(rewards, np.float32)
            true_rewards = rewards.copy()
            for i in np.flatnonzero(dones):  # time-limit cut: bootstrap with the value of the terminal observation
                if infos[i].get("TimeLimit.truncated", False) and infos[i].get("terminal_observation") is not None:
                    terminal = np.asarray(infos[i]["terminal_observation"])[None]
                    rewards[i] += model.gamma * float(policy.value(terminal, states[i:i + 1], np.zeros(1))[0])
            self.states = states
            self.dones = np.asarray(dones, bool)
            self.obs[:] = obs
            if not self._on_env_step(locals(), infos, ep_infos):
                return None
            buffer.add_rewards(rewards, true_rewards)
        last_values = policy.value(self.obs, self.states, self.dones)
        buffer.compute_gae(last_values, self.dones, model.gamma, model.gae_lambda)
        batch = buffer.get(ep_infos)
        batch.states = swap_and_flatten(self.step_states)  # (n_envs * n_steps, state_size), env-major
        return batch


class RecurrentPPO(Sb3ModelApi, OnPolicyAlgorithm):
    """
    Proximal Policy Optimization algorithm (PPO) (clip version) with support for recurrent policies (LSTM).
    Based on the original Stable Baselines 3 implementation and sb3-contrib's.

    :param policy: (RecurrentActorCriticPolicy or str) The policy model to use (MlpLstmPolicy, CnnLstmPolicy,
        MultiInputLstmPolicy)
    :param env: (gymnasium.Env, VecEnv or str) The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: (float or callable) The learning rate, a number or a function of the remaining progress
    :param n_steps: (int) The number of steps to run for each environment per update
    :param batch_size: (int) Minibatch size (transitions)
    :param n_epochs: (int) Number of epoch when optimizing the surrogate loss
    :param gamma: (float) Discount factor
    :param gae_lambda: (float) Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    :param clip_range: (float or callable) Clipping parameter
    :param clip_range_vf: (float or callable) Clipping parameter for the value function (None: no clipping)
    :param normalize_advantage: (bool) Whether to normalize or not the advantage
    :param ent_coef: (float) Entropy coefficient for the loss calculation
    :param vf_coef: (float) Value function coefficient for the loss calculation
    :param max_grad_norm: (float) The maximum value for the gradient clipping
    :param use_sde: (bool) generalized State-Dependent Exploration (gSDE, Box actions; :mod:`sbtf.common.nn.sde`)
    :param sde_sample_freq: (int) resample the gSDE exploration matrices every n steps (-1: only at rollout start)
    :param target_kl: (float) Limit the KL divergence between updates (early stop of the epochs at 1.5 x)
    :param stats_window_size: (int) Window size for the rollout logging (episodes)
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param verbose: (int) the verbosity level: 0 no output, 1 info, 2 debug
    :param seed: (int) Seed for the pseudo random generators
    :param device: (str) kept for sb3-contrib's signature: sbtf runs on TensorFlow's default device
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    """

    _save_schema = dict(
        learning_rate=ms.Schedule(), n_steps=ms.Integer(1), batch_size=ms.Integer(1), n_epochs=ms.Integer(1),
        gamma=ms.Real(), gae_lambda=ms.Real(), clip_range=ms.Schedule(), clip_range_vf=ms.Nullable(ms.Schedule()),
        normalize_advantage=ms.Flag(), ent_coef=ms.Real(), vf_coef=ms.Real(), max_grad_norm=ms.Real(),
        use_sde=ms.Flag(), sde_sample_freq=ms.Integer(-1), target_kl=ms.Nullable(ms.Real()),
        stats_window_size=ms.Integer(1), _n_train_updates=ms.Integer(0))

    def __init__(self, policy, env, learning_rate=3e-4, n_steps: int = 128, batch_size: Optional[int] = 128,
                 n_epochs: int = 10, gamma: float = 0.99, gae_lambda: float = 0.95, clip_range=0.2,
                 clip_range_vf=None, normalize_advantage: bool = True, ent_coef: float = 0.0, vf_coef: float = 0.5,
                 max_grad_norm: float = 0.5, use_sde: bool = False, sde_sample_freq: int = -1,
                 target_kl: Optional[float] = None, stats_window_size: int = 100,
                 tensorboard_log: Optional[str] = None, policy_kwargs: Optional[Dict[str, Any]] = None,
                 verbose: int = 0, seed: Optional[int] = None, device: str = "auto", _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        self.learning_rate = learning_rate
        self.n_steps = n_steps
        self.batch_size = batch_size if batch_size is not None else n_steps
        self.n_epochs = n_epochs
        self.gamma = gamma
        self.gae_lambda = gae_lambda
        self.clip_range = clip_range
        self.clip_range_vf = clip_range_vf
        self.normalize_advantage = normalize_advantage
        self.ent_coef = ent_coef
        self.vf_coef = vf_coef
        self.max_grad_norm = max_grad_norm
        self.use_sde = bool(use_sde)
        self.sde_sample_freq = int(sde_sample_freq)
        self.target_kl = target_kl
        self.stats_window_size = stats_window_size
        self.tensorboard_log = tensorboard_log
        self.full_tensorboard_log = False
        self.device = device
        self._n_train_updates = 0
        self._train_step: Optional[TrainStep] = None
        self._train_shape = None
        super().__init__(policy=policy, env=env, verbose=verbose, policy_base=RecurrentActorCriticPolicy,
                         requires_vec_env=True, _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs,
                         seed=seed)
        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        policy = self.policy_class
        if not (isinstance(policy, type) and issubclass(policy, RecurrentActorCriticPolicy)):
            raise ValueError("Error: the input policy for the RecurrentPPO model must be a subclass of "
                             f"RecurrentActorCriticPolicy (e.g. 'MlpLstmPolicy'), got {policy!r}.")
        if self.batch_size < 2 and self.normalize_advantage:
            raise ValueError("Error: `batch_size` must be greater than 1 (advantage normalization).")
        self.set_random_seed(self.seed)
        kwargs = dict(self.policy_kwargs, use_sde=True) if self.use_sde else self.policy_kwargs
        self.policy_tf = policy(self.observation_space, self.action_space, **kwargs)
        self.initial_state = None
        self.params = self.get_parameter_list()
        self._variables = [var for var in self.params if var.trainable]
        self.optimizer = make_optimizer(self._variables, self.policy_tf.optimizer_class,
                                        self.policy_tf.optimizer_kwargs, name="recurrent_ppo_adam")
        self._train_step = None
        self._runner = None

    def _on_env_changed(self) -> None:
        self._runner = None

    @property
    def runner(self) -> RecurrentRolloutRunner:
        if self._runner is None:
            self._runner = RecurrentRolloutRunner(env=self.env, model=self, n_steps=self.n_steps)
        return self._runner

    def _sequence_layout(self):
        """(seq_len, sequences per minibatch, minibatches per epoch) for the current ``n_envs``."""
        seq_len = math.gcd(int(self.n_steps), int(self.batch_size))
        per_batch = int(self.batch_size) // seq_len
        n_seq = self.n_envs * int(self.n_steps) // seq_len
        n_minibatches = max(n_seq // per_batch, 1)
        per_batch = min(per_batch, n_seq)
        return seq_len, per_batch, n_minibatches

    # ------------------------------------------------------------------ the compiled train step
    def _make_train_step(self) -> TrainStep:
        policy = self.policy_tf
        seq_len, per_batch, n_minibatches = self._sequence_layout()
        n_seq = self.n_envs * int(self.n_steps) // seq_len
        n_epochs = int(self.n_epochs)
        obs_shape = tuple(policy.obs_shape)
        act_shape = tuple(policy.pdtype.sample_shape())
        act_dtype = tf.float32 if isinstance(self.action_space, gym.spaces.Box) else tf.int64
        state_size = policy.state_size
        variables, optimizer = self._variables, self.optimizer
        ent_coef, vf_coef = float(self.ent_coef), float(self.vf_coef)
        max_grad_norm, normalize = float(self.max_grad_norm), bool(self.normalize_advantage)
        clip_vf = self.clip_range_vf is not None
        target_kl = None if self.target_kl is None else float(self.target_kl)
        n_stats = len(STAT_NAMES)

        def minibatch_stats(obs, actions, old_values, old_neglogp, advantages, returns, starts, states, lr, clip,
                            clip_vf_value):
            with tf.GradientTape() as tape:
                flat, values = policy.evaluate_sequences(obs, states, starts)
                dist = policy.proba_distribution_from_flat(flat)
                actions_flat = tf.reshape(actions, (-1,) + act_shape)
                log_prob = -dist.neglogp(actions_flat)
                adv = tf.reshape(advantages, (-1,))
                if normalize:
                    n = tf.cast(tf.size(adv), tf.float32)
                    std = tf.math.reduce_std(adv) * tf.sqrt(n / tf.maximum(n - 1.0, 1.0))  # torch's unbiased std
                    adv = (adv - tf.reduce_mean(adv)) / (std + 1e-8)
                log_ratio = log_prob + tf.reshape(old_neglogp, (-1,))
                ratio = tf.exp(log_ratio)
                policy_loss = -tf.reduce_mean(tf.minimum(adv * ratio,
                                                         adv * tf.clip_by_value(ratio, 1.0 - clip, 1.0 + clip)))
                old_v = tf.reshape(old_values, (-1,))
                if clip_vf:
                    values = old_v + tf.clip_by_value(values - old_v, -clip_vf_value, clip_vf_value)
                value_loss = tf.reduce_mean(tf.square(tf.reshape(returns, (-1,)) - values))
                entropy_loss = -tf.reduce_mean(dist.entropy())
                loss = policy_loss + ent_coef * entropy_loss + vf_coef * value_loss
            grads = tape.gradient(loss, variables)
            grads, _ = tf.clip_by_global_norm(grads, max_grad_norm)
            approx_kl = tf.reduce_mean((ratio - 1.0) - log_ratio)
            clip_fraction = tf.reduce_mean(tf.cast(tf.abs(ratio - 1.0) > clip, tf.float32))
            return grads, tf.stack([policy_loss, value_loss, entropy_loss, approx_kl, clip_fraction, loss])

        def train(obs, actions, values, neglogp, advantages, returns, starts, states, perms, lr, clip, clip_vf_value):
            def minibatch(k, stats, count, stop):
                index = perms[k // n_minibatches, k % n_minibatches]

                def take(x):
                    return tf.gather(x, index)

                grads, mb_stats = minibatch_stats(take(obs), take(actions), take(values), take(neglogp),
                                                  take(advantages), take(returns), take(starts), take(states), lr,
                                                  clip, clip_vf_value)
                too_far = tf.constant(False) if target_kl is None else mb_stats[3] > 1.5 * target_kl

                def apply():
                    optimizer.apply(grads, lr)
                    return stats + mb_stats, count + 1.0

                stats, count = tf.cond(too_far, lambda: (stats, count), apply)  # sb3: stop before this step
                return k + 1, stats, count, too_far

            _, stats, count, _ = tf.while_loop(
                lambda k, stats, count, stop: tf.logical_and(k < n_epochs * n_minibatches, tf.logical_not(stop)),
                minibatch, (tf.constant(0), tf.zeros((n_stats,), tf.float32), tf.constant(0.0), tf.constant(False)))
            stats = stats / tf.maximum(count, 1.0)
            out = {name: stats[i] for i, name in enumerate(STAT_NAMES)}
            out["n_steps_done"] = count
            return out

        inputs = dict(
            obs=tf.TensorSpec((n_seq, seq_len) + obs_shape, tf.as_dtype(policy.obs_dtype)),
            actions=tf.TensorSpec((n_seq, seq_len) + act_shape, act_dtype),
            values=tf.TensorSpec((n_seq, seq_len), tf.float32), neglogp=tf.TensorSpec((n_seq, seq_len), tf.float32),
            advantages=tf.TensorSpec((n_seq, seq_len), tf.float32),
            returns=tf.TensorSpec((n_seq, seq_len), tf.float32), starts=tf.TensorSpec((n_seq, seq_len), tf.float32),
            states=tf.TensorSpec((n_seq, state_size), tf.float32),
            perms=tf.TensorSpec((n_epochs, n_minibatches, per_batch), tf.int32), lr=tf.TensorSpec((), tf.float32),
            clip=tf.TensorSpec((), tf.float32), clip_vf_value=tf.TensorSpec((), tf.float32))
        # XLA whatever the length of the run: the unrolled LSTM step gains far more from it than an MLP step (100k
        # steps of ppo_lstm_cartpole_novel, 7,800 gradient steps: 89 s with XLA, 129 s without, 2026-11-27)
        return TrainStep(train, inputs, networks=(policy,), name="recurrent_ppo_train",
                         jit_compile=xla_pays_off(policy), xla_min_gradient_steps=0)

    # ------------------------------------------------------------------ the on-policy loop's parts
    def _progress_remaining(self, progress) -> float:
        """sb3's ``1 - num_timesteps / total_timesteps`` at the start of the update."""
        done = self.num_timesteps - progress.start_timesteps
        return 1.0 - float(done) / float(max(progress.total_timesteps, 1))

    def _on_learn_start(self, progress, callback) -> None:
        self._lr_fn = get_schedule_fn(self.learning_rate)
        self._clip_fn = get_schedule_fn(self.clip_range)
        self._clip_vf_fn = get_schedule_fn(self.clip_range_vf) if self.clip_range_vf is not None else None
        if self.ep_info_buf is None or self.ep_info_buf.maxlen != int(self.stats_window_size):
            self.ep_info_buf = deque(self.ep_info_buf or (), maxlen=int(self.stats_window_size))

    def _collect_rollout(self, callback):
        callback.on_rollout_start()
        policy = self.policy_tf
        if self.use_sde:  # new exploration matrices per rollout, resampled every sde_sample_freq steps
            policy.sde_noise.start_rollout(policy.sde_std_matrix(), self.n_envs, self.sde_sample_freq)
        try:
            batch = self.runner.run(callback)
        finally:
            if self.use_sde:
                policy.sde_noise.end_rollout()
        callback.update_locals(locals())
        callback.on_rollout_end()
        if not self.runner.continue_training:
            return None
        return batch

    def train(self, batch) -> Dict[str, float]:
        """``n_epochs`` epochs of sequence minibatches in one compiled call; the mean statistics."""
        shape = (self.n_envs, int(self.n_steps), int(self.batch_size), int(self.n_epochs))
        if self._train_step is None or self._train_shape != shape:
            self._train_step = self._make_train_step()
            self._train_shape = shape
        seq_len, per_batch, n_minibatches = self._sequence_layout()
        n_seq = self.n_envs * int(self.n_steps) // seq_len
        frac = self._learn_progress.progress_remaining
        self._current_lr = float(self._lr_fn(frac))
        self._current_clip = float(self._clip_fn(frac))
        clip_vf = float(self._clip_vf_fn(frac)) if self._clip_vf_fn is not None else 0.0

        def seq(x):
            x = np.asarray(x)
            return x.reshape((n_seq, seq_len) + x.shape[1:])

        perms = np.stack([np.random.permutation(n_seq)[:n_minibatches * per_batch]
                          for _ in range(int(self.n_epochs))]).astype(np.int32)
        perms = perms.reshape(int(self.n_epochs), n_minibatches, per_batch)
        out = self._train_step(
            obs=seq(batch.observations), actions=seq(batch.actions), values=seq(batch.values),
            neglogp=seq(batch.neg_log_probs), advantages=seq(batch.advantages), returns=seq(batch.returns),
            starts=seq(batch.masks.astype(np.float32)), states=np.asarray(batch.states, np.float32)[::seq_len],
            perms=perms, lr=self._current_lr, clip=self._current_clip, clip_vf_value=clip_vf)
        self._n_train_updates += int(out["n_steps_done"])
        stats = {name: float(out[name]) for name in STAT_NAMES}
        stats["explained_variance"] = float(explained_variance(batch.values, batch.returns))
        return stats

    def _tensorboard_scalars(self, batch, stats: Dict[str, float]) -> Dict[str, float]:
        return {**{f"train/{name}": value for name, value in stats.items()},
                "train/learning_rate": self._current_lr, "train/clip_range": self._current_clip}

    def _is_log_update(self, update: int, log_interval: int) -> bool:
        return self.verbose >= 1 and log_interval is not None and update % log_interval == 0

    def _log_update(self, batch, stats: Dict[str, float]) -> None:
        progress = self._learn_progress
        logger.logkv("iterations", progress.update)
        record_episode_means(self.ep_info_buf)
        logger.logkv("fps", self._fps_since_start())
        logger.logkv("time_elapsed", int(time.time() - progress.t_start))
        logger.logkv("total_timesteps", self.num_timesteps)
        for name, value in stats.items():
            logger.logkv(name, value)
        logger.logkv("n_updates", self._n_train_updates)
        logger.logkv("learning_rate", self._current_lr)
        logger.logkv("clip_range", self._current_clip)
        logger.dumpkvs()

    def learn(self, total_timesteps, callback=None, log_interval=1, tb_log_name="RecurrentPPO",
              reset_num_timesteps=True, progress_bar: bool = False):
        """
        Return a trained model.

        :param total_timesteps: (int) The total number of samples (env steps) to train on
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) The number of updates before logging
        :param tb_log_name: (str) the name of the run for TensorBoard logging
        :param reset_num_timesteps: (bool) whether or not to reset the current timestep number (used in logging)
        :param progress_bar: (bool) Display a progress bar using tqdm and rich
        :return: (RecurrentPPO) the trained model
        """
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)

    # ------------------------------------------------------------------ predict
    def predict(self, observation, state=None, episode_start=None, deterministic=False, mask=None):
        """
        Get the policy action from an observation and the LSTM state (sb3-contrib's ``predict``).

        :param observation: (np.ndarray or dict) the input observation (single or batch)
        :param state: (tuple) the last hidden states ``(h, c)``, each ``(n_lstm_layers, n_envs, lstm_hidden_size)``
            (None: zeros)
        :param episode_start: (np.ndarray) 1 where an episode starts (resets the state); default no start
        :param deterministic: (bool) whether to return deterministic actions
        :param mask: stable-baselines 2's name of ``episode_start``
        :return: (np.ndarray, tuple) the action(s) and the next hidden state ``(h, c)``
        """
        if mask is not None and episode_start is not None:
            warnings.warn("predict: both mask and episode_start were given; episode_start is used.")
        episode_start = episode_start if episode_start is not None else mask
        observation, vectorized = self._check_obs(observation)
        n_envs = observation.shape[0]
        policy = self.policy_tf
        rows = policy.from_sb3_state(state, n_envs)
        starts = np.zeros(n_envs, np.float32) if episode_start is None else \
            np.asarray(episode_start, np.float32).reshape(n_envs)
        actions, _, new_rows, _ = policy.step(observation, rows, starts, deterministic=deterministic)
        actions = policy.env_actions(actions)  # Box: clipped, in the space's shape
        if not vectorized:
            actions = np.asarray(actions[0])
        return actions, policy.to_sb3_state(new_rows)

    def action_probability(self, observation, state=None, mask=None, actions=None, logp=False, *,
                           episode_start=None):
        """Not defined for this algorithm (sb3-contrib has no such method either)."""
        raise NotImplementedError("RecurrentPPO does not have action probabilities.")

    def _named_parameters(self):
        return self.policy_tf.named_parameters("model")


__all__ = ["RecurrentPPO", "RecurrentRolloutRunner", "STAT_NAMES"]
