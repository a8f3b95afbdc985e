"""Twin Delayed DDPG (stable-baselines 2.x ``TD3``).

One gradient step (twin-Q regression on the clipped double-Q target with target policy smoothing; every
``policy_delay`` steps also the actor update and the Polyak update of all target networks) is one compiled
``tf.function`` call with a fixed input signature; ``gradient_steps`` steps that follow each other run in one
call. Acting with an Mlp actor is a NumPy forward pass on weights that the train call returns.
"""
from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.nn.sde import refuse_sde
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.algo.off_policy_actor_critic import ActorCriticOffPolicyAlgorithm
from sbtf.common.algo.off_policy_algorithm import REPLAY_BUFFER_SCHEMA, learn_doc
from sbtf.common.algo.off_policy_ops import polyak_update
from sbtf.common.optimizers import Adam
from sbtf.td3.policies import TD3Policy
from sbtf.common.fileio import model_schema as ms
from sbtf.common.arg_checks import check_hyperparameters

STATS_NAMES = ['qf1_loss', 'qf2_loss']
#: the statistics of a train step (the policy loss is 0 in steps without an actor update)
TRAIN_STATS = ['qf1_loss', 'qf2_loss', 'policy_loss']


class TD3(ActorCriticOffPolicyAlgorithm):
    """
    Twin Delayed DDPG (TD3)
    Addressing Function Approximation Error in Actor-Critic Methods.

    Original implementation: https://github.com/sfujim/TD3
    Paper: https://arxiv.org/pdf/1802.09477.pdf
    Introduction to TD3: https://spinningup.openai.com/en/latest/algorithms/td3.html

    :param policy: (TD3Policy or str) The policy model to use (MlpPolicy, CnnPolicy, LnMlpPolicy, ...)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str)
    :param gamma: (float) the discount factor
    :param learning_rate: (float or callable) learning rate for adam optimizer,
        the same learning rate will be used for all networks (Q-Values and Actor networks)
        it can be a function of the current progress (from 1 to 0)
    :param buffer_size: (int) size of the replay buffer
    :param batch_size: (int) Minibatch size for each gradient update
    :param tau: (float) the soft update coefficient ("polyak update" of the target networks, between 0 and 1)
    :param policy_delay: (int) Policy and target networks will only be updated once every policy_delay steps
        per training steps. The Q values will be updated policy_delay more often (update every training step).
    :param action_noise: (ActionNoise) the action noise type. Cf DDPG for the different action noise type.
    :param target_policy_noise: (float) Standard deviation of Gaussian noise added to target policy
        (smoothing noise)
    :param target_noise_clip: (float) Limit for absolute value of target policy smoothing noise.
    :param train_freq: (int) Update the model every `train_freq` steps.
    :param learning_starts: (int) how many steps of the model to collect transitions for before learning starts
    :param gradient_steps: (int) How many gradient update after each step
    :param random_exploration: (float) Probability of taking a random action (as in an epsilon-greedy strategy)
        This is not needed for TD3 normally but can help exploring when using HER + TD3.
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param full_tensorboard_log: (bool) enable additional logging when using tensorboard
        Note: this has no effect on TD3 logging for now
    :param seed: (int) Seed for the pseudo-random generators (python, numpy, tensorflow, env).
    :param n_cpu_tf_sess: (int) The number of threads for TensorFlow operations (set once per process)
    :param replay_buffer_class: (type) Replay buffer class to use (e.g. ``HerReplayBuffer``; default ``ReplayBuffer``)
    :param replay_buffer_kwargs: (dict) Keyword arguments of the replay buffer (e.g. ``n_sampled_goal``)
    :param optimize_memory_usage: (bool) Enable a memory efficient variant of the replay buffer (each observation is
        stored once)
    """

    _not_saved_arguments = {"use_sde": "only False is accepted (stable-baselines3 has no gSDE for TD3)"}
    _save_schema = dict(
        learning_rate=ms.Schedule(), buffer_size=ms.Integer(1), learning_starts=ms.Integer(0),
        train_freq=ms.Integer(1), batch_size=ms.Integer(1), tau=ms.Real(), policy_delay=ms.Integer(1),
        target_noise_clip=ms.Real(), target_policy_noise=ms.Real(), gamma=ms.Real(), action_noise=ms.Noise(),
        random_exploration=ms.Real(), gradient_steps=ms.Integer(0), **REPLAY_BUFFER_SCHEMA)
    _supported_action_spaces = (gym.spaces.Box,)
    _target_policy_attr = "target_policy_tf"

    def __init__(self, policy, env, gamma=0.99, learning_rate=3e-4, buffer_size=50000, learning_starts=100,
                 train_freq=100, gradient_steps=100, batch_size=128, tau=0.005, policy_delay=2, action_noise=None,
                 target_policy_noise=0.2, target_noise_clip=0.5, random_exploration=0.0, verbose=0,
                 tensorboard_log=None, _init_setup_model=True, policy_kwargs=None, full_tensorboard_log=False,
                 seed=None, n_cpu_tf_sess=None, replay_buffer_class=None, replay_buffer_kwargs=None,
                 optimize_memory_usage=False, use_sde=False):
        check_hyperparameters(type(self).__name__, locals())
        refuse_sde("TD3", use_sde)  # stable-baselines3 has no gSDE for TD3
        super().__init__(policy, env, TD3Policy, gamma=gamma, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, train_freq=train_freq, batch_size=batch_size, tau=tau,
                         gradient_steps=gradient_steps, action_noise=action_noise,
                         random_exploration=random_exploration, verbose=verbose, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, full_tensorboard_log=full_tensorboard_log, seed=seed,
                         n_cpu_tf_sess=n_cpu_tf_sess, replay_buffer_class=replay_buffer_class,
                         replay_buffer_kwargs=replay_buffer_kwargs, optimize_memory_usage=optimize_memory_usage)
        self.policy_delay = policy_delay
        self.target_noise_clip = target_noise_clip
        self.target_policy_noise = target_policy_noise

        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        policy_tf, target_policy = self._build_policies(TD3Policy)
        for network in (policy_tf, target_policy):
            network.make_actor()
            network.make_critics()
        self._actor_vars = policy_tf.actor_variables()
        self._critic_vars = policy_tf.critic_variables()
        self._source_vars = self._actor_vars + self._critic_vars
        self._target_vars = target_policy.actor_variables() + target_policy.critic_variables()
        self._init_targets(self._target_vars, self._source_vars)
        self.policy_optimizer = Adam(self._actor_vars, name="policy_adam")
        self.qvalues_optimizer = Adam(self._critic_vars, name="qvalues_adam")
        self._finish_setup()

    # ------------------------------------------------------------------ train step
    def _build_train_step(self, n_steps: int, update_policy) -> TrainStep:
        policy, target_policy = self.policy_tf, self.target_policy_tf
        actor_vars, critic_vars = self._actor_vars, self._critic_vars
        source_vars, target_vars = self._source_vars, self._target_vars
        policy_optimizer, qvalues_optimizer = self.policy_optimizer, self.qvalues_optimizer
        gamma, tau = float(self.gamma), float(self.tau)
        noise_std, noise_clip = float(self.target_policy_noise), float(self.target_noise_clip)

        def one_step(obs, actions, rewards, next_obs, dones, lr, seed, do_policy):
            rewards = rewards[:, None]
            dones = dones[:, None]
            target_action = target_policy.actor(next_obs)
            target_noise = tf.random.stateless_normal(tf.shape(target_action), seed=seed, stddev=noise_std)
            target_noise = tf.clip_by_value(target_noise, -noise_clip, noise_clip)
            noisy_target_action = tf.clip_by_value(target_action + target_noise, -1.0, 1.0)
            # the minimum over the target critics (SB2: min(qf1, qf2))
            target_qfs = target_policy.q_values(target_policy.critic_features(next_obs), noisy_target_action)
            min_qf_target = target_qfs[0]
            for target_qf in target_qfs[1:]:
                min_qf_target = tf.minimum(min_qf_target, target_qf)
            q_backup = tf.stop_gradient(rewards + (1.0 - dones) * gamma * min_qf_target)
            with tf.GradientTape() as tape:
                qfs = policy.q_values(policy.critic_features(obs), actions)
                qf_losses = [tf.reduce_mean((q_backup - qf) ** 2) for qf in qfs]
                qvalues_losses = tf.add_n(qf_losses)
            qvalue_grads = tape.gradient(qvalues_losses, critic_vars)
            # the policy loss of SB2 is computed with the critics of before this step's critic update
            if do_policy is True:
                policy_loss = policy_update_pre(obs, lr, qvalue_grads)
            elif do_policy is False:
                qvalues_optimizer.apply(qvalue_grads, lr)
                policy_loss = tf.constant(0.0)
            else:
                policy_loss = tf.cond(do_policy, lambda: policy_update_pre(obs, lr, qvalue_grads),
                                      lambda: critic_only(qvalue_grads, lr))
            return tf.stack(qf_losses + [policy_loss])

        def critic_only(qvalue_grads, lr):
            qvalues_optimizer.apply(qvalue_grads, lr)
            return tf.constant(0.0)

        def policy_update_pre(obs, lr, qvalue_grads):
            with tf.GradientTape() as tape:
                qf1_pi = policy.critic("qf1", policy.critic_features(obs), policy.actor(obs))
                policy_loss = -tf.reduce_mean(qf1_pi)
            policy_grads = tape.gradient(policy_loss, actor_vars)
            qvalues_optimizer.apply(qvalue_grads, lr)
            policy_optimizer.apply(policy_grads, lr)
            polyak_update(target_vars, source_vars, tau)
            return policy_loss

        # flags[k]: update the actor and the targets too after gradient step k
        return self._k_step_train_step(one_step, n_steps, update_policy, networks=(policy, target_policy),
                                       name="td3_train")

    # ------------------------------------------------------------------ collection
    def _explore_step(self, obs: np.ndarray) -> np.ndarray:
        return self.policy_tf.step(obs)

    def _trains_after(self, step: int, timestep: int) -> bool:
        return step % self.train_freq == 0

    @property
    def _flag_period(self) -> int:
        return self.policy_delay

    @property
    def _train_stat_names(self):
        """The statistics of a train step: one loss per critic, then the policy loss (0 in steps without an actor
        update)."""
        return self._stats_names() + ["policy_loss"]

    def _train(self, plan, state, writer) -> np.ndarray:
        flags, lr = plan
        stats = self._run_train(flags, lr)
        n_critics = len(self._stats_names())
        if writer is not None:
            values = dict(zip(self._stats_names(), stats[:n_critics]))
            values["learning_rate"] = lr
            if any(flags):
                values["policy_loss"] = stats[n_critics]
            writer.add_scalars(values, self.num_timesteps)
        return stats[:n_critics]

    def _stats_names(self):
        if self.policy_tf is None:
            return list(STATS_NAMES)
        return [f"{name}_loss" for name in self.policy_tf.qf_names]

    @learn_doc("TD3")
    def learn(self, total_timesteps, callback=None, log_interval=4, tb_log_name="TD3", reset_num_timesteps=True,
              replay_wrapper=None, progress_bar: bool = False):
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, replay_wrapper,
                           progress_bar)

    # ------------------------------------------------------------------ predict
    def action_probability(self, observation, state=None, mask=None, actions=None, logp=False):
        """
        TD3 has no action distribution to report (its policy is deterministic): this warns and returns None,
        as stable-baselines 2.

        :param observation: (np.ndarray) the input observation
        :param state: (np.ndarray) unused (no recurrent policy)
        :param mask: (np.ndarray) unused (no recurrent policy)
        :param actions: (np.ndarray) must be None
        :param logp: (bool) unused
        :return: None
        :raises ValueError: when ``actions`` is given (TD3 cannot compute their probability)
        """
        _ = np.array(observation)
        if actions is not None:
            raise ValueError("Error: TD3 does not have action probabilities.")
        warnings.warn("Warning: action probability is meaningless for TD3. Returning None")
        return None

    def _predict_step(self, observation: np.ndarray, deterministic: bool) -> np.ndarray:
        # the actor's action, plus action_noise (clipped to [-1, 1]) when not deterministic and noise is set
        actions = self.policy_tf.step(observation)
        if self.action_noise is not None and not deterministic:
            actions = np.clip(actions + self.action_noise(), -1, 1)
        return actions

    # ------------------------------------------------------------------ behaviour cloning
    def _deterministic_actor(self, obs):
        return self.policy_tf.actor(obs)


__all__ = ["TD3"]
