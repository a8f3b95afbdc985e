"""Soft Actor-Critic (stable-baselines 2.x ``SAC``: the first SAC paper's version, with a state-value network).

One gradient step (actor, V and twin-Q losses on the same minibatch with the pre-update weights, the three Adam
updates, the entropy coefficient update when it is learned, and the Polyak update of the target V network when
due) is one compiled ``tf.function`` call with a fixed input signature; ``gradient_steps`` steps that follow each
other run in one call. Acting with an Mlp actor is a NumPy forward pass on weights that the train call returns.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import List

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.algo.off_policy_actor_critic import ActorCriticOffPolicyAlgorithm
from sbtf.common.algo.off_policy_algorithm import REPLAY_BUFFER_SCHEMA, learn_doc
from sbtf.common.algo.off_policy_ops import polyak_update
from sbtf.common.optimizers import Adam
from sbtf.common.nn.sde import gaussian_log_prob, sde_log_std
from sbtf.common.math_util import unscale_action
from sbtf.sac.policies import SACPolicy, apply_squashing_func, gaussian_entropy, gaussian_likelihood
from sbtf.common.fileio import model_schema as ms
from sbtf.common.arg_checks import check_hyperparameters


class SAC(ActorCriticOffPolicyAlgorithm):
    """
    Soft Actor-Critic (SAC)
    Off-Policy Maximum Entropy Deep Reinforcement Learning with a Stochastic Actor,
    This implementation borrows code from original implementation (https://github.com/haarnoja/sac)
    from OpenAI Spinning Up (https://github.com/openai/spinningup) and from the Softlearning repo
    (https://github.com/rail-berkeley/softlearning/)
    Paper: https://arxiv.org/abs/1801.01290
    Introduction to SAC: https://spinningup.openai.com/en/latest/algorithms/sac.html

    :param policy: (SACPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, LnMlpPolicy, ...)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str)
    :param gamma: (float) the discount factor
    :param learning_rate: (float or callable) learning rate for adam optimizer,
        the same learning rate will be used for all networks (Q-Values, Actor and Value function)
        it can be a function of the current progress (from 1 to 0)
    :param buffer_size: (int) size of the replay buffer
    :param batch_size: (int) Minibatch size for each gradient update
    :param tau: (float) the soft update coefficient ("polyak update", between 0 and 1)
    :param ent_coef: (str or float) Entropy regularization coefficient. (Equivalent to
        inverse of reward scale in the original SAC paper.)  Controlling exploration/exploitation trade-off.
        Set it to 'auto' to learn it automatically (and 'auto_0.1' for using 0.1 as initial value)
    :param train_freq: (int) Update the model every `train_freq` steps.
    :param learning_starts: (int) how many steps of the model to collect transitions for before learning starts
    :param target_update_interval: (int) update the target network every `target_network_update_freq` steps.
    :param gradient_steps: (int) How many gradient update after each step
    :param target_entropy: (str or float) target entropy when learning ent_coef (ent_coef = 'auto')
    :param action_noise: (ActionNoise) the action noise type (None by default), this can help
        for hard exploration problem. Cf DDPG for the different action noise type.
    :param random_exploration: (float) Probability of taking a random action (as in an epsilon-greedy strategy)
        This is not needed for SAC normally but can help exploring when using HER + SAC.
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param full_tensorboard_log: (bool) enable additional logging when using tensorboard
        Note: this has no effect on SAC logging for now
    :param seed: (int) Seed for the pseudo-random generators (python, numpy, tensorflow, env).
    :param n_cpu_tf_sess: (int) The number of threads for TensorFlow operations (set once per process)
    :param replay_buffer_class: (type) Replay buffer class to use (e.g. ``HerReplayBuffer``; default ``ReplayBuffer``)
    :param replay_buffer_kwargs: (dict) Keyword arguments of the replay buffer (e.g. ``n_sampled_goal``)
    :param optimize_memory_usage: (bool) Enable a memory efficient variant of the replay buffer (each observation is
        stored once)
    :param use_sde: (bool) generalized State-Dependent Exploration (gSDE) instead of independent action noise
        (see ``sbtf.common.nn.sde``; policy_kwargs ``log_std_init``, ``use_expln``, ``full_std``, ``clip_mean``)
    :param sde_sample_freq: (int) resample the gSDE exploration matrix every n steps (-1: only when a collection of
        ``train_freq`` steps starts)
    :param use_sde_at_warmup: (bool) act with gSDE instead of uniform random actions before ``learning_starts``
    """

    _save_schema = dict(
        learning_rate=ms.Schedule(), buffer_size=ms.Integer(1), learning_starts=ms.Integer(0),
        train_freq=ms.Integer(1), batch_size=ms.Integer(1), tau=ms.Real(),
        ent_coef=ms.AnyOf(ms.Real(), ms.Text(("auto",), prefixes=True)),
        target_entropy=ms.AnyOf(ms.Real(), ms.Text(("auto",))), gamma=ms.Real(), action_noise=ms.Noise(),
        random_exploration=ms.Real(), target_update_interval=ms.Integer(1), gradient_steps=ms.Integer(0),
        **REPLAY_BUFFER_SCHEMA,
        use_sde=ms.Flag(), sde_sample_freq=ms.Integer(-1), use_sde_at_warmup=ms.Flag())
    _supported_action_spaces = (gym.spaces.Box,)
    #: SB2's graph subtracts ``ent_coef * logp_pi`` (shape (B,)) from ``min_qf_pi`` (shape (B, 1)), a (B, B) broadcast,
    #: so its value network regresses towards ``min Q(s, pi(s)) - ent_coef * mean_batch(logp_pi)``: the entropy term
    #: of every state is replaced by the batch mean. sbtf computes the intended per-sample target
    #: ``min Q(s, pi(s)) - ent_coef * logp_pi(s)`` (the first SAC paper's, Spinning Up's); set this to True (on the
    #: class or the instance, before the first ``learn``) to reproduce SB2's loss exactly.
    sb2_value_target_broadcast = False
    def __init__(self, policy, env, gamma=0.99, learning_rate=3e-4, buffer_size=50000, learning_starts=100,
                 train_freq=1, batch_size=64, tau=0.005, ent_coef='auto', target_update_interval=1, gradient_steps=1,
                 target_entropy='auto', action_noise=None, random_exploration=0.0, verbose=0, tensorboard_log=None,
                 _init_setup_model=True, policy_kwargs=None, full_tensorboard_log=False, seed=None,
                 n_cpu_tf_sess=None, replay_buffer_class=None, replay_buffer_kwargs=None,
                 optimize_memory_usage=False, use_sde=False, sde_sample_freq=-1, use_sde_at_warmup=False):
        check_hyperparameters(type(self).__name__, locals())
        self.use_sde = bool(use_sde)
        self.sde_sample_freq = int(sde_sample_freq)
        self.use_sde_at_warmup = bool(use_sde_at_warmup)
        self._sde_collected = 0
        super().__init__(policy, env, SACPolicy, gamma=gamma, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, train_freq=train_freq, batch_size=batch_size, tau=tau,
                         gradient_steps=gradient_steps, action_noise=action_noise,
                         random_exploration=random_exploration, verbose=verbose, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, full_tensorboard_log=full_tensorboard_log, seed=seed,
                         n_cpu_tf_sess=n_cpu_tf_sess, replay_buffer_class=replay_buffer_class,
                         replay_buffer_kwargs=replay_buffer_kwargs, optimize_memory_usage=optimize_memory_usage)
        self.ent_coef = ent_coef
        self.target_update_interval = target_update_interval
        self.target_entropy = target_entropy
        self.log_ent_coef = None

        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        if self.use_sde:
            base_kwargs = self.policy_kwargs
            self.policy_kwargs = dict(base_kwargs or {}, use_sde=True)
            try:
                policy_tf, target_policy = self._build_policies(SACPolicy)
            finally:
                self.policy_kwargs = base_kwargs
        else:
            policy_tf, target_policy = self._build_policies(SACPolicy)
        policy_tf.make_actor()
        policy_tf.make_critics(create_vf=True, create_qf=True)
        target_policy.make_critics(create_vf=True, create_qf=False)

        if isinstance(self.target_entropy, str):
            if self.target_entropy != 'auto':
                raise ValueError(f"Error: target_entropy must be 'auto' or a number, got {self.target_entropy!r}.")
            self._target_entropy_value = float(-np.prod(self.action_space.shape).astype(np.float32))
            self.target_entropy = self._target_entropy_value
        else:
            self._target_entropy_value = float(self.target_entropy)

        self.log_ent_coef = None
        if isinstance(self.ent_coef, str):
            if not self.ent_coef.startswith('auto'):
                raise ValueError(f"Error: ent_coef must be a number, 'auto' or 'auto_<initial value>', got "
                                 f"{self.ent_coef!r}.")
            init_value = 1.0
            if '_' in self.ent_coef:
                init_value = float(self.ent_coef.split('_')[1])
                if not init_value > 0.0:
                    raise ValueError("Error: the initial value of ent_coef must be greater than 0")
            self.log_ent_coef = tf.Variable(np.log(init_value).astype(np.float32), name="log_ent_coef")
        else:
            self._ent_coef_value = float(self.ent_coef)

        self._actor_vars = self.policy_tf.actor_variables()
        self._critic_vars = self.policy_tf.critic_variables()
        # SB2 pairs target/values_fn with model/values_fn in creation order: the critics' CNN, then vf
        self._target_vars = self.target_policy.critic_network_variables(["vf"])
        self._target_source_vars = self.policy_tf.critic_network_variables(["vf"])
        self._init_targets(self._target_vars, self._target_source_vars)
        self.policy_optimizer = Adam(self._actor_vars, name="policy_adam")
        self.value_optimizer = Adam(self._critic_vars, name="value_adam")
        self.entropy_optimizer = Adam([self.log_ent_coef], name="entropy_adam") \
            if self.log_ent_coef is not None else None
        self._finish_setup()

    def _extra_model_parameters(self) -> "OrderedDict[str, tf.Variable]":
        if self.log_ent_coef is None:
            return OrderedDict()
        return OrderedDict([("model/log_ent_coef:0", self.log_ent_coef)])

    def _get_save_data(self) -> dict:
        data = super()._get_save_data()
        # SB2 writes the float when fixed, else 'auto' (the learned value is the model/log_ent_coef parameter)
        data["ent_coef"] = self.ent_coef if not isinstance(self.ent_coef, str) else 'auto'
        return data

    @property
    def stats_names(self) -> List[str]:
        qf_names = self.policy_tf.qf_names if self.policy_tf is not None else ["qf1", "qf2"]
        names = ['policy_loss'] + [f"{name}_loss" for name in qf_names] + ['value_loss', 'entropy']
        if self.log_ent_coef is not None:
            names += ['ent_coef_loss', 'ent_coef']
        return names

    @property
    def _train_stat_names(self) -> List[str]:
        return self.stats_names

    # ------------------------------------------------------------------ train step
    def _build_train_step(self, n_steps: int, update_target) -> TrainStep:
        policy, target_policy = self.policy_tf, self.target_policy
        actor_vars, critic_vars = self._actor_vars, self._critic_vars
        target_vars, target_source_vars = self._target_vars, self._target_source_vars
        policy_optimizer, value_optimizer, entropy_optimizer = (self.policy_optimizer, self.value_optimizer,
                                                                self.entropy_optimizer)
        log_ent_coef = self.log_ent_coef
        fixed_ent_coef = None if log_ent_coef is not None else self._ent_coef_value
        target_entropy = self._target_entropy_value
        gamma = float(self.gamma)
        tau = float(self.tau)
        sb2_broadcast = bool(self.sb2_value_target_broadcast)

        def one_step(obs, actions, rewards, next_obs, dones, lr, seed, do_target):
            rewards = rewards[:, None]
            dones = dones[:, None]
            value_target = target_policy.critic("vf", target_policy.critic_features(next_obs))
            q_backup = tf.stop_gradient(rewards + (1.0 - dones) * gamma * value_target)
            with tf.GradientTape(persistent=True) as tape:
                if policy.use_sde:  # one exploration matrix per gradient step, differentiable (SB3's rsample)
                    mu_, latent, std = policy.actor_sde(obs)
                    log_std = sde_log_std(latent, std)
                    pi_ = mu_ + tf.matmul(latent, std * tf.random.stateless_normal(tf.shape(std), seed=seed + 1))
                    logp_pi = gaussian_log_prob(pi_, mu_, log_std)
                else:
                    mu_, log_std = policy.actor_mu_log_std(obs)
                    pi_ = mu_ + tf.random.stateless_normal(tf.shape(mu_), seed=seed) * tf.exp(log_std)
                    logp_pi = gaussian_likelihood(pi_, mu_, log_std)
                entropy = tf.reduce_mean(gaussian_entropy(log_std))
                _, policy_out, logp_pi = apply_squashing_func(mu_, pi_, logp_pi)
                features = policy.critic_features(obs)
                qfs = policy.q_values(features, actions)
                value_fn = policy.critic("vf", features)
                qfs_pi = policy.q_values(features, policy_out)
                ent_coef = tf.exp(log_ent_coef) if log_ent_coef is not None else fixed_ent_coef
                # the minimum over the critics (SB2: min(qf1_pi, qf2_pi))
                min_qf_pi = qfs_pi[0]
                for qf_pi in qfs_pi[1:]:
                    min_qf_pi = tf.minimum(min_qf_pi, qf_pi)
                qf_losses = [0.5 * tf.reduce_mean((q_backup - qf) ** 2) for qf in qfs]
                ent_coef_loss = None
                if log_ent_coef is not None:
                    ent_coef_loss = -tf.reduce_mean(log_ent_coef * tf.stop_gradient(logp_pi + target_entropy))
                # SB2: reduce_mean(ent_coef * logp_pi (B,) - qf1_pi (B, 1)), a (B, B) broadcast whose mean is this
                policy_loss = tf.reduce_mean(ent_coef * logp_pi) - tf.reduce_mean(qfs_pi[0])
                value_loss = sac_value_loss(value_fn[:, 0], min_qf_pi[:, 0], ent_coef * logp_pi,
                                            sb2_broadcast=sb2_broadcast)
                values_losses = tf.add_n(qf_losses) + value_loss
            policy_optimizer.apply(tape.gradient(policy_loss, actor_vars), lr)
            value_optimizer.apply(tape.gradient(values_losses, critic_vars), lr)
            stats = [policy_loss] + qf_losses + [value_loss, entropy]
            if log_ent_coef is not None:
                entropy_optimizer.apply(tape.gradient(ent_coef_loss, [log_ent_coef]), lr)
                stats += [ent_coef_loss, tf.exp(log_ent_coef)]
            del tape
            if do_target is True:
                polyak_update(target_vars, target_source_vars, tau)
            elif do_target is not False:
                tf.cond(do_target, lambda: _polyak(target_vars, target_source_vars, tau), lambda: tf.constant(False))
            return tf.stack(stats)

        # flags[k]: update the target V after gradient step k
        return self._k_step_train_step(one_step, n_steps, update_target, networks=(policy, target_policy),
                                       name="sac_train")

    # ------------------------------------------------------------------ collection
    def _explore_step(self, obs: np.ndarray) -> np.ndarray:
        if self.use_sde:  # a collection of train_freq steps starts with a new exploration matrix (SB3)
            if self._sde_collected % max(int(self.train_freq), 1) == 0:
                self.policy_tf.sde_noise.start_rollout(self.policy_tf.sde_std_matrix(), len(obs), self.sde_sample_freq)
            self._sde_collected += 1
        return self.policy_tf.step(obs, deterministic=False)

    def _select_actions(self, obs: np.ndarray):
        if self.use_sde and self.use_sde_at_warmup and self.num_timesteps < self.learning_starts:
            action = np.asarray(self._explore_step(obs), np.float32).reshape((obs.shape[0],) + self.action_space.shape)
            return action, unscale_action(self.action_space, action)
        return super()._select_actions(obs)

    def _trains_after(self, step: int, timestep: int) -> bool:
        return timestep % self.train_freq == 0

    @property
    def _flag_period(self) -> int:
        return self.target_update_interval

    def _train(self, plan, state, writer) -> np.ndarray:
        flags, lr = plan
        stats = self._run_train(flags, lr)
        if writer is not None:
            writer.add_scalars({name: value for name, value in zip(self.stats_names, stats)}, self.num_timesteps)
            writer.add_scalar("learning_rate", lr, self.num_timesteps)
        return stats

    def _stats_names(self):
        return self.stats_names

    @learn_doc("SAC")
    def learn(self, total_timesteps, callback=None, log_interval=4, tb_log_name="SAC", reset_num_timesteps=True,
              replay_wrapper=None, progress_bar: bool = False):
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, replay_wrapper,
                           progress_bar)

    # ------------------------------------------------------------------ predict
    def action_probability(self, observation, state=None, mask=None, actions=None, logp=False):
        """
        SAC has no action distribution to report (its Gaussian is squashed by a tanh, then scaled): this warns and
        returns None, as stable-baselines 2.

        :param observation: (np.ndarray) the input observation
        :param state: (np.ndarray) unused (no recurrent policy)
        :param mask: (np.ndarray) unused (no recurrent policy)
        :param actions: (np.ndarray) must be None
        :param logp: (bool) unused
        :return: None
        :raises ValueError: when ``actions`` is given (SAC cannot compute their probability)
        """
        if actions is not None:
            raise ValueError("Error: SAC does not have action probabilities.")
        warnings.warn("Even though SAC has a Gaussian policy, it cannot return a distribution as it "
                      "is squashed by a tanh before being scaled and outputed.")
        return None

    def _predict_step(self, observation: np.ndarray, deterministic: bool) -> np.ndarray:
        # tanh(mu) when deterministic, else tanh(mu + std * N(0, 1))
        return self.policy_tf.step(observation, deterministic=deterministic)

    # ------------------------------------------------------------------ behaviour cloning
    def _deterministic_actor(self, obs):
        mu_, _ = self.policy_tf.actor_mu_log_std(obs)
        return tf.tanh(mu_)


def sac_value_loss(value_fn, min_qf_pi, ent_logp, sb2_broadcast: bool = False):
    """
    SAC's state-value loss ``0.5 * mean((V(s) - v_backup)^2)`` with ``v_backup = min_qf_pi - ent_coef * logp_pi``
    (targets without gradient). All inputs have shape (B,).

    :param value_fn: (tf.Tensor) V(s) of the batch
    :param min_qf_pi: (tf.Tensor) min(Q1, Q2) at the current policy's sampled actions
    :param ent_logp: (tf.Tensor) ``ent_coef * logp_pi`` of those actions
    :param sb2_broadcast: (bool) SB2's (B, B) broadcast: ``0.5 * mean_ij (V_i - min_qf_pi_i + ent_logp_j)^2``
        (computed in O(B)), whose targets hold the batch mean of ``ent_logp`` instead of each sample's own
    :return: (tf.Tensor) the scalar loss
    """
    min_qf_pi = tf.stop_gradient(min_qf_pi)
    ent_logp = tf.stop_gradient(ent_logp)
    if not sb2_broadcast:
        return 0.5 * tf.reduce_mean((value_fn - (min_qf_pi - ent_logp)) ** 2)
    # mean_ij (d_i + c_j)^2 = mean(d^2) + 2 mean(d) mean(c) + mean(c^2)
    diff = value_fn - min_qf_pi
    return 0.5 * (tf.reduce_mean(diff ** 2) + 2.0 * tf.reduce_mean(diff) * tf.reduce_mean(ent_logp)
                  + tf.reduce_mean(ent_logp ** 2))


def _polyak(targets, sources, tau):
    polyak_update(targets, sources, tau)
    return tf.constant(True)


__all__ = ["SAC", "sac_value_loss"]
