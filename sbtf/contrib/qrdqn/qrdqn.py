"""Quantile Regression DQN (sb3-contrib ``QRDQN``) on sbtf's off-policy core.

One gradient step (target quantiles of the greedy next action from the target network, the quantile Huber loss
summed over the quantiles, optional gradient-norm clipping as PyTorch's ``clip_grad_norm_``, PyTorch's Adam) is
traced once; the ``gradient_steps`` steps of a training run in one compiled call, which also returns the acting
weights. The target network follows the quantile network every ``target_update_interval`` env steps (Polyak with
``tau``, a copy by default). Acting with an Mlp network is a NumPy forward pass. Exploration, the target network and
the compiled steps are SB3's DQN's (``sbtf.sb3.dqn.q_learning``), as sb3-contrib's QRDQN mirrors SB3's DQN.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import tensorflow as tf

from sbtf.common.algo.off_policy_algorithm import learn_doc
from sbtf.sb3.dqn.q_learning import QLearningAlgorithm, exploration_rate, q_learning_save_schema
from sbtf.contrib.common.quantiles import quantile_huber_loss
from sbtf.contrib.qrdqn.policies import QRDQNPolicy
from sbtf.common.arg_checks import check_hyperparameters


class QRDQN(QLearningAlgorithm):
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

    _save_schema = q_learning_save_schema()

    def __init__(self, policy, env, learning_rate=5e-5, buffer_size: int = 1000000, learning_starts: int = 100,
                 batch_size: int = 32, tau: float = 1.0, gamma: float = 0.99, train_freq=4, gradient_steps: int = 1,
                 replay_buffer_class=None, replay_buffer_kwargs: Optional[Dict[str, Any]] = None,
                 optimize_memory_usage: bool = False, n_steps: int = 1, target_update_interval: int = 10000,
                 exploration_fraction: float = 0.005, exploration_initial_eps: float = 1.0,
                 exploration_final_eps: float = 0.01, max_grad_norm: Optional[float] = None,
                 stats_window_size: int = 100, tensorboard_log: Optional[str] = None,
                 policy_kwargs: Optional[Dict[str, Any]] = None, verbose: int = 0, seed: Optional[int] = None,
                 device: str = "auto", _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        super().__init__(policy, env, QRDQNPolicy, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, batch_size=batch_size, tau=tau, gamma=gamma,
                         train_freq=train_freq, gradient_steps=gradient_steps,
                         replay_buffer_class=replay_buffer_class, replay_buffer_kwargs=replay_buffer_kwargs,
                         optimize_memory_usage=optimize_memory_usage, n_steps=n_steps,
                         target_update_interval=target_update_interval, exploration_fraction=exploration_fraction,
                         exploration_initial_eps=exploration_initial_eps,
                         exploration_final_eps=exploration_final_eps, max_grad_norm=max_grad_norm,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device)
        if "optimizer_class" not in self.policy_kwargs and "optimizer_kwargs" not in self.policy_kwargs:
            # proposed in the QR-DQN paper where batch_size = 32 (sb3-contrib's default)
            self.policy_kwargs["optimizer_kwargs"] = dict(eps=0.01 / batch_size)
        self.quantile_net = None
        self.quantile_net_target = None
        if _init_setup_model:
            self.setup_model()

    def _create_aliases(self) -> None:
        self.quantile_net = self.policy_tf.quantile_net
        self.quantile_net_target = self.policy_tf.quantile_net_target
        self.n_quantiles = self.policy_tf.n_quantiles

    # ------------------------------------------------------------------ the gradient step
    def _td_target(self, batch: Dict[str, tf.Tensor]) -> tf.Tensor:
        """The target quantiles (B, N) of the greedy next action (by the target network's mean quantiles)."""
        policy = self.policy_tf
        next_quantiles = policy.quantile_net_target.quantiles(batch["next_obs"])  # (B, N, A)
        greedy = tf.argmax(tf.reduce_mean(next_quantiles, axis=1), axis=1)
        next_quantiles = tf.reduce_sum(next_quantiles * tf.one_hot(greedy, policy.n_actions)[:, None, :], axis=2)
        return batch["rewards"][:, None] + (1.0 - batch["dones"][:, None]) * float(self.gamma) * next_quantiles

    def _td_loss(self, batch: Dict[str, tf.Tensor], target: tf.Tensor) -> tf.Tensor:
        """The quantile Huber loss of the taken actions' quantiles, summed over the quantiles."""
        actions = self._one_hot_actions(batch)
        current = tf.reduce_sum(self.policy_tf.quantile_net.quantiles(batch["obs"]) * actions[:, None, :], axis=2)
        return quantile_huber_loss(current, target, sum_over_quantiles=True)

    def _train_step_name(self) -> str:
        return "qrdqn_train"

    @learn_doc("QRDQN")
    def learn(self, total_timesteps, callback=None, log_interval=4, tb_log_name="QRDQN", reset_num_timesteps=True,
              progress_bar: bool = False):
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, None,
                           progress_bar)

    # ------------------------------------------------------------------ export and behaviour cloning
    def _export_outputs(self, obs) -> Dict[str, tf.Tensor]:
        """The exported graph: the greedy action, the Q-values and the quantiles."""
        quantiles = self.policy_tf.quantile_net.quantiles(obs)
        q_values = tf.reduce_mean(quantiles, axis=1)
        return {"action": tf.argmax(q_values, axis=1), "q_values": q_values, "quantiles": quantiles}


__all__ = ["QRDQN", "exploration_rate"]
