"""stable-baselines3's on-policy algorithm base (``stable_baselines3.common.on_policy_algorithm``) on sbtf's one
on-policy loop.

:class:`Sb3OnPolicyAlgorithm` is an :class:`~sbtf.common.algo.on_policy.NStepActorCriticRLModel` (sbtf's one on-policy
``learn`` loop, runners, callbacks, TensorBoard, save format) with what stable-baselines3 does differently; the
sb3-contrib classes (MaskablePPO, contrib TRPO) and :class:`OnPolicyAlgorithm` (PPO, A2C) derive from it:

* ``learn(total_timesteps)`` collects rollouts until ``total_timesteps`` steps were taken (the last rollout may go
  beyond), and the schedules read ``progress_remaining = 1 - steps_done / total_timesteps`` after each rollout;
* the policy is looked up among the algorithm's own policy names (``policy_base``), and sb3's ``policy_kwargs``;
* the log block has sb3's keys (``rollout/ep_rew_mean``, ``time/fps``, ``train/...``); ``stats_window_size``.

:class:`OnPolicyAlgorithm` adds SB3's common arguments of PPO and A2C (``learning_rate``, ``ent_coef``, ``vf_coef``,
``max_grad_norm``, ``use_sde``, ``sde_sample_freq``, ``rollout_buffer_class``, ``device``), builds SB3-signature
policies (:class:`sbtf.sb3.common.policies.ActorCriticPolicy`) and their optimizer, and collects GAE(lambda)
rollouts with time-limit bootstraps as SB3's ``collect_rollouts`` does.
"""
from __future__ import annotations

import time
import warnings
from collections import deque
from typing import Any, Dict, Optional

import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.math_util import explained_variance, safe_mean
from sbtf.common.algo.on_policy import NStepActorCriticRLModel
from sbtf.common.policies import get_policy_from_name
from sbtf.common.storage.rollout import RolloutBuffer
from sbtf.common.runners import RolloutRunner
from sbtf.common.algo.sb3_api import Sb3ModelApi
from sbtf.common.schedules import get_schedule_fn
from sbtf.common.nn.sde import OnPolicySDEMixin
from sbtf.sb3.common.policies import ActorCriticPolicy

__all__ = ["Sb3OnPolicyAlgorithm", "OnPolicyAlgorithm", "warn_truncated_minibatch", "normalize_advantages"]


class Sb3OnPolicyAlgorithm(Sb3ModelApi, NStepActorCriticRLModel):
    """
    Base of the sb3-contrib on-policy algorithms (see the module docstring).

    :param policy: (str or class) a policy name of ``policy_base`` (``"MlpPolicy"``) or a policy class
    :param env: the environment (VecEnv, gymnasium env or id)
    :param n_steps: (int) steps per environment per rollout
    :param gamma: (float) discount factor
    :param gae_lambda: (float) GAE's lambda
    :param stats_window_size: (int) the number of episodes the ``rollout/`` means are taken over
    :param tensorboard_log: (str) TensorBoard folder (None: none)
    :param policy_kwargs: (dict) arguments of the policy
    :param verbose: (int) 0 none, 1 training information
    :param seed: (int) seed of the random generators
    :param _init_setup_model: (bool) build the networks now
    """

    #: the base class whose registered names ``policy`` may be
    policy_base: type = None

    def __init__(self, policy, env, n_steps: int, gamma: float, gae_lambda: float, stats_window_size: int = 100,
                 tensorboard_log: Optional[str] = None, policy_kwargs: Optional[dict] = None, verbose: int = 0,
                 seed: Optional[int] = None, _init_setup_model: bool = True):
        if isinstance(policy, str):
            policy = get_policy_from_name(self.policy_base, policy)
        self.gamma = gamma
        self.gae_lambda = gae_lambda
        self.stats_window_size = stats_window_size
        self._n_train_updates = 0
        super().__init__(policy, env, n_steps=n_steps, verbose=verbose, tensorboard_log=tensorboard_log,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs, seed=seed)

    # ------------------------------------------------------------------ sb3's pace and schedules
    def _setup_learn(self) -> None:
        if self.ep_info_buf is None or self.ep_info_buf.maxlen != self.stats_window_size:
            self.ep_info_buf = deque(self.ep_info_buf or (), maxlen=int(self.stats_window_size))
        super()._setup_learn()

    def _n_updates(self, total_timesteps: int) -> Optional[int]:
        return None  # until total_timesteps steps were taken, as sb3

    def _gradient_steps_per_update(self) -> int:
        n_batch = (self.n_envs or 1) * self.n_steps
        batch_size = int(getattr(self, "batch_size", None) or n_batch)
        return int(getattr(self, "n_epochs", 1)) * -(-n_batch // batch_size)

    def _sb3_progress_remaining(self) -> float:
        """sb3's ``1 - steps_done / total_timesteps``, read after a rollout (the train step's schedules)."""
        progress = self._learn_progress
        done = self.num_timesteps - progress.start_timesteps
        return 1.0 - float(done) / max(float(progress.total_timesteps), 1.0)

    # ------------------------------------------------------------------ sb3's log block
    def _train_log_keys(self, stats: Dict[str, float]) -> Dict[str, float]:
        """The ``train/`` entries of the log block (the algorithm's statistics)."""
        return {f"train/{name}": value for name, value in stats.items()}

    def _log_update(self, batch, stats: Dict[str, float]) -> None:
        progress = self._learn_progress
        elapsed = max(time.time() - progress.t_start, 1e-9)
        if len(self.ep_info_buf) > 0 and len(self.ep_info_buf[0]) > 0:
            logger.logkv("rollout/ep_rew_mean", safe_mean([info["r"] for info in self.ep_info_buf]))
            logger.logkv("rollout/ep_len_mean", safe_mean([info["l"] for info in self.ep_info_buf]))
        logger.logkv("time/fps", int((self.num_timesteps - progress.start_timesteps) / elapsed))
        logger.logkv("time/iterations", progress.update)
        logger.logkv("time/time_elapsed", int(elapsed))
        logger.logkv("time/total_timesteps", self.num_timesteps)
        logger.logkv("train/explained_variance", float(explained_variance(batch.values, batch.returns)))
        logger.logkv("train/n_updates", self._n_train_updates)
        for key, value in self._train_log_keys(stats).items():
            logger.logkv(key, value)
        logger.dumpkvs()

    def _tensorboard_scalars(self, batch, stats: Dict[str, float]) -> Dict[str, float]:
        return {**self._train_log_keys(stats),
                "train/explained_variance": float(explained_variance(batch.values, batch.returns))}

    @staticmethod
    def _mean_or_nan(values) -> float:
        return float(np.mean(values)) if len(values) else float("nan")


class OnPolicyAlgorithm(OnPolicySDEMixin, Sb3OnPolicyAlgorithm):
    """
    stable-baselines3's ``OnPolicyAlgorithm``: the base of PPO and A2C.

    :param policy: (str or class) ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or an
        :class:`~sbtf.sb3.common.policies.ActorCriticPolicy` subclass
    :param env: (gymnasium.Env, VecEnv or str) the environment
    :param learning_rate: (float or callable) the learning rate, or a function of the remaining progress (1 -> 0)
    :param n_steps: (int) steps per environment per rollout
    :param gamma: (float) discount factor
    :param gae_lambda: (float) factor of the Generalized Advantage Estimator (1.0: n-step returns)
    :param ent_coef: (float) entropy coefficient of the loss
    :param vf_coef: (float) value function coefficient of the loss
    :param max_grad_norm: (float) the maximum global norm of the gradients
    :param use_sde: (bool) generalized State-Dependent Exploration (Box actions)
    :param sde_sample_freq: (int) resample the gSDE exploration matrices every n steps (-1: only at rollout start)
    :param rollout_buffer_class: (type) None or sbtf's :class:`~sbtf.common.storage.rollout.RolloutBuffer` (the one the
        rollouts are stored in, for Dict observations too: they travel packed, ``sbtf.common.envs.dict_obs``)
    :param rollout_buffer_kwargs: (dict) None or empty (sbtf's buffer takes no further settings)
    :param stats_window_size: (int) the number of episodes the ``rollout/`` means are taken over
    :param tensorboard_log: (str) TensorBoard folder (None: none)
    :param policy_kwargs: (dict) arguments of the policy (``net_arch``, ``activation_fn``, ...)
    :param verbose: (int) 0 none, 1 training information
    :param seed: (int) seed of the random generators
    :param device: (str) accepted for SB3's signature and ignored: TensorFlow places the operations
    :param _init_setup_model: (bool) build the networks now
    """

    _policy_is_object = True
    policy_base = ActorCriticPolicy
    #: SB3's ``policy_aliases``: the policy names the algorithm takes
    policy_aliases: Dict[str, type] = {}

    _not_saved_arguments = {
        "rollout_buffer_class": "only sbtf's RolloutBuffer is accepted (None or RolloutBuffer): nothing to restore",
        "rollout_buffer_kwargs": "only None or {} is accepted: nothing to restore",
    }

    def __init__(self, policy, env, learning_rate, n_steps: int, gamma: float, gae_lambda: float, ent_coef: float,
                 vf_coef: float, max_grad_norm: float, use_sde: bool, sde_sample_freq: int,
                 rollout_buffer_class: Optional[type] = None, rollout_buffer_kwargs: Optional[Dict[str, Any]] = None,
                 stats_window_size: int = 100, tensorboard_log: Optional[str] = None,
                 policy_kwargs: Optional[dict] = None, verbose: int = 0, seed: Optional[int] = None,
                 device: str = "auto", _init_setup_model: bool = True):
        if rollout_buffer_class not in (None, RolloutBuffer):
            raise ValueError(f"Error: rollout_buffer_class={rollout_buffer_class!r} is not supported: sbtf stores "
                             "every rollout (Dict observations too, packed) in "
                             "sbtf.common.storage.rollout.RolloutBuffer; "
                             "leave rollout_buffer_class=None.")
        if rollout_buffer_kwargs:
            raise ValueError(f"Error: rollout_buffer_kwargs={rollout_buffer_kwargs!r} is not supported: sbtf's "
                             "RolloutBuffer takes no further settings.")
        self.learning_rate = learning_rate
        self.ent_coef = ent_coef
        self.vf_coef = vf_coef
        self.max_grad_norm = max_grad_norm
        self.use_sde = bool(use_sde)
        self.sde_sample_freq = int(sde_sample_freq)
        self.rollout_buffer_class = RolloutBuffer
        self.rollout_buffer_kwargs: Dict[str, Any] = {}
        self.device = device
        self._current_lr = None
        super().__init__(policy, env, n_steps=n_steps, gamma=gamma, gae_lambda=gae_lambda,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, _init_setup_model=_init_setup_model)

    # ------------------------------------------------------------------ setup
    @property
    def lr_schedule(self):
        """SB3's ``lr_schedule``: the learning rate (a Python ``float``) as a function of the remaining progress."""
        from sbtf.sb3.common.utils import FloatSchedule

        return FloatSchedule(get_schedule_fn(self.learning_rate))

    def _make_policy(self, n_env: int, n_steps: int, n_batch: Optional[int]) -> ActorCriticPolicy:
        """The policy, built as SB3 builds it: ``policy_class(observation_space, action_space, lr_schedule,
        **policy_kwargs)`` (gSDE switched on by the algorithm's ``use_sde``)."""
        if not (isinstance(self.policy_class, type) and issubclass(self.policy_class, ActorCriticPolicy)):
            raise ValueError(f"Error: the policy of {type(self).__name__} must be 'MlpPolicy', 'CnnPolicy', "
                             "'MultiInputPolicy' or a subclass of sbtf.sb3.common.policies.ActorCriticPolicy, got "
                             f"{self.policy_class!r}.")
        kwargs = dict(self.policy_kwargs)
        if self.use_sde:
            kwargs["use_sde"] = True
        return self.policy_class(self.observation_space, self.action_space, self.lr_schedule, n_env=n_env, **kwargs)

    def _make_optimizer(self):
        """The policy's optimizer (``optimizer_class`` / ``optimizer_kwargs``), kept as ``policy.optimizer``."""
        return self.policy_tf.make_optimizer(self._variables)

    def _make_runner(self) -> RolloutRunner:
        return RolloutRunner(env=self.env, model=self, n_steps=self.n_steps, gamma=self.gamma, lam=self.gae_lambda,
                             with_neg_log_probs=True)

    # ------------------------------------------------------------------ the loop's parts
    def _on_learn_start(self, progress, callback) -> None:
        self._lr_fn = get_schedule_fn(self.learning_rate)

    def _policy_std_stats(self) -> Dict[str, float]:
        """SB3's ``train/std``: the mean of ``exp(log_std)`` when the policy has a ``log_std``."""
        log_std = getattr(self.policy_tf, "log_std", None)
        return {} if log_std is None else {"std": float(np.mean(np.exp(log_std.numpy())))}


def warn_truncated_minibatch(batch_size: int, n_steps: int, n_envs: int) -> None:
    """SB3's warning when ``batch_size`` does not divide the rollout (``n_steps * n_envs``)."""
    buffer_size = n_envs * n_steps
    if batch_size > buffer_size:  # "after every 0 untruncated mini-batches" would say nothing
        warnings.warn(f"The mini-batch size {batch_size} is larger than the `RolloutBuffer` (`n_steps * n_envs = "
                      f"{buffer_size}`, n_steps={n_steps}, n_envs={n_envs}): every epoch trains on one mini-batch "
                      f"of {buffer_size}. Pass a `batch_size` of at most {buffer_size} (a factor of it) to silence "
                      "this warning.")
    elif buffer_size % batch_size > 0:
        warnings.warn(f"You have specified a mini-batch size of {batch_size}, but because the `RolloutBuffer` is of "
                      f"size `n_steps * n_envs = {buffer_size}`, after every {buffer_size // batch_size} untruncated "
                      f"mini-batches, there will be a truncated mini-batch of size {buffer_size % batch_size}\n"
                      "We recommend using a `batch_size` that is a factor of `n_steps * n_envs`.\n"
                      f"Info: (n_steps={n_steps} and n_envs={n_envs})")


def normalize_advantages(advantages: tf.Tensor) -> tf.Tensor:
    """SB3's ``(adv - mean) / (std + 1e-8)`` with PyTorch's unbiased std, for a batch of more than one sample (a
    batch of one is returned as it is, as SB3 does)."""
    n = tf.cast(tf.shape(advantages)[0], tf.float32)
    mean, var = tf.nn.moments(advantages, axes=[0])
    normalized = (advantages - mean) / (tf.sqrt(var * n / tf.maximum(n - 1.0, 1.0)) + 1e-8)
    return tf.where(n > 1.0, normalized, advantages)
