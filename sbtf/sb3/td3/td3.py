"""Twin Delayed DDPG as stable-baselines3 2.x writes it (``stable_baselines3.TD3``), on sbtf's off-policy core.

One gradient step, in sb3's order: target policy smoothing (``a' = clip(actor_target(s') + clip(N(0,
target_policy_noise), +-target_noise_clip), -1, 1)``), the critic update ``sum_i mean((Q_i(s, a) - y)^2)`` with
``y = r + gamma * (1 - d) * min_i Q_targ_i(s', a')``; then, every ``policy_delay`` gradient steps (counted over the
model's life, ``_n_updates``), the actor update ``-mean(Q_1(s, actor(s)))`` and the Polyak updates of both targets.
The ``gradient_steps`` steps of a training run in one compiled call; an Mlp actor acts in NumPy on weights the train
call returns. DDPG (``sbtf.sb3.ddpg``) is this class with ``policy_delay=1``, no target smoothing and one critic.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import tensorflow as tf

from sbtf.common.fileio import model_schema as ms
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.algo.off_policy_algorithm import learn_doc
from sbtf.common.algo.off_policy_ops import polyak_update
from sbtf.sb3.common.off_policy_algorithm import ActorCriticOffPolicyAlgorithm, contrib_save_schema
from sbtf.sb3.sac.sac import q_regression_loss
from sbtf.sb3.td3.policies import TD3Policy
from sbtf.common.arg_checks import check_hyperparameters


class TD3(ActorCriticOffPolicyAlgorithm):
    """
    Twin Delayed DDPG (TD3): Addressing Function Approximation Error in Actor-Critic Methods (stable-baselines3's
    class and arguments). Paper: https://arxiv.org/abs/1802.09477

    :param policy: (TD3Policy or str) The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy)
    :param env: (gymnasium.Env, VecEnv or str) The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: (float or callable) learning rate for the Adam optimizers (actor and critics); a callable
        gets the progress remaining (from 1 to 0)
    :param buffer_size: (int) size of the replay buffer
    :param learning_starts: (int) how many steps of the model to collect transitions for before learning starts
    :param batch_size: (int) Minibatch size for each gradient update
    :param tau: (float) the soft update coefficient ("Polyak update", between 0 and 1)
    :param gamma: (float) the discount factor
    :param train_freq: (int or (int, str)) Update the model every ``train_freq`` steps, or a pair such as
        ``(5, "step")`` or ``(2, "episode")``
    :param gradient_steps: (int) How many gradient steps after each rollout (``-1``: as many as env steps collected)
    :param action_noise: (ActionNoise) the action noise added to the actions for exploration (None by default)
    :param replay_buffer_class: (type) Replay buffer class (e.g. ``HerReplayBuffer``; default ``ReplayBuffer``)
    :param replay_buffer_kwargs: (dict) Keyword arguments to pass to the replay buffer on creation
    :param optimize_memory_usage: (bool) store each observation once (the next observation is read from the next
        slot; terminal observations of finished episodes are kept apart, so time limits are handled)
    :param policy_delay: (int) the actor and the target networks are updated once every ``policy_delay`` critic
        updates
    :param target_policy_noise: (float) standard deviation of the Gaussian noise added to the target policy's
        actions (smoothing noise)
    :param target_noise_clip: (float) limit for the absolute value of the target policy smoothing noise
    :param stats_window_size: (int) Window size for the rollout logging (episodes)
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param verbose: (int) the verbosity level: 0 no output, 1 info, 2 debug
    :param seed: (int) Seed for the pseudo random generators
    :param device: (str) kept for sb3's signature: sbtf runs on TensorFlow's default device
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    """

    _save_schema = contrib_save_schema(action_noise=ms.Noise(), policy_delay=ms.Integer(1),
                                       target_policy_noise=ms.Real(), target_noise_clip=ms.Real())

    def __init__(self, policy, env, learning_rate: Union[float, Any] = 1e-3, buffer_size: int = 1_000_000,
                 learning_starts: int = 100, batch_size: int = 256, tau: float = 0.005, gamma: float = 0.99,
                 train_freq: Union[int, Tuple[int, str]] = 1, gradient_steps: int = 1, action_noise=None,
                 replay_buffer_class=None, replay_buffer_kwargs: Optional[Dict[str, Any]] = None,
                 optimize_memory_usage: bool = False, policy_delay: int = 2, target_policy_noise: float = 0.2,
                 target_noise_clip: float = 0.5, stats_window_size: int = 100, tensorboard_log: Optional[str] = None,
                 policy_kwargs: Optional[Dict[str, Any]] = None, verbose: int = 0, seed: Optional[int] = None,
                 device: str = "auto", _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        super().__init__(policy, env, TD3Policy, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, batch_size=batch_size, tau=tau, gamma=gamma,
                         train_freq=train_freq, gradient_steps=gradient_steps, action_noise=action_noise,
                         replay_buffer_class=replay_buffer_class, replay_buffer_kwargs=replay_buffer_kwargs,
                         optimize_memory_usage=optimize_memory_usage, n_steps=1,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device)
        self.policy_delay = policy_delay
        self.target_policy_noise = target_policy_noise
        self.target_noise_clip = target_noise_clip
        #: the last actor loss (a training whose gradient steps all skip the actor reports it again, as sb3 logs
        #: nothing new then)
        self._last_actor_loss: Optional[float] = None
        if _init_setup_model:
            self.setup_model()

    def setup_model(self) -> None:
        """Build the policy, the optimizers and the replay buffer."""
        if int(self.policy_delay) < 1:
            raise ValueError(f"Error: policy_delay must be >= 1, got {self.policy_delay}.")
        self._build_policy(TD3Policy)
        self._setup_actor_critic()
        self._finish_setup()

    @property
    def stats_names(self) -> List[str]:
        #: actor_updates: the fraction of the training's gradient steps that updated the actor and the targets
        return ["actor_loss", "critic_loss", "actor_updates"]

    def _target_update_flags(self, n_steps: int, offset: int) -> np.ndarray:
        # sb3 counts the update before testing it: the actor follows when (n_updates + 1) % policy_delay == 0
        steps = int(self._n_updates) + offset + np.arange(n_steps) + 1
        return steps % int(self.policy_delay) == 0

    def _build_train_step(self, n_steps: int, variant) -> TrainStep:
        policy = self.policy_tf
        actor, actor_target = policy.actor, policy.actor_target
        critic, critic_target = policy.critic, policy.critic_target
        actor_vars, critic_vars = self._actor_vars, self._critic_vars
        target_pairs = [(self._critic_target_vars, self._critic_source_vars),
                        (self._actor_target_vars, self._actor_vars)]
        actor_opt, critic_opt = self.actor_optimizer, self.critic_optimizer
        gamma, tau = float(self.gamma), float(self.tau)
        noise_std, noise_clip = float(self.target_policy_noise), float(self.target_noise_clip)

        def actor_update(obs, lr):
            with tf.GradientTape() as tape:
                actor_loss = -tf.reduce_mean(critic.q1_forward(obs, actor(obs)))
            actor_opt.apply(tape.gradient(actor_loss, actor_vars), lr)
            for targets, sources in target_pairs:
                polyak_update(targets, sources, tau)
            return actor_loss

        def one_step(k, batch):
            obs, actions, lr = batch["obs"], batch["actions"], batch["learning_rate"]
            seed = tf.cast(batch["seeds"], tf.int32)
            noise = tf.random.stateless_normal(tf.shape(actions), seed=seed) * noise_std
            noise = tf.clip_by_value(noise, -noise_clip, noise_clip)
            next_actions = tf.clip_by_value(actor_target(batch["next_obs"]) + noise, -1.0, 1.0)
            next_q = tf.reduce_min(critic_target.q_values(batch["next_obs"], next_actions), axis=1)
            target = tf.stop_gradient(batch["rewards"] + (1.0 - batch["dones"]) * gamma * next_q)
            with tf.GradientTape() as tape:
                critic_loss = q_regression_loss(critic.q_values(obs, actions), target)
            critic_opt.apply(tape.gradient(critic_loss, critic_vars), lr)
            flag = batch["flags"]
            actor_loss = tf.cond(flag > 0.5, lambda: actor_update(obs, lr), lambda: tf.constant(0.0))
            return tf.stack([actor_loss * flag, critic_loss, flag])

        return self._k_step_train_step(one_step, n_steps, self._extra_specs(n_steps), name="td3_train")

    def _run_train(self, gradient_steps: int, lr: float) -> np.ndarray:
        # the step returns the actor loss summed over the steps that updated the actor: made a mean of those
        actor_sum, critic_loss, actor_updates = super()._run_train(gradient_steps, lr)
        if actor_updates > 0:
            self._last_actor_loss = float(actor_sum / actor_updates)
        actor_loss = np.nan if self._last_actor_loss is None else self._last_actor_loss
        return np.array([actor_loss, critic_loss, actor_updates], np.float32)

    @learn_doc("TD3")
    def learn(self, total_timesteps: int, callback=None, log_interval: int = 4, tb_log_name: str = "TD3",
              reset_num_timesteps: bool = True, progress_bar: bool = False):
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, None,
                           progress_bar)


__all__ = ["TD3"]
