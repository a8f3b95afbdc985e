"""Proximal Policy Optimization, stable-baselines3's ``PPO`` (arguments, defaults and maths) on sbtf's core.

One update: ``n_epochs`` passes over the rollout, each a new shuffle cut into minibatches of ``batch_size`` (the last
one truncated when ``batch_size`` does not divide ``n_steps * n_envs``); per minibatch the advantages are normalised
(``normalize_advantage``, unbiased std, when the minibatch has more than one sample), the loss is the clipped
surrogate + ``vf_coef`` x the MSE of the (optionally ``clip_range_vf``-clipped) values + ``ent_coef`` x the entropy loss
(``-mean(entropy)``, or ``mean(log_prob)`` without a closed form), the gradients are clipped to ``max_grad_norm`` and
PyTorch's Adam steps; a minibatch whose approximate KL ``mean((r - 1) - log r)`` exceeds ``1.5 * target_kl`` stops
the update before its step. All of it runs in one compiled call (:class:`~sbtf.common.compile.fast_call.TrainStep`).

sb3-contrib's ``MaskablePPO`` (``sbtf.contrib.ppo_mask``) is this class with masked distributions: it replaces the
inputs and the evaluation of the actions (:meth:`PPO._train_inputs`, :meth:`PPO._train_feed`,
:meth:`PPO._evaluate_actions`), the loss and the loops are these.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.fileio import model_schema as ms
from sbtf.common.base_class import SetVerbosity
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.optimizers import clip_grads
from sbtf.common.storage.rollout import RolloutBatch
from sbtf.common.schedules import get_schedule_fn
from sbtf.sb3.common.on_policy_algorithm import OnPolicyAlgorithm, normalize_advantages, warn_truncated_minibatch
from sbtf.sb3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy
from sbtf.common.arg_checks import check_hyperparameters

__all__ = ["PPO", "STAT_NAMES"]

#: the statistics of one update (SB3's ``train/`` keys), in the order the train step returns them
STAT_NAMES = ("policy_gradient_loss", "value_loss", "entropy_loss", "approx_kl", "clip_fraction", "loss")


class PPO(OnPolicyAlgorithm):
    """
    Proximal Policy Optimization algorithm (PPO) (clip version), stable-baselines3's arguments and defaults.

    Paper: https://arxiv.org/abs/1707.06347

    :param policy: (str or class) ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or an
        :class:`~sbtf.sb3.common.policies.ActorCriticPolicy` subclass
    :param env: (gymnasium.Env, VecEnv or str) the environment
    :param learning_rate: (float or callable) the learning rate, or a function of the remaining progress (1 -> 0)
    :param n_steps: (int) steps per environment per update (the rollout is ``n_steps * n_envs``)
    :param batch_size: (int) minibatch size
    :param n_epochs: (int) number of passes over the rollout per update
    :param gamma: (float) discount factor
    :param gae_lambda: (float) factor of the Generalized Advantage Estimator
    :param clip_range: (float or callable) clipping parameter of the policy ratio
    :param clip_range_vf: (float or callable) clipping parameter of the value function (None: no clipping); it
        depends on the reward scaling
    :param normalize_advantage: (bool) normalise the advantages of each minibatch
    :param ent_coef: (float) entropy coefficient
    :param vf_coef: (float) value function coefficient
    :param max_grad_norm: (float) the maximum global norm of the gradients
    :param use_sde: (bool) generalized State-Dependent Exploration instead of action noise (Box actions)
    :param sde_sample_freq: (int) resample the gSDE noise matrix every n steps (-1: only at the rollout start)
    :param rollout_buffer_class: (type) None (sbtf's ``RolloutBuffer``)
    :param rollout_buffer_kwargs: (dict) None
    :param target_kl: (float) stop an update's epochs when the approximate KL divergence of a minibatch goes beyond
        ``1.5 * target_kl`` (None: never)
    :param stats_window_size: (int) the number of episodes the ``rollout/`` means are taken over
    :param tensorboard_log: (str) TensorBoard folder (None: none)
    :param policy_kwargs: (dict) arguments of the policy (``net_arch``, ``activation_fn``, ...)
    :param verbose: (int) 0 none, 1 training information
    :param seed: (int) seed of the random generators
    :param device: (str) ignored (TensorFlow places the operations)
    :param _init_setup_model: (bool) build the networks now
    """

    policy_aliases = {"MlpPolicy": ActorCriticPolicy, "CnnPolicy": ActorCriticCnnPolicy,
                      "MultiInputPolicy": MultiInputActorCriticPolicy}
    _supported_action_spaces = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
    _generator_attrs = ("_shuffle_gen",)
    _save_schema = dict(
        learning_rate=ms.Schedule(), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), batch_size=ms.Integer(1),
        n_epochs=ms.Integer(1), gamma=ms.Real(), gae_lambda=ms.Real(), clip_range=ms.Schedule(),
        clip_range_vf=ms.Nullable(ms.Schedule()), normalize_advantage=ms.Flag(), ent_coef=ms.Real(),
        vf_coef=ms.Real(), max_grad_norm=ms.Real(), use_sde=ms.Flag(), sde_sample_freq=ms.Integer(-1),
        target_kl=ms.Nullable(ms.Real()), stats_window_size=ms.Integer(1))

    def __init__(self, policy, env, learning_rate=3e-4, n_steps: int = 2048, batch_size: int = 64,
                 n_epochs: int = 10, gamma: float = 0.99, gae_lambda: float = 0.95, clip_range=0.2,
                 clip_range_vf=None, normalize_advantage: bool = True, ent_coef: float = 0.0, vf_coef: float = 0.5,
                 max_grad_norm: float = 0.5, use_sde: bool = False, sde_sample_freq: int = -1,
                 rollout_buffer_class: Optional[type] = None, rollout_buffer_kwargs: Optional[Dict[str, Any]] = None,
                 target_kl: Optional[float] = None, stats_window_size: int = 100,
                 tensorboard_log: Optional[str] = None, policy_kwargs: Optional[dict] = None, verbose: int = 0,
                 seed: Optional[int] = None, device: str = "auto", _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        if normalize_advantage and batch_size is not None and batch_size <= 1:
            raise ValueError("`batch_size` must be greater than 1 (the advantages are normalised per minibatch); "
                             f"got {batch_size}. See https://github.com/DLR-RM/stable-baselines3/issues/440")
        if isinstance(clip_range_vf, (float, int)) and not isinstance(clip_range_vf, bool) and clip_range_vf <= 0:
            raise ValueError(f"`clip_range_vf` must be positive, pass `None` to deactivate vf clipping (got "
                             f"{clip_range_vf}).")
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.clip_range = clip_range
        self.clip_range_vf = clip_range_vf
        self.normalize_advantage = normalize_advantage
        self.target_kl = target_kl
        self._current_clip_range = None
        super().__init__(policy, env, learning_rate=learning_rate, n_steps=n_steps, gamma=gamma,
                         gae_lambda=gae_lambda, ent_coef=ent_coef, vf_coef=vf_coef, max_grad_norm=max_grad_norm,
                         use_sde=use_sde, sde_sample_freq=sde_sample_freq, rollout_buffer_class=rollout_buffer_class,
                         rollout_buffer_kwargs=rollout_buffer_kwargs, stats_window_size=stats_window_size,
                         tensorboard_log=tensorboard_log, policy_kwargs=policy_kwargs, verbose=verbose, seed=seed,
                         device=device, _init_setup_model=_init_setup_model)

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        with SetVerbosity(self.verbose):
            self.n_batch = self.n_envs * self.n_steps
            if self.n_batch < 2 and self.normalize_advantage:
                raise ValueError(f"`n_steps * n_envs` must be greater than 1. Currently n_steps={self.n_steps} and "
                                 f"n_envs={self.n_envs}")
            warn_truncated_minibatch(int(self.batch_size or self.n_batch), self.n_steps, self.n_envs)
            self._setup_policy(1, None)
            self.optimizer = self._make_optimizer()
            self._shuffle_gen = self._new_generator()
            self._train_step = self._make_train_step()  # traced on the first update, not at load

    # ------------------------------------------------------------------ what a variant replaces (MaskablePPO)
    def _train_inputs(self, n_batch: int) -> Dict[str, tf.TensorSpec]:
        """The per-sample inputs of the train step: ``obs``, ``actions``, ``advantages``, ``returns``,
        ``old_values``, ``old_log_probs``."""
        return self._rollout_inputs(n_batch, ("advantages", "returns", "old_values", "old_log_probs"))

    def _train_feed(self, batch: RolloutBatch) -> Dict[str, np.ndarray]:
        """The arrays of :meth:`_train_inputs` from a rollout."""
        return dict(obs=batch.observations, actions=batch.actions, advantages=batch.advantages,
                    returns=batch.returns, old_values=batch.values, old_log_probs=-batch.neg_log_probs)

    def _evaluate_actions(self, data: Dict[str, tf.Tensor]) -> Tuple[tf.Tensor, tf.Tensor, Optional[tf.Tensor]]:
        """SB3's ``policy.evaluate_actions`` on a minibatch: (values, log_prob, entropy or None)."""
        return self.policy_tf.evaluate_actions(data["obs"], data["actions"])

    # ------------------------------------------------------------------ the loss and the compiled update
    def _minibatch(self, data: Dict[str, tf.Tensor], lr, clip_range, clip_range_vf, target_kl):
        """One minibatch: SB3's loss, and its gradient step unless the approximate KL is beyond ``1.5 target_kl``.

        :return: (stats vector in :data:`STAT_NAMES` order, stop flag)
        """
        advantages, returns, old_values = data["advantages"], data["returns"], data["old_values"]
        old_log_probs = data["old_log_probs"]
        if self.normalize_advantage:
            advantages = normalize_advantages(advantages)
        with tf.GradientTape() as tape:
            values, log_prob, entropy = self._evaluate_actions(data)
            ratio = tf.exp(log_prob - old_log_probs)
            policy_loss = -tf.reduce_mean(tf.minimum(advantages * ratio,
                                                     advantages * tf.clip_by_value(ratio, 1.0 - clip_range,
                                                                                   1.0 + clip_range)))
            if self.clip_range_vf is None:
                values_pred = values
            else:
                values_pred = old_values + tf.clip_by_value(values - old_values, -clip_range_vf, clip_range_vf)
            value_loss = tf.reduce_mean(tf.square(returns - values_pred))
            entropy_loss = tf.reduce_mean(log_prob) if entropy is None else -tf.reduce_mean(entropy)
            loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
        log_ratio = log_prob - old_log_probs
        approx_kl = tf.reduce_mean((tf.exp(log_ratio) - 1.0) - log_ratio)
        clip_fraction = tf.reduce_mean(tf.cast(tf.abs(ratio - 1.0) > clip_range, tf.float32))
        grads = tape.gradient(loss, self._variables)

        def apply():
            clipped, _ = clip_grads(grads, self.max_grad_norm)
            self.optimizer.apply(clipped, lr)
            return tf.constant(0)

        stats = tf.stack([policy_loss, value_loss, entropy_loss, approx_kl, clip_fraction, loss])
        if target_kl is None:  # no early stop: no branch in the graph
            apply()
            return stats, tf.constant(False)
        stop = approx_kl > 1.5 * target_kl
        tf.cond(stop, lambda: tf.constant(0), apply)
        return stats, stop

    def _make_train_step(self) -> TrainStep:
        """The compiled update for the current rollout size; without ``target_kl`` it has no early-stop branch, and
        with one minibatch per epoch no shuffle (the minibatch's loss is a mean: the order does not change it)."""
        self._train_step_target_kl = self.target_kl is not None
        with_kl = self._train_step_target_kl
        n_batch = int(self.n_batch)
        batch_size = n_batch if self.batch_size is None else min(int(self.batch_size), n_batch)
        n_minibatches = -(-n_batch // batch_size)
        even = n_batch % batch_size == 0
        n_epochs = int(self.n_epochs)
        scalar = tf.TensorSpec((), tf.float32)
        data_specs = self._train_inputs(n_batch)
        names = tuple(data_specs)
        inputs = {**data_specs, "lr": scalar, "clip_range": scalar, "clip_range_vf": scalar, "target_kl": scalar}
        n_stats = len(STAT_NAMES)
        kl_index = STAT_NAMES.index("approx_kl")
        loss_index = STAT_NAMES.index("loss")

        def train_epochs(lr, clip_range, clip_range_vf, target_kl, **tensors):
            """Every epoch's minibatch steps in one call. Returns SB3's statistics: the means over the minibatches
            evaluated (the one that stopped the update included), ``approx_kl`` over the last epoch's, the last
            ``loss``; the number of epochs begun (SB3's ``n_updates`` count) and whether ``target_kl`` stopped them."""
            data = [tensors[name] for name in names]

            kl_limit = target_kl if with_kl else None

            def epoch(index, sums, count, kl_sum, kl_count, last, stopped):
                perm = tf.argsort(self._shuffle_gen.uniform((n_batch,))) if n_minibatches > 1 else None

                def minibatch(mb, sums, count, kl_sum, kl_count, last, stopped):
                    if perm is None:  # the whole rollout
                        batch = dict(zip(names, data))
                    else:
                        start = mb * batch_size
                        # a fixed-size slice: XLA:CPU runs a slice with moving bounds about 10x slower
                        idx = tf.slice(perm, [start], [batch_size]) if even else \
                            perm[start:tf.minimum(start + batch_size, n_batch)]
                        batch = {name: tf.gather(x, idx) for name, x in zip(names, data)}
                    mb_stats, stop = self._minibatch(batch, lr, clip_range, clip_range_vf, kl_limit)
                    return (mb + 1, sums + mb_stats, count + 1.0, kl_sum + mb_stats[kl_index], kl_count + 1.0,
                            mb_stats[loss_index], stop)

                _, sums, count, kl_sum, kl_count, last, stopped = tf.while_loop(
                    lambda mb, *state: tf.logical_and(mb < n_minibatches, tf.logical_not(state[-1])), minibatch,
                    (tf.constant(0), sums, count, tf.constant(0.0), tf.constant(0.0), last, stopped))
                return index + 1, sums, count, kl_sum, kl_count, last, stopped

            epochs, sums, count, kl_sum, kl_count, last, stopped = tf.while_loop(
                lambda index, *state: tf.logical_and(index < n_epochs, tf.logical_not(state[-1])), epoch,
                (tf.constant(0), tf.zeros((n_stats,), tf.float32), tf.constant(0.0), tf.constant(0.0),
                 tf.constant(0.0), tf.constant(0.0), tf.constant(False)))
            means = tf.unstack(sums / tf.maximum(count, 1.0))
            means[kl_index] = kl_sum / tf.maximum(kl_count, 1.0)
            means[loss_index] = last
            return {**dict(zip(STAT_NAMES, means)), "epochs": tf.cast(epochs, tf.float32),
                    "stopped": tf.cast(stopped, tf.float32)}

        return TrainStep(train_epochs, inputs, networks=(self.policy_tf,), name=f"{type(self).__name__.lower()}_train",
                         jit_compile="auto" if even else False)

    # ------------------------------------------------------------------ the on-policy loop's parts
    def _on_learn_start(self, progress, callback) -> None:
        super()._on_learn_start(progress, callback)
        self._clip_range_fn = get_schedule_fn(self.clip_range)
        self._clip_range_vf_fn = None if self.clip_range_vf is None else get_schedule_fn(self.clip_range_vf)

    def train(self, batch: RolloutBatch) -> Dict[str, float]:
        """``n_epochs`` passes of minibatch steps on SB3's PPO loss; returns SB3's ``train/`` statistics."""
        frac = self._sb3_progress_remaining()
        self._current_lr, self._current_clip_range = self._lr_fn(frac), self._clip_range_fn(frac)
        clip_range_vf = self._clip_range_vf_fn(frac) if self._clip_range_vf_fn is not None else 0.0
        if (self.target_kl is not None) != self._train_step_target_kl:  # target_kl was set or cleared since
            self._train_step = self._make_train_step()
        out = self._train_step(**self._train_feed(batch), lr=self._current_lr, clip_range=self._current_clip_range,
                               clip_range_vf=clip_range_vf,
                               target_kl=np.inf if self.target_kl is None else self.target_kl)
        epochs = int(out["epochs"])
        self._n_train_updates += epochs
        if self.verbose >= 1 and out["stopped"] > 0:
            print(f"Early stopping at step {epochs - 1} due to reaching max kl: {float(out['approx_kl']):.2f}")
        stats = {name: float(out[name]) for name in STAT_NAMES}
        stats.update(self._policy_std_stats())
        stats["clip_range"] = float(self._current_clip_range)
        if self.clip_range_vf is not None:
            stats["clip_range_vf"] = float(clip_range_vf)
        return stats

    def learn(self, total_timesteps: int, callback=None, log_interval: int = 1, tb_log_name: str = "PPO",
              reset_num_timesteps: bool = True, progress_bar: bool = False) -> "PPO":
        """
        Train for ``total_timesteps`` environment steps (SB3's signature and defaults).

        :param total_timesteps: (int) the number of environment steps to train for
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) the number of updates between log blocks (verbose >= 1)
        :param tb_log_name: (str) the name of the run for TensorBoard
        :param reset_num_timesteps: (bool) whether to reset ``num_timesteps``
        :param progress_bar: (bool) show a progress bar (tqdm)
        :return: the trained model (``self``)
        """
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
