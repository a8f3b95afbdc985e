"""Truncated Quantile Critics (sb3-contrib ``TQC``) on sbtf's off-policy core.

One gradient step is sb3-contrib's: the entropy coefficient update (``ent_coef='auto'``), the critic update towards
the truncated quantile target (the next-state quantiles of all target critics pooled and sorted, the top
``top_quantiles_to_drop_per_net * n_critics`` dropped, the entropy term subtracted), the actor update against the
updated critic's mean quantile, and the Polyak update of the target critic every ``target_update_interval`` gradient
steps. The ``gradient_steps`` steps of a training run in one compiled call, traced once per count; acting with an Mlp
actor is a NumPy forward pass on weights the train call returns.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common import model_schema as ms
from sbtf.common.fast_call import TrainStep
from sbtf.common.math_util import unscale_action
from sbtf.common.off_policy_algorithm import learn_doc
from sbtf.common.off_policy_ops import polyak_update
from sbtf.common.sde import SDE_EPSILON, gaussian_log_prob, sde_log_std
from sbtf.contrib.common.off_policy import ContribOffPolicyAlgorithm, contrib_save_schema
from sbtf.contrib.common.optim import TorchAdam, make_optimizer
from sbtf.contrib.common.quantiles import quantile_huber_loss, truncated_quantile_target
from sbtf.contrib.tqc.policies import TQCPolicy

_HALF_LOG_2PI = 0.5 * np.log(2.0 * np.pi)


def squashed_gaussian_sample(mean, log_std, noise):
    """
    sb3's ``SquashedDiagGaussianDistribution``: ``action = tanh(mean + std * noise)`` and its log-probability
    ``sum(log N(x; mean, std)) - sum(log(1 - action^2 + 1e-6))`` (TF).

    :return: (action (batch, n), log_prob (batch,))
    """
    gaussian = mean + tf.exp(log_std) * noise
    action = tf.tanh(gaussian)
    log_prob = tf.reduce_sum(-0.5 * tf.square(noise) - log_std - _HALF_LOG_2PI, axis=-1)
    log_prob -= tf.reduce_sum(tf.math.log(1.0 - tf.square(action) + 1e-6), axis=-1)
    return action, log_prob


def squashed_sde_sample(mean, latent, std, noise):
    """
    sb3's gSDE ``StateDependentNoiseDistribution`` with ``squash_output=True, learn_features=True`` (sbtf's SAC
    maths): the exploration matrix ``E = std * noise`` (differentiable in ``log_std``, sb3's ``rsample``), the action
    ``tanh(mean + latent @ E)`` and its log-probability under ``N(mean, sqrt(latent**2 @ std**2 + 1e-6))`` with the
    tanh correction ``- sum(log(1 - action^2 + 1e-6))`` (TF).

    :param noise: (latent_dim, action_dim) standard normal draws (one matrix for the whole batch, as sb3 in training)
    :return: (action (batch, n), log_prob (batch,))
    """
    gaussian = mean + tf.matmul(latent, std * noise)
    action = tf.tanh(gaussian)
    log_prob = gaussian_log_prob(gaussian, mean, sde_log_std(latent, std))
    log_prob -= tf.reduce_sum(tf.math.log(1.0 - tf.square(action) + SDE_EPSILON), axis=-1)
    return action, log_prob


class TQC(ContribOffPolicyAlgorithm):
    """
    Controlling Overestimation Bias with Truncated Mixture of Continuous Distributional Quantile Critics.
    Paper: https://arxiv.org/abs/2005.04269

    :param policy: (TQCPolicy or str) The policy model to use (MlpPolicy, CnnPolicy)
    :param env: (gymnasium.Env, VecEnv or str) The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: (float or callable) learning rate for adam optimizer, the same learning rate will be used
        for all networks (Q-Values, Actor and Value function); it can be a function of the current progress remaining
        (from 1 to 0)
    :param buffer_size: (int) size of the replay buffer
    :param learning_starts: (int) how many steps of the model to collect transitions for before learning starts
    :param batch_size: (int) Minibatch size for each gradient update
    :param tau: (float) the soft update coefficient ("Polyak update", between 0 and 1)
    :param gamma: (float) the discount factor
    :param train_freq: (int or (int, str)) Update the model every ``train_freq`` steps. Alternatively pass a tuple of
        frequency and unit like ``(5, "step")`` or ``(2, "episode")``.
    :param gradient_steps: (int) How many gradient update after each step (``-1``: as many as env steps collected)
    :param action_noise: (ActionNoise) the action noise type (None by default)
    :param replay_buffer_class: must be None (sbtf's ReplayBuffer)
    :param replay_buffer_kwargs: must be None
    :param optimize_memory_usage: must be False
    :param n_steps: must be 1 (n-step returns are not implemented)
    :param ent_coef: (str or float) Entropy regularization coefficient; 'auto' to learn it (and 'auto_0.1' for using
        0.1 as initial value)
    :param target_update_interval: (int) update the target network every ``target_update_interval`` gradient steps
    :param target_entropy: (str or float) target entropy when learning ``ent_coef`` (``ent_coef = 'auto'``)
    :param top_quantiles_to_drop_per_net: (int) Number of quantiles to drop per network
    :param use_sde: (bool) generalized State-Dependent Exploration (gSDE) instead of independent Gaussian noise (see
        ``sbtf.common.sde`` and docs/gsde.md; policy_kwargs ``log_std_init``, ``use_expln``, ``full_std``,
        ``clip_mean``)
    :param sde_sample_freq: (int) resample the gSDE exploration matrix every n steps (-1: only when a collection of
        ``train_freq`` steps starts)
    :param use_sde_at_warmup: (bool) act with gSDE instead of uniform random actions before ``learning_starts``
    :param stats_window_size: (int) Window size for the rollout logging (episodes)
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param verbose: (int) the verbosity level: 0 no output, 1 info, 2 debug
    :param seed: (int) Seed for the pseudo random generators
    :param device: (str) kept for sb3-contrib's signature: sbtf runs on TensorFlow's default device
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    """

    _save_schema = contrib_save_schema(
        action_noise=ms.Noise(), ent_coef=ms.AnyOf(ms.Real(), ms.Text(("auto",), prefixes=True)),
        target_update_interval=ms.Integer(1), target_entropy=ms.AnyOf(ms.Real(), ms.Text(("auto",))),
        top_quantiles_to_drop_per_net=ms.Integer(0), use_sde=ms.Flag(), sde_sample_freq=ms.Integer(),
        use_sde_at_warmup=ms.Flag())
    _supported_action_spaces = (gym.spaces.Box,)
    _action_storage = "scaled"

    def __init__(self, policy, env, learning_rate=3e-4, buffer_size: int = 1000000, learning_starts: int = 100,
                 batch_size: int = 256, tau: float = 0.005, gamma: float = 0.99, train_freq=1,
                 gradient_steps: int = 1, action_noise=None, replay_buffer_class=None,
                 replay_buffer_kwargs: Optional[Dict[str, Any]] = None, optimize_memory_usage: bool = False,
                 n_steps: int = 1, ent_coef="auto", target_update_interval: int = 1, target_entropy="auto",
                 top_quantiles_to_drop_per_net: int = 2, use_sde: bool = False, sde_sample_freq: int = -1,
                 use_sde_at_warmup: bool = False, stats_window_size: int = 100, tensorboard_log: Optional[str] = None,
                 policy_kwargs: Optional[Dict[str, Any]] = None, verbose: int = 0, seed: Optional[int] = None,
                 device: str = "auto", _init_setup_model: bool = True):
        super().__init__(policy, env, TQCPolicy, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, batch_size=batch_size, tau=tau, gamma=gamma,
                         train_freq=train_freq, gradient_steps=gradient_steps, action_noise=action_noise,
                         replay_buffer_class=replay_buffer_class, replay_buffer_kwargs=replay_buffer_kwargs,
                         optimize_memory_usage=optimize_memory_usage, n_steps=n_steps,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device)
        self.target_entropy = target_entropy
        self.log_ent_coef = None
        self.ent_coef = ent_coef
        self.target_update_interval = target_update_interval
        self.top_quantiles_to_drop_per_net = top_quantiles_to_drop_per_net
        self.use_sde = use_sde
        self.sde_sample_freq = sde_sample_freq
        self.use_sde_at_warmup = use_sde_at_warmup
        self.ent_coef_optimizer = None
        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        base_kwargs = self.policy_kwargs
        if self.use_sde:  # gSDE is the algorithm's argument; the policy is built with it (as SAC)
            self.policy_kwargs = dict(base_kwargs or {}, use_sde=True)
        try:
            policy = self._build_policy(TQCPolicy)
        finally:
            self.policy_kwargs = base_kwargs
        self.actor, self.critic, self.critic_target = policy.actor, policy.critic, policy.critic_target
        n_target = policy.critic.quantiles_total - int(self.top_quantiles_to_drop_per_net) * policy.n_critics
        if not 0 < n_target <= policy.critic.quantiles_total:
            raise ValueError(f"Error: top_quantiles_to_drop_per_net={self.top_quantiles_to_drop_per_net} leaves "
                             f"{n_target} of the {policy.critic.quantiles_total} target quantiles; it must leave at "
                             "least one.")
        if isinstance(self.target_entropy, str):
            if self.target_entropy != "auto":
                raise ValueError(f"Error: target_entropy must be 'auto' or a number, got {self.target_entropy!r}.")
            self._target_entropy_value = float(-np.prod(self.action_space.shape).astype(np.float32))
        else:
            self._target_entropy_value = float(self.target_entropy)
        self.log_ent_coef = None
        if isinstance(self.ent_coef, str):
            if not self.ent_coef.startswith("auto"):
                raise ValueError(f"Error: ent_coef must be a number, 'auto' or 'auto_<initial value>', got "
                                 f"{self.ent_coef!r}.")
            init_value = 1.0
            if "_" in self.ent_coef:
                init_value = float(self.ent_coef.split("_")[1])
                if not init_value > 0.0:
                    raise ValueError("Error: the initial value of ent_coef must be greater than 0")
            self.log_ent_coef = tf.Variable(np.float32(np.log(init_value)), name="log_ent_coef")
            self.ent_coef_optimizer = TorchAdam([self.log_ent_coef], name="ent_coef_adam")
        else:
            self._ent_coef_value = float(self.ent_coef)
            self.ent_coef_optimizer = None
        self._actor_vars = policy.actor_variables()
        self._critic_vars = policy.critic_variables()
        self._critic_source_vars = policy.critic_variables(with_shared=True)
        self._critic_target_vars = policy.critic_target_variables()
        self.actor_optimizer = make_optimizer(self._actor_vars, policy.optimizer_class, policy.optimizer_kwargs,
                                              name="actor_adam")
        self.critic_optimizer = make_optimizer(self._critic_vars, policy.optimizer_class, policy.optimizer_kwargs,
                                               name="critic_adam")
        self._finish_setup()

    def _named_parameters(self):
        params = self.policy_tf.named_parameters("model")
        if self.log_ent_coef is not None:
            params["model/log_ent_coef:0"] = self.log_ent_coef
        return params

    @property
    def stats_names(self) -> List[str]:
        names = ["actor_loss", "critic_loss", "ent_coef"]
        if self.log_ent_coef is not None:
            names.append("ent_coef_loss")
        return names

    # ------------------------------------------------------------------ train step
    def _build_train_step(self, n_steps: int, variant) -> TrainStep:
        policy = self.policy_tf
        actor, critic, critic_target = policy.actor, policy.critic, policy.critic_target
        actor_vars, critic_vars = self._actor_vars, self._critic_vars
        source_vars, target_vars = self._critic_source_vars, self._critic_target_vars
        actor_opt, critic_opt, ent_opt = self.actor_optimizer, self.critic_optimizer, self.ent_coef_optimizer
        log_ent_coef = self.log_ent_coef
        fixed_ent_coef = None if log_ent_coef is not None else self._ent_coef_value
        target_entropy = self._target_entropy_value
        n_target = critic.quantiles_total - int(self.top_quantiles_to_drop_per_net) * policy.n_critics
        gamma, tau = float(self.gamma), float(self.tau)
        use_sde = policy.use_sde

        def sample(observations, noise):
            """The actor's squashed sample and its log-probability for the given standard normal draws."""
            if use_sde:
                return squashed_sde_sample(*actor.sde(observations), noise)
            return squashed_gaussian_sample(*actor.mean_log_std(observations), noise)

        def one_step(k, batch):
            obs, next_obs, lr = batch["obs"], batch["next_obs"], batch["learning_rate"]
            seed = tf.cast(batch["seeds"], tf.int32)
            if use_sde:  # one exploration matrix per gradient step, for the state and the next state (sb3)
                _, _, std = actor.sde(obs)
                noise = next_noise = tf.random.stateless_normal(tf.shape(std), seed=seed)
            else:
                noise = tf.random.stateless_normal(tf.shape(actor.mean_log_std(obs)[0]), seed=seed)
                next_noise = tf.random.stateless_normal(tf.shape(noise), seed=seed + 1)
            _, log_prob = sample(obs, noise)
            stats = []
            if log_ent_coef is not None:
                ent_coef = tf.exp(log_ent_coef)  # the value before this step's update (sb3: detached)
                with tf.GradientTape() as tape:
                    ent_coef_loss = -tf.reduce_mean(log_ent_coef * tf.stop_gradient(log_prob + target_entropy))
                ent_opt.apply(tape.gradient(ent_coef_loss, [log_ent_coef]), lr)
                ent_coef = tf.stop_gradient(ent_coef)
            else:
                ent_coef = tf.constant(fixed_ent_coef, tf.float32)
            # target quantiles
            next_actions, next_log_prob = sample(next_obs, next_noise)
            target_quantiles = truncated_quantile_target(critic_target.quantiles(next_obs, next_actions), n_target,
                                                         batch["rewards"], batch["dones"], gamma,
                                                         ent_coef * next_log_prob)
            # critic
            with tf.GradientTape() as tape:
                current = critic.quantiles(obs, batch["actions"])
                critic_loss = quantile_huber_loss(current, target_quantiles, sum_over_quantiles=False)
            critic_opt.apply(tape.gradient(critic_loss, critic_vars), lr)
            # actor, against the updated critic (the actor's sample is the one drawn above)
            with tf.GradientTape() as tape:
                actions_pi, log_prob = sample(obs, noise)
                qf_pi = tf.reduce_mean(critic.quantiles(obs, actions_pi), axis=[1, 2])
                actor_loss = tf.reduce_mean(ent_coef * log_prob - qf_pi)
            actor_opt.apply(tape.gradient(actor_loss, actor_vars), lr)
            # target critic (flag: this gradient step's index is a multiple of target_update_interval)
            tf.cond(batch["flags"] > 0.5, lambda: _polyak(target_vars, source_vars, tau), lambda: tf.constant(False))
            stats = [actor_loss, critic_loss, ent_coef]
            if log_ent_coef is not None:
                stats.append(ent_coef_loss)
            return tf.stack(stats)

        extra = {"seeds": tf.TensorSpec((n_steps, 2), tf.float32), "flags": tf.TensorSpec((n_steps,), tf.float32)}
        return self._k_step_train_step(one_step, n_steps, extra, name="tqc_train")

    def _extra_train_inputs(self, n_steps: int, offset: int) -> Dict[str, np.ndarray]:
        # sb3-contrib: the target follows after the gradient steps whose index in the training is a multiple of
        # target_update_interval; seeds below 2 ** 24 are exact in float32 (they travel in the packed input vector)
        flags = ((offset + np.arange(n_steps)) % int(self.target_update_interval) == 0).astype(np.float32)
        return {"seeds": np.random.randint(0, 2 ** 24, size=(n_steps, 2)).astype(np.float32), "flags": flags}

    # ------------------------------------------------------------------ collection and predict
    def _random_warmup(self) -> bool:
        return super()._random_warmup() and not (self.use_sde and self.use_sde_at_warmup)

    def _select_actions(self, obs: np.ndarray):
        if self.use_sde and self._rollout_steps == 0 and not self._random_warmup():
            # a collection of train_freq steps starts with new exploration matrices (sb3), then every sde_sample_freq
            policy = self.policy_tf
            policy.sde_noise.start_rollout(policy.sde_std_matrix(), obs.shape[0], self.sde_sample_freq)
        return super()._select_actions(obs)

    def _policy_actions(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        actions = self.policy_tf.step(obs, deterministic=deterministic).reshape((-1,) + self.action_space.shape)
        return unscale_action(self.action_space, actions)

    @learn_doc("TQC")
    def learn(self, total_timesteps, callback=None, log_interval=4, tb_log_name="TQC", reset_num_timesteps=True,
              progress_bar: bool = False):
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, None,
                           progress_bar)

    def predict(self, observation, state=None, episode_start=None, deterministic=False, mask=None):
        """
        Get the policy action from an observation, rescaled from [-1, 1] to the action space's bounds:
        ``tanh(mu)`` (deterministic) or a sample ``tanh(mu + std * N(0, 1))``.

        :param observation: (np.ndarray) the input observation (single or batch)
        :param state: unused (no recurrent policy); returned as is
        :param episode_start: unused
        :param deterministic: (bool) whether to return deterministic actions
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
    def _squashed_mean(self, obs):
        return tf.tanh(self.policy_tf.actor.mean_log_std(obs)[0])

    def _export_outputs(self, obs) -> Dict[str, tf.Tensor]:
        """The exported graph: ``unscale(tanh(mu))``, the Gaussian's mean and standard deviation."""
        mean, log_std = self.policy_tf.actor.mean_log_std(obs)
        low = tf.constant(np.asarray(self.action_space.low, np.float32))
        high = tf.constant(np.asarray(self.action_space.high, np.float32))
        return {"action": low + 0.5 * (tf.tanh(mean) + 1.0) * (high - low), "mean": mean, "std": tf.exp(log_std)}

    def _pretrain_output(self, obs):
        low = tf.constant(np.asarray(self.action_space.low, np.float32))
        high = tf.constant(np.asarray(self.action_space.high, np.float32))
        return low + 0.5 * (self._squashed_mean(obs) + 1.0) * (high - low)

    def _pretrain_variables(self) -> list:
        return list(self._actor_vars)


def _polyak(targets, sources, tau):
    polyak_update(targets, sources, tau)
    return tf.constant(False)


__all__ = ["TQC", "squashed_gaussian_sample", "squashed_sde_sample"]
