"""Advantage Actor Critic, stable-baselines3's ``A2C`` (arguments, defaults and maths) on sbtf's core.

One update is one gradient step on the whole rollout (``n_steps * n_envs`` samples): the loss is
``-mean(advantages * log_prob) + vf_coef * mean((returns - values)^2) + ent_coef * entropy_loss`` (advantages
normalised when ``normalize_advantage``; returns are GAE(``gae_lambda``), which with the default ``gae_lambda=1.0``
are the n-step returns), gradients clipped to ``max_grad_norm``, then PyTorch's RMSprop as SB3 sets it (``alpha=0.99``,
``eps=rms_prop_eps``; :class:`~sbtf.common.optimizers.TorchStyleRMSProp`) or PyTorch's Adam with
``use_rms_prop=False``.

stable-baselines 2's A2C (``sbtf.A2C``, ``sbtf.a2c``) is a different class and stays as it is; this one is
``sbtf.sb3.A2C`` (``--algo a2c_sb3`` on the command line; its files name the algorithm ``a2c_sb3``).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import gymnasium as gym
import tensorflow as tf

from sbtf.common.fileio import model_schema as ms
from sbtf.common.base_class import SetVerbosity
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.optimizers import clip_grads
from sbtf.common.storage.rollout import RolloutBatch
from sbtf.common.runners import RolloutRunner
from sbtf.sb3.common.on_policy_algorithm import OnPolicyAlgorithm, normalize_advantages
from sbtf.sb3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy
from sbtf.common.arg_checks import check_hyperparameters

__all__ = ["A2C"]

#: the statistics of one update (SB3's ``train/`` keys)
STAT_NAMES = ("policy_loss", "value_loss", "entropy_loss")


class A2C(OnPolicyAlgorithm):
    """
    Advantage Actor Critic (A2C), stable-baselines3's arguments and defaults.

    Paper: https://arxiv.org/abs/1602.01783

    :param policy: (str or class) ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or an
        :class:`~sbtf.sb3.common.policies.ActorCriticPolicy` subclass
    :param env: (gymnasium.Env, VecEnv or str) the environment
    :param learning_rate: (float or callable) the learning rate, or a function of the remaining progress (1 -> 0)
    :param n_steps: (int) steps per environment per update
    :param gamma: (float) discount factor
    :param gae_lambda: (float) factor of the Generalized Advantage Estimator (1.0: classic n-step advantages)
    :param ent_coef: (float) entropy coefficient
    :param vf_coef: (float) value function coefficient
    :param max_grad_norm: (float) the maximum global norm of the gradients
    :param rms_prop_eps: (float) RMSprop's epsilon (stabilises the square root of the denominator)
    :param use_rms_prop: (bool) RMSprop (default) or Adam
    :param use_sde: (bool) generalized State-Dependent Exploration instead of action noise (Box actions)
    :param sde_sample_freq: (int) resample the gSDE noise matrix every n steps (-1: only at the rollout start)
    :param rollout_buffer_class: (type) None (sbtf's ``RolloutBuffer``)
    :param rollout_buffer_kwargs: (dict) None
    :param normalize_advantage: (bool) normalise the advantages
    :param stats_window_size: (int) the number of episodes the ``rollout/`` means are taken over
    :param tensorboard_log: (str) TensorBoard folder (None: none)
    :param policy_kwargs: (dict) arguments of the policy (``net_arch``, ``activation_fn``, ``optimizer_class``...)
    :param verbose: (int) 0 none, 1 training information
    :param seed: (int) seed of the random generators
    :param device: (str) ignored (TensorFlow places the operations)
    :param _init_setup_model: (bool) build the networks now
    """

    #: the algorithm name written in (and required of) model files: ``A2C`` is stable-baselines 2's
    FILE_ALGO_NAME = "a2c_sb3"
    policy_aliases = {"MlpPolicy": ActorCriticPolicy, "CnnPolicy": ActorCriticCnnPolicy,
                      "MultiInputPolicy": MultiInputActorCriticPolicy}
    _supported_action_spaces = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
    _save_schema = dict(
        learning_rate=ms.Schedule(), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), gamma=ms.Real(), gae_lambda=ms.Real(),
        ent_coef=ms.Real(), vf_coef=ms.Real(), max_grad_norm=ms.Real(), rms_prop_eps=ms.Real(),
        use_rms_prop=ms.Flag(), use_sde=ms.Flag(), sde_sample_freq=ms.Integer(-1), normalize_advantage=ms.Flag(),
        stats_window_size=ms.Integer(1))

    def __init__(self, policy, env, learning_rate=7e-4, n_steps: int = 5, gamma: float = 0.99,
                 gae_lambda: float = 1.0, ent_coef: float = 0.0, vf_coef: float = 0.5, max_grad_norm: float = 0.5,
                 rms_prop_eps: float = 1e-5, use_rms_prop: bool = True, use_sde: bool = False,
                 sde_sample_freq: int = -1, rollout_buffer_class: Optional[type] = None,
                 rollout_buffer_kwargs: Optional[Dict[str, Any]] = None, normalize_advantage: bool = False,
                 stats_window_size: int = 100, tensorboard_log: Optional[str] = None,
                 policy_kwargs: Optional[dict] = None, verbose: int = 0, seed: Optional[int] = None,
                 device: str = "auto", _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        self.rms_prop_eps = rms_prop_eps
        self.use_rms_prop = use_rms_prop
        self.normalize_advantage = normalize_advantage
        policy_kwargs = dict(policy_kwargs or {})
        # SB3: RMSprop (the original A2C's optimizer) unless the policy names its own
        if use_rms_prop and "optimizer_class" not in policy_kwargs:
            policy_kwargs["optimizer_class"] = "RMSprop"
            policy_kwargs["optimizer_kwargs"] = dict(alpha=0.99, eps=rms_prop_eps, weight_decay=0)
        super().__init__(policy, env, learning_rate=learning_rate, n_steps=n_steps, gamma=gamma,
                         gae_lambda=gae_lambda, ent_coef=ent_coef, vf_coef=vf_coef, max_grad_norm=max_grad_norm,
                         use_sde=use_sde, sde_sample_freq=sde_sample_freq, rollout_buffer_class=rollout_buffer_class,
                         rollout_buffer_kwargs=rollout_buffer_kwargs, stats_window_size=stats_window_size,
                         tensorboard_log=tensorboard_log, policy_kwargs=policy_kwargs, verbose=verbose, seed=seed,
                         device=device, _init_setup_model=_init_setup_model)

    # ------------------------------------------------------------------ setup
    def _make_runner(self) -> RolloutRunner:
        return RolloutRunner(env=self.env, model=self, n_steps=self.n_steps, gamma=self.gamma, lam=self.gae_lambda,
                             with_neg_log_probs=False)

    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        with SetVerbosity(self.verbose):
            self.n_batch = self.n_envs * self.n_steps
            self._setup_policy(1, None)
            self.optimizer = self._make_optimizer()
            self._train_step = self._make_train_step()  # traced on the first update, not at load

    def _make_train_step(self) -> TrainStep:
        policy = self.policy_tf
        inputs = self._rollout_inputs(self.n_batch, ("advantages", "returns"))
        inputs["lr"] = tf.TensorSpec((), tf.float32)

        def train_step(obs, actions, advantages, returns, lr):
            """One gradient step on the whole rollout (SB3's A2C loss)."""
            if self.normalize_advantage:
                advantages = normalize_advantages(advantages)
            with tf.GradientTape() as tape:
                values, log_prob, entropy = policy.evaluate_actions(obs, actions)
                policy_loss = -tf.reduce_mean(advantages * log_prob)
                value_loss = tf.reduce_mean(tf.square(returns - values))
                entropy_loss = tf.reduce_mean(log_prob) if entropy is None else -tf.reduce_mean(entropy)
                loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
            grads = tape.gradient(loss, self._variables)
            grads, _ = clip_grads(grads, self.max_grad_norm)
            self.optimizer.apply(grads, lr)
            return {"policy_loss": policy_loss, "value_loss": value_loss, "entropy_loss": entropy_loss}

        return TrainStep(train_step, inputs, name="a2c_sb3_train",
                         jit_compile=False)  # measured on sbtf's SB2 A2C: XLA does not pay for one step per rollout

    # ------------------------------------------------------------------ the on-policy loop's parts
    def train(self, batch: RolloutBatch) -> Dict[str, float]:
        """One gradient step on the rollout; returns SB3's ``train/`` statistics."""
        self._current_lr = self._lr_fn(self._sb3_progress_remaining())
        out = self._train_step(obs=batch.observations, actions=batch.actions, advantages=batch.advantages,
                               returns=batch.returns, lr=self._current_lr)
        self._n_train_updates += 1
        stats = {name: float(out[name]) for name in STAT_NAMES}
        stats.update(self._policy_std_stats())
        return stats

    def learn(self, total_timesteps: int, callback=None, log_interval: int = 100, tb_log_name: str = "A2C",
              reset_num_timesteps: bool = True, progress_bar: bool = False) -> "A2C":
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
