"""Quantile Regression DQN (sb3-contrib ``QRDQN``) on sbtf's off-policy core.

One gradient step (target quantiles of the greedy next action from the target network, the quantile Huber loss
summed over the quantiles, optional global gradient-norm clipping, PyTorch's Adam) is traced once; the
``gradient_steps`` steps of a training run in one compiled call, which also returns the acting weights. The target
network follows the quantile network every ``target_update_interval`` env steps (Polyak with ``tau``, a copy by
default). Acting with an Mlp network is a NumPy forward pass.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common import model_schema as ms
from sbtf.common.fast_call import TrainStep
from sbtf.common.off_policy_algorithm import learn_doc
from sbtf.common.off_policy_ops import polyak_update
from sbtf.contrib.common.off_policy import ContribOffPolicyAlgorithm, contrib_save_schema
from sbtf.contrib.common.optim import make_optimizer
from sbtf.contrib.common.quantiles import quantile_huber_loss
from sbtf.contrib.qrdqn.policies import QRDQNPolicy


def exploration_rate(progress_remaining: float, initial_eps: float, final_eps: float, fraction: float) -> float:
    """sb3's ``LinearSchedule(initial, final, fraction)`` at ``progress_remaining``."""
    progress = 1.0 - progress_remaining
    if progress > fraction:
        return final_eps
    return initial_eps + progress * (final_eps - initial_eps) / fraction


class QRDQN(ContribOffPolicyAlgorithm):
    """
    Quantile Regression Deep Q-Network (QR-DQN)
    Paper: https://arxiv.org/abs/1710.10044
    Default hyperparameters are taken from the paper and are tuned for Atari games
    (except for the ``learning_starts`` parameter).

    :param policy: (QRDQNPolicy or str) The policy model to use (MlpPolicy, CnnPolicy)
    :param env: (gymnasium.Env, VecEnv or str) The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: (float or callable) The learning rate, it can be a function
        of the current progress remaining (from 1 to 0)
    :param buffer_size: (int) size of the replay buffer
    :param learning_starts: (int) how many steps of the model to collect transitions for before learning starts
    :param batch_size: (int) Minibatch size for each gradient update
    :param tau: (float) the soft update coefficient ("Polyak update", between 0 and 1) default 1 for hard update
    :param gamma: (float) the discount factor
    :param train_freq: (int or (int, str)) Update the model every ``train_freq`` steps. Alternatively pass a tuple of
        frequency and unit like ``(5, "step")`` or ``(2, "episode")``.
    :param gradient_steps: (int) How many gradient steps to do after each rollout (``-1``: as many as env steps
        collected in the rollout, summed over the envs)
    :param replay_buffer_class: must be None (sbtf's ReplayBuffer)
    :param replay_buffer_kwargs: must be None
    :param optimize_memory_usage: must be False (sbtf's replay buffer stores the next observations)
    :param n_steps: must be 1 (n-step returns are not implemented)
    :param target_update_interval: (int) update the target network every ``target_update_interval`` environment
        steps
    :param exploration_fraction: (float) fraction of entire training period over which the exploration rate is
        reduced
    :param exploration_initial_eps: (float) initial value of random action probability
    :param exploration_final_eps: (float) final value of random action probability
    :param max_grad_norm: (float) The maximum value for the gradient clipping (if None, no clipping)
    :param stats_window_size: (int) Window size for the rollout logging (episodes)
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param verbose: (int) the verbosity level: 0 no output, 1 info, 2 debug
    :param seed: (int) Seed for the pseudo random generators
    :param device: (str) kept for sb3-contrib's signature: sbtf runs on TensorFlow's default device
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    """

    _save_schema = contrib_save_schema(
        target_update_interval=ms.Integer(1), exploration_fraction=ms.Real(), exploration_initial_eps=ms.Real(),
        exploration_final_eps=ms.Real(), max_grad_norm=ms.Nullable(ms.Real()), exploration_rate=ms.Real(),
        _n_calls=ms.Integer(0))
    _supported_action_spaces = (gym.spaces.Discrete,)

    def __init__(self, policy, env, learning_rate=5e-5, buffer_size: int = 1000000, learning_starts: int = 100,
                 batch_size: int = 32, tau: float = 1.0, gamma: float = 0.99, train_freq=4, gradient_steps: int = 1,
                 replay_buffer_class=None, replay_buffer_kwargs: Optional[Dict[str, Any]] = None,
                 optimize_memory_usage: bool = False, n_steps: int = 1, target_update_interval: int = 10000,
                 exploration_fraction: float = 0.005, exploration_initial_eps: float = 1.0,
                 exploration_final_eps: float = 0.01, max_grad_norm: Optional[float] = None,
                 stats_window_size: int = 100, tensorboard_log: Optional[str] = None,
                 policy_kwargs: Optional[Dict[str, Any]] = None, verbose: int = 0, seed: Optional[int] = None,
                 device: str = "auto", _init_setup_model: bool = True):
        super().__init__(policy, env, QRDQNPolicy, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, batch_size=batch_size, tau=tau, gamma=gamma,
                         train_freq=train_freq, gradient_steps=gradient_steps, action_noise=None,
                         replay_buffer_class=replay_buffer_class, replay_buffer_kwargs=replay_buffer_kwargs,
                         optimize_memory_usage=optimize_memory_usage, n_steps=n_steps,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device)
        self.exploration_initial_eps = exploration_initial_eps
        self.exploration_final_eps = exploration_final_eps
        self.exploration_fraction = exploration_fraction
        self.target_update_interval = target_update_interval
        self._n_calls = 0
        self.max_grad_norm = max_grad_norm
        self.exploration_rate = 0.0
        if "optimizer_class" not in self.policy_kwargs and "optimizer_kwargs" not in self.policy_kwargs:
            # proposed in the QR-DQN paper where batch_size = 32 (sb3-contrib's default)
            self.policy_kwargs["optimizer_kwargs"] = dict(eps=0.01 / batch_size)
        self.quantile_net = None
        self.quantile_net_target = None
        self._online_changed = True
        self._target_update_step: Optional[TrainStep] = None
        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        policy = self._build_policy(QRDQNPolicy)
        self.quantile_net = policy.quantile_net
        self.quantile_net_target = policy.quantile_net_target
        self.n_quantiles = policy.n_quantiles
        self._online_vars = policy.online_variables()
        self._target_vars = policy.target_variables()
        self.optimizer = make_optimizer(self._online_vars, policy.optimizer_class, policy.optimizer_kwargs,
                                        name="quantile_net_adam")
        self._target_update_step = None
        self._online_changed = True
        if self.n_envs is not None and self.n_envs > self.target_update_interval:
            warnings.warn("The number of environments used is greater than the target network update interval "
                          f"({self.n_envs} > {self.target_update_interval}), therefore the target network will be "
                          f"updated after each call to env.step() which corresponds to {self.n_envs} steps.")
        self._finish_setup()

    @property
    def stats_names(self) -> List[str]:
        return ["loss"]

    # ------------------------------------------------------------------ train step
    def _build_train_step(self, n_steps: int, variant) -> TrainStep:
        policy = self.policy_tf
        online, target = policy.quantile_net, policy.quantile_net_target
        online_vars = self._online_vars
        optimizer = self.optimizer
        n_actions, gamma = policy.n_actions, float(self.gamma)
        max_grad_norm = None if self.max_grad_norm is None else float(self.max_grad_norm)

        def one_step(k, batch):
            next_quantiles = target.quantiles(batch["next_obs"])  # (B, N, A)
            greedy = tf.argmax(tf.reduce_mean(next_quantiles, axis=1), axis=1)
            next_quantiles = tf.reduce_sum(next_quantiles * tf.one_hot(greedy, n_actions)[:, None, :], axis=2)
            target_quantiles = tf.stop_gradient(batch["rewards"][:, None]
                                                + (1.0 - batch["dones"][:, None]) * gamma * next_quantiles)
            actions = tf.one_hot(tf.cast(batch["actions"][:, 0], tf.int32), n_actions)
            with tf.GradientTape() as tape:
                current = tf.reduce_sum(online.quantiles(batch["obs"]) * actions[:, None, :], axis=2)  # (B, N)
                loss = quantile_huber_loss(current, target_quantiles, sum_over_quantiles=True)
            grads = tape.gradient(loss, online_vars)
            if max_grad_norm is not None:
                grads, _ = tf.clip_by_global_norm(grads, max_grad_norm)
            optimizer.apply(grads, batch["learning_rate"])
            return tf.stack([loss])

        return self._k_step_train_step(one_step, n_steps, {}, name="qrdqn_train")

    def _train(self, plan, state, writer) -> np.ndarray:
        stats = super()._train(plan, state, writer)
        self._online_changed = True
        return stats

    def update_target(self) -> None:
        """``target = tau * online + (1 - tau) * target`` (one compiled call)."""
        if self._target_update_step is None:
            online_vars, target_vars, tau = self._online_vars, self._target_vars, float(self.tau)

            def update():
                polyak_update(target_vars, online_vars, tau)
                return {}

            self._target_update_step = TrainStep(update, {}, name="qrdqn_update_target")
        self._target_update_step()

    # ------------------------------------------------------------------ collection
    def _on_env_step(self) -> None:
        self._n_calls += 1
        if self._n_calls % max(self.target_update_interval // self.n_envs, 1) == 0:
            # with tau = 1 the update is a copy: skipped while the quantile network has not changed since the last
            if self.tau != 1.0 or self._online_changed:
                self.update_target()
                self._online_changed = False
        self.exploration_rate = exploration_rate(self._current_progress_remaining, self.exploration_initial_eps,
                                                 self.exploration_final_eps, self.exploration_fraction)

    def _policy_actions(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        if not deterministic and np.random.rand() < self.exploration_rate:
            return np.array([self.action_space.sample() for _ in range(obs.shape[0])])
        return self.policy_tf.predict_actions(obs)

    def _log_values(self):
        return [("exploration_rate", self.exploration_rate)] + super()._log_values()

    @learn_doc("QRDQN")
    def learn(self, total_timesteps, callback=None, log_interval=4, tb_log_name="QRDQN", reset_num_timesteps=True,
              progress_bar: bool = False):
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, None,
                           progress_bar)

    # ------------------------------------------------------------------ predict
    def predict(self, observation, state=None, episode_start=None, deterministic=False, mask=None):
        """
        Get the policy action from an observation: the greedy action, or (``deterministic=False``) with probability
        ``exploration_rate`` random actions (sb3-contrib's ``QRDQN.predict``).

        :param observation: (np.ndarray) the input observation (single or batch)
        :param state: unused (no recurrent policy); returned as is
        :param episode_start: unused
        :param deterministic: (bool) whether to return the greedy action
        :param mask: unused (stable-baselines 2's name of episode_start)
        :return: (np.ndarray, None) the action(s) and the state
        """
        self._check_predict_args(mask, episode_start)
        observation, vectorized = self._check_obs(observation)
        actions = self._policy_actions(observation, deterministic)
        if not vectorized:
            actions = actions[0]
        return actions, state

    # ------------------------------------------------------------------ export and behaviour cloning
    def _export_outputs(self, obs) -> Dict[str, tf.Tensor]:
        """The exported graph: the greedy action, the Q-values and the quantiles."""
        quantiles = self.policy_tf.quantile_net.quantiles(obs)
        q_values = tf.reduce_mean(quantiles, axis=1)
        return {"action": tf.argmax(q_values, axis=1), "q_values": q_values, "quantiles": quantiles}

    def _pretrain_output(self, obs):
        return self.policy_tf.q_values(obs)

    def _pretrain_variables(self) -> list:
        return list(self._online_vars)


__all__ = ["QRDQN", "exploration_rate"]
