"""Proximal Policy Optimization with invalid action masking (sb3-contrib ``MaskablePPO``) on sbtf's core.

Each step of a rollout reads the env's ``action_masks()``; actions are drawn from the masked distribution and the
masks are stored with the rollout, so the train step evaluates the same masked log-probabilities. The whole
optimisation of one update (``n_epochs`` passes over shuffled minibatches of ``batch_size``, early stopping on
``target_kl``) runs in one compiled call (:class:`~sbtf.common.fast_call.TrainStep`).
"""
from __future__ import annotations

from typing import Dict, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common import model_schema as ms
from sbtf.common.base_class import SetVerbosity
from sbtf.common.fast_call import TrainStep
from sbtf.common.optimizers import Adam, clip_grads
from sbtf.common.schedules import get_schedule_fn
from sbtf.common.tf_util import xla_pays_off
from sbtf.contrib.common.maskable.buffers import MaskableRolloutBatch, MaskableRolloutRunner
from sbtf.contrib.common.maskable.policies import MaskableActorCriticPolicy
from sbtf.contrib.common.sb3_on_policy import Sb3OnPolicyAlgorithm

__all__ = ["MaskablePPO"]

#: the statistics of one update, in the order the train step returns them
STAT_NAMES = ("policy_gradient_loss", "value_loss", "entropy_loss", "approx_kl", "clip_fraction", "loss")


class MaskablePPO(Sb3OnPolicyAlgorithm):
    """
    Proximal Policy Optimization algorithm (PPO) (clip version) with Invalid Action Masking (sb3-contrib's
    arguments and defaults).

    Paper: https://arxiv.org/abs/1707.06347, masking: https://arxiv.org/abs/2006.14171

    :param policy: (str or class) ``"MlpPolicy"``, ``"CnnPolicy"`` or a ``MaskableActorCriticPolicy`` subclass
    :param env: (gymnasium.Env, VecEnv or str) the environment; it (or an ``ActionMasker`` wrapper) has
        ``action_masks()``
    :param learning_rate: (float or callable) the learning rate, or a function of the remaining progress (1 -> 0)
    :param n_steps: (int) steps per environment per update (the rollout is ``n_steps * n_envs``)
    :param batch_size: (int) minibatch size (None: the whole rollout)
    :param n_epochs: (int) number of passes over the rollout per update
    :param gamma: (float) discount factor
    :param gae_lambda: (float) factor of the Generalized Advantage Estimator
    :param clip_range: (float or callable) clipping parameter of the policy ratio
    :param clip_range_vf: (float or callable) clipping parameter of the value function (None: no clipping)
    :param normalize_advantage: (bool) normalise the advantages of each minibatch
    :param ent_coef: (float) entropy coefficient
    :param vf_coef: (float) value function coefficient
    :param max_grad_norm: (float) the maximum global norm of the gradients
    :param target_kl: (float) stop an update's epochs early when the approximate KL divergence of a minibatch goes
        beyond ``1.5 * target_kl`` (None: never)
    :param stats_window_size: (int) the number of episodes the ``rollout/`` means are taken over
    :param tensorboard_log: (str) TensorBoard folder (None: none)
    :param policy_kwargs: (dict) arguments of the policy (``net_arch``, ``activation_fn``, ...)
    :param verbose: (int) 0 none, 1 training information
    :param seed: (int) seed of the random generators
    :param _init_setup_model: (bool) build the networks now
    """

    policy_base = MaskableActorCriticPolicy
    _supported_action_spaces = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
    _generator_attrs = ("_shuffle_gen",)
    _save_schema = dict(
        learning_rate=ms.Schedule(), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), batch_size=ms.Integer(1),
        n_epochs=ms.Integer(1), gamma=ms.Real(), gae_lambda=ms.Real(), clip_range=ms.Schedule(),
        clip_range_vf=ms.Nullable(ms.Schedule()), normalize_advantage=ms.Flag(), ent_coef=ms.Real(),
        vf_coef=ms.Real(), max_grad_norm=ms.Real(), target_kl=ms.Nullable(ms.Real()),
        stats_window_size=ms.Integer(1))

    def __init__(self, policy, env, learning_rate=3e-4, n_steps: int = 2048, batch_size: Optional[int] = 64,
                 n_epochs: int = 10, gamma: float = 0.99, gae_lambda: float = 0.95, clip_range=0.2,
                 clip_range_vf=None, normalize_advantage: bool = True, ent_coef: float = 0.0, vf_coef: float = 0.5,
                 max_grad_norm: float = 0.5, target_kl: Optional[float] = None, stats_window_size: int = 100,
                 tensorboard_log: Optional[str] = None, policy_kwargs: Optional[dict] = None, verbose: int = 0,
                 seed: Optional[int] = None, _init_setup_model: bool = True):
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.clip_range = clip_range
        self.clip_range_vf = clip_range_vf
        self.normalize_advantage = normalize_advantage
        self.ent_coef = ent_coef
        self.vf_coef = vf_coef
        self.max_grad_norm = max_grad_norm
        self.target_kl = target_kl
        self._use_masking = True
        super().__init__(policy, env, n_steps=n_steps, gamma=gamma, gae_lambda=gae_lambda,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, _init_setup_model=_init_setup_model)

    # ------------------------------------------------------------------ setup
    def _make_runner(self) -> MaskableRolloutRunner:
        return MaskableRolloutRunner(env=self.env, model=self, n_steps=self.n_steps, gamma=self.gamma,
                                     gae_lambda=self.gae_lambda)

    def setup_model(self):
        with SetVerbosity(self.verbose):
            if self.normalize_advantage and self.batch_size is not None and self.batch_size < 2:
                raise ValueError("`batch_size` must be greater than 1 (the advantages are normalised per minibatch); "
                                 f"got {self.batch_size}. See https://github.com/DLR-RM/stable-baselines3/issues/440")
            self.n_batch = self.n_envs * self.n_steps
            if self.n_batch < 2 and self.normalize_advantage:
                raise ValueError(f"`n_steps * n_envs` must be greater than 1. Currently n_steps={self.n_steps} and "
                                 f"n_envs={self.n_envs}")
            policy = self._setup_policy(1, None)
            if not isinstance(policy, MaskableActorCriticPolicy):
                raise ValueError("Policy must subclass MaskableActorCriticPolicy")
            self.optimizer = Adam(self._variables, epsilon=1e-5)
            self._shuffle_gen = self._new_generator()
            self._train_step = self._make_train_step()  # traced on the first update, not at load

    # ------------------------------------------------------------------ losses and the compiled update
    def _minibatch(self, obs, actions, advantages, returns, old_values, old_log_probs, masks, lr, clip_range,
                   clip_range_vf, target_kl):
        """One minibatch: the clipped-surrogate Adam step unless its approximate KL is beyond ``1.5 target_kl``.

        :return: (stats vector, stop flag)
        """
        policy = self.policy_tf
        dist = policy.dist
        with tf.GradientTape() as tape:
            logits, values = policy.network_tf(obs)
            log_prob = dist.log_prob_tf(logits, actions, masks)
            entropy = dist.entropy_tf(logits, masks)
            if self.normalize_advantage:
                mean, var = tf.nn.moments(advantages, axes=[0])
                n = tf.cast(tf.shape(advantages)[0], tf.float32)
                advantages = (advantages - mean) / (tf.sqrt(var * n / (n - 1.0)) + 1e-8)  # torch's unbiased std
            ratio = tf.exp(log_prob - old_log_probs)
            policy_loss = -tf.reduce_mean(tf.minimum(advantages * ratio,
                                                     advantages * tf.clip_by_value(ratio, 1 - clip_range,
                                                                                   1 + clip_range)))
            if self.clip_range_vf is None:
                values_pred = values
            else:
                values_pred = old_values + tf.clip_by_value(values - old_values, -clip_range_vf, clip_range_vf)
            value_loss = tf.reduce_mean(tf.square(returns - values_pred))
            entropy_loss = -tf.reduce_mean(entropy)
            loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
        log_ratio = log_prob - old_log_probs
        approx_kl = tf.reduce_mean((tf.exp(log_ratio) - 1.0) - log_ratio)
        clip_fraction = tf.reduce_mean(tf.cast(tf.abs(ratio - 1.0) > clip_range, tf.float32))
        stop = approx_kl > 1.5 * target_kl
        grads = tape.gradient(loss, self._variables)

        def apply():
            clipped, _ = clip_grads(grads, self.max_grad_norm)
            self.optimizer.apply(clipped, lr)
            return tf.constant(0)

        tf.cond(stop, lambda: tf.constant(0), apply)
        return tf.stack([policy_loss, value_loss, entropy_loss, approx_kl, clip_fraction, loss]), stop

    def _make_train_step(self) -> TrainStep:
        policy = self.policy_tf
        dist = policy.dist
        n_batch = int(self.n_batch)
        batch_size = n_batch if self.batch_size is None else min(int(self.batch_size), n_batch)
        n_minibatches = -(-n_batch // batch_size)
        even = n_batch % batch_size == 0
        n_epochs = int(self.n_epochs)
        vec = tf.TensorSpec((n_batch,), tf.float32)
        scalar = tf.TensorSpec((), tf.float32)
        inputs = {"obs": policy.obs_signature(n_batch),
                  "actions": tf.TensorSpec((n_batch,) + dist.action_shape, tf.int64),
                  "advantages": vec, "returns": vec, "old_values": vec, "old_log_probs": vec,
                  "action_masks": tf.TensorSpec((n_batch, dist.n_logits), tf.bool),
                  "lr": scalar, "clip_range": scalar, "clip_range_vf": scalar, "target_kl": scalar}

        def train_epochs(obs, actions, advantages, returns, old_values, old_log_probs, action_masks, lr, clip_range,
                         clip_range_vf, target_kl):
            """Every epoch's minibatch steps in one call; returns the mean statistics and the epochs run."""
            data = (obs, actions, advantages, returns, old_values, old_log_probs, action_masks)

            def epoch(index, stats, count, stopped):
                perm = tf.argsort(self._shuffle_gen.uniform((n_batch,)))

                def minibatch(mb, stats, count, stopped):
                    start = mb * batch_size
                    # a fixed-size slice: XLA:CPU runs a slice with moving bounds about 10x slower
                    idx = tf.slice(perm, [start], [batch_size]) if even else \
                        perm[start:tf.minimum(start + batch_size, n_batch)]
                    mb_stats, stop = self._minibatch(*(tf.gather(x, idx) for x in data), lr, clip_range,
                                                     clip_range_vf, target_kl)
                    return mb + 1, stats + mb_stats, count + 1.0, stop

                _, stats, count, stopped = tf.while_loop(
                    lambda mb, _s, _c, stopped: tf.logical_and(mb < n_minibatches, tf.logical_not(stopped)),
                    minibatch, (tf.constant(0), stats, count, stopped))
                return index + 1, stats, count, stopped

            epochs, stats, count, _ = tf.while_loop(
                lambda index, _s, _c, stopped: tf.logical_and(index < n_epochs, tf.logical_not(stopped)), epoch,
                (tf.constant(0), tf.zeros((len(STAT_NAMES),), tf.float32), tf.constant(0.0), tf.constant(False)))
            return {**dict(zip(STAT_NAMES, tf.unstack(stats / tf.maximum(count, 1.0)))),
                    "epochs": tf.cast(epochs, tf.float32)}

        return TrainStep(train_epochs, inputs, updates=(policy,), name="maskable_ppo_train_epochs",
                         jit_compile=even and xla_pays_off(policy))

    # ------------------------------------------------------------------ the on-policy loop's parts
    def _on_learn_start(self, progress, callback) -> None:
        self._lr_fn = get_schedule_fn(self.learning_rate)
        self._clip_range_fn = get_schedule_fn(self.clip_range)
        self._clip_range_vf_fn = None if self.clip_range_vf is None else get_schedule_fn(self.clip_range_vf)
        self.runner.use_masking = self._use_masking

    def train(self, batch: MaskableRolloutBatch) -> Dict[str, float]:
        """``n_epochs`` passes of minibatch Adam steps on the clipped surrogate; returns the mean statistics."""
        frac = self._sb3_progress_remaining()
        self._current_lr, self._current_clip_range = self._lr_fn(frac), self._clip_range_fn(frac)
        clip_range_vf = self._clip_range_vf_fn(frac) if self._clip_range_vf_fn is not None else 0.0
        out = self._train_step(obs=batch.observations, actions=batch.actions, advantages=batch.advantages,
                               returns=batch.returns, old_values=batch.values,
                               old_log_probs=-batch.neg_log_probs, action_masks=batch.action_masks,
                               lr=self._current_lr, clip_range=self._current_clip_range, clip_range_vf=clip_range_vf,
                               target_kl=np.inf if self.target_kl is None else self.target_kl)
        self._n_train_updates += int(out["epochs"])
        stats = {name: float(out[name]) for name in STAT_NAMES}
        stats["clip_range"] = float(self._current_clip_range)
        if self.clip_range_vf is not None:
            stats["clip_range_vf"] = float(clip_range_vf)
        return stats

    # ------------------------------------------------------------------ acting
    def predict(self, observation, state=None, episode_start=None, deterministic: bool = False,
                action_masks: Optional[np.ndarray] = None, mask=None):
        """
        The model's action(s) for an observation (or a batch), drawn from the masked distribution.

        :param observation: (np.ndarray) the observation(s)
        :param state: (None) no recurrent state (kept for the common signature)
        :param episode_start: (None) unused (feed-forward policy)
        :param deterministic: (bool) the most likely valid action instead of a sample
        :param action_masks: (np.ndarray) booleans, one per choice of each action component (flat), per observation;
            None: no masking
        :param mask: (None) stable-baselines 2's name of ``episode_start``
        :return: (np.ndarray, None) the action(s) and the (absent) next state
        """
        observation, vectorized = self._check_obs(observation)
        masks = None
        if action_masks is not None:
            masks = self.policy_tf.dist.check_masks(action_masks, observation.shape[0])
        actions, _, _ = self.policy_tf.step_masked(observation, masks, deterministic=deterministic)
        return (actions if vectorized else actions[0]), None

    def _proba_outputs(self, observation, state, mask):
        if isinstance(self.action_space, gym.spaces.MultiBinary):  # two logits per bit: P(bit = 1)
            probs = self.policy_tf.proba_step(observation)
            return probs.reshape(probs.shape[0], -1, 2)[:, :, 1]
        return super()._proba_outputs(observation, state, mask)

    def _export_extra_inputs(self) -> Dict[str, tuple]:
        """The export takes the action masks as a second input (``(batch, n_choices)`` booleans)."""
        return {"action_masks": ((None, self.policy_tf.dist.n_logits), "bool")}

    def _export_outputs(self, observation, action_masks=None) -> Dict[str, tf.Tensor]:
        """The exported graph: the most likely valid action, the masked probabilities and the value."""
        policy = self.policy_tf
        logits, value = policy.network_tf(observation)
        return {"action": policy.dist.mode_tf(logits, action_masks),
                "probabilities": policy.dist.probabilities_tf(logits, action_masks), "value": value}

    def learn(self, total_timesteps, callback=None, log_interval: int = 1, tb_log_name: str = "MaskablePPO",
              reset_num_timesteps: bool = True, use_masking: bool = True, progress_bar: bool = False):
        """
        Train for ``total_timesteps`` environment steps (sb3-contrib's signature and defaults).

        :param total_timesteps: (int) the number of environment steps to train for
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) the number of updates between log blocks (verbose >= 1)
        :param tb_log_name: (str) the name of the run for TensorBoard
        :param reset_num_timesteps: (bool) whether to reset ``num_timesteps``
        :param use_masking: (bool) read and apply the env's action masks (False: train without masks)
        :param progress_bar: (bool) show a progress bar (tqdm)
        :return: the trained model (``self``)
        """
        self._use_masking = bool(use_masking)
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
